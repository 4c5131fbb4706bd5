-- Circuit breakers (docs/design/breakers.md): df.with_breaker's
-- JSON, the checks of names and settings, who may create, drop and reset,
-- the df.circuit_breakers view, a BREAKER node that opens after its
-- failures and then refuses at once with kind circuit_open, a df.retry
-- that waits for the half-open time, and an HTTP node whose config names
-- a breaker (refused: the server never sees the call).
SELECT df.grant_usage('df_user', include_http => true) IS NOT NULL AS granted;
SET ROLE df_user;

-- the builder
SELECT df.with_breaker('SELECT 1', 'inventory');
SELECT df.with_breaker(df.http('http://example.com/x', 'GET'), 'svc.v2:eu-1');
SELECT df.with_breaker(NULL, 'inventory');
SELECT df.with_breaker('SELECT 1', NULL);
SELECT df.with_breaker('SELECT 1', '');
SELECT df.with_breaker('SELECT 1', '1abc');
SELECT df.with_breaker('SELECT 1', 'a b');
SELECT df.with_breaker('SELECT 1', repeat('x', 64));

-- df.explain shows the node with its settings
SELECT df.explain(df.with_breaker('SELECT 1' ~> 'SELECT 2', 'inventory'));

-- hand-written graphs
RESET ROLE;
SELECT df_internal.validate_graph('{"node_type":"BREAKER","left_node":{"node_type":"SQL","query":"SELECT 1"}}');
SELECT df_internal.validate_graph('{"node_type":"BREAKER","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"name\":\"x\",\"other\":1}"}');
SELECT df_internal.validate_graph('{"node_type":"BREAKER","query":"{\"name\":\"x\"}"}');
SELECT df_internal.validate_graph('{"node_type":"BREAKER","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"name\":\"x\"}"}');
SELECT df_internal.validate_graph('{"node_type":"HTTP","query":"{\"url\":\"http://example.com/\",\"breaker\":7}"}');
SELECT df_internal.validate_graph('{"node_type":"HTTP","query":"{\"url\":\"http://example.com/\",\"breaker\":\"no good\"}"}');
SELECT df_internal.validate_graph('{"node_type":"HTTP","query":"{\"url\":\"http://example.com/\",\"breaker\":\"inventory\"}"}') IS NULL AS http_breaker_ok;

-- creating needs the grant
SET ROLE df_user;
SELECT df.create_circuit_breaker('inventory');
RESET ROLE;
GRANT EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]),
	df.drop_circuit_breaker(text), df.reset_circuit_breaker(text) TO df_user;
SET ROLE df_user;
SELECT df.create_circuit_breaker('inventory');
SELECT df.create_circuit_breaker('inventory');
-- the settings are checked
SELECT df.create_circuit_breaker('b1', failure_rate_threshold => 0);
SELECT df.create_circuit_breaker('b1', failure_rate_threshold => 101);
SELECT df.create_circuit_breaker('b1', minimum_calls => 30);
SELECT df.create_circuit_breaker('b1', window_size => 0);
SELECT df.create_circuit_breaker('b1', window_size => 1001);
SELECT df.create_circuit_breaker('b1', wait_duration => '0 s');
SELECT df.create_circuit_breaker('b1', wait_duration => NULL);
SELECT df.create_circuit_breaker('b1', half_open_calls => 0);
SELECT df.create_circuit_breaker('b1', slow_call_duration => '-1 s');
SELECT df.create_circuit_breaker('b1', slow_call_rate_threshold => 0);
SELECT df.create_circuit_breaker('b1', record_on => '{}');
SELECT df.create_circuit_breaker('b1', record_on => '{http:6xx}');
SELECT df.create_circuit_breaker('b1', record_on => ARRAY['timeout', NULL]);
SELECT df.create_circuit_breaker('b 1');
SELECT df.create_circuit_breaker(NULL);

-- the view: a new breaker is closed with an empty window
SELECT name, state, failure_rate, calls_in_window, opened_at, open_until,
	   half_open_permits_left, slow_call_rate, owner
FROM df.circuit_breakers;

-- another role may not drop or reset it
RESET ROLE;
CREATE ROLE df_breaker_other;
GRANT USAGE ON SCHEMA df TO df_breaker_other;
GRANT EXECUTE ON FUNCTION df.drop_circuit_breaker(text), df.reset_circuit_breaker(text) TO df_breaker_other;
SET ROLE df_breaker_other;
SELECT df.drop_circuit_breaker('inventory');
SELECT df.reset_circuit_breaker('inventory');
SELECT df.drop_circuit_breaker('nope');
SELECT name, state FROM df.circuit_breakers;
RESET ROLE;
DROP OWNED BY df_breaker_other;
DROP ROLE df_breaker_other;
SET ROLE df_user;

