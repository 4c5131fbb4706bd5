-- Failure handling (docs/design/failure-handling.md): the JSON of
-- df.retry, df.timeout, df.catch, df.fail and fractional df.sleep (defaults
-- add no key), their build-time errors, error codes on failed nodes and in
-- history, retries with back-off (a sequence counts the attempts), the
-- default classification, retry_on, exhaustion, df.catch with $error,
-- df.fail in an IF arm, df.timeout interrupting a running statement.
SET ROLE df_user;

-- exact JSON; reference graphs keep theirs
SELECT df.sleep(5) AS sleep_int, df.sleep(5::float8) AS sleep_float_whole, df.sleep(0.25) AS sleep_fraction;
SELECT df.retry('SELECT 1');
SELECT df.retry('SELECT 1', max_attempts => 5, initial_interval => '10 ms', backoff_rate => 1.5,
                max_interval => '2 s', jitter => 'none', retry_on => '{sql:40001,http:5xx}',
                non_retryable => '{sql:23505}', max_duration => '1 min');
SELECT df.retry('SELECT 1', 3, '1 second', 2.0, '100 seconds', 'full', NULL, NULL, NULL, NULL, 'step') AS all_defaults;
SELECT df.timeout('SELECT pg_sleep(10)', 0.5);
SELECT df.catch('SELECT 1/0', 'SELECT 1');
SELECT df.catch('SELECT 1/0', 'SELECT 1', '{sql:22012,timeout}');
SELECT df.fail('no stock');
SELECT df.fail('version moved', retryable => true);
SELECT df.retry('SELECT 1' ~> 'SELECT 2') ~> df.catch(df.fail('x'), 'SELECT 3') AS composed;

-- validation at build time
SELECT df.retry('SELECT 1', max_attempts => -1);
SELECT df.retry('SELECT 1', initial_interval => '-1 s');
SELECT df.retry('SELECT 1', backoff_rate => 0.5);
SELECT df.retry('SELECT 1', max_interval => '0.5 s');
SELECT df.retry('SELECT 1', jitter => 'some');
SELECT df.retry('SELECT 1', retry_on => '{http:6xx}');
SELECT df.retry('SELECT 1', non_retryable => '{bogus}');
SELECT df.retry('SELECT 1', retry_on => ARRAY[NULL]::text[]);
SELECT df.retry('SELECT 1', max_duration => '0 s');
SELECT df.retry('SELECT 1', mode => 'tree');
SELECT df.retry('SELECT 1', mode => 'subtree');
SELECT df.retry('SELECT 1', attempt_timeout => '0 s');
SELECT df.retry('SELECT 1', max_attempts => NULL);
SELECT df.timeout('SELECT 1', 0);
SELECT df.timeout('SELECT 1', -2);
SELECT df.catch('SELECT 1', 'SELECT 2', '{sql:ABCDEFG}');
SELECT df.sleep(-0.5);
-- and at df.start for hand-written graphs
SELECT df.start('{"node_type":"RETRY","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"max_attempts\":-1}"}');
SELECT df.start('{"node_type":"RETRY","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"tries\":2}"}');
SELECT df.start('{"node_type":"RETRY","query":"{}"}');
SELECT df.start('{"node_type":"TIMEOUT","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"seconds\":0}"}');
SELECT df.start('{"node_type":"CATCH","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{}"}');
SELECT df.start('{"node_type":"FAIL","query":"{}"}');
SELECT df.start('{"node_type":"SLEEP","query":"1.1234567"}');

-- wait for an instance with a deadline
CREATE FUNCTION fh_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;

-- a failed SQL step: its code in status_details and in the node_failed event
SELECT df.start('SELECT 1/0') AS id \gset
SELECT fh_wait(:'id');
SELECT status, result #>> '{}' AS error, (status_details->'error') - 'node' AS error_code
FROM df.nodes WHERE instance_id = :'id';
SELECT kind, detail - 'error' AS detail FROM df.history(:'id') WHERE kind = 'node_failed';

