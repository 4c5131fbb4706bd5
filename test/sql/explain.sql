-- df.explain: input classification, every label and header, chain flattening,
-- truncation, and problems returned as text instead of raised.
\pset format unaligned
\pset tuples_only on

-- ---------------------------------------------------------------------------
-- Leaf labels, from the DSL and from hand-written Durofut JSON
-- ---------------------------------------------------------------------------
SELECT df.explain(df.sql('SELECT 1'));
SELECT df.explain('{"node_type":"SQL","query":"SELECT 1","result_name":"one"}');
SELECT df.explain(df.sleep(5));
SELECT df.explain(df.sleep(0) |=> 'nap');
SELECT df.explain(df.wait_for_schedule('*/5 9-17 * * MON-FRI'));
SELECT df.explain(df.wait_for_schedule('0 0 1 * *') |=> 'tick');
SELECT df.explain(df.http('https://api.github.com/zen', 'get'));
SELECT df.explain(df.http('https://api.github.com/repos', 'POST', '{}') |=> 'r');
SELECT df.explain(df.http_multipart('https://acct.blob.core.windows.net/c/b', 'PUT',
	'[{"name":"a","data_b64":"eA=="},{"name":"b","data_b64":"eQ=="}]'));
SELECT df.explain(df.http_multipart('https://acct.blob.core.windows.net/c/b', 'post',
	'[{"name":"a","data_b64":"eA=="}]') |=> 'up');
SELECT df.explain(df.wait_for_signal('approve'));
SELECT df.explain(df.wait_for_signal('approve', 60) |=> 'sig');
SELECT df.explain(df.break());
SELECT df.explain(df.break('done'));
SELECT df.explain('{"node_type":"BREAK","query":"{\"break_value\":\"stop\"}","result_name":"b"}');

-- ---------------------------------------------------------------------------
-- Compound nodes and their child headers
-- ---------------------------------------------------------------------------
-- IF with a condition node, and df.if_rows
SELECT df.explain(df.if('SELECT true', 'SELECT 1', 'SELECT 2'));
SELECT df.explain(('SELECT count(*) > 0 FROM pg_class' ?> 'SELECT 1' !> df.sleep(1)) |=> 'branch');
SELECT df.explain(df.if_rows('found', df.sql('SELECT 1'), df.break('none')));
-- LOOP, infinite and do-while
SELECT df.explain(df.loop('SELECT 1'));
SELECT df.explain(@> df.sql('SELECT 1'));
SELECT df.explain(df.loop('SELECT 1', 'SELECT false') |=> 'l');
-- JOIN of 2 and 3 (extra_nodes), RACE
SELECT df.explain('SELECT 1' & 'SELECT 2');
SELECT df.explain(df.join3('SELECT 1', df.sleep(2), 'SELECT 3') |=> 'j');
SELECT df.explain('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"a"},"right_node":{"node_type":"SQL","query":"b"},"extra_nodes":[{"node_type":"SQL","query":"c"},{"node_type":"SQL","query":"d"},{"node_type":"SQL","query":"e"}]}');
SELECT df.explain(df.race(df.wait_for_signal('go'), df.sleep(60)) |=> 'first');
-- nesting: children are indented two spaces per level
SELECT df.explain(
	'INSERT INTO t VALUES (1)' |=> 'ins'
	~> (('SELECT 2' ~> 'SELECT 3') & df.loop(df.if('SELECT random() < 0.5', df.break('x'), df.sleep(1))))
	~> df.race('SELECT 4', 'SELECT 5' ~> 'SELECT 6'));

-- ---------------------------------------------------------------------------
-- THEN chains are flattened
-- ---------------------------------------------------------------------------
-- left-nested (what ~> builds) and right-nested chains read the same
SELECT df.explain('SELECT 1' ~> 'SELECT 2' ~> 'SELECT 3' ~> 'SELECT 4');
SELECT df.explain(df.seq('SELECT 1', df.seq('SELECT 2', df.seq('SELECT 3', 'SELECT 4'))));
-- a named THEN keeps its name: its chain goes one level down
SELECT df.explain('SELECT 0' ~> (('SELECT 1' ~> 'SELECT 2') |=> 'pair') ~> 'SELECT 3');
-- a chain inside a branch
SELECT df.explain(df.join('SELECT 1' ~> 'SELECT 2', 'SELECT 3'));
-- a 130-step chain: 130 lines, 129 arrows
WITH RECURSIVE c(i, g) AS (
	SELECT 1, df.sql('SELECT 1')
	UNION ALL
	SELECT i + 1, g ~> df.sql('SELECT ' || (i + 1)) FROM c WHERE i < 130
), e AS (SELECT df.explain(g) AS x FROM c WHERE i = 130)
SELECT array_length(string_to_array(x, E'\n'), 1) AS lines,
	(length(x) - length(replace(x, '→', ''))) AS arrows,
	split_part(x, E'\n', 1) AS first, split_part(x, E'\n', 2) AS second,
	split_part(x, E'\n', 130) AS last
