-- What df.retry and df.catch accept and retry (docs/guides/failure-handling.md,
-- "What df.retry retries"): empty pattern arrays are refused, a retry_on
-- that mode 'step' can never match is refused naming the mode to use, a
-- duration out of range says so, and under a df.retry an HTTP 429 or 408
-- is a retryable failure (Retry-After honoured) unless fail_on decides,
-- while outside one 0.2.6's rule returns it as the result.
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));

-- empty arrays match nothing: refused by the builders and at df.start
SELECT df.retry('SELECT 1', retry_on => '{}');
SELECT df.retry('SELECT 1', non_retryable => '{}');
SELECT df.catch('SELECT 1', 'SELECT 2', errors => '{}');
SELECT df.start('{"node_type":"RETRY","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"retry_on\":[]}"}');
SELECT df.start('{"node_type":"CATCH","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"errors\":[]}"}');

-- a lock or limit that gives up is never a step's failure: mode 'step'
-- cannot retry it, mode 'subtree' can
SELECT df.retry(df.with_lock('SELECT 1', ARRAY['k'], wait_timeout => '1 s'), retry_on => '{lock_timeout}');
SELECT df.retry(df.limit('SELECT 1', 'k', 1, queue_timeout => '1 s'), retry_on => '{sql,queue_timeout}');
SELECT df.retry(df.limit('SELECT 1', 'k', 1, queue_timeout => '1 s'), retry_on => '{queue_timeout}', mode => 'subtree') IS NOT NULL AS subtree_ok;
SELECT df.start('{"node_type":"RETRY","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"retry_on\":[\"lock_timeout\"]}"}');

-- a duration out of range names it
SELECT df.retry('SELECT 1', max_interval => '1000 years');

-- 429 with Retry-After: 1 under df.retry: waited out and retried, then 200
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/429?retry_after=1', 'GET'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result->>'status' AS status FROM df.nodes WHERE instance_id = :'id' AND node_type = 'HTTP';
SELECT (detail->>'delay_ms')::int >= 1000 AS waited_a_second, detail->>'code' AS code
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- 408 the same way
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/2/408', 'GET'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT string_agg(detail->>'code', ',' ORDER BY at) AS retried_on
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- fail_on decides alone: '5xx' returns the 429 as the result
SELECT df.start(df.retry(df.http('{base}/flaky/{sys_instance_id}/1/429', 'GET', fail_on => '5xx'),
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result->>'status' AS status FROM df.nodes WHERE instance_id = :'id' AND node_type = 'HTTP';
-- outside a df.retry, 0.2.6's rule: the 429 is the step's result
SELECT df.start(df.http('{base}/flaky/{sys_instance_id}/1/429', 'GET')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result->>'status' AS status FROM df.nodes WHERE instance_id = :'id' AND node_type = 'HTTP';
-- a 429 that never ends: the retries give up and the instance fails with it
SELECT df.start(df.retry(df.http('{base}/status/429', 'GET'), max_attempts => 2,
                         initial_interval => '10 ms', jitter => 'none')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT status_details->'error'->>'code' AS code FROM df.nodes WHERE instance_id = :'id' AND node_type = 'HTTP';
