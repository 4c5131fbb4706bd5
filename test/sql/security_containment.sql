-- Security: a step cannot escape.  Executors are long-lived sessions that run
-- the steps of every user one after the other; each test below has one role
-- (sec_alice) try to leave something behind or reach further than its own
-- instances, and another role (sec_bob) look for it from a later step on the
-- very same executor process.  The escape step also reports what it saw
-- inside, so a broken mechanism cannot pass by not escaping in the first place.
CREATE ROLE sec_alice LOGIN;
CREATE ROLE sec_bob LOGIN;
SELECT df.grant_usage('sec_alice');
SELECT df.grant_usage('sec_bob');
CREATE SEQUENCE public.sec_seq;
GRANT USAGE, SELECT ON SEQUENCE public.sec_seq TO sec_alice, sec_bob;

-- the session state a step could leave in its executor, as one line
CREATE FUNCTION public.sec_state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	cv text;
BEGIN
	BEGIN
		cv := currval('public.sec_seq')::text;
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		cv := 'undefined';
	END;
	RETURN format('work_mem=%s search_path=%s statement_timeout=%s lock_timeout=%s '
				  'datestyle=%s in_workflow=%s prepared=%s cursors=%s listening=%s '
				  'advisory_locks=%s currval=%s',
				  current_setting('work_mem'), current_setting('search_path'),
				  current_setting('statement_timeout'),
				  -- a later step of a batch runs with the batch's short
				  -- lock_timeout: not a setting left behind
				  CASE current_setting('lock_timeout') WHEN '5ms' THEN '0'
				  ELSE current_setting('lock_timeout') END,
				  current_setting('datestyle'), current_setting('df.in_workflow', true),
				  (SELECT count(*) FROM pg_catalog.pg_prepared_statements),
				  (SELECT count(*) FROM pg_catalog.pg_cursors),
				  (SELECT count(*) FROM pg_catalog.pg_listening_channels()),
				  (SELECT count(*) FROM pg_catalog.pg_locks
				   WHERE locktype = 'advisory' AND pid = pg_backend_pid()),
				  cv);
END
$$;

-- everything a step may do to its session without being refused
CREATE FUNCTION public.sec_escape(fail boolean) RETURNS TABLE (pid int, state text)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('work_mem', '1234kB', false);
	SET datestyle = 'SQL, DMY';
	SET statement_timeout = '4321s';
	EXECUTE 'SET LOCAL lock_timeout = ''4321ms''';
	PERFORM pg_advisory_lock(4242);
	PERFORM nextval('public.sec_seq');
	EXECUTE 'DECLARE sec_cur CURSOR FOR SELECT 1';
	PERFORM set_config('search_path', 'nowhere', false);
	PERFORM set_config('df.in_workflow', 'false', false);
	IF fail THEN
		RAISE EXCEPTION 'escape attempt on backend % saw %', pg_backend_pid(), public.sec_state();
	END IF;
	RETURN QUERY SELECT pg_backend_pid(), public.sec_state();
END
$$;

