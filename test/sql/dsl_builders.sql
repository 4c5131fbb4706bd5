-- DSL builders: the exact Durofut JSON of every builder, canonical output,
-- auto-wrapping of operands and hand-written JSON.

-- leaves
SELECT df.sql('SELECT 1');
SELECT df.sql('SELECT ''it''''s'' AS "q", E''\t''');
SELECT df.sql('{"node_type":"SQL","query":"x"}');	-- df.sql never parses its text
SELECT df.sleep(5);
SELECT df.sleep(0);
SELECT df.sleep(9223372036854775807);
SELECT df.wait_for_schedule('*/5 * * * *');
SELECT df.wait_for_schedule('0 9 * * MON-FRI');
SELECT df.wait_for_signal('approval');
SELECT df.wait_for_signal('approval', 60);
SELECT df.wait_for_signal(name => 'n', timeout_seconds => NULL);
SELECT df.break();
SELECT df.break(NULL);
SELECT df.break('done');
SELECT df.break('{"a": 1}');	-- a literal: kept as text, never wrapped
SELECT df.break('SELECT 1');

-- composers
SELECT df.seq('SELECT 1', 'SELECT 2');
SELECT df.as('SELECT 1', 'x');
SELECT df.as(df.as('SELECT 1', 'x'), 'y');	-- the later name wins
SELECT df.as('SELECT 1', '_Under_2');
SELECT df.loop('SELECT 1');
SELECT df.loop('SELECT 1', NULL);
SELECT df.loop('SELECT 1', 'SELECT false');
SELECT df.if('SELECT true', 'SELECT 1', 'SELECT 2');
SELECT df.if_rows('r', 'SELECT 1', 'SELECT 2');
SELECT df.join('SELECT 1', 'SELECT 2');
SELECT df.join3('SELECT 1', 'SELECT 2', 'SELECT 3');
SELECT df.race('SELECT 1', df.sleep(10));
SELECT df.seq(df.sleep(1), df.wait_for_signal('go', 5));

-- nesting: every child is an object, in key order
SELECT df.if(df.as('SELECT count(*) > 0 FROM t', 'c'),
			 df.join3('a', 'b', df.loop('c', 'd')),
			 df.race(df.break('x'), df.seq('e', 'f')));

-- identical DSL gives identical text
SELECT df.seq(df.as('SELECT 1', 'a'), df.join('b', 'c'))
	 = df.seq(df.as('SELECT 1', 'a'), df.join('b', 'c')) AS identical;
SELECT df.seq(df.sql('SELECT 1'), 'SELECT 2') = df.seq('SELECT 1', df.sql('SELECT 2')) AS wrap_equals_sql;

-- auto-wrap: Durofut operands are used as they are, other text is SQL
SELECT df.seq(df.sleep(1), 'SELECT 1');
SELECT df.seq('{"a": 1}', 'SELECT 1');				-- JSON without node_type is SQL text
SELECT df.seq('[1, 2]', '"str"');					-- JSON that is not an object too
SELECT df.seq('{ not json', 'SELECT {x}');			-- not JSON, no node_type: SQL text
SELECT df.seq('', ' ');								-- empty text is still SQL text

-- hand-written JSON is accepted and canonicalized: whitespace, key order,
-- nulls and unknown keys do not survive, escapes are decoded and re-encoded
SELECT df.seq('  {"query": "SELECT 1", "node_type": "SQL", "result_name": null,
				  "left_node": null, "comment": "ignored", "extra_nodes": []}  ', 'x');
SELECT df.seq('{"node_type":"SQL","query":"caf\u00e9 \ud83d\ude00 \/ \" \\ \b\f\n\r\t \u001f"}', 'x');
SELECT df.seq('{"node_type":"SQL","query":"SELECT 2","query":"SELECT 3"}', 'x');	-- last duplicate wins
SELECT df.as('{"result_name":"old","node_type":"THEN","right_node":{"node_type":"SQL","query":"b"},
			   "left_node":{"node_type":"SQL","query":"a"}}', 'new');
SELECT df.seq('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"a"},"right_node":{"node_type":"SQL","query":"b"},
				"extra_nodes":[{"node_type":"SQL","query":"c"},{"node_type":"SLEEP","query":"1"}]}', 'x');
-- hand-written numbers and literals in configs are kept as written
SELECT df.seq('{"node_type":"BREAK","query":"{\"break_value\": \"1.50\"}"}', 'x');

-- re-wrapping is idempotent: a builder's output given back is unchanged
SELECT df.as(df.as(df.join3('a', 'b', 'c'), 'j'), 'j') = df.as(df.join3('a', 'b', 'c'), 'j') AS idempotent;
SELECT (df.seq(x, 'SELECT 1')::json->'left_node')::text = x AS left_is_operand
FROM (SELECT df.if('c', 'a', 'b') AS x) s;

-- multi-byte text and long text round-trip
SELECT df.sql('SELECT ''日本語'', ''ü''') ::json->>'query' AS query;
SELECT length(df.sql(repeat('x', 100000))::json->>'query') AS long_query;

-- every builder is immutable; only those with optional arguments are not STRICT
SELECT p.proname, p.provolatile, p.proisstrict
FROM pg_proc p WHERE p.pronamespace = 'df'::regnamespace
  AND p.prosrc LIKE 'pgd\_%' AND p.proname IN ('sql', 'seq', 'as', 'as_op', 'sleep', 'wait_for_schedule',
	'loop', 'loop_prefix_op', 'break', 'if', 'if_rows', 'if_then_op', 'if_else_op', 'join', 'join3',
	'race', 'wait_for_signal', 'http', 'http_multipart')
ORDER BY 1;
