-- Graph validation: every message df.start will raise for a graph it refuses,
-- through df_internal.validate_graph (NULL = accepted).

CREATE FUNCTION v(g text) RETURNS text LANGUAGE sql AS $$
	SELECT COALESCE(df_internal.validate_graph(g), 'valid')
$$;
-- a SQL leaf, and a node of the given type and JSON fields around it
CREATE FUNCTION leaf(q text DEFAULT 'SELECT 1') RETURNS text LANGUAGE sql AS $$
	SELECT json_build_object('node_type', 'SQL', 'query', q)::text
$$;
CREATE FUNCTION node(t text, fields text DEFAULT '') RETURNS text LANGUAGE sql AS $$
	SELECT '{"node_type":"' || t || '"' || CASE WHEN fields = '' THEN '' ELSE ',' || fields END || '}'
$$;

-- everything the builders produce is accepted
SELECT v(g) FROM (VALUES
	(df.sql('SELECT 1')), (df.seq('a', 'b')), (df.as('a', 'n')), (df.sleep(0)), (df.sleep(30)),
	(df.wait_for_schedule('0 9 * * MON-FRI')), (df.loop('a')), (df.loop('a', 'b')), (df.break()),
	(df.break('x')), (df.if('c', 'a', 'b')), (df.if_rows('r', 'a', 'b')), (df.join('a', 'b')),
	(df.join3('a', 'b', 'c')), (df.race('a', 'b')), (df.wait_for_signal('s')),
	(df.wait_for_signal('s', 10)), (df.http('https://h.example/', 'GET', NULL, '{"A": 1}')),
	(df.http('{u}')), (df.http_multipart('https://h.example/', 'PUT', '[{"name": "f", "data_b64": "$f"}]')),
	(df.if('c' ~> 'd' |=> 'x', @> ('a' ~> df.break()), 'b' & 'c' | df.sleep(1)))) AS t(g);

-- not a graph at all
SELECT v('SELECT 1');
SELECT v('{"a": 1}');
SELECT v('{"node_type":"SQL","query":');
SELECT v('{"node_type":"SQL","query":"x"} x');
-- unknown node types, at the root and below
SELECT v('{"node_type":"BOGUS"}');
SELECT v(node('THEN', '"left_node":' || leaf() || ',"right_node":' || node('LOOPS')));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"condition_node":' || node('Sql')));
-- malformed envelopes: the root node_type names the family, the path says where
SELECT v(node('THEN', '"left_node":"SELECT 1","right_node":' || leaf()));
SELECT v(node('THEN', '"left_node":' || node('IF', '"condition_node":"SELECT true"') || ',"right_node":' || leaf()));
SELECT v(node('JOIN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"extra_nodes":[' || leaf() || ',"SELECT 2"]'));
SELECT v(node('JOIN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"extra_nodes":' || leaf()));
SELECT v(node('SQL', '"query":["SELECT 1"]'));
SELECT v(node('SQL', '"query":"x","result_name":true'));
SELECT v(node('THEN', '"left_node":{"query":"x"},"right_node":' || leaf()));

