-- df.loop(body, condition, continue_on_failure): with continue_on_failure a
-- body run that fails with an error code (SQL, HTTP, a wrapper's) starts the
-- next iteration without the condition; after a body run that succeeds the
-- condition decides as before; the condition's failures and the engine's
-- stay fatal.  With df.catch, df.retry and df.break inside the body.
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
CREATE FUNCTION lc_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;
CREATE TABLE lc_runs (n int);
CREATE TABLE lc_cond (n int);
CREATE TABLE lc_caught (code text);
CREATE SEQUENCE lc_seq;
CREATE SEQUENCE lc_seq_break;
CREATE SEQUENCE lc_seq_catch;
CREATE SEQUENCE lc_seq_retry;

-- the JSON: without the flag it is the reference's (no query); with it a settings object
SELECT df.loop('SELECT 1');
SELECT df.loop('SELECT 1', continue_on_failure => false) = df.loop('SELECT 1') AS same_json,
       df.loop('SELECT 1', 'SELECT false', false) = df.loop('SELECT 1', 'SELECT false') AS same_json_while;
SELECT df.loop('SELECT 1', continue_on_failure => true);
SELECT df.loop('SELECT 1', 'SELECT false', true);
SELECT df.loop('SELECT 1', continue_on_failure => NULL);
SELECT df.explain(df.loop('SELECT 1', 'SELECT false', continue_on_failure => true));
SELECT df.explain(df.loop('SELECT 1', continue_on_failure => true));
-- settings written by hand are checked by df.start
SELECT df.start('{"node_type":"LOOP","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"continue_on_failure\":1}"}');
SELECT df.start('{"node_type":"LOOP","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"keep_going\":true}"}');
SELECT df.start('{"node_type":"LOOP","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"SELECT 1"}');

-- every other run fails (division by zero): a failed run skips the condition,
-- which runs after the three runs that succeed only
SELECT df.start(df.loop($$INSERT INTO lc_runs SELECT 1 / (nextval('lc_seq') % 2)::int RETURNING n$$,
                        $$INSERT INTO lc_cond SELECT 1 RETURNING (SELECT count(*) < 3 FROM lc_runs) AS again$$,
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id');
SELECT (SELECT last_value FROM lc_seq) AS body_runs, (SELECT count(*) FROM lc_runs) AS succeeded,
       (SELECT count(*) FROM lc_cond) AS conditions;
SELECT count(*) FILTER (WHERE kind = 'node_failed') AS body_failures,
       string_agg(DISTINCT detail->>'code', ',') FILTER (WHERE kind = 'node_failed') AS codes
FROM df.history(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';
-- the instance's explain shows the setting (from its df.nodes rows)
SELECT position('LOOP (while, continue on failure)' in df.explain(:'id')) > 0 AS live_explain;

-- without it (the default) the first failure fails the loop, as before
SELECT df.start(df.loop('SELECT 1/0', continue_on_failure => false)) AS id \gset
SELECT lc_wait(:'id');

-- the condition's failure stays fatal
SELECT df.start(df.loop('SELECT 1', 'SELECT 1/0', continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- so does the engine's (a named result without rows, substituted): it has no error code
SELECT df.start(df.loop(('SELECT 1 AS x WHERE false' |=> 'nothing') ~> 'SELECT $nothing.x',
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- df.break still ends the loop: two failed runs, then the break
SELECT df.start(df.loop($$SELECT 1 / (nextval('lc_seq_break') >= 3)::int$$ ~> df.break('"done"'),
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id'), (SELECT last_value FROM lc_seq_break) AS body_runs;

-- df.catch in the body: a handler that succeeds makes the run a success, so
-- the condition runs; the handler saw the error
SELECT df.start(df.loop(df.catch('SELECT 1/0', $$INSERT INTO lc_caught VALUES ($error.code) RETURNING code$$),
                        'SELECT count(*) < 2 FROM lc_caught', continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id');
SELECT code, count(*) FROM lc_caught GROUP BY code;

-- a handler that fails again (df.fail) fails the run with code fail: the next run follows
-- (two runs: the FAIL, the CATCH and the THEN of each failed with that code)
SELECT df.start(df.loop(df.catch($$SELECT 1 / (nextval('lc_seq_catch') >= 3)::int$$,
                                 df.fail('rethrown'))
                        ~> df.break('"after two rethrows"'),
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id');
SELECT count(*) FILTER (WHERE kind = 'error_caught') AS caught,
       count(*) FILTER (WHERE kind = 'node_failed' AND detail->>'code' = 'fail') AS rethrown
FROM df.history(:'id');

-- df.retry in the body retries first; only the failure it gives up on reaches the loop
SELECT df.start(df.loop(df.retry($$SELECT 1 / (nextval('lc_seq_retry') >= 4)::int$$,
                                 max_attempts => 2, initial_interval => '10 ms', jitter => 'none',
                                 retry_on => '{sql}')
                        ~> df.break('"retried"'),
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id'), (SELECT last_value FROM lc_seq_retry) AS attempts;
SELECT count(*) FILTER (WHERE kind = 'retries_exhausted') AS exhausted FROM df.history(:'id');

-- an HTTP body: 503 twice (failed runs), then 200; the condition ends the loop after it
SELECT df.start(df.loop(df.http('{base}/flaky/{sys_instance_id}/2/503', 'GET'), 'SELECT false',
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id')::jsonb->>'status' AS status;
SELECT string_agg(detail->>'code', ',' ORDER BY at) AS failures
FROM df.history(:'id') WHERE kind = 'node_failed';

-- a failed JOIN branch and a df.timeout that fires carry their codes up to
-- the loop: each failed run is followed by the next
CREATE SEQUENCE lc_seq_join;
CREATE SEQUENCE lc_seq_timeout;
SELECT df.start(df.loop(('SELECT 1' & $$SELECT 1 / (nextval('lc_seq_join') >= 2)::int$$) ~> df.break('"joined"'),
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id'), (SELECT last_value FROM lc_seq_join) AS body_runs;
SELECT df.start(df.loop($$SELECT nextval('lc_seq_timeout')$$
                        ~> df.timeout($$SELECT pg_sleep(CASE WHEN (SELECT last_value FROM lc_seq_timeout) < 2 THEN 30 ELSE 0 END)$$, 0.5)
                        ~> df.break('"in time"'),
                        continue_on_failure => true)) AS id \gset
SELECT lc_wait(:'id');
SELECT df.result(:'id'), (SELECT last_value FROM lc_seq_timeout) AS body_runs;
SELECT count(*) FILTER (WHERE kind = 'timeout_fired') AS timeouts,
       string_agg(DISTINCT detail->>'code', ',') FILTER (WHERE kind = 'node_failed') AS failure_codes
FROM df.history(:'id');

-- failed runs count toward the backstop: a loop whose every run fails ends
-- there (the counter is set just below it rather than run up to it)
SELECT df.start(df.loop('SELECT 1/0', continue_on_failure => true)) AS id \gset
RESET ROLE;
SET lc.id = :'id';
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.loops WHERE instance_id = current_setting('lc.id')) LOOP
		IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'the loop never started'; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
UPDATE df_internal.loops SET iterations = 8388607 WHERE instance_id = :'id';
SET ROLE df_user;
SELECT lc_wait(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

RESET ROLE;
SELECT engine_idle() AS idle;
