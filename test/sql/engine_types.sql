-- The engine: every column type of reference §1.8 end to end, from a step
-- to df.result (stored as jsonb), DML without RETURNING, and a refused type
-- that fails the node and rolls back the statement's writes.
SET ROLE df_user;
SET TimeZone = 'America/New_York';   -- the result is in UTC whatever the session says
CREATE TABLE types_t (id int, b bytea);

SELECT df.start('SELECT true AS t, false AS f, 1::int2 AS i2, 2147483647::int4 AS i4, '
                '9007199254740993::int8 AS i8, (-5)::int8 AS neg') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.start('SELECT 1.5::float4 AS f4, 0.1::float8 AS f8, ''NaN''::float8 AS nan, '
                '''Infinity''::float8 AS inf, ''-Infinity''::float4 AS ninf, 1e-7::float8 AS small') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.start('SELECT ''a "q" \ b''::text AS t, ''v''::varchar(5) AS vc, ''ab''::char(4) AS bp, '
                '''nm''::name AS nm, ''é€''::text AS utf8') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.start('SELECT 1.10::numeric AS n1, 100::numeric AS n2, 123456789012345678901234567890.000000001 AS n3, '
                '''NaN''::numeric AS nnan, (-0.5)::numeric(5,2) AS n4') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.start('SELECT ''a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11''::uuid AS u, '
                '''2024-03-01 12:34:56.789+02''::timestamptz AS tz, '
                '''2024-03-01 12:34:56.123456''::timestamp AS ts, '
                '''2024-03-01 00:00:00''::timestamp AS ts0, '
                '''2024-02-29''::date AS d') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.start('SELECT ''{"b":1,"a":[true,null,"x"]}''::json AS j, ''{"k":{"n":1.50}}''::jsonb AS jb, '
                '''"str"''::jsonb AS js, ''3''::json AS jn, pg_sleep(0) AS v, NULL::int AS nul') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- the stored result is jsonb: numbers and nesting are native
SELECT jsonb_typeof(result->'rows'->0->'jb'->'k'->'n') AS jb_number,
       jsonb_typeof(result->'rows'->0->'j'->'a') AS j_array,
       jsonb_typeof(result->'rows'->0->'v') AS void_null
FROM df.nodes WHERE instance_id = :'id';

-- several rows, no rows
SELECT df.start('SELECT g AS n, g::text AS s FROM generate_series(1, 3) g') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start('SELECT 1 AS n WHERE false') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- DML without RETURNING, and utility statements
SELECT df.start('INSERT INTO types_t (id) VALUES (1), (2)') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start('UPDATE types_t SET id = id + 10') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start('CREATE TABLE types_made_by_step (x int)') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT to_regclass('types_made_by_step') IS NOT NULL AS table_made;
SELECT df.start('DELETE FROM types_t WHERE id = 11 RETURNING id') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- an unsupported type fails the node, and the statement's writes are rolled back
SELECT df.start('INSERT INTO types_t VALUES (100, ''\xdeadbeef'') RETURNING id, b') AS id \gset
SELECT df.await_instance(:'id');
SELECT status, result FROM df.nodes WHERE instance_id = :'id';
SELECT count(*) AS rolled_back FROM types_t WHERE id = 100;
-- (refused even when the value is NULL; a query of that type returning no rows succeeds)
SELECT df.start('SELECT NULL::bytea AS b') AS id \gset
SELECT df.await_instance(:'id');
SELECT status, result FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('SELECT b FROM types_t WHERE false') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start('SELECT 1 AS a, ''(1,2)''::point AS p') AS id \gset
SELECT df.await_instance(:'id');
SELECT status, result FROM df.nodes WHERE instance_id = :'id';
-- a cast makes it work
SELECT df.start('SELECT ''\xdeadbeef''::bytea::text AS b') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET TimeZone;
RESET ROLE;