-- start q as the current role, wait for it and return the root node's
-- outcome (state column, or the error text) and the executor it ran on
CREATE PROCEDURE public.sec_run(q text, INOUT pid int DEFAULT NULL, INOUT status text DEFAULT NULL,
								INOUT res text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	iid text;
	r jsonb;
BEGIN
	iid := df.start(q);
	COMMIT;
	status := df.await_instance(iid);
	SELECT n.result INTO r FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
	WHERE i.id = iid;
	IF jsonb_typeof(r) = 'string' THEN
		res := r #>> '{}';
		pid := substring(res FROM 'backend ([0-9]+)')::int;
	ELSE
		res := coalesce(r -> 'rows' -> 0 ->> 'state', r::text);
		pid := (r -> 'rows' -> 0 ->> 'pid')::int;
	END IF;
END
$$;

-- look at the session state of executor target from a step of the current role
CREATE PROCEDURE public.sec_probe_on(target int, INOUT res text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	p int;
	st text;
BEGIN
	FOR i IN 1..500 LOOP
		CALL public.sec_run('SELECT pg_backend_pid() AS pid, public.sec_state() AS state', p, st, res);
		IF p = target THEN
			RETURN;
		END IF;
	END LOOP;
	RAISE EXCEPTION 'no step of % ran on executor % in 500 tries', current_user, target;
END
$$;

-- the state of a fresh step, for comparison
SET ROLE sec_bob;
CALL sec_run('SELECT pg_backend_pid() AS pid, public.sec_state() AS state', NULL, NULL, NULL) \gset fresh_
SELECT :'fresh_status' AS status, :'fresh_res' AS fresh_step;
RESET ROLE;

-- 1. settings (SET, SET LOCAL, set_config), session advisory locks,
--    sequence state and cursors: alice leaves all of them ...
SET ROLE sec_alice;
CALL sec_run('SELECT * FROM public.sec_escape(false)', NULL, NULL, NULL) \gset alice_
SELECT :'alice_status' AS status, :'alice_res' AS seen_inside_alices_step;
RESET ROLE;
-- ... and none of it is there for bob's next step on that executor
SET ROLE sec_bob;
CALL sec_probe_on(:alice_pid, NULL);
RESET ROLE;
-- nor does any executor still hold alice's advisory lock
SELECT count(*) AS advisory_locks_held FROM pg_locks WHERE locktype = 'advisory';
SELECT pg_try_advisory_lock(4242) AS lock_is_free, pg_advisory_unlock(4242);

-- 2. the same when the step fails after doing it all
SET ROLE sec_alice;
CALL sec_run('SELECT * FROM public.sec_escape(true)', NULL, NULL, NULL) \gset alice_
SELECT :'alice_status' AS status, regexp_replace(:'alice_res', 'backend [0-9]+', 'backend N') AS alices_failed_step;
RESET ROLE;
SET ROLE sec_bob;
CALL sec_probe_on(:alice_pid, NULL);
RESET ROLE;
SELECT count(*) AS advisory_locks_held FROM pg_locks WHERE locktype = 'advisory';

-- 3. refused outright: role changes, temporary objects, LISTEN, cursors WITH
--    HOLD, prepared statements
CREATE FUNCTION sec_setvar_after(how text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF how = 'set' THEN
		SET df.in_workflow = false;
	ELSIF how = 'reset' THEN
		RESET ALL;
	END IF;
	RETURN current_setting('df.in_workflow', true) || ' ' || df.setvar('sec_k', 'v');
END
$$;
SET ROLE sec_alice;
CALL sec_run('SET ROLE sec_bob');
CALL sec_run('RESET ROLE');
CALL sec_run('SET ROLE NONE');
CALL sec_run($$SELECT set_config('role', 'sec_bob', false)$$);
CALL sec_run('SET SESSION AUTHORIZATION sec_bob');
CALL sec_run('RESET SESSION AUTHORIZATION');
CALL sec_run('CREATE TEMP TABLE sec_leak (x int)');
CALL sec_run('CREATE TABLE pg_temp.sec_leak (x int)');
CALL sec_run('CREATE TEMP SEQUENCE sec_leak_seq');
CALL sec_run('LISTEN sec_channel');
CALL sec_run('UNLISTEN *');
CALL sec_run('DECLARE sec_hold CURSOR WITH HOLD FOR SELECT 1');
CALL sec_run('DISCARD ALL');
CALL sec_run('PREPARE sec_secret AS SELECT 1');
CALL sec_run($q$DO $do$ BEGIN EXECUTE 'PREPARE sec_secret AS SELECT 1'; END $do$$q$);

-- 4. df.in_workflow cannot be turned off from inside a step
CALL sec_run($$SELECT set_config('df.in_workflow', 'false', false) AS off, current_setting('df.in_workflow') AS now$$);
CALL sec_run($$SELECT set_config('df.in_workflow', 'false', false), df.setvar('sec_k', 'v')$$);
CALL sec_run($$SELECT sec_setvar_after('set')$$);
CALL sec_run($$SELECT sec_setvar_after('reset')$$);
CALL sec_run($$SELECT set_config('df.in_workflow', 'false', false), df.unsetvar('sec_k')$$);
CALL sec_run($$SELECT set_config('df.in_workflow', 'false', false), df.clearvars()$$);
CALL sec_run($$SELECT set_config('df.in_workflow', 'false', false), df.await_instance('00000000')$$);
SELECT count(*) AS alice_vars FROM df.vars;
RESET ROLE;

-- 5. other users' instances: invisible, not updatable, not signalable,
--    not cancellable from a step
SET ROLE sec_bob;
SELECT df.setvar('bob_secret', 'b');
SELECT df.start(df.wait_for_signal('go') ~> 'SELECT ''bob done'' AS r', 'sec-bob-wait') AS bob_id \gset
RESET ROLE;
SELECT count(*) > 0 AS bob_rows_exist FROM df.instances WHERE submitted_by = 'sec_bob'::regrole;
SET ROLE sec_alice;
CALL sec_run($$SELECT (SELECT count(*) FROM df.instances WHERE submitted_by <> current_user::regrole)
                   || '/' || (SELECT count(*) FROM df.nodes WHERE submitted_by <> current_user::regrole)
                   || '/' || (SELECT count(*) FROM df.vars WHERE owner <> current_user::regrole) AS state$$);
CALL sec_run('SELECT count(*) FROM df_internal.runs');
CALL sec_run('SELECT count(*) FROM df_internal.tasks');
CALL sec_run(format($$UPDATE df.instances SET status = 'cancelled' WHERE id = %L$$, :'bob_id')) \gset
SELECT :'status' AS status, :'res' AS update_of_bobs_instance;
CALL sec_run($$DELETE FROM df.vars WHERE owner = 'sec_bob'::regrole RETURNING 1$$) \gset
SELECT :'status' AS status, :'res' AS delete_of_bobs_vars;
CALL sec_run(format($$DELETE FROM df.instances WHERE id = %L$$, :'bob_id'));
CALL sec_run($$INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000000c', '0000000d', 'sec_bob')$$);
CALL sec_run(format($$SELECT df.signal(%L, 'go')$$, :'bob_id')) \gset
SELECT :'status' AS status, replace(:'res', :'bob_id', '<bob>') AS signal_to_bob;
CALL sec_run(format($$SELECT df.cancel(%L)$$, :'bob_id')) \gset
SELECT :'status' AS status, replace(:'res', :'bob_id', '<bob>') AS cancel_of_bob;
RESET ROLE;
SELECT status AS bobs_status, (SELECT count(*) FROM df.vars WHERE owner = 'sec_bob'::regrole) AS bobs_vars
FROM df.instances WHERE id = :'bob_id';
SET ROLE sec_bob;
SELECT df.signal(:'bob_id', 'go');
SELECT df.await_instance(:'bob_id');
SELECT df.result(:'bob_id');
RESET ROLE;

-- 6. df.start from a step: the new instance is the step's submitter's and
--    starts only if the step commits
SET ROLE sec_alice;
CALL sec_run($$SELECT df.start('SELECT current_user AS who', 'sec-child') AS state$$) \gset
SELECT :'status' AS status, length(:'res') AS child_id_length;
SELECT df.await_instance(:'res');
SELECT df.result(:'res');
SELECT submitted_by FROM df.instances WHERE id = :'res';
CALL sec_run($$WITH s AS MATERIALIZED (SELECT df.start('SELECT 1', 'sec-child-rolled-back') AS id)
              SELECT id, 1 / (SELECT count(*) - 1 FROM s)::int FROM s$$);
RESET ROLE;
SELECT count(*) AS rolled_back_children FROM df.instances WHERE label = 'sec-child-rolled-back';

-- 7. search_path: the parts of df.start, df.cancel, df.signal and df.metrics
--    that act with the bootstrap superuser's privileges must not resolve an
--    operator or function the caller planted in its own schema
CREATE SCHEMA sec_evil AUTHORIZATION sec_alice;
SET ROLE sec_alice;
CREATE TABLE sec_evil.seen (who text);
CREATE FUNCTION sec_evil.texteq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sec_evil.seen VALUES (current_user);
	RETURN pg_catalog.texteq(a, b);
END
$$;
CREATE OPERATOR sec_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = sec_evil.texteq);
CREATE FUNCTION sec_evil.textne(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sec_evil.seen VALUES (current_user);
	RETURN pg_catalog.textne(a, b);
END
$$;
CREATE OPERATOR sec_evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = sec_evil.textne);
CREATE FUNCTION sec_evil.int8eq(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sec_evil.seen VALUES (current_user);
	RETURN pg_catalog.int8eq(a, b);
END
$$;
CREATE OPERATOR sec_evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = sec_evil.int8eq);
SET search_path = sec_evil, pg_catalog, public;
SELECT 'x' = 'x' AND NOT 'x' <> 'x' AS planted_operators_work;
SELECT df.start(df.wait_for_signal('go') ~> 'SELECT 1', 'sec-evil') AS evil_id \gset
SELECT df.signal(:'evil_id', 'go');
SELECT df.await_instance(:'evil_id');
SELECT df.start(df.wait_for_signal('go'), 'sec-evil') AS evil_id \gset
SELECT df.cancel(:'evil_id') IS NOT NULL AS cancelled;
RESET search_path;
SELECT DISTINCT who FROM sec_evil.seen ORDER BY who;
RESET ROLE;
DROP SCHEMA sec_evil CASCADE;

-- leave no variables behind for the tests that list them
SET ROLE sec_bob;
SELECT df.clearvars();
RESET ROLE;