-- structure per node type
SELECT v(node('SQL'));
SELECT v(leaf(''));
SELECT v(leaf(E' \n\t'));
SELECT v(node('SQL', '"query":"x","left_node":' || leaf()));
SELECT v(node('SLEEP', '"query":"1","condition_node":' || leaf()));
SELECT v(node('BREAK', '"query":"{\"break_value\":null}","extra_nodes":[' || leaf() || ']'));
SELECT v(node('THEN', '"left_node":' || leaf()));
SELECT v(node('THEN', '"right_node":' || leaf()));
SELECT v(node('JOIN', '"left_node":' || leaf()));
SELECT v(node('RACE', '"right_node":' || leaf()));
SELECT v(node('THEN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"x"'));
SELECT v(node('JOIN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"{}"'));
SELECT v(node('RACE', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"condition_node":' || leaf()));
SELECT v(node('THEN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"extra_nodes":[' || leaf() || ']'));
SELECT v(node('JOIN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"extra_nodes":[]'));	-- empty extras: fine
SELECT v(node('LOOP'));
SELECT v(node('LOOP', '"left_node":' || leaf() || ',"right_node":' || leaf()));
SELECT v(node('LOOP', '"left_node":' || leaf() || ',"query":"{\"condition_node\":\"x\"}"'));
-- IF: a condition node, or an if_rows config in query
SELECT v(node('IF', '"left_node":' || leaf() || ',"condition_node":' || leaf()));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf()));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"{\"condition_node\":{\"node_type\":\"SQL\",\"query\":\"SELECT true\"}}"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"SELECT true"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"[1]"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"{\"condition_type\":\"result_is_true\",\"result_name\":\"r\"}"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"{\"condition_type\":\"result_has_rows\"}"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"query":"{\"condition_type\":\"result_has_rows\",\"result_name\":\"no good\"}"'));
SELECT v(node('IF', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"condition_node":' || leaf() || ',"query":"{\"condition_type\":\"result_has_rows\",\"result_name\":\"r\"}"'));
-- BREAK
SELECT v(node('BREAK'));
SELECT v(node('BREAK', '"query":"stop"'));
SELECT v(node('BREAK', '"query":"{\"break_value\":5}"'));
SELECT v(node('BREAK', '"query":"{}"'));
SELECT v(node('BREAK', '"query":"{\"break_value\":\"x\",\"other\":1}"'));	-- extra keys: fine
-- SLEEP
SELECT q, v(node('SLEEP', '"query":' || to_json(q)::text))
FROM unnest(ARRAY['0', '86400', '9223372036854775807', '9223372036854775808', '-1', '1.5', '1e3', ' 5', '', 'five']) AS q;
SELECT v(node('SLEEP'));
-- WAIT_SCHEDULE
SELECT v(node('WAIT_SCHEDULE'));
SELECT v(node('WAIT_SCHEDULE', '"query":"* * * * *"'));
SELECT v(node('WAIT_SCHEDULE', '"query":"{\"cron\":\"* * * * *\"}"'));
SELECT v(node('WAIT_SCHEDULE', '"query":"{\"cron_expr\":\"* * *\"}"'));
SELECT v(node('WAIT_SCHEDULE', '"query":"{\"cron_expr\":\"0 25 * * *\"}"'));
-- SIGNAL
SELECT q, v(node('SIGNAL', '"query":' || to_json(q)::text))
FROM unnest(ARRAY['{"signal_name":"s"}', '{"signal_name":"s","timeout_seconds":null}', '{"signal_name":"s","timeout_seconds":5}',
				  '{"signal_name":""}', '{"signal_name":"  "}', '{"timeout_seconds":5}', '{"signal_name":7}', 'approve',
				  '{"signal_name":"s","timeout_seconds":0}', '{"signal_name":"s","timeout_seconds":-3}',
				  '{"signal_name":"s","timeout_seconds":"5"}', '{"signal_name":"s","timeout_seconds":1.5}',
				  '{"signal_name":"s","timeout_seconds":2147483648}']) AS q;
-- HTTP and HTTP_MULTIPART: the builders' checks, on hand-written configs
SELECT v(node('HTTP'));
SELECT q, v(node('HTTP', '"query":' || to_json(q)::text))
FROM unnest(ARRAY['{"url":"https://h.example/"}', '{"url":"https://h.example/","method":"get","body":"b","headers":{"A":1},"timeout_seconds":5}',
				  'https://h.example/', '{"method":"GET"}', '{"url":5}', '{"url":"ftp://h.example/"}', '{"url":"{base}/x"}',
				  '{"url":"h.example"}', '{"url":"https://h.example/","method":"TRACE"}', '{"url":"https://h.example/","method":1}',
				  '{"url":"https://h.example/","body":{"a":1}}', '{"url":"https://h.example/","headers":[1]}',
				  '{"url":"https://h.example/","headers":{"A":"x\ny"}}', '{"url":"https://h.example/","timeout_seconds":0}',
				  '{"url":"https://h.example/","timeout_seconds":"30"}', '{"url":"https://h.example/","timeout_seconds":99999999999}']) AS q;
SELECT q, v(node('HTTP_MULTIPART', '"query":' || to_json(q)::text))
FROM unnest(ARRAY['{"url":"https://h.example/","parts":[{"name":"f","data":"x"}]}', '{"url":"https://h.example/"}',
				  '{"url":"https://h.example/","parts":[]}', '{"url":"https://h.example/","parts":{}}',
				  '{"url":"https://h.example/","method":"GET","parts":[{"name":"f","data":"x"}]}',
				  '{"url":"https://h.example/","parts":[{"name":"f","data_b64":"x y"}]}',
				  '{"url":"gopher://h.example/","parts":[{"name":"f","data":"x"}]}']) AS q;

-- result names on any node
SELECT v(df.seq('a', node('SQL', '"query":"x","result_name":"1x"')));
SELECT v(node('LOOP', '"left_node":' || leaf() || ',"result_name":"ok_name"'));

-- paths: left, right, condition_node, extra_nodes[i], nested; first problem in pre-order
SELECT v(df.seq(df.seq('a', node('SQL')), 'b'));
SELECT v(df.seq('a', df.seq('b', node('SLEEP', '"query":"x"'))));
SELECT v(df.if(node('BREAK'), 'a', 'b'));
SELECT v(df.loop('a', df.seq(node('LOOP'), 'x')));
SELECT v(df.join3('a', 'b', df.join3('c', 'd', node('SQL', '"query":""'))));
SELECT v(node('JOIN', '"left_node":' || leaf() || ',"right_node":' || leaf() || ',"extra_nodes":[' || leaf() || ',' || node('RACE') || ']'));
SELECT v(df.seq(node('SQL'), node('LOOP')));		-- left before right
SELECT v(df.if(node('LOOP'), node('SQL'), 'b'));	-- then-branch (left) before the condition
SELECT v(node('THEN', '"left_node":' || node('SQL') || ',"right_node":' || leaf() || ',"query":"x"'));	-- the node before its children

DROP FUNCTION v(text);
DROP FUNCTION leaf(text);
DROP FUNCTION node(text, text);
