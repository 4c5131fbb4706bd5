-- What a step sees of who it is.  Steps run in an executor, a
-- session whose authenticated user is the worker role (a superuser); seeing
-- session_user = that role and is_superuser = on would fool policies
-- and functions keyed on them.  A step sees the submitter as
-- current_user and as session_user, the submitter's is_superuser, and
-- cannot get back to the worker role.
CREATE ROLE ssu_alice LOGIN;
CREATE ROLE ssu_bob LOGIN;
SELECT df.grant_usage('ssu_alice');
SELECT df.grant_usage('ssu_bob');

-- start q as the current role, wait for it and return the root node's
-- result (its first row's "seen" column, or the error text)
CREATE PROCEDURE public.ssu_run(q text, INOUT status text DEFAULT NULL, INOUT res text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	iid text;
	r jsonb;
BEGIN
	iid := df.start(q);
	COMMIT;
	status := df.await_instance(iid, 60);
	SELECT n.result INTO r FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
	WHERE i.id = iid;
	IF jsonb_typeof(r) = 'string' THEN
		res := r #>> '{}';
	ELSE
		res := coalesce(r -> 'rows' -> 0 ->> 'seen', r::text);
	END IF;
END
$$;

-- who the step is, as one line
CREATE FUNCTION public.ssu_whoami() RETURNS text LANGUAGE sql AS $$
	SELECT format('current_user=%s session_user=%s session_authorization=%s is_superuser=%s role=%s',
				  current_user, session_user, current_setting('session_authorization'),
				  current_setting('is_superuser'), current_setting('role'))
$$;

-- a table whose policy is keyed on session_user
CREATE TABLE public.ssu_notes (owner name NOT NULL, note text NOT NULL);
INSERT INTO public.ssu_notes VALUES ('ssu_alice', 'alice''s'), ('ssu_bob', 'bob''s'),
	('postgres', 'the worker role''s');
ALTER TABLE public.ssu_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY ssu_mine ON public.ssu_notes USING (owner = session_user);
GRANT SELECT ON public.ssu_notes TO ssu_alice, ssu_bob;

-- 1. what a step sees, for two roles one after the other
SET ROLE ssu_alice;
CALL ssu_run('SELECT public.ssu_whoami() AS seen');
CALL ssu_run('SELECT string_agg(note, '', '') AS seen FROM public.ssu_notes');
RESET ROLE;
SET ROLE ssu_bob;
CALL ssu_run('SELECT public.ssu_whoami() AS seen');
CALL ssu_run('SELECT string_agg(note, '', '') AS seen FROM public.ssu_notes');
RESET ROLE;

-- 2. a step that fails reports the same inside, and the next one is itself
SET ROLE ssu_alice;
CALL ssu_run($q$SELECT (SELECT 1/0 WHERE public.ssu_whoami() IS NOT NULL) AS seen$q$);
CALL ssu_run($q$DO $do$ BEGIN RAISE EXCEPTION 'inside: %', public.ssu_whoami(); END $do$$q$);
RESET ROLE;
SET ROLE ssu_bob;
CALL ssu_run('SELECT public.ssu_whoami() AS seen');
RESET ROLE;

-- 3. a step cancelled while it runs: the next step on that very executor
--    is bob's own
SET ROLE ssu_alice;
SELECT df.start('SELECT pg_sleep(300) AS seen') AS sleeper \gset
RESET ROLE;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'
					  AND state = 'active' AND query LIKE '%pg_sleep(300)%') LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the sleeping step did not start within 60 seconds';
		END IF;
		PERFORM pg_sleep(0.01);
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
END
$$;
SELECT pid AS sleeper_pid FROM pg_stat_activity
WHERE backend_type = 'pg_durable executor' AND query LIKE '%pg_sleep(300)%' \gset
SELECT df.cancel(:'sleeper') LIKE '%cancelled%' AS cancelled;
SELECT set_config('ssu.sleeper_pid', :'sleeper_pid', false) IS NOT NULL AS noted;
SET ROLE ssu_bob;
DO $$
DECLARE
	st text;
	res text;
BEGIN
	FOR i IN 1..500 LOOP
		CALL public.ssu_run($q$SELECT pg_backend_pid() || ' ' || public.ssu_whoami() AS seen$q$, st, res);
		IF split_part(res, ' ', 1)::int = current_setting('ssu.sleeper_pid')::int THEN
			RAISE NOTICE 'on the cancelled step''s executor: %', substr(res, strpos(res, ' ') + 1);
			RETURN;
		END IF;
	END LOOP;
	RAISE EXCEPTION 'no step of bob ran on the cancelled step''s executor in 500 tries';
END
$$;
RESET ROLE;

-- 4. no way back to the worker role (or to any other)
SET ROLE ssu_alice;
CALL ssu_run('SET ROLE postgres');
CALL ssu_run('SET SESSION AUTHORIZATION postgres');
CALL ssu_run('SET SESSION AUTHORIZATION ssu_bob');
CALL ssu_run('RESET SESSION AUTHORIZATION');
CALL ssu_run('SET LOCAL ROLE postgres');
CALL ssu_run($q$SELECT set_config('session_authorization', 'postgres', true) AS seen$q$);
CALL ssu_run($q$SELECT set_config('role', 'postgres', false) AS seen$q$);
CALL ssu_run($q$SELECT set_config('is_superuser', 'on', false) AS seen$q$);
RESET ROLE;
-- nor through a function of alice's own with a SET clause
CREATE FUNCTION public.ssu_become(r text) RETURNS text LANGUAGE sql
	SET role = 'postgres' AS 'SELECT current_user::text';
ALTER FUNCTION public.ssu_become(text) OWNER TO ssu_alice;
SET ROLE ssu_alice;
CALL ssu_run($q$SELECT public.ssu_become('x') AS seen$q$);
-- and after all of these, still alice
CALL ssu_run('SELECT public.ssu_whoami() AS seen');
RESET ROLE;

-- the caller's own session is untouched
SELECT current_user, session_user;

DROP FUNCTION public.ssu_become(text);
DROP TABLE public.ssu_notes;
DROP FUNCTION public.ssu_whoami();
DROP PROCEDURE public.ssu_run(text, text, text);
