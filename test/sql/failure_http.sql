-- Failure handling of HTTP steps against the local test server
-- (test/http_server.pl: /flaky/<name>/<n>/<status> fails n times, then
-- answers 200): a retried call keeps its Idempotency-Key, Retry-After sets
-- the next delay, error codes of HTTP failures, df.timeout over a slow call.
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
CREATE FUNCTION fhh_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;

-- 503 twice, then 200: three calls with one Idempotency-Key
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/2/503', 'GET'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT fhh_wait(:'id');
SELECT result->>'status' AS status, regexp_replace(result->>'body', '[0-9a-f]{8}', 'ID') AS body
FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id WHERE i.id = :'id';
SELECT string_agg(detail->>'code', ',' ORDER BY at) AS retried_on FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- the server's request log for this name
SELECT df.start(df.http('{base}/log?path=/flaky/' || :'id' || '/', 'GET')) AS log_id \gset
SELECT fhh_wait(:'log_id');
SELECT jsonb_array_length((result->>'body')::jsonb) AS calls,
       (SELECT count(DISTINCT e->>'key') FROM jsonb_array_elements((result->>'body')::jsonb) e) AS distinct_keys
FROM df.nodes WHERE instance_id = :'log_id';

-- 503 with Retry-After: 1: the next attempt waits at least a second (capped by max_interval)
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/503?retry_after=1', 'GET'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT fhh_wait(:'id');
SELECT detail->>'delay_ms' AS delay_ms FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/503?retry_after=100', 'GET'),
                         initial_interval => '10 ms', max_interval => '200 ms', jitter => 'none')) AS id \gset
SELECT fhh_wait(:'id');
SELECT detail->>'delay_ms' AS capped_delay_ms FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- error codes: http:<status> for 5xx
SELECT df.start(df.http('{base}/status/502', 'GET')) AS id \gset
SELECT fhh_wait(:'id');
SELECT status_details->'error'->>'code' AS code, status_details->'error'->>'kind' AS kind
FROM df.nodes WHERE instance_id = :'id';

-- fail_on: the statuses that fail the step (JSON only when given; checked at build time)
SELECT df.http('http://example.com/pay', 'POST', fail_on => '4xx, 5xx') AS with_fail_on;
SELECT df.http('http://example.com/pay', 'POST') AS without_fail_on;
SELECT df.http('http://example.com/pay', fail_on => '4x2');
SELECT df.http('http://example.com/pay', fail_on => '402,');
SELECT df.http('http://example.com/pay', fail_on => '');
SELECT df.start('{"node_type":"HTTP","query":"{\"url\":\"http://example.com\",\"fail_on\":\"600\"}"}');
-- 402 is returned by default, fails with fail_on => '4xx'
SELECT df.start(df.http('{base}/status/402', 'GET')) AS id1,
       df.start(df.http('{base}/status/402', 'GET', fail_on => '4xx')) AS id2 \gset
SELECT fhh_wait(:'id1') AS default_rule, fhh_wait(:'id2') AS fail_on_4xx;
SELECT status_details->'error'->>'code' AS code FROM df.nodes WHERE instance_id = :'id2';
-- 429 with Retry-After: 1 under a retry: the next attempt at least a second later
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/429?retry_after=1', 'GET', fail_on => '429'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT fhh_wait(:'id');
SELECT (detail->>'delay_ms')::int >= 1000 AS waited_a_second, detail->>'code' AS code
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT (SELECT min(at) FROM df.history(:'id') h WHERE h.kind = 'node_completed' AND h.node_type = 'HTTP')
       - (SELECT at FROM df.history(:'id') h WHERE h.kind = 'retry_scheduled') >= interval '1 s' AS next_attempt_after_1s;
-- a 4xx other than 408 and 429 is not retried by default
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/409', 'GET', fail_on => '4xx'),
                         initial_interval => '10 ms')) AS id \gset
SELECT fhh_wait(:'id');
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- the test server's counters (/stats), read by a workflow: start, commit, wait
CREATE PROCEDURE fhh_stat(key text, INOUT val int) LANGUAGE plpgsql AS $$
DECLARE
	iid text := df.start(df.http(current_setting('pgd_test.http_base') || '/stats', 'GET'));
BEGIN
	COMMIT;
	PERFORM df.await_instance(iid, 30);
	val := (SELECT ((result->>'body')::jsonb->>key)::int FROM df.nodes WHERE instance_id = iid);
END $$;
-- wait (with a deadline) until the counter is above n
CREATE PROCEDURE fhh_wait_stat(key text, n int, INOUT ok boolean) LANGUAGE plpgsql AS $$
DECLARE
	v int;
