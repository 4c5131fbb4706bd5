-- Runs last: after every other test, df.check() finds no violated
-- invariant.  A step of a finished instance that is still running (its
-- task claimed) is a passing state, so wait for the engine to settle
-- first; a real violation does not go away and fails the test.
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '20 seconds';
BEGIN
	WHILE EXISTS (SELECT 1 FROM df.check()) AND clock_timestamp() < deadline LOOP
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT * FROM df.check();
-- called by a step, it does not count that step's own run (its node
-- running, its task taken, nothing else pending) as a problem
GRANT EXECUTE ON FUNCTION df.check() TO df_user;
SET ROLE df_user;
SELECT df.start('SELECT count(*) AS problems FROM df.check()') AS id \gset
SELECT df.await_instance(:'id', 20), df.result(:'id');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.check() FROM df_user;
-- and it is an administrator's function
SELECT has_function_privilege('df_user', 'df.check()', 'EXECUTE') AS df_user_may_check;
