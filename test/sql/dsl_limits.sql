-- Limits and hostile input: node count, nesting depth (also far beyond the
-- limit, which must give the depth error and never a stack error), big
-- strings, and malformed, truncated or wrongly encoded JSON.

CREATE FUNCTION v(g text) RETURNS text LANGUAGE sql AS $$
	SELECT COALESCE(df_internal.validate_graph(g), 'valid')
$$;
-- a JOIN of n SQL leaves (n >= 2): n + 1 nodes, depth 2
CREATE FUNCTION wide_join(n int) RETURNS text LANGUAGE sql AS $$
	SELECT '{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"SELECT 1"},'
		'"right_node":{"node_type":"SQL","query":"SELECT 2"},"extra_nodes":['
		|| string_agg(format('{"node_type":"SQL","query":"SELECT %s"}', i), ',' ORDER BY i) || ']}'
	FROM generate_series(3, n) AS i
$$;
-- n levels: n - 1 nested nodes of the given kind around a SQL leaf
CREATE FUNCTION deep(n int, kind text DEFAULT 'left') RETURNS text LANGUAGE sql AS $$
	SELECT CASE kind
		WHEN 'left' THEN repeat('{"node_type":"THEN","left_node":', n - 1)
			|| '{"node_type":"SQL","query":"x"}' || repeat(',"right_node":{"node_type":"SQL","query":"y"}}', n - 1)
		WHEN 'right' THEN repeat('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"y"},"right_node":', n - 1)
			|| '{"node_type":"SQL","query":"x"}' || repeat('}', n - 1)
		WHEN 'loop' THEN repeat('{"node_type":"LOOP","left_node":', n - 1)
			|| '{"node_type":"SQL","query":"x"}' || repeat('}', n - 1)
		WHEN 'condition' THEN repeat('{"node_type":"IF","left_node":{"node_type":"SQL","query":"a"},'
			'"right_node":{"node_type":"SQL","query":"b"},"condition_node":', n - 1)
			|| '{"node_type":"SQL","query":"x"}' || repeat('}', n - 1)
		WHEN 'extra' THEN repeat('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"a"},'
			'"right_node":{"node_type":"SQL","query":"b"},"extra_nodes":[', n - 1)
			|| '{"node_type":"SQL","query":"x"}' || repeat(']}', n - 1)
	END
$$;

-- node count: 10,000 accepted, 10,001 refused
SELECT v(wide_join(9999)) AS nodes_10000;
SELECT v(wide_join(10000)) AS nodes_10001;
SELECT v(df.seq(wide_join(9997), 'x')) AS composed_10000;
SELECT v(df.seq(wide_join(9998), 'x')) AS composed_10001;
SELECT v(df.join(wide_join(6000), wide_join(6000))) AS two_halves;
-- big graphs compose and round-trip unchanged
SELECT (df.seq(wide_join(10000), 'x')::json->'left_node')::text = wide_join(10000) AS big_roundtrip;

-- pg_durable.max_nodes (superuser) moves the limit, and the message with it
SET pg_durable.max_nodes = 20000;
SELECT v(wide_join(10000)) AS nodes_10001_under_20000, v(wide_join(19999)) AS nodes_20000,
	   v(wide_join(20000)) AS nodes_20001;
SET pg_durable.max_nodes = 3;
SELECT v(df.seq('a', 'b')) AS nodes_3, v(df.seq('a', df.seq('b', 'c'))) AS nodes_5;
RESET pg_durable.max_nodes;
SELECT v(wide_join(10000)) AS nodes_10001_again;
SET pg_durable.max_nodes = 0;
CREATE ROLE df_limits_user;
SET ROLE df_limits_user;
SET pg_durable.max_nodes = 20000;
RESET ROLE;
DROP ROLE df_limits_user;

-- depth counts edges from the root, as in the reference (the root is at
-- depth 0): 257 levels (depth 256) accepted, 258 (depth 257) refused,
-- whichever edge nests
SELECT kind, v(deep(257, kind)) AS depth_256, v(deep(258, kind)) AS depth_257
FROM unnest(ARRAY['left', 'right', 'loop', 'condition', 'extra']) AS kind;
SELECT v(df.seq(deep(256), 'x')) AS composed_256, v(df.seq(deep(257), 'x')) AS composed_257;
-- the depth error wins over the count error and over errors deeper down
SELECT v(df.seq(deep(300), wide_join(10000))) AS deep_and_big;
SELECT v(replace(deep(400), '"query":"x"', '"query":""')) AS deep_with_bad_leaf;

