-- Monitoring: df.instance_nodes (both overloads) and the inferred status of
-- each node (reference §1.5): untaken IF arm, right side of a failed THEN,
-- clean sequences, loops (nested, non-root), RACE losers, running instances.
SET ROLE df_user;
CREATE TABLE mon_n (n int);
CREATE TABLE mon_nest (n int);

-- the nodes in tree order, ids masked: a leaf shows its query; the driving
-- ancestor of a derived status is shown by its node type
CREATE FUNCTION show_nodes(inst text)
RETURNS TABLE (node text, status text, inferred text, from_ancestor text)
LANGUAGE sql AS $$
	SELECT n.node_type || CASE WHEN n.node_type IN ('THEN', 'IF', 'JOIN', 'RACE', 'LOOP') THEN ''
	                           ELSE ': ' || left(n.query, 60) END,
	       n.status, n.inferred_status,
	       (SELECT a.node_type FROM df.instance_nodes(inst) a
	        WHERE a.node_id = n.inferred_status_from_ancestor_id)
	FROM df.instance_nodes(inst) WITH ORDINALITY n
	ORDER BY n.ordinality
$$;

-- wait (with a deadline) until a node of the given type is running
CREATE FUNCTION wait_running(inst text, type text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = inst AND node_type = type
	                  AND status = 'running') LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.02);
	END LOOP;
	RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- Output shape
-- ---------------------------------------------------------------------------
SELECT df.start(('SELECT 1 AS a' |=> 'first') ~> 'SELECT $first + 1 AS b') AS id \gset
SELECT df.await_instance(:'id');
SELECT node_id ~ '^[0-9a-f]{8}$' AS id_ok, node_type, query, result_name,
       left_node IS NOT NULL AS has_left, right_node IS NOT NULL AS has_right, status, result,
       status_details = jsonb_build_object('execution_id', :'id' || '::1')::text AS stamp_ok,
       inferred_status, inferred_status_from_ancestor_id, updated_at IS NOT NULL AS has_updated_at
FROM df.instance_nodes(:'id');
-- the compatibility overload: execution_id 1, no inference
SELECT execution_id, node_type, query, result_name, status, result, updated_at IS NOT NULL AS has_updated_at
FROM df.instance_nodes(:'id', 5);
SELECT count(*) AS unknown FROM df.instance_nodes('00000000');
SELECT count(*) AS unknown FROM df.instance_nodes('00000000', 1);
SELECT count(*) AS null_id FROM df.instance_nodes(NULL);

-- ---------------------------------------------------------------------------
-- A clean sequence: inferred = physical
-- ---------------------------------------------------------------------------
SELECT df.start('SELECT 1' ~> 'SELECT 2' ~> 'SELECT 3') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT bool_and(inferred_status = status) AS inferred_is_physical FROM df.instance_nodes(:'id');

