-- Sagas (docs/design/sagas.md): the JSON of df.with_undo and
-- of the operator <~>, its precedence beside ~> and |=>, build-time and
-- df.start errors, and a COMPENSATED node run forward (its forward's
-- outcome is the node's, its undo does not run).
SET ROLE df_user;

-- exact JSON
SELECT df.with_undo('SELECT 1', 'SELECT 2');
SELECT 'SELECT 1' <~> 'SELECT 2' AS op;
SELECT ('SELECT 1' <~> 'SELECT 2') = df.with_undo('SELECT 1', 'SELECT 2') AS same;
-- <~> groups left to right with ~>: each step with its undo, then the next
SELECT 'A' <~> 'UA' ~> ('B' <~> 'UB') AS two_steps;
SELECT 'A' <~> 'UA' ~> 'B' AS undo_then_plain;
-- |=> names the forward when written first, the COMPENSATED node when last
SELECT 'A' |=> 'a' <~> 'UA' AS named_forward;
-- df.with_undo takes a whole sequence as its forward
SELECT df.with_undo('A' ~> 'B', 'UAB') AS whole_sequence;

-- the pitfall: without parentheses <~> would undo the whole sequence
SELECT 'A' <~> 'UA' ~> 'B' <~> 'UB';
SELECT 'A' ~> 'B' <~> 'UB';
-- other errors
SELECT df.with_undo(NULL, 'SELECT 2');
SELECT df.with_undo('SELECT 1', NULL);
SELECT df.with_undo('SELECT 1', df.with_undo('SELECT 2', 'SELECT 3'));
SELECT df.with_undo('{"node_type":"NOPE"}', 'SELECT 3');

-- hand-written graphs at df.start
SELECT df.start('{"node_type":"COMPENSATED","left_node":{"node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"node_type":"COMPENSATED","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{}"}');

-- run forward: the forward's result is the node's, the undo never runs
CREATE FUNCTION saga_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;
CREATE TABLE saga_log (what text);
SELECT df.start(('INSERT INTO saga_log VALUES (''forward'') RETURNING 41 + 1 AS v' |=> 'fwd'
				 <~> 'INSERT INTO saga_log VALUES (''undo'')')
				~> 'SELECT $fwd.v * 2 AS doubled') AS id \gset
SELECT saga_wait(:'id');
SELECT df.result(:'id');
SELECT what FROM saga_log ORDER BY what;
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;

-- a failing forward fails the node
SELECT df.start(df.with_undo('SELECT 1/0', 'INSERT INTO saga_log VALUES (''undo2'')')) AS id \gset
SELECT saga_wait(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT count(*) AS undos_run FROM saga_log WHERE what LIKE 'undo%';

-- registration: each completed forward step registers its undo in the
-- transaction where it completed, in completion order, with the named
-- results visible then; the failed forward above registered nothing
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT count(*) AS registered FROM df.compensations(:'id');
SELECT df.start(('SELECT 7 AS order_id' |=> 'order_id'
				 <~> 'DELETE FROM saga_log WHERE what = ''order '' || $order_id')
				~> ('SELECT $order_id * 10 AS pay_id' |=> 'pay_id'
					<~> 'SELECT ''refund '' || $pay_id')
				~> 'SELECT 1/0') AS id \gset
SELECT saga_wait(:'id');
SELECT c.state, c.attempts, c.error, n.node_type AS forward_type, u.query AS undo_query,
	   c.forward_completed_at IS NOT NULL AS has_time, c.execution_id IS NOT NULL AS has_scope
FROM df.compensations(:'id') c
JOIN df.nodes n ON n.instance_id = :'id' AND n.id = (SELECT left_node FROM df.nodes WHERE instance_id = :'id' AND id = c.node_id)
JOIN df.nodes u ON u.instance_id = :'id' AND u.id = c.undo_node_id;
SELECT kind, (detail->>'seq')::int > 0 AS has_seq, detail->>'undo' = (SELECT right_node FROM df.nodes WHERE instance_id = :'id' AND id = h.node_id) AS names_undo
FROM df.history(:'id') h WHERE kind = 'undo_registered';
-- the snapshots (df_internal is not readable by users)
RESET ROLE;
SELECT seq IS NOT NULL AS has_seq, results::text FROM df_internal.compensations WHERE instance_id = :'id' ORDER BY seq;
-- an instance the caller cannot see shows no rows
CREATE ROLE saga_other;
SELECT df.grant_usage('saga_other') IS NOT NULL AS granted;
SET ROLE saga_other;
SELECT count(*) AS others_see FROM df.compensations(:'id');
RESET ROLE;
SELECT df.revoke_usage('saga_other') IS NOT NULL AS revoked;
DROP ROLE saga_other;
SET ROLE df_user;

-- df.explain shows the forward and the undo
SELECT df.explain('A' <~> 'UA' ~> ('B' <~> 'UB'));

RESET ROLE;