-- 100,000 levels: parsed, composed and refused cleanly, never a stack overflow
SELECT v(deep(100000)) AS depth_100000;
SELECT v(deep(100000, 'right')) AS right_100000;
SELECT v(deep(100000, 'extra')) AS extra_100000;
SELECT length(df.seq(deep(100000), 'x')) AS composed_length;
SELECT v(df.as(deep(100000, 'loop'), 'n')) AS named_100000;
SELECT length(df.seq(repeat('[', 100000) || repeat(']', 100000), 'x')) AS deep_array_is_sql;
SELECT v(repeat('{"node_type":"THEN","left_node":', 100000)) AS truncated_100000;
SELECT v(replace(deep(100000), '"query":"x"', '"node_type":"NOPE"')) AS unknown_at_100000;
SELECT df.seq(replace(deep(100000), '"query":"x"', '"node_type":"NOPE"'), 'x');
SELECT v(replace(deep(100), '"query":"x"', '"node_type":"NOPE"')) AS unknown_at_100;
SELECT v(replace(deep(33), '"query":"x"', '"node_type":"NOPE"')) AS unknown_at_33;

-- a 1 MB query, with characters that need escaping, round-trips exactly
SELECT length(q) AS query_length,
	   (df.sql(q)::json->>'query') = q AS sql_roundtrip,
	   (df.seq(q, 'x')::json->'left_node'->>'query') = q AS wrapped_roundtrip,
	   (df.seq(df.sql(q), 'x')::json->'left_node'->>'query') = q AS reparsed_roundtrip,
	   v(df.sql(q)) AS valid
FROM (SELECT repeat(E'SELECT ''é"\\\n\t😀'' ', 65536) AS q) s;
SELECT length(df.sql(repeat('x', 1048576))) AS sql_1mb;

-- truncated and garbage JSON
SELECT v(left(wide_join(10000), -1)) AS truncated_big;
SELECT g, v(g) FROM unnest(ARRAY[
	'{"node_type"', '{"node_type":', '{"node_type":"SQL"', '{"node_type":"SQL",', '{"node_type":"SQL","query":"x',
	'{"node_type":"SQL","query":"x\', '{"node_type":"SQL","query":"x\u00', '{"node_type":"SQL","query":"x"}}',
	'{"node_type":"SQL","query":"x"}]', '{"node_type":"SQL","query":"x"},', '{"node_type":"SQL","query":"x"} {}',
	'{"node_type":"SQL","query":"x"} //', ' {"node_type":"SQL","query":"x"} ', '{''node_type'':"SQL"}',
	'{"node_type":"SQL","query":"x",,}', '{"node_type":"SQL","query":"x" "y"}', '{"node_type":"SQL",query:"x"}',
	'{"node_type":"SQL","query":"\u0000"}', '{"node_type":"SQL","query":"a\u0000b"}',
	'{"node_type":"SQL","query":"\uD83D"}', '{"node_type":"SQL","query":"\uD83Dx"}', '{"node_type":"SQL","query":"\uDE00\uD83D"}',
	'{"node_type":"SQL","query":"\uD83D\u0041"}', '{"node_type":"SQL","query":"\uD83D\uDE00"}',
	'{"node_type":"SQL","query":"x","n":NaN}', '{"node_type":"SQL","query":"x","n":+1}', '{"node_type":"SQL","query":"x","n":.5}',
	'{"node_type":"SQL","query":"x","n":1e}', '{"node_type":"SQL","query":"x","n":-0.0e-7}', '{"node_type":"SQL","query":"x","n":nul}']) AS g;

-- invalid UTF-8 can only reach us in a SQL_ASCII database: call the same C
-- functions there (the extension itself lives in one database only)
CREATE DATABASE pgd_ascii ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C';
\c pgd_ascii
CREATE FUNCTION seq(text, text) RETURNS text LANGUAGE c STRICT AS '$libdir/pg_durable', 'pgd_seq';
CREATE FUNCTION validate(text) RETURNS text LANGUAGE c STRICT AS '$libdir/pg_durable', 'pgd_validate_graph';
SELECT seq(E'{"node_type":"SQL","query":"\\xff"}', 'x');
SELECT seq(E'{"node_type":"SQL","query":"\xff"}', 'x');
SELECT seq(E'{"node_type":"SQL","query":"ok \xe2\x82"}', 'x');
SELECT seq(E'{"node_type":"SQL","query":"\xc0\xaf"}', 'x');
SELECT seq(E'{"node_type":"SQL","query":"\xed\xa0\x80"}', 'x');
SELECT seq(E'{"node_type":"SQL","query":"x"}\xe2', 'x');
SELECT validate(E'{"node_type":"SQL","query":"\xf8\x88\x80\x80\x80"}');
SELECT validate(seq(E'SELECT \xff', 'x'));	-- as SQL text it is wrapped; df.start refuses it
SELECT seq(E'{"node_type":"SQL","query":"caf\xc3\xa9"}', 'x');	-- valid UTF-8 passes
\c regression

DROP DATABASE pgd_ascii;
DROP FUNCTION v(text);
DROP FUNCTION wide_join(int);
DROP FUNCTION deep(int, text);
