-- df.start and the readiness row: while
-- <df.duroxide_schema()>._worker_ready.schema_version is not the engine's
-- version, df.start raises the reference's text and leaves nothing behind,
-- in both transaction modes; instances already running go on; once the row
-- is restored, starts work again.
SELECT df.duroxide_schema() AS schema, schema_version FROM df_internal._worker_ready;

SET ROLE df_user;
-- an instance that is running when intake stops: it waits for a signal
SELECT df.start(df.wait_for_signal('go') ~> 'SELECT 7 AS seven', 'readiness-running') AS running_id \gset
RESET ROLE;

-- every instance id that has a row anywhere
CREATE FUNCTION ids_now() RETURNS SETOF text LANGUAGE sql AS $$
	SELECT id::text FROM df.instances UNION SELECT instance_id FROM df.nodes
	UNION SELECT instance_id FROM df_internal.runs UNION SELECT instance_id FROM df_internal.tasks
$$;

-- wait (with a deadline) until the running instance has registered its wait
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.waits w JOIN df.instances i ON i.id = w.instance_id
					  WHERE i.label = 'readiness-running') LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the instance did not reach its signal wait within 30 seconds';
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;

-- stop intake as the reference's operators do
UPDATE df_internal._worker_ready SET schema_version = -1;
CREATE TEMP TABLE before_ids AS SELECT * FROM ids_now() AS id;

SET ROLE df_user;
\set VERBOSITY default
SELECT df.start('SELECT 1', 'readiness-refused');
SELECT df.start('SELECT 1', 'readiness-refused', transaction_mode => 'new');
BEGIN;
SELECT df.start(df.sleep(1) ~> 'SELECT 2', 'readiness-refused');
ROLLBACK;
\set VERBOSITY terse
-- a signal and a cancel still work: they are not new instances
SELECT df.signal(:'running_id', 'go', '"now"');
SELECT df.await_instance(:'running_id', 30) AS running_instance;
SELECT df.result(:'running_id') AS running_result;
RESET ROLE;

-- nothing was written by the refused starts, and the 'new' start gave its
-- admission slot back
SELECT count(*) AS new_ids FROM ids_now() AS id WHERE id NOT IN (SELECT id FROM before_ids);
SELECT count(*) AS refused_rows FROM df.instances WHERE label = 'readiness-refused';
SELECT df_internal.admission_slots_held() AS slots_held;

-- another version (a newer engine's, say) is refused too
UPDATE df_internal._worker_ready SET schema_version = 2;
SET ROLE df_user;
SELECT df.start('SELECT 1', 'readiness-refused');
RESET ROLE;

-- restored: starts work again, in both modes
UPDATE df_internal._worker_ready SET schema_version = 1;
SET ROLE df_user;
SELECT df.start('SELECT 3 AS three', 'readiness-restored') AS caller_id \gset
SELECT df.start('SELECT 4 AS four', 'readiness-restored', transaction_mode => 'new') AS new_id \gset
SELECT df.await_instance(:'caller_id', 30) AS caller_mode, df.await_instance(:'new_id', 30) AS new_mode;
SELECT df.result(:'caller_id') AS caller_result, df.result(:'new_id') AS new_result;
SELECT count(*) AS refused_rows FROM df.instances WHERE label = 'readiness-refused';
RESET ROLE;
DROP FUNCTION ids_now();