-- ---------------------------------------------------------------------------
-- IF: the untaken arm is skipped, driven by the IF
-- ---------------------------------------------------------------------------
SELECT df.start(df.if('SELECT true', 'SELECT ''then''', 'SELECT ''else''')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT count(*) FILTER (WHERE inferred_status = 'skipped') AS skipped FROM df.instance_nodes(:'id');
SELECT df.start('SELECT 0 AS zero' ?> 'SELECT ''then''' !> 'SELECT ''else''') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');

-- ---------------------------------------------------------------------------
-- THEN: the right side of a failed left side is skipped
-- ---------------------------------------------------------------------------
SELECT df.start('SELECT 1/0' ~> 'SELECT 2') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
-- deeper: everything after the failure, below the failed THENs
SELECT df.start('SELECT 1' ~> 'SELECT 1/0' ~> 'SELECT 3' ~> ('SELECT 4' & 'SELECT 5')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');

-- ---------------------------------------------------------------------------
-- Loops: after they finish, nothing is pending or running
-- ---------------------------------------------------------------------------
-- a non-root loop whose body takes a different IF arm each iteration: the
-- arm of an earlier iteration is superseded, so skipped
SELECT df.start('SELECT 0'
                ~> df.loop(df.if('SELECT count(*) % 2 = 0 FROM mon_n',
                                 'INSERT INTO mon_n VALUES (1) RETURNING ''even''',
                                 'INSERT INTO mon_n VALUES (2) RETURNING ''odd'''),
                           'SELECT count(*) < 3 FROM mon_n')
                ~> 'SELECT ''after''') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT count(*) FILTER (WHERE inferred_status IN ('pending', 'running')) AS unfinished
FROM df.instance_nodes(:'id');

-- nested loops: a root loop around a non-root loop
SELECT df.start(df.loop(df.loop('INSERT INTO mon_nest VALUES (1) RETURNING n',
                                'SELECT count(*) % 2 = 1 FROM mon_nest')
                        ~> 'SELECT ''outer step''',
                        'SELECT count(*) < 4 FROM mon_nest')) AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS inner_runs FROM mon_nest;
SELECT * FROM show_nodes(:'id');
SELECT count(*) FILTER (WHERE inferred_status IN ('pending', 'running')) AS unfinished
FROM df.instance_nodes(:'id');

-- a root loop does the same across root generations
TRUNCATE mon_n;
SELECT df.start(df.loop(df.if('SELECT count(*) % 2 = 0 FROM mon_n',
                              'INSERT INTO mon_n VALUES (1) RETURNING ''even''',
                              'INSERT INTO mon_n VALUES (2) RETURNING ''odd'''),
                        'SELECT count(*) < 3 FROM mon_n')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT status_details::jsonb->>'execution_id' = :'id' || '::2' AS odd_arm_of_generation_2
FROM df.instance_nodes(:'id') WHERE query LIKE '%''odd''';

-- hand-written rows of a root loop caught in its second generation: a node
-- last stamped in the first one will run again (pending), a stale stamp
-- in a branch scope of the first generation too
RESET ROLE;
BEGIN;
INSERT INTO df.instances (id, label, root_node, status, submitted_by)
VALUES ('feed0001', 'hand-made', '00000001', 'running', 'df_user');
INSERT INTO df.nodes (id, instance_id, node_type, query, left_node, right_node, status, result,
                      submitted_by, status_details) VALUES
('00000001', 'feed0001', 'LOOP', NULL, '00000002', NULL, 'running', NULL, 'df_user',
 '{"execution_id": "feed0001::2"}'),
('00000002', 'feed0001', 'THEN', NULL, '00000003', '00000004', 'running', NULL, 'df_user',
 '{"execution_id": "feed0001::2"}'),
('00000003', 'feed0001', 'SQL', 'SELECT 3', NULL, NULL, 'completed', '{"rows": [], "row_count": 0}',
 'df_user', '{"execution_id": "feed0001::2"}'),
('00000004', 'feed0001', 'RACE', NULL, '00000005', '00000006', 'completed', '1', 'df_user',
 '{"execution_id": "feed0001::1"}'),
('00000005', 'feed0001', 'SQL', 'SELECT 5', NULL, NULL, 'completed', '1', 'df_user',
 '{"execution_id": "feed0001::1::00000005::1"}'),
('00000006', 'feed0001', 'SQL', 'SELECT 6', NULL, NULL, 'running', NULL, 'df_user',
 '{"execution_id": "feed0001::1::00000006::1"}');
COMMIT;
SET ROLE df_user;
SELECT node_id, node_type, status, inferred_status, inferred_status_from_ancestor_id
FROM df.instance_nodes('feed0001');
RESET ROLE;
DELETE FROM df.instances WHERE id = 'feed0001';	-- its nodes go with it
SELECT count(*) AS nodes_left FROM df.nodes WHERE instance_id = 'feed0001';
SET ROLE df_user;

-- ---------------------------------------------------------------------------
-- RACE: the loser is skipped; a losing loop is failed, its body skipped
-- ---------------------------------------------------------------------------
SELECT df.start(df.race('SELECT pg_sleep(2)', 'SELECT ''fast''')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT df.start(df.race(df.loop('SELECT pg_sleep(2)'), 'SELECT pg_sleep(0.5)')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');
SELECT result FROM df.instance_nodes(:'id') WHERE node_type = 'LOOP';

-- ---------------------------------------------------------------------------
-- A running instance: done, running and not yet started nodes
-- ---------------------------------------------------------------------------
SELECT df.start('SELECT 1' ~> df.wait_for_signal('go') ~> 'SELECT 3') AS id \gset
SELECT wait_running(:'id', 'SIGNAL');
SELECT * FROM show_nodes(:'id');
SELECT df.signal(:'id', 'go');
SELECT df.await_instance(:'id');
SELECT * FROM show_nodes(:'id');

-- ---------------------------------------------------------------------------
-- A cancelled instance runs nothing more: the nodes df.cancel
-- caught running inside a JOIN are cancelled, and both they and those it
-- never reached infer skipped, not running or pending; the step it
-- interrupted is not retried (no step_retried event after
-- instance_cancelled)
-- ---------------------------------------------------------------------------
SELECT df.start(df.join('SELECT pg_sleep(60) AS cancel_me', df.wait_for_signal('never'))
                ~> 'SELECT 3', 'cancelled join') AS id \gset
RESET ROLE;
-- (inside pg_sleep: an executor shows the step's query just before it
-- registers the step for interrupts)
CREATE FUNCTION step_active(marker text, want boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'
	              AND state = 'active' AND query LIKE '%' || marker || '%'
	              AND (wait_event = 'PgSleep' OR NOT want)) <> want LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.02);
		PERFORM pg_stat_clear_snapshot();	-- else pg_stat_activity stays as first read
	END LOOP;
	RETURN true;
END
$$;
SELECT step_active('AS cancel_me', true) AS step_running;
SET ROLE df_user;
SELECT wait_running(:'id', 'SIGNAL');
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
RESET ROLE;
SELECT step_active('AS cancel_me', false) AS step_interrupted;
SELECT engine_idle();
SELECT string_agg(kind, ', ' ORDER BY id) AS events_after_cancel
FROM df_internal.events
WHERE instance_id = :'id'
  AND id > (SELECT id FROM df_internal.events WHERE instance_id = :'id' AND kind = 'instance_cancelled');
DROP FUNCTION step_active(text, boolean);
SET ROLE df_user;
SELECT * FROM show_nodes(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

RESET ROLE;
SELECT engine_idle();
