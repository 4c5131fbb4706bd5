-- Roles and helpers shared by the engine tests (named to sort before the other engine_* tests).
-- Workflows run as an ordinary LOGIN role, like the reference's suite.
CREATE ROLE df_user LOGIN;
SELECT df.grant_usage('df_user');
GRANT CREATE ON SCHEMA public TO df_user;

-- wait (with a deadline) until a condition (a query returning a boolean) holds
CREATE FUNCTION public.wait_until(cond text, timeout_s int DEFAULT 30) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + make_interval(secs => timeout_s);
	ok boolean;
BEGIN
	LOOP
		EXECUTE cond INTO ok;
		IF ok THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION public.wait_until(text, int) TO df_user;

-- wait (with a deadline) until the engine has no task left, and no start
-- queued (a pending runs row)
CREATE FUNCTION public.engine_idle(timeout_s int DEFAULT 30) RETURNS boolean
LANGUAGE sql AS $$
	SELECT public.wait_until('SELECT NOT EXISTS (SELECT 1 FROM df_internal.tasks) '
							 'AND NOT EXISTS (SELECT 1 FROM df_internal.runs WHERE status = ''pending'')',
							 timeout_s)
$$;
GRANT EXECUTE ON FUNCTION public.engine_idle(int) TO df_user;
ALTER FUNCTION public.engine_idle(int) SECURITY DEFINER;

-- wait (with a deadline) until the executors have announced readiness
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal._worker_ready WHERE schema_version >= 1) LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'pg_durable executors did not become ready within 60 seconds';
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT schema_version FROM df_internal._worker_ready;
SELECT count(*) > 0 AS executors_running
FROM pg_stat_activity WHERE backend_type = 'pg_durable executor';
SELECT count(*) AS heartbeat_rows FROM df._worker_epoch;
