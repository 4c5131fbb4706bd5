-- Durable timers, cron waits, buffered signals, and cancellation that
-- interrupts running steps.
-- wait (with a deadline) until an instance has no task left, and its
-- start is not queued (a pending runs row)
CREATE FUNCTION instance_idle(inst text, timeout_s int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + make_interval(secs => timeout_s);
BEGIN
	WHILE EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = inst)
		  OR EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = inst
					 AND r.status = 'pending') LOOP
		IF clock_timestamp() > deadline THEN RETURN false; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
SET ROLE df_user;


-- a cron wait for the next minute boundary, checked at the end of this file
SELECT df.start(df.wait_for_schedule('* * * * *')
                ~> 'SELECT extract(second FROM clock_timestamp()) < 5 AS at_minute_start') AS cron_id \gset

-- SLEEP: at least n seconds, and its result
SELECT df.start(('SELECT clock_timestamp() AS t' |=> 'before') ~> df.sleep(1)
                ~> 'SELECT clock_timestamp() - $before::timestamptz >= interval ''1 second'' AS slept_enough') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SLEEP';
SELECT df.start(df.sleep(0)) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- a cron expression without an upcoming time fails the node
SELECT df.start(df.wait_for_schedule('0 0 30 2 *')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id';

-- SIGNAL: a signal sent before the wait is reached is buffered, not dropped
SELECT df.start('SELECT pg_sleep(0.2)' ~> (df.wait_for_signal('go') |=> 'sig')
                ~> 'SELECT $sig.data AS data, $sig.timed_out AS timed_out') AS id \gset
SELECT df.signal(:'id', 'go', 'approve');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- ... and one sent after the wait is registered reaches it; JSON payloads stay JSON
SELECT df.start(df.wait_for_signal('go') |=> 'sig' ~> 'SELECT ($sig)::jsonb -> ''data'' ->> ''n'' AS n') AS id \gset
RESET ROLE;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.waits) LOOP
		IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'the wait was never registered'; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
SET ROLE df_user;
SELECT df.signal(:'id', 'go', '{"n": 7}');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- signals of one name are delivered in the order they were sent
SELECT df.start((df.wait_for_signal('s') |=> 'first') ~> (df.wait_for_signal('s') |=> 'second')
                ~> 'SELECT $first.data AS first, $second.data AS second') AS id \gset
SELECT df.signal(:'id', 's', '1');
SELECT df.signal(:'id', 's', '2');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- waits inside JOIN branches
SELECT df.start(df.wait_for_signal('left') & df.wait_for_signal('right')) AS id \gset
SELECT df.signal(:'id', 'right', '"R"');
SELECT df.signal(:'id', 'left', '"L"');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- a timeout
SELECT df.start(df.wait_for_signal('never', 1)) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- df.signal errors
SELECT set_config('test.done_id', :'id', false) IS NOT NULL AS noted;
SELECT df.signal('', 'x');
SELECT df.signal(:'id', '');
SELECT df.signal('00000000', 'x');
DO $$
BEGIN
	PERFORM df.signal(current_setting('test.done_id'), 'x');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;

-- cancel during a sleep releases the timer at once
SELECT df.start(df.sleep(100)) AS id \gset
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
SELECT df.status(:'id');
RESET ROLE;
SELECT instance_idle(:'id', 5) AS timer_released;
SET ROLE df_user;

-- cancel interrupts a running step (it would otherwise run for a minute)
SELECT df.start('SELECT pg_sleep(60)') AS id \gset
RESET ROLE;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM pg_stat_activity
					  WHERE backend_type = 'pg_durable executor' AND query = 'SELECT pg_sleep(60)') LOOP
		IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'the step never started'; END IF;
		PERFORM pg_sleep(0.01);
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
END
$$;
SET ROLE df_user;
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
RESET ROLE;
SELECT instance_idle(:'id', 10) AS step_interrupted;
SET ROLE df_user;

-- a RACE decided by a timer interrupts the slow loser
CREATE TABLE raced (who text);
SELECT df.start(df.sleep(1) | 'INSERT INTO raced SELECT ''loser'' FROM pg_sleep(60)') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT instance_idle(:'id', 10) AS loser_interrupted;
SET ROLE df_user;
SELECT count(*) AS loser_rows FROM raced;

-- the cron wait fired at a minute boundary
SELECT df.await_instance(:'cron_id', 90);
SELECT df.result(:'cron_id');
RESET ROLE;
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
SELECT count(*) AS signals_left FROM df_internal.signals;
SELECT count(*) AS waits_left FROM df_internal.waits;