-- a BREAKER node: two failures in a window of two open it (record_on sql:22,
-- failure_rate_threshold 100)
CREATE FUNCTION bk_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;
CREATE TABLE bk_calls (n int);
SELECT df.create_circuit_breaker('calc', failure_rate_threshold => 100,
								 minimum_calls => 2, window_size => 2,
								 wait_duration => '1 hour', half_open_calls => 1,
								 record_on => '{sql:22}');
SELECT df.start(df.with_breaker('INSERT INTO bk_calls VALUES (1) RETURNING 1 AS ok', 'calc')) AS id \gset
SELECT bk_wait(:'id');
SELECT name, state, failure_rate, calls_in_window FROM df.circuit_breakers WHERE name = 'calc';
-- a failure that record_on does not name counts as a success
SELECT df.start(df.with_breaker('SELECT * FROM no_such_table', 'calc')) AS id \gset
SELECT bk_wait(:'id');
SELECT name, state, failure_rate, calls_in_window FROM df.circuit_breakers WHERE name = 'calc';
SELECT df.start(df.with_breaker('SELECT 1/0', 'calc')) AS id \gset
SELECT bk_wait(:'id');
SELECT name, state, failure_rate, calls_in_window FROM df.circuit_breakers WHERE name = 'calc';
SELECT df.start(df.with_breaker('SELECT 1/0', 'calc')) AS id \gset
SELECT bk_wait(:'id');
SELECT name, state, failure_rate, calls_in_window, opened_at IS NOT NULL AS opened,
	   open_until - opened_at AS wait
FROM df.circuit_breakers WHERE name = 'calc';
-- open: the step is not run, the node fails at once with kind circuit_open
SELECT df.start(df.with_breaker('INSERT INTO bk_calls VALUES (2) RETURNING 1 AS ok', 'calc')) AS id \gset
SELECT bk_wait(:'id');
SELECT node_type, status, status_details::jsonb->'error'->>'code' AS code,
	   regexp_replace(result, 'until .*', 'until …') AS message
FROM df.instance_nodes(:'id') ORDER BY node_type;
SELECT array_agg(n ORDER BY n) AS calls_made FROM bk_calls;
-- circuit_open is not retried by default
SELECT df.start(df.retry(df.with_breaker('SELECT 1', 'calc'), initial_interval => '10 ms')) AS id \gset
SELECT bk_wait(:'id');
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';
-- the history of transitions
SELECT from_state, to_state, reason, failure_rate, calls FROM df.circuit_breaker_history
WHERE name = 'calc' ORDER BY at;

-- reset: closed with an empty window; a breaker that closes trims its
-- history to its latest 1,000 transitions
RESET ROLE;
INSERT INTO df_internal.circuit_breaker_transitions (name, at, from_state, to_state, reason)
	SELECT 'calc', clock_timestamp() - interval '1 day' + g * interval '1 ms', 'open', 'half_open', 'old'
	FROM generate_series(1, 1200) g;
SET ROLE df_user;
SELECT df.reset_circuit_breaker('calc');
SELECT count(*) AS kept, count(*) FILTER (WHERE reason = 'reset') AS resets,
	   count(*) FILTER (WHERE reason = 'failure rate reached its threshold') AS opened
FROM df.circuit_breaker_history WHERE name = 'calc';
SELECT name, state, failure_rate, calls_in_window, opened_at FROM df.circuit_breakers WHERE name = 'calc';

-- df.retry(retry_on => circuit_open): the next attempt waits for the
-- half-open time (here 3 s, longer than the back-off and than its
-- max_interval), then the probe goes through and closes the breaker
SELECT df.create_circuit_breaker('quick', minimum_calls => 1, window_size => 1,
								 wait_duration => '3 s', half_open_calls => 1,
								 record_on => '{sql:22}');
SELECT df.start(df.with_breaker('SELECT 1/0', 'quick')) AS id \gset
SELECT bk_wait(:'id');
SELECT state FROM df.circuit_breakers WHERE name = 'quick';
SELECT df.start(df.retry(df.with_breaker('INSERT INTO bk_calls VALUES (3) RETURNING 3 AS ok', 'quick'),
						 retry_on => '{circuit_open}', initial_interval => '10 ms',
						 max_interval => '100 ms', jitter => 'none')) AS id \gset
SELECT bk_wait(:'id');
SELECT (detail->>'delay_ms')::int >= 1000 AS waited_for_half_open, detail->>'code' AS code
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT state, calls_in_window FROM df.circuit_breakers WHERE name = 'quick';
SELECT array_agg(n ORDER BY n) AS calls_made FROM bk_calls;
SELECT from_state, to_state, reason FROM df.circuit_breaker_history WHERE name = 'quick' ORDER BY at;

