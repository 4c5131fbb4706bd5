-- Steps cannot leave state behind in the executor, and deadlocks between
-- steps are retried instead of failing the workflow.
SET ROLE df_user;

-- settings changed by a step end with the step: the next step sees defaults
SELECT df.start($$SELECT set_config('work_mem', '1234kB', false) AS a, set_config('search_path', 'nowhere', false) AS b$$
                ~> $$SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path$$) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start($$SET work_mem = '2345kB'$$ ~> $$SHOW work_mem$$) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start($$SET LOCAL statement_timeout = '1ms'$$ ~> $$SELECT current_setting('statement_timeout') AS st$$) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- security-restricted: no temporary objects, no role changes, no LISTEN
SELECT df.start('CREATE TEMP TABLE leak (x int)') AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('SET SESSION AUTHORIZATION postgres') AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('LISTEN leak') AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id';

-- two branches that lock two rows in opposite orders deadlock; the loser of
-- the deadlock is retried and both complete
CREATE TABLE pair (id int PRIMARY KEY, v int);
INSERT INTO pair VALUES (1, 0), (2, 0);
CREATE FUNCTION lock_both(first int, second int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	UPDATE pair SET v = v + 1 WHERE id = first;
	PERFORM pg_sleep(0.3);
	UPDATE pair SET v = v + 1 WHERE id = second;
	RETURN first;
END
$$;
SELECT set_config('test.deadlocks_before', deadlocks::text, false) IS NOT NULL AS noted
FROM pg_stat_database WHERE datname = current_database();
SELECT df.start('SELECT lock_both(1, 2)' & 'SELECT lock_both(2, 1)') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT * FROM pair ORDER BY id;
-- the deadlock did happen (the executors' statistics show it)
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN (SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()) > current_setting('test.deadlocks_before')::bigint;
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'no deadlock was recorded';
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