BEGIN
	ok := false;
	FOR i IN 1..100 LOOP
		CALL fhh_stat(key, v);
		IF v > n THEN
			ok := true;
			RETURN;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

-- attempt_timeout bounds each call below its timeout_seconds
SELECT df.start(df.retry(df.http('{base}/delay/5000', 'GET'), max_attempts => 2, initial_interval => '10 ms',
                         attempt_timeout => '300 ms')) AS id \gset
SELECT clock_timestamp() AS t0 \gset
SELECT fhh_wait(:'id');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '4 s' AS bounded;
SELECT n.status_details->'error'->>'code' AS code,
       (SELECT count(*) FROM df.history(:'id') h WHERE h.kind = 'retry_scheduled') AS retries
FROM df.nodes n WHERE n.instance_id = :'id' AND n.node_type = 'HTTP';

-- df.timeout over a 10 s call: the node fails with kind timeout long before,
-- and the call is aborted (the server sees the connection close)
CALL fhh_stat('aborted', NULL) \gset aborted_before_
SELECT clock_timestamp() AS t0 \gset
SELECT df.start(df.timeout(df.http('{base}/delay/10000', 'GET'), 0.5)) AS id \gset
SELECT fhh_wait(:'id');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS within_seconds;
SELECT result #>> '{}' AS error, status_details->'error'->>'code' AS code
FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id WHERE i.id = :'id';
CALL fhh_wait_stat('aborted', :aborted_before_val, NULL);
SELECT clock_timestamp() - :'t0'::timestamptz < interval '8 s' AS aborted_well_before_its_end;
-- the deadline fired within about a second of the start (0.5 s, and slack for a busy machine)
SELECT (SELECT at FROM df.history(:'id') WHERE kind = 'timeout_fired')
       - (SELECT at FROM df.history(:'id') WHERE kind = 'instance_started') < interval '1.5 s' AS fired_within_a_second;
-- no late transition: the timed-out instance's history ends with its failure
SELECT kind FROM df.history(:'id') ORDER BY at DESC, kind LIMIT 1;

-- df.cancel of an instance whose call is in flight aborts the call
CALL fhh_stat('aborted', NULL) \gset aborted_before_
SELECT df.start(df.http('{base}/delay/10000', 'GET')) AS id \gset
CALL fhh_wait_stat('inflight', 0, NULL);
SELECT df.cancel(:'id', 'test') IS NOT NULL AS cancelled;
CALL fhh_wait_stat('aborted', :aborted_before_val, NULL);

RESET ROLE;

-- an HTTP step whose RACE is lost: its call in flight is aborted
SET ROLE df_user;
CALL fhh_stat('aborted', NULL) \gset aborted_before_
SELECT clock_timestamp() AS t0 \gset
SELECT df.start(df.race(df.http('{base}/delay/10000', 'GET'), df.sleep(1) ~> 'SELECT ''won'' AS w')) AS id \gset
SELECT fhh_wait(:'id');
SELECT result->'rows' AS winner FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id
WHERE i.id = :'id';
CALL fhh_wait_stat('aborted', :aborted_before_val, NULL);
SELECT clock_timestamp() - :'t0'::timestamptz < interval '8 s' AS aborted_well_before_its_end;
RESET ROLE;

-- the codes of a refused connection and of a transfer timeout
SET ROLE df_user;
SELECT df.start(df.http('http://localhost:1/echo', 'GET')) AS id1,
       df.start(df.http('{base}/delay/5000', 'GET', NULL, NULL, 1)) AS id2 \gset
SELECT fhh_wait(:'id1'), fhh_wait(:'id2');
SELECT n.instance_id = :'id1' AS refused, n.status_details->'error'->>'code' AS code,
       n.status_details->'error'->>'kind' AS kind
FROM df.nodes n WHERE n.instance_id IN (:'id1', :'id2') ORDER BY 1 DESC;
RESET ROLE;

-- fail_on replaces the default rule: a 503 not in it is returned
SET ROLE df_user;
SELECT df.start(df.http('{base}/status/503', 'GET', fail_on => '402')) AS id1,
       df.start(df.http('{base}/status/503', 'GET', fail_on => '402,5xx')) AS id2 \gset
SELECT fhh_wait(:'id1') AS fail_on_402, fhh_wait(:'id2') AS fail_on_402_5xx;
SELECT result->>'status' AS returned_status FROM df.nodes WHERE instance_id = :'id1';
RESET ROLE;
