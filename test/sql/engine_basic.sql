-- The engine: simple and sequential workflows, statuses, results, failures,
-- stamps, rollback of the caller's transaction, await and cancel.
SET ROLE df_user;
CREATE TABLE log (step text, at timestamptz DEFAULT clock_timestamp());

-- one SQL step
SELECT df.start('INSERT INTO log (step) VALUES (''one'') RETURNING step', 'single') AS id \gset
SELECT df.status(:'id') IN ('pending', 'running', 'completed') AS known_status;
SELECT df.await_instance(:'id');
SELECT df.status(:'id'), df.result(:'id');
SELECT label, status, completed_at IS NOT NULL AS has_completed_at,
       submitted_by = 'df_user'::regrole AS submitter_ok, id ~ '^[0-9a-f]{8}$' AS id_ok
FROM df.instances WHERE id = :'id';
SELECT node_type, status, result, status_details->>'execution_id' = :'id' || '::1' AS stamp_ok
FROM df.nodes WHERE instance_id = :'id';

-- a sequence runs in order, each step once
SELECT df.start('INSERT INTO log (step) VALUES (''a'')' ~> 'INSERT INTO log (step) VALUES (''b'')'
                ~> 'SELECT string_agg(step, '','' ORDER BY at) AS steps FROM log') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;

-- a failing step fails the instance with the reference's text; the rest is skipped
SELECT df.start('SELECT 1/0' ~> 'INSERT INTO log (step) VALUES (''never'')') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.status(:'id'), df.result(:'id') IS NULL AS no_result;
SELECT completed_at IS NULL AS failed_has_no_completed_at FROM df.instances WHERE id = :'id';
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT count(*) AS never_ran FROM log WHERE step = 'never';

-- a failed step's effects are rolled back with it
SELECT df.start('WITH i AS (INSERT INTO log (step) VALUES (''half'')) SELECT 1/0') AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS half_done FROM log WHERE step = 'half';

-- a step may not change the session of the executor or escape its role
SELECT df.start('SET ROLE postgres') AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('SELECT current_user AS u, current_setting(''df.in_workflow'') AS in_workflow') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- the caller's ROLLBACK leaves nothing behind and runs nothing
BEGIN;
SELECT df.start('INSERT INTO log (step) VALUES (''rolled back'')') AS id \gset
ROLLBACK;
SELECT count(*) AS instance_rows FROM df.instances WHERE id = :'id';
SELECT count(*) AS node_rows FROM df.nodes WHERE instance_id = :'id';
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS engine_rows FROM df_internal.runs WHERE instance_id = :'id';
SET ROLE df_user;
SELECT count(*) AS never_ran FROM log WHERE step = 'rolled back';

-- plain SQL text and hand-written Durofut JSON are accepted
SELECT df.start('{"node_type":"SQL","query":"SELECT 42 AS answer"}') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- (an instance started in the same statement is not committed yet: it cannot
-- finish, and waiting for it is refused at once)
DO $$
BEGIN
	PERFORM df.await_instance(df.start('SELECT 1'), 1);
EXCEPTION WHEN invalid_transaction_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;

-- errors of df.start
SELECT df.start(NULL);
SELECT df.start('{"node_type":"NOPE"}');
SELECT df.start('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('SELECT 1', NULL, 'no_such_database');
SELECT df.start('SELECT 1', NULL, NULL, 'sometimes');
SELECT df.start('SELECT 1', transaction_mode => 'CALLER') IS NOT NULL AS mode_case_insensitive;
RESET ROLE;
SELECT df.start('SELECT 1');      -- superuser instances are off by default
CREATE ROLE df_nologin NOLOGIN;
GRANT USAGE ON SCHEMA df TO df_nologin;
SET ROLE df_nologin;
SELECT df.start('SELECT 1');
RESET ROLE;
REVOKE USAGE ON SCHEMA df FROM df_nologin;
DROP ROLE df_nologin;
SET ROLE df_user;

-- await_instance and friends
SELECT df.await_instance('ffffffff');
SELECT df.await_instance(:'id', 0);
SELECT df.start('SELECT pg_sleep(0.5)') AS slow \gset
SELECT df.await_instance(:'slow', 1) IN ('completed') AS waited;
SELECT df.wait_for_completion(:'slow', 5);
SELECT df.run();
SET df.in_workflow = 'true';
SELECT df.await_instance(:'slow');
RESET df.in_workflow;
SELECT df.seq(df.await_instance(:'slow'), 'SELECT 1');

-- df.await: the same wait as a procedure; a top-level CALL commits before
-- it sleeps, so that it holds back no VACUUM (t/042_await_horizon.pl)
SELECT df.start('SELECT pg_sleep(0.2)') AS slow2 \gset
CALL df.await(:'slow2', 5);
CALL df.await(:'slow2');
-- in a transaction block it cannot commit: it waits as the function does,
-- and refuses as it does an instance the transaction itself started
SELECT df.start('SELECT pg_sleep(0.2)') AS slow3 \gset
BEGIN;
CALL df.await(:'slow3', 5);
DO $$
DECLARE s text;
BEGIN
	CALL df.await(df.start('SELECT 1'), 5, s);
EXCEPTION WHEN invalid_transaction_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END $$;
ROLLBACK;
-- from a DO block, which may commit as well
SELECT set_config('test.slow', df.start('SELECT pg_sleep(0.2)'), false) IS NOT NULL AS started;
DO $$
DECLARE s text;
BEGIN
	CALL df.await(current_setting('test.slow'), 5, s);
	RAISE NOTICE 'df.await from a DO block: %', s;
END $$;
CALL df.await('ffffffff');
CALL df.await(:'slow2', 0);
CALL df.await(NULL);
CALL df.await(:'slow2', NULL);
SET df.in_workflow = 'true';
CALL df.await(:'slow2');
RESET df.in_workflow;

-- cancel: immediate, final, and a no-op on finished instances
SELECT df.start('SELECT pg_sleep(2)' ~> 'INSERT INTO log (step) VALUES (''after cancel'')') AS id \gset
SELECT replace(df.cancel(:'id', 'test over'), :'id', '<id>');
SELECT df.status(:'id');
SELECT df.await_instance(:'id');
SELECT replace(df.cancel(:'id'), :'id', '<id>');
SELECT df.cancel('00000000');
SELECT replace(df.cancel(:'slow'), :'slow', '<id>');
SELECT df.status(:'slow');
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS never_ran FROM log WHERE step = 'after cancel';
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
