-- The record of an instance that ends while completions wait in its
-- inbox (docs/design/batches-and-inbox.md §4): a step whose completion
-- went to the inbox has committed its effects, so its node shows
-- completed with its result, and the inbox is empty once the instance
-- has ended.  The runs row is held here while a JOIN branch completes
-- (so its completion goes to the inbox), then the instance is cancelled
-- in the same transaction.
CREATE SEQUENCE ie_gate;
GRANT SELECT ON ie_gate TO df_user;
CREATE TABLE ie_effects (v int);
GRANT INSERT, SELECT ON ie_effects TO df_user;
-- waits (with a deadline) until the gate moves: setval is seen at once,
-- whatever transaction holds what
CREATE FUNCTION ie_gated() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE (SELECT last_value FROM ie_gate) < 2 AND clock_timestamp() < deadline LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	INSERT INTO ie_effects VALUES (7);
	RETURN 7;
END $$;
GRANT EXECUTE ON FUNCTION ie_gated() TO df_user;

SET ROLE df_user;
SELECT df.start(df.join(df.wait_for_signal('never'), 'SELECT ie_gated() AS v')) AS id \gset
RESET ROLE;
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L AND node_type = ''SQL'' AND status = ''running'')', :'id'), 60);

BEGIN;
SELECT status FROM df_internal.runs WHERE instance_id = :'id' FOR UPDATE;
SELECT setval('ie_gate', 2) > 0 AS opened;
-- the branch commits its effect and its completion into the inbox
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df_internal.inbox WHERE instance_id = %L)', :'id'), 60);
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
COMMIT;

SELECT df.status(:'id');
SELECT count(*) AS effects FROM ie_effects;
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SQL';
SELECT count(*) AS inbox_left FROM df_internal.inbox WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id';
-- df.check() reports a completion left in the inbox of an ended instance
INSERT INTO df_internal.inbox (instance_id, node_id, scope, attempt, ok, result)
SELECT instance_id, id, instance_id, 1, true, '{}' FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL';
SELECT problem FROM df.check() WHERE instance_id = :'id';
DELETE FROM df_internal.inbox WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id';

-- An ended instance shows no node running: the nodes its end stopped are
-- cancelled (inferred skipped), and every item whose effect committed is
-- completed.  A df.map of 300 INSERTs whose item 150 fails:
CREATE TABLE ie_rows (n int);
GRANT INSERT, SELECT ON ie_rows TO df_user;
SET ROLE df_user;
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 300) g',
	'INSERT INTO ie_rows SELECT $item.n WHERE 1 / ($item.n - 150) IS NOT NULL')) AS map_id \gset
RESET ROLE;
SELECT wait_until(format('SELECT df.status(%L) = ''failed''', :'map_id'), 120);
SELECT count(*) AS running_nodes FROM df.nodes WHERE instance_id = :'map_id' AND status = 'running';
SELECT (SELECT count(*) FROM ie_rows) =
	   (SELECT count(*) FROM df.nodes WHERE instance_id = :'map_id' AND node_type = 'SQL'
		AND status = 'completed' AND query LIKE 'INSERT%') AS each_effect_completed;
SELECT count(*) AS inbox_left FROM df_internal.inbox WHERE instance_id = :'map_id';
SELECT count(*) AS cancelled_not_skipped FROM df.instance_nodes(:'map_id') n
WHERE n.status = 'cancelled' AND n.inferred_status <> 'skipped';
-- (a step the failure interrupted deletes its task as it rolls back)
SELECT wait_until(format('SELECT NOT EXISTS (SELECT 1 FROM df.check() WHERE instance_id = %L)', :'map_id'), 60) AS check_clean;

-- a RACE's loser in a completed instance, and the steps df.cancel stops
SET ROLE df_user;
SELECT df.start(df.race('SELECT pg_sleep(60)', 'SELECT 1 AS quick')) AS race_id \gset
SELECT df.start(df.join('SELECT pg_sleep(60)', df.wait_for_signal('never'))) AS cancel_id \gset
RESET ROLE;
SELECT wait_until(format('SELECT df.status(%L) = ''completed''', :'race_id'), 60);
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L AND node_type = ''SQL'' AND status = ''running'')', :'cancel_id'), 60);
SELECT replace(df.cancel(:'cancel_id'), :'cancel_id', '<id>') AS answer;
SELECT i, n.node_type, n.status, n.inferred_status
FROM (VALUES (1, :'race_id'), (2, :'cancel_id')) v(i, id),
	 df.instance_nodes(v.id) n
WHERE n.node_type IN ('SQL', 'SIGNAL', 'JOIN', 'RACE')
ORDER BY i, n.node_type, n.status;
SELECT problem FROM df.check() WHERE instance_id IN (:'race_id', :'cancel_id');

-- df.check() reports a node left running in an ended instance, and
-- reconciliation's repair stops it
UPDATE df.nodes SET status = 'running'
WHERE instance_id = :'cancel_id' AND status = 'cancelled' AND node_type = 'SQL';
SELECT problem, detail LIKE 'SQL node % is running in scope %, but its instance ended cancelled' AS says
FROM df.check() WHERE instance_id = :'cancel_id';
UPDATE df.nodes SET status = 'cancelled'
WHERE instance_id = :'cancel_id' AND status = 'running';
