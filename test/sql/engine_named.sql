-- The engine: named results ($name, $name.col, $name?, $name.*), strict
-- reference errors, names on compound nodes, last write wins, variables
-- captured at start and the sys_ variables (reference §1.6, §3.2).
SET ROLE df_user;
CREATE TABLE named_t (id int, v text);
INSERT INTO named_t VALUES (1, 'one'), (2, 'two'), (3, 'three');

-- $name is the first column of the first row; $name.col a named column
SELECT df.start(('SELECT 100 AS x, ''it''''s'' AS s' |=> 'a')
                ~> 'SELECT $a + 1 AS plus, $a.s AS s, $a::text AS t') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- df.as is the same as |=>
SELECT df.start(df.seq(df.as('SELECT 7 AS n', 'seven'), 'SELECT $seven * 6 AS n')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- exact numeric round-trip: numerics travel as strings, integers as numbers
SELECT df.start(('SELECT 100::numeric AS x, 1.10::numeric AS y, 12345678901234567890.123456789::numeric AS z' |=> 'n')
                ~> 'SELECT $n::text AS x, $n.y::numeric = 1.10 AS y_exact, $n.y::text AS y, $n.z::numeric::text AS z') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(('SELECT 100 AS x' |=> 'x') ~> 'SELECT $x::text AS t, pg_typeof($x)::text AS ty') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- null-safe forms give NULL instead of failing
SELECT df.start(('SELECT NULL::int AS a, NULL::text AS b' |=> 'z')
                ~> ('SELECT id FROM named_t WHERE false' |=> 'none')
                ~> 'SELECT $z? IS NULL AS a, $z.b? IS NULL AS b, $none? IS NULL AS c, $none.id? IS NULL AS d') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- $name.* is a row set, in FROM and in an IN-subquery
SELECT df.start(('SELECT id, v FROM named_t WHERE id >= 2 ORDER BY id' |=> 'b')
                ~> 'SELECT string_agg(b.v, '','' ORDER BY b.id) AS vs, sum(b.id) AS total FROM $b.*') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(('SELECT id FROM named_t WHERE id <> 2' |=> 'b')
                ~> 'SELECT string_agg(v, '','' ORDER BY id) AS vs FROM named_t WHERE id IN (SELECT id FROM $b.*)') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- an empty row set expands to no rows
SELECT df.start(('SELECT id FROM named_t WHERE false' |=> 'e')
                ~> 'SELECT count(*) AS n FROM $e.*') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- strict references fail the node, the THEN and the instance
SELECT df.start(('SELECT id FROM named_t WHERE false' |=> 'n') ~> 'INSERT INTO named_t VALUES (99, $n)') AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT df.start(('SELECT NULL::int AS a' |=> 'n') ~> 'INSERT INTO named_t VALUES (99, $n)') AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT df.start(('SELECT 1 AS a, NULL::text AS c' |=> 'n') ~> 'INSERT INTO named_t VALUES (99, $n.c)') AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;
SELECT count(*) AS never_inserted FROM named_t WHERE id = 99;
-- an unknown column is kept as written (and then fails as SQL)
SELECT df.start(('SELECT 1 AS a' |=> 'n') ~> 'SELECT $n.nope') AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SQL' AND status = 'failed';
-- an unknown $name is left alone ($1 too)
SELECT df.start('SELECT ''$nobody'' AS a, ''$1'' AS b') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- names on THEN, JOIN and IF nodes
SELECT df.start((('SELECT 1 AS v' ~> 'SELECT 2 AS v') |=> 't')
                ~> (df.join('SELECT 3 AS v', 'SELECT 4 AS v') |=> 'j')
                ~> (df.if('SELECT true', 'SELECT ''yes'' AS v', 'SELECT ''no'' AS v') |=> 'i')
                ~> 'SELECT $t AS t, $j::jsonb -> 1 -> ''rows'' -> 0 ->> ''v'' AS j, $i AS i') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT result_name, node_type FROM df.nodes WHERE instance_id = :'id' AND result_name IS NOT NULL ORDER BY 1;

-- last write wins
SELECT df.start(('SELECT 1 AS v' |=> 'x') ~> ('SELECT 2 AS v' |=> 'x') ~> 'SELECT $x AS x') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- variables: captured at start, raw text, sys_ variables, unknown kept
SELECT df.setvar('who', 'world');
SELECT df.setvar('tbl', 'named_t');
SELECT df.start('SELECT ''hello {who}'' AS greeting, (SELECT count(*) FROM {tbl}) AS n, ''{nope}'' AS unknown, '
                '''{sys_label}'' AS label, ''{sys_instance_id}'' AS iid', 'greeter') AS id \gset
SELECT df.await_instance(:'id');
SELECT replace(df.result(:'id'), :'id', '<id>');
SELECT df.start('SELECT ''[{sys_label}]'' AS label') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- a later df.setvar does not reach a started instance
SELECT df.start('SELECT pg_sleep(0.3)' ~> 'SELECT ''{who}'' AS who') AS id \gset
SELECT df.setvar('who', 'later');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
BEGIN;
SELECT df.setvar('who', 'first');
SELECT df.start('SELECT ''{who}'' AS who') AS id \gset
SELECT df.setvar('who', 'second');
COMMIT;
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- variables reach every branch, and are substituted before $references
SELECT df.setvar('ref', '$r');
SELECT df.start(('SELECT 5 AS r' |=> 'r')
                ~> df.join('SELECT {ref} AS a, ''{who}'' AS w', 'SELECT ''{sys_label}'' AS l'), 'lbl') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.clearvars();
RESET ROLE;