FROM e;
-- a balanced tree of 4,095 THENs (depth 13): 4,096 items, 4,095 arrows
WITH RECURSIVE c(i, g) AS (
	SELECT 0, df.sql('SELECT 1')
	UNION ALL
	SELECT i + 1, g ~> g FROM c WHERE i < 12
), e AS (SELECT df.explain(g) AS x FROM c WHERE i = 12)
SELECT array_length(string_to_array(x, E'\n'), 1) AS lines,
	(length(x) - length(replace(x, '→', ''))) AS arrows
FROM e;

-- ---------------------------------------------------------------------------
-- SQL and URL text: whitespace collapsed, long text cut
-- ---------------------------------------------------------------------------
SELECT df.explain(df.sql(E'\n  SELECT a,\n\t\tb\r\n  FROM   t  \n'));
-- 50 bytes are shown whole, 51 bytes are cut to 47 + "..."
SELECT x, octet_length(x) FROM (SELECT df.explain(df.sql('SELECT ''' || repeat('a', 41) || '''')) AS x) s;
SELECT x, octet_length(x) FROM (SELECT df.explain(df.sql('SELECT ''' || repeat('a', 42) || '''')) AS x) s;
-- the limit applies after collapsing whitespace
SELECT df.explain(df.sql('SELECT' || repeat(' ', 40) || '1'));
-- multibyte text is cut on a character boundary (é: 2 bytes, 日: 3 bytes)
SELECT x, octet_length(x) FROM (SELECT df.explain(df.sql('SELECT ''' || repeat('é', 30) || '''')) AS x) s;
SELECT x, octet_length(x) FROM (SELECT df.explain(df.sql('SELECT ''a' || repeat('日', 20) || '''')) AS x) s;
SELECT x, octet_length(x) FROM (SELECT df.explain(df.sql('SELECT ''' || repeat('日', 20) || '''')) AS x) s;
-- a long name is never cut
SELECT df.explain(df.sql('SELECT 1') |=> ('n' || repeat('x', 60)));
-- URLs: 40 bytes whole, 41 cut to 37 + "..."
SELECT df.explain(df.http('https://api.github.com/' || repeat('a', 17), 'GET'));
SELECT df.explain(df.http('https://api.github.com/' || repeat('a', 18), 'GET'));
SELECT df.explain(df.http_multipart('https://acct.blob.core.windows.net/container/blob', 'PUT',
	'[{"name":"a","data_b64":"eA=="}]'));

-- ---------------------------------------------------------------------------
-- Input classification
-- ---------------------------------------------------------------------------
-- DSL text is evaluated
SELECT df.explain($$'SELECT 1' ~> 'SELECT 2'$$);
SELECT df.explain($$df.sql('SELECT 1') |=> 'a' ~> df.sleep(3)$$);
SELECT df.explain($$'SELECT true' ?> 'SELECT 1' !> 'SELECT 2'$$);
SELECT df.explain($$@> df.break('b')$$);
SELECT df.explain($$df.join3('SELECT 1', 'SELECT 2', 'SELECT 3')$$);
-- the value of the expression is what gets explained (here: SQL text)
SELECT df.explain($$upper('select 1 /* df. */')$$);
-- plain SQL is one SQL step, keywords in any case, after leading whitespace
SELECT df.explain('SELECT 1');
SELECT df.explain('insert into t values (1)');
SELECT df.explain(E'\n  With x AS (SELECT 1) SELECT * FROM x');
SELECT df.explain('VACUUM');
SELECT df.explain('CALL p()');
-- SQL that mentions df. is still SQL (the reference would evaluate it and fail)
SELECT df.explain('SELECT * FROM df.instances WHERE status = ''failed''');
-- an instance id: 8 lowercase hex characters (live instances: monitor_explain)
SELECT df.explain('deadbeef');
SELECT df.explain('01234567');
-- anything else says what is accepted
SELECT df.explain('hello world');
SELECT df.explain('');
SELECT df.explain('   ');
SELECT df.explain('DEADBEEF');
SELECT df.explain('deadbee');
SELECT df.explain('deadbeef0');
SELECT df.explain('selectx 1');
SELECT df.explain('[1, 2]');
SELECT df.explain('{"a": 1}');
SELECT df.explain('see mypdf.pages');
SELECT df.explain(NULL);

-- ---------------------------------------------------------------------------
-- Invalid graphs are returned as text
-- ---------------------------------------------------------------------------
SELECT df.explain('{"node_type":"FOO"}');
SELECT df.explain('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"a"},"right_node":{"node_type":"sql","query":"b"}}');
SELECT df.explain('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"a"},"right_node":{"node_type":"SQL","query":"b"},"extra_nodes":[{"node_type":"NOPE"}]}');
SELECT df.explain('{"node_type":"THEN","left_node":"SELECT 1","right_node":{"node_type":"SQL","query":"b"}}');
SELECT df.explain('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"a"}}');
SELECT df.explain('{"node_type":"IF","left_node":{"node_type":"SQL","query":"a"},"right_node":{"node_type":"SQL","query":"b"}}');
SELECT df.explain('{"node_type":"LOOP","left_node":{"node_type":"WAIT_SCHEDULE","query":"{\"cron_expr\":\"* * * *\"}"}}');
SELECT df.explain('{"node_type":"SQL","query":"SELECT 1"');
-- depth: 256 is fine, 257 is not (a left-nested chain of n steps is n - 1
-- deep: the root is at depth 0, as in the reference)
CREATE FUNCTION explain_chain(n int) RETURNS text LANGUAGE sql AS $$
	WITH RECURSIVE c(i, g) AS (
		SELECT 1, df.sql('SELECT 1')
		UNION ALL
		SELECT i + 1, g ~> df.sql('SELECT ' || (i + 1)) FROM c WHERE i < n
	)
	SELECT g FROM c WHERE i = n
$$;
SELECT array_length(string_to_array(x, E'\n'), 1) AS lines, split_part(x, E'\n', 257) AS last
FROM (SELECT df.explain(explain_chain(257)) AS x) s;
SELECT df.explain(explain_chain(258));
-- 256 nested loops (depth 256): every level two spaces below its header,
-- the SQL at 4 * 256 spaces
CREATE FUNCTION explain_loops(n int) RETURNS text LANGUAGE sql AS $$
	WITH RECURSIVE c(i, g) AS (
		SELECT 1, df.sql('SELECT 1')
		UNION ALL
		SELECT i + 1, df.loop(g) FROM c WHERE i < n
	)
	SELECT g FROM c WHERE i = n
$$;
SELECT array_length(string_to_array(x, E'\n'), 1) AS lines,
	length(split_part(x, E'\n', 513)) - length(ltrim(split_part(x, E'\n', 513))) AS last_indent,
	ltrim(split_part(x, E'\n', 513)) AS last_line,
	split_part(x, E'\n', 3) AS line3, split_part(x, E'\n', 4) AS line4
FROM (SELECT df.explain(explain_loops(257)) AS x) s;
SELECT df.explain(explain_loops(258));
-- node count: 10,000 nodes render (a JOIN of 9,999 branches), 10,001 do not
CREATE FUNCTION explain_wide_join(n int) RETURNS text LANGUAGE sql AS $$
	SELECT '{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"extra_nodes":['
		|| string_agg('{"node_type":"SQL","query":"SELECT ' || k || '"}', ',' ORDER BY k)
		|| ']}'
	FROM generate_series(3, n - 1) AS k
$$;
SELECT array_length(string_to_array(x, E'\n'), 1) AS lines,
	split_part(x, E'\n', 1) AS first, split_part(x, E'\n', 19998) AS header,
	split_part(x, E'\n', 19999) AS last
FROM (SELECT df.explain(explain_wide_join(10000)) AS x) s;
SELECT df.explain(explain_wide_join(10001));
DROP FUNCTION explain_chain(int);
DROP FUNCTION explain_loops(int);
DROP FUNCTION explain_wide_join(int);

-- ---------------------------------------------------------------------------
-- Errors inside a DSL expression are returned as text
-- ---------------------------------------------------------------------------
SELECT df.explain($$df.sleep(-1)$$);
SELECT df.explain($$'SELECT 1' ~> df.sql((1/0)::text)$$);
SELECT df.explain($$df.sql('SELECT 1'$$);
SELECT df.explain($$df.no_such_function()$$);
SELECT df.explain($$df.as('SELECT 1', '1bad')$$);
SELECT df.explain($$'SELECT 1' ?> 'SELECT 2'$$);
SELECT df.explain($$df.sql('SELECT 1'); SELECT 2$$);
SELECT df.explain($$df.sql(x) FROM (VALUES ('SELECT 1'), ('SELECT 2')) AS v(x)$$);
SELECT df.explain($$df.sql('SELECT 1'), df.sql('SELECT 2')$$);
SELECT df.explain($$'SELECT 1' ~> NULL$$);
SELECT df.explain($$df.target_database()$$);
-- the caller's transaction goes on, and the expression's effects are rolled back
CREATE TABLE explain_log (x int);
CREATE FUNCTION explain_step() RETURNS text LANGUAGE sql AS $$
	INSERT INTO explain_log VALUES (1);
	SELECT df.sql('SELECT 42');
$$;
BEGIN;
INSERT INTO explain_log VALUES (0);
SELECT df.explain($$explain_step() ~> 'SELECT 43'$$);
SELECT df.explain($$explain_step() ~> df.sleep(-1)$$);
INSERT INTO explain_log VALUES (2);
COMMIT;
SELECT x FROM explain_log ORDER BY x;
-- a query cancel is not turned into text
SET statement_timeout = '200ms';
SELECT df.explain($$df.sql(pg_sleep(5)::text)$$);
RESET statement_timeout;

DROP FUNCTION explain_step();
DROP TABLE explain_log;