-- an HTTP node whose config names an open breaker: no call is made
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
SELECT df.create_circuit_breaker('svc', wait_duration => '1 hour');
RESET ROLE;
-- (the state a restart would load: the latest transition)
INSERT INTO df_internal.circuit_breaker_transitions (name, at, from_state, to_state, opened_at, open_until, reason)
	VALUES ('svc', clock_timestamp(), 'closed', 'open', clock_timestamp(), clock_timestamp() + interval '1 hour', 'test');
SET ROLE df_user;
SELECT jsonb_set(df.http('{base}/service/bk_regress_{sys_instance_id}', 'GET')::jsonb,
				 '{query}', to_jsonb(jsonb_set((df.http('{base}/service/bk_regress_{sys_instance_id}', 'GET')::jsonb->>'query')::jsonb,
											   '{breaker}', '"svc"')::text))::text AS step \gset
SELECT df.start(:'step') AS id \gset
SELECT bk_wait(:'id');
SELECT node_type, status_details::jsonb->'error'->>'code' AS code,
	   regexp_replace(result, 'until .*', 'until …') AS message
FROM df.instance_nodes(:'id');
SELECT df.start(df.http('{base}/log?path=/service/bk_regress_' || :'id', 'GET')) AS log_id \gset
SELECT bk_wait(:'log_id');
SELECT jsonb_array_length((result->>'body')::jsonb) AS calls_seen_by_server
FROM df.nodes WHERE instance_id = :'log_id' AND node_type = 'HTTP';
-- a completed call answered 429 is a failure for the breaker (record_on http:429)
SELECT df.create_circuit_breaker('rl', minimum_calls => 1, window_size => 1, wait_duration => '1 hour');
SELECT jsonb_set(j, '{query}', to_jsonb(jsonb_set((j->>'query')::jsonb, '{breaker}', '"rl"')::text))::text AS step
FROM (SELECT df.http('{base}/status/429', 'GET')::jsonb AS j) s \gset
SELECT df.start(:'step') AS id \gset
SELECT bk_wait(:'id');
SELECT state, failure_rate, calls_in_window FROM df.circuit_breakers WHERE name = 'rl';
SELECT df.drop_circuit_breaker('rl');

-- an HTTP step refused by its breaker, under df.retry(retry_on => circuit_open):
-- its next attempt waits for the half-open time, and the probe is its call
SELECT df.create_circuit_breaker('hr', minimum_calls => 1, window_size => 1,
								 wait_duration => '3 s', half_open_calls => 1);
SELECT jsonb_set(j, '{query}', to_jsonb(jsonb_set((j->>'query')::jsonb, '{breaker}', '"hr"')::text))::text AS step
FROM (SELECT df.http('{base}/status/503', 'GET')::jsonb AS j) s \gset
SELECT df.start(:'step') AS id \gset
SELECT bk_wait(:'id');
SELECT state FROM df.circuit_breakers WHERE name = 'hr';
SELECT jsonb_set(j, '{query}', to_jsonb(jsonb_set((j->>'query')::jsonb, '{breaker}', '"hr"')::text))::text AS step
FROM (SELECT df.http('{base}/service/bk_regress_hr_{sys_instance_id}', 'GET')::jsonb AS j) s \gset
SELECT df.start(df.retry(:'step', retry_on => '{circuit_open}', initial_interval => '10 ms',
						 max_interval => '100 ms', jitter => 'none')) AS id \gset
SELECT bk_wait(:'id');
SELECT (detail->>'delay_ms')::int >= 1000 AS waited_for_half_open, detail->>'code' AS code
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT state FROM df.circuit_breakers WHERE name = 'hr';
SELECT df.drop_circuit_breaker('hr');

-- a breaker that does not exist is refused at df.start; one dropped after
-- the start fails the step
SELECT df.start(df.with_breaker('SELECT 1', 'missing'));
SELECT df.create_circuit_breaker('dropped_later');
SELECT df.start(df.wait_for_signal('go') ~> df.with_breaker('SELECT 1', 'dropped_later')) AS id \gset
SELECT df.drop_circuit_breaker('dropped_later');
SELECT df.signal(:'id', 'go');
SELECT bk_wait(:'id');
SELECT node_type, status, result FROM df.instance_nodes(:'id') ORDER BY node_type;

SELECT df.drop_circuit_breaker('inventory');
SELECT df.drop_circuit_breaker('calc');
SELECT df.drop_circuit_breaker('quick');
SELECT df.drop_circuit_breaker('svc');
SELECT count(*) AS breakers FROM df.circuit_breakers;
SELECT count(*) AS transitions FROM df.circuit_breaker_history;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]),
	df.drop_circuit_breaker(text), df.reset_circuit_breaker(text) FROM df_user;