-- a step failing twice, then succeeding: 3 attempts, the effect of the last
-- only (P0001 is retried by default; each failed attempt rolls back its insert)
CREATE SEQUENCE fh_attempts;
CREATE TABLE fh_effects (attempt bigint);
CREATE FUNCTION fh_flaky(fail_below int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE a bigint := nextval('fh_attempts');
BEGIN
	INSERT INTO fh_effects VALUES (a);
	IF a < fail_below THEN
		RAISE EXCEPTION 'attempt % fails', a;
	END IF;
	RETURN a;
END $$;
SELECT df.start(df.retry('SELECT fh_flaky(3) AS attempt', initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT fh_wait(:'id');
SELECT attempt FROM fh_effects;
SELECT kind, attempt, detail->>'attempt' AS next_attempt, detail->>'delay_ms' AS delay_ms, detail->>'code' AS code
FROM df.history(:'id') WHERE kind = 'retry_scheduled' ORDER BY at;

-- back-off bounds with jitter 'none': 10, 20, 40, capped at 50 ms
SELECT df.start(df.retry('SELECT 1/0', max_attempts => 5, initial_interval => '10 ms',
                         max_interval => '50 ms', jitter => 'none', retry_on => '{sql:22012}')) AS id \gset
SELECT fh_wait(:'id');
SELECT string_agg(detail->>'delay_ms', ',' ORDER BY at) AS delays FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- exhaustion: the last error, and history says after N attempts
SELECT result #>> '{}' AS error FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
SELECT kind, attempt, detail->>'error' AS message, detail->>'reason' AS reason
FROM df.history(:'id') WHERE kind = 'retries_exhausted';

-- jitter 'full' stays within [0, delay] over 50 draws
SELECT df.start(df.retry('SELECT 1/0', max_attempts => 51, initial_interval => '4 ms', backoff_rate => 1,
                         max_interval => '4 ms', jitter => 'full', retry_on => '{sql}')) AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) AS draws, bool_and((detail->>'delay_ms')::int BETWEEN 0 AND 4) AS within_bounds
FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- non-retryable codes fail at once: sql:23505, sql:42P01, fail
CREATE TABLE fh_unique (k int PRIMARY KEY);
INSERT INTO fh_unique VALUES (1);
SELECT df.start(df.retry('INSERT INTO fh_unique VALUES (1)', initial_interval => '10 ms')) AS id1,
       df.start(df.retry('SELECT * FROM fh_no_such_table', initial_interval => '10 ms')) AS id2,
       df.start(df.retry(df.fail('refused'), initial_interval => '10 ms')) AS id3 \gset
SELECT fh_wait(:'id1'), fh_wait(:'id2'), fh_wait(:'id3');
SELECT i.id = :'id1' AS first, n.status_details->'error'->>'code' AS code,
       (SELECT count(*) FROM df.history(i.id) h WHERE h.kind = 'retry_scheduled') AS retries
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
WHERE i.id IN (:'id1', :'id2', :'id3') ORDER BY i.id = :'id1' DESC, i.id = :'id2' DESC;

-- retry_on restricts: division by zero is not in it
SELECT df.start(df.retry('SELECT 1/0', initial_interval => '10 ms', retry_on => '{sql:40001}')) AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- the nearest RETRY wins; a completed step never runs again
CREATE SEQUENCE fh_first_runs;
SELECT df.start(df.retry(df.retry($$SELECT nextval('fh_first_runs')$$ ~> 'SELECT fh_flaky(1000000)', max_attempts => 2,
                                  initial_interval => '10 ms'),
                         max_attempts => 5, initial_interval => '10 ms')) AS id \gset
SELECT fh_wait(:'id');
SELECT last_value AS first_step_runs FROM fh_first_runs;
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- df.catch: a matching error runs the handler with $error; others propagate
SELECT df.start(df.catch('SELECT 1/0', 'SELECT $error.code AS code, $error.kind AS kind')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS handler_rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
SELECT df.start(df.catch('SELECT 1/0', 'SELECT ''handled''', '{sql:23}')) AS id \gset
SELECT fh_wait(:'id');
SELECT df.start(df.catch('SELECT 1/0', 'SELECT ''handled''', '{sql:22}')) AS id \gset
SELECT fh_wait(:'id');
SELECT df.start(df.catch('SELECT 1', 'SELECT ''never''')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS step_rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';

-- df.fail in an IF arm, with substitution; caught by kind
CREATE TABLE fh_stock (item text, qty int);
SELECT df.start(('UPDATE fh_stock SET qty = qty - 1 WHERE item = ''pen'' RETURNING qty' |=> 'upd')
                ~> df.if('SELECT $upd.qty? IS NULL', df.fail('nothing updated for {sys_label}'), 'SELECT 1'),
                'fh-label') AS id \gset
SELECT fh_wait(:'id');
SELECT status, result #>> '{}' AS error, status_details->'error'->>'code' AS code
FROM df.nodes n WHERE instance_id = :'id' AND node_type = 'FAIL';
SELECT df.start(df.catch(df.fail('business refusal'), 'SELECT $error.message AS m', '{fail}')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS handler_rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';

-- fractional sleep
SELECT df.start(df.sleep(0.25) ~> 'SELECT 1') AS id \gset
SELECT fh_wait(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SLEEP';

-- df.timeout: a running statement is interrupted and rolled back, the node fails with kind timeout
CREATE TABLE fh_timeout_effects (v int);
SELECT df.start(df.timeout('INSERT INTO fh_timeout_effects SELECT 1 FROM pg_sleep(10)', 0.5)) AS id \gset
SELECT clock_timestamp() AS t0 \gset
SELECT fh_wait(:'id');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS within_seconds;
SELECT count(*) AS effects FROM fh_timeout_effects;
SELECT result #>> '{}' AS error, status_details->'error'->>'code' AS code
FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id WHERE i.id = :'id';
-- a step that finishes in time: the deadline goes, the result passes through
SELECT df.start(df.timeout('SELECT 42 AS v' |=> 'v', 30) ~> 'SELECT $v.v AS again') AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
-- a timeout inside a catch
SELECT df.start(df.catch(df.timeout('SELECT pg_sleep(10)', 0.3), 'SELECT $error.kind AS kind', '{timeout}')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';

RESET ROLE;

-- attempt_timeout bounds each attempt (statement_timeout), and a timeout is retried
SET ROLE df_user;
SELECT df.retry('SELECT 1', attempt_timeout => '1.5 s') AS with_attempt_timeout;
SELECT df.start(df.retry('SELECT pg_sleep(10)', max_attempts => 2, initial_interval => '10 ms',
                         attempt_timeout => '200 ms')) AS id \gset
SELECT clock_timestamp() AS t0 \gset
SELECT fh_wait(:'id');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS bounded;
SELECT n.status_details->'error'->>'code' AS code, n.result #>> '{}' AS error,
       (SELECT count(*) FROM df.history(:'id') h WHERE h.kind = 'retry_scheduled') AS retries
FROM df.nodes n WHERE n.instance_id = :'id' AND n.node_type = 'SQL';
RESET ROLE;

-- mode 'subtree': a failure anywhere under the wrapper re-runs the whole subtree
-- (read a version, act, and start over when df.fail(..., retryable => true) says it moved)
SET ROLE df_user;
CREATE SEQUENCE fh_generations;
CREATE TABLE fh_sub_effects (generation bigint);
SELECT df.start(df.retry((('SELECT nextval(''fh_generations'') AS g' |=> 'v')
                          ~> 'INSERT INTO fh_sub_effects VALUES ($v.g)'
                          ~> df.if('SELECT $v.g < 3', df.fail('version moved', retryable => true),
                                   'SELECT $v.g AS final')),
                         mode => 'subtree', initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
SELECT string_agg(generation::text, ',' ORDER BY generation) AS effects_of_every_generation FROM fh_sub_effects;
SELECT count(*) AS subtree_retries, string_agg(detail->>'code', ',') AS codes
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- a df.fail that is not retryable ends it at once
SELECT df.start(df.retry('SELECT 1' ~> df.fail('refused'), mode => 'subtree', initial_interval => '10 ms')) AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- exhausted after max_attempts generations
SELECT df.start(df.retry(df.fail('always moved', retryable => true), mode => 'subtree', max_attempts => 3,
                         initial_interval => '10 ms')) AS id \gset
SELECT fh_wait(:'id');
SELECT kind, attempt, detail->>'error' AS message FROM df.history(:'id') WHERE kind = 'retries_exhausted';
RESET ROLE;

-- df.start's instance-wide policy: defaults change nothing (not even the graph)
SET ROLE df_user;
SELECT df.start('SELECT 1', max_attempts => 1, on_failure => 'fail') AS id \gset
SELECT node_type FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('SELECT 1', max_attempts => -1);
SELECT df.start('SELECT 1', max_backoff => '0 s');
SELECT df.start('SELECT 1', on_failure => 'ignore');
-- max_attempts: a step without its own retry is retried (back-off from 1 s)
CREATE SEQUENCE fh_policy_attempts;
CREATE FUNCTION fh_policy_flaky() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE a bigint := nextval('fh_policy_attempts');
BEGIN
	IF a < 2 THEN
		RAISE EXCEPTION 'policy attempt % fails', a;
	END IF;
	RETURN a;
END $$;
SELECT df.start('SELECT fh_policy_flaky() AS a', max_attempts => 3, max_backoff => '5 s') AS id \gset
SELECT fh_wait(:'id');
SELECT detail->>'delay_ms' AS delay_ms, attempt FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT node_type, query FROM df.nodes WHERE instance_id = :'id' AND node_type = 'RETRY';
-- on_failure 'continue' in a chain: the failed step ends with its error, the next one runs
SELECT df.start(('SELECT 1/0' |=> 'bad') ~> 'SELECT ($bad.error)::jsonb->>''code'' AS code', on_failure => 'continue') AS id \gset
SELECT fh_wait(:'id');
SELECT n.query, n.status, n.result->'error'->>'code' AS error_code, n.result->'rows' AS rows FROM df.nodes n
WHERE n.instance_id = :'id' AND n.node_type = 'SQL' ORDER BY n.query;
-- ... and in a loop: a failed iteration goes on to the next one
CREATE TABLE fh_loop_log (id serial);
SELECT df.start(df.loop('INSERT INTO fh_loop_log DEFAULT VALUES'
                        ~> 'SELECT 1 / (SELECT count(*) % 2 FROM fh_loop_log)::int'
                        ~> df.if('SELECT count(*) >= 3 FROM fh_loop_log', df.break('done'), 'SELECT 1')),
                on_failure => 'continue') AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) AS iterations FROM fh_loop_log;
SELECT count(*) AS failures_continued FROM df.history(:'id') WHERE kind = 'error_caught';
RESET ROLE;

-- a JOIN or a RACE fails with its failed branch's code, so a CATCH above matches it
SET ROLE df_user;
SELECT df.start(df.catch(df.join('SELECT 1', 'SELECT 1/0'), 'SELECT $error.code AS code', '{sql:22}')) AS id \gset
SELECT fh_wait(:'id');
SELECT result->'rows' AS rows FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
SELECT status_details->'error'->>'code' AS join_code FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN';
SELECT df.start(df.race('SELECT 1/0', df.sleep(30))) AS id \gset
SELECT fh_wait(:'id');
SELECT status_details->'error'->>'code' AS race_code FROM df.nodes WHERE instance_id = :'id' AND node_type = 'RACE';
-- a running TIMEOUT shows its deadline
SELECT df.start(df.timeout(df.sleep(30), 60)) AS id \gset
CREATE FUNCTION fh_deadline(iid text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..600 LOOP
		IF EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = iid AND node_type = 'TIMEOUT'
				   AND status_details ? 'deadline') THEN
			RETURN (SELECT (status_details->>'deadline')::timestamptz > now() + interval '50 s'
					FROM df.nodes WHERE instance_id = iid AND node_type = 'TIMEOUT');
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END $$;
SELECT fh_deadline(:'id') AS deadline_shown;
SELECT df.cancel(:'id', 'done') IS NOT NULL AS cancelled;
RESET ROLE;

-- df.explain shows the wrappers with their settings, their step and handler
SET ROLE df_user;
SELECT df.explain(df.catch(df.retry('SELECT 1', max_attempts => 5), df.fail('refused'), '{sql:23}'));
SELECT df.explain(df.timeout(df.sleep(0.25), 2));
RESET ROLE;

-- the monitoring functions: a failed node's code in
-- df.instance_nodes, and a step waiting for its next attempt shows attempt
-- n of m and when the next one is due
SET ROLE df_user;
SELECT df.start('SELECT 1/0') AS id \gset
SELECT fh_wait(:'id');
SELECT node_type, status, status_details::jsonb->'error'->>'code' AS code,
       status_details::jsonb->'error'->>'kind' AS kind
FROM df.instance_nodes(:'id');
SELECT df.start(df.retry('SELECT 1/0', max_attempts => 4, initial_interval => '1 min', jitter => 'none',
                         retry_on => '{sql:22012}')) AS id \gset
CREATE FUNCTION fh_next_attempt(iid text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..600 LOOP
		IF EXISTS (SELECT 1 FROM df.instance_nodes(iid) WHERE node_type = 'SQL'
				   AND status_details::jsonb ? 'next_attempt_at') THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END $$;
SELECT fh_next_attempt(:'id') AS waiting_for_next_attempt;
SELECT node_type, status, d->>'attempt' AS attempt, d->>'max_attempts' AS max_attempts,
       (d->>'next_attempt_at')::timestamptz BETWEEN now() + interval '50 s' AND now() + interval '61 s' AS next_in_a_minute,
       d->'last_error'->>'code' AS last_code
FROM df.instance_nodes(:'id'), LATERAL (SELECT status_details::jsonb AS d) x WHERE node_type = 'SQL';
SELECT df.cancel(:'id', 'done') IS NOT NULL AS cancelled;
SELECT fh_wait(:'id');
RESET ROLE;

-- non_retryable narrows the retried set (the default one and retry_on's)
SET ROLE df_user;
SELECT df.start(df.retry('SELECT fh_flaky(1000000)', initial_interval => '10 ms',
                         non_retryable => '{sql:P0001}')) AS id1,
       df.start(df.retry('SELECT 1/0', initial_interval => '10 ms', retry_on => '{sql}',
                         non_retryable => '{sql:22}')) AS id2,
       df.start(df.retry('SELECT fh_flaky(1000000)', initial_interval => '10 ms',
                         max_attempts => 2, non_retryable => '{sql:22}')) AS id3 \gset
SELECT fh_wait(:'id1'), fh_wait(:'id2'), fh_wait(:'id3');
SELECT (SELECT count(*) FROM df.history(:'id1') WHERE kind = 'retry_scheduled') AS default_narrowed,
       (SELECT count(*) FROM df.history(:'id2') WHERE kind = 'retry_scheduled') AS retry_on_narrowed,
       (SELECT count(*) FROM df.history(:'id3') WHERE kind = 'retry_scheduled') AS other_code_retried;

-- max_duration bounds an unlimited retry: it gives up
-- before a next attempt that would start past it
SELECT df.start(df.retry('SELECT 1/0', max_attempts => 0, initial_interval => '300 ms', backoff_rate => 1,
                         jitter => 'none', retry_on => '{sql:22012}', max_duration => '1 s')) AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) BETWEEN 1 AND 3 AS retries_within_duration FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT detail->>'reason' AS reason, detail->>'code' AS code FROM df.history(:'id') WHERE kind = 'retries_exhausted';

-- jitter 'equal' draws in [delay/2, delay] over 50 draws, and does draw
SELECT df.start(df.retry('SELECT 1/0', max_attempts => 51, initial_interval => '20 ms', backoff_rate => 1,
                         max_interval => '20 ms', jitter => 'equal', retry_on => '{sql}')) AS id \gset
SELECT fh_wait(:'id');
SELECT count(*) AS draws, bool_and((detail->>'delay_ms')::int BETWEEN 10 AND 20) AS within_bounds,
       count(DISTINCT detail->>'delay_ms') > 1 AS jittered
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
RESET ROLE;

-- df.explain of a live instance: the wrappers with their settings and state
SET ROLE df_user;
SELECT df.start(df.catch(df.timeout('SELECT pg_sleep(10)', 0.3), 'SELECT $error.kind AS kind', '{timeout}')
                ~> df.retry('SELECT 1', max_attempts => 2)) AS id \gset
SELECT fh_wait(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;
RESET ROLE;

-- a df.timeout that fires removes its subtree's queued
-- work (here the wrapped sleep's timer) while the instance goes on
SET ROLE df_user;
CREATE FUNCTION fh_running(iid text, type text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..600 LOOP
		IF EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = iid AND node_type = type AND status = 'running') THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END $$;
SELECT df.start(df.catch(df.timeout(df.sleep(30), 0.3), 'SELECT $error.code AS code')
                ~> df.wait_for_signal('go', 60)) AS id \gset
SELECT fh_running(:'id', 'SIGNAL') AS past_the_timeout;
RESET ROLE;
SELECT n.node_type, count(t.id) AS tasks
FROM df.nodes n LEFT JOIN df_internal.tasks t ON t.instance_id = n.instance_id AND t.node_id = n.id
WHERE n.instance_id = :'id' AND n.node_type IN ('SLEEP', 'TIMEOUT', 'SIGNAL') GROUP BY 1 ORDER BY 1;
SET ROLE df_user;
SELECT df.signal(:'id', 'go') IS NOT NULL AS signalled;
SELECT fh_wait(:'id');
RESET ROLE;

-- a fractional sleep waits that long, not rounded to whole seconds
SET ROLE df_user;
SELECT df.start(df.sleep(0.25) ~> 'SELECT 1') AS id \gset
SELECT fh_wait(:'id');
SELECT slept_for >= interval '0.25 s' AS not_early, slept_for < interval '0.95 s' AS not_rounded_up
FROM (SELECT min(h.at) FILTER (WHERE h.kind = 'node_completed') - min(h.at) FILTER (WHERE h.kind = 'node_started')
             AS slept_for
      FROM df.history(:'id') h WHERE h.node_type = 'SLEEP') s;
RESET ROLE;

-- $error.node is the node that failed
SET ROLE df_user;
SELECT df.start(df.catch('SELECT 1' ~> 'SELECT 1/0', 'SELECT $error.node AS node')) AS id \gset
SELECT fh_wait(:'id');
SELECT (r.result->'rows'->0->>'node') = f.id AS error_node_is_the_failed_step
FROM df.nodes r JOIN df.instances i ON i.root_node = r.id AND i.id = r.instance_id
JOIN df.nodes f ON f.instance_id = i.id AND f.query = 'SELECT 1/0'
WHERE i.id = :'id';
RESET ROLE;

-- df.start's policy: back-off from 1 s, doubling, capped at max_backoff
SET ROLE df_user;
SELECT df.start('SELECT fh_flaky(1000000)', max_attempts => 3, max_backoff => '1.5 s') AS id \gset
SELECT fh_wait(:'id');
SELECT string_agg(detail->>'delay_ms', ',' ORDER BY at) AS delays FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT detail->>'error' AS message FROM df.history(:'id') WHERE kind = 'retries_exhausted';
RESET ROLE;

-- the engine's own retry of a user deadlock is not an attempt
-- of the df.retry around it (two branches lock two rows in opposite orders)
SET ROLE df_user;
CREATE TABLE fh_pair (id int PRIMARY KEY, v int);
INSERT INTO fh_pair VALUES (1, 0), (2, 0);
CREATE FUNCTION fh_lock_both(first int, second int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	UPDATE fh_pair SET v = v + 1 WHERE id = first;
	PERFORM pg_sleep(0.3);
	UPDATE fh_pair SET v = v + 1 WHERE id = second;
	RETURN first;
END $$;
SELECT set_config('test.fh_deadlocks_before', deadlocks::text, false) IS NOT NULL AS noted
FROM pg_stat_database WHERE datname = current_database();
SELECT df.start(df.retry('SELECT fh_lock_both(1, 2)' & 'SELECT fh_lock_both(2, 1)', max_attempts => 2,
                         initial_interval => '10 ms')) AS id \gset
SELECT fh_wait(:'id');
SELECT v FROM fh_pair ORDER BY id;
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN (SELECT deadlocks FROM pg_stat_database WHERE datname = current_database())
				  > current_setting('test.fh_deadlocks_before')::bigint;
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'no deadlock was recorded';
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;
RESET ROLE;
