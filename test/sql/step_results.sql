-- Step results: the JSON a SQL step records for its rows (reference 1.8),
-- through df_internal.step_result.  Every mapped type, NULLs, the float
-- specials, exact numerics, time types in a non-UTC session, json/jsonb,
-- domains, DML with and without RETURNING, zero rows and the refused types.

SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';        -- must not matter
SET extra_float_digits = 3;        -- must not matter

-- booleans and integers
SELECT df_internal.step_result($$SELECT true AS t, false AS f, NULL::boolean AS n$$);
SELECT df_internal.step_result($$SELECT 1::int2 AS a, (-32768)::int2 AS b, 2147483647 AS c,
	(-9223372036854775808)::int8 AS d, NULL::int4 AS e$$);

-- floats: shortest round-trip text; NaN and infinities are null
SELECT df_internal.step_result($$SELECT 0.1::float8 AS a, 1.1::float4 AS b, 1e100::float8 AS c,
	1e-7::float8 AS d, '-0'::float8 AS e, 3::float8 AS f, 123456789012345680000::float8 AS g$$);
SELECT df_internal.step_result($$SELECT 'NaN'::float8 AS a, 'Infinity'::float8 AS b,
	'-Infinity'::float4 AS c, 'NaN'::float4 AS d, NULL::float8 AS e$$);

-- strings (bpchar keeps its padding) and escaping
SELECT df_internal.step_result($$SELECT 'it''s'::text AS a, 'x'::varchar(5) AS b, 'ab'::char(4) AS c,
	'pg_class'::name AS d, E'q"u\\o\te\n'::text AS e, 'é✓'::text AS f, ''::text AS g, NULL::text AS h$$);

-- numeric: exact text, as a string
SELECT df_internal.step_result($$SELECT 1.10::numeric AS a, 12345678901234567890.000000001 AS b,
	'NaN'::numeric AS c, (-0.5)::numeric(5,3) AS d, NULL::numeric AS e$$);

-- uuid
SELECT df_internal.step_result($$SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid AS u, NULL::uuid AS n$$);

-- timestamptz in UTC with Z whatever the session zone; fractions only when non-zero
SELECT df_internal.step_result($$SELECT '2024-03-10 01:59:59-05'::timestamptz AS whole,
	'2024-07-01 12:00:00.5+02'::timestamptz AS millis,
	'2024-07-01 12:00:00.123+00'::timestamptz AS millis3,
	'2024-07-01 12:00:00.000001+00'::timestamptz AS micros,
	'2024-07-01 12:00:00.12345+00'::timestamptz AS micros5,
	NULL::timestamptz AS n$$);
-- timestamp without zone: as written, no Z
SELECT df_internal.step_result($$SELECT '2024-02-29 23:59:59'::timestamp AS a,
	'2024-02-29 23:59:59.25'::timestamp AS b, '2024-02-29 00:00:00.000123'::timestamp AS c,
	'0044-03-15 12:00:00 BC'::timestamp AS bc, '10000-01-01 00:00:00'::timestamp AS far$$);
-- date
SELECT df_internal.step_result($$SELECT '2024-02-29'::date AS a, '0001-01-01'::date AS b,
	'0001-12-31 BC'::date AS bc, NULL::date AS n$$);
-- infinity
SELECT df_internal.step_result($$SELECT 'infinity'::timestamptz AS a, '-infinity'::timestamptz AS b,
	'infinity'::timestamp AS c, '-infinity'::timestamp AS d, 'infinity'::date AS e, '-infinity'::date AS f$$);

-- json keeps its key order, duplicates and number text, made compact;
-- jsonb is embedded in jsonb's own order
SELECT df_internal.step_result($$SELECT '{ "z": 1, "a": [1, 2.50, {"k": null}], "z": "dup", "e": 1E+2 }'::json AS j,
	'{"z": 1, "a": {"y": [true, false, null], "b": "x"}}'::jsonb AS jb,
	'[]'::json AS ea, '"s"'::jsonb AS s, '3.000'::jsonb AS num, 'null'::jsonb AS jnull,
	NULL::json AS sqlnull$$);
-- json holding \u0000 cannot be represented
SELECT df_internal.step_result($$SELECT '{"a":"\u0000"}'::json AS bad$$);

-- void
SELECT df_internal.step_result($$SELECT pg_sleep(0) AS v$$);

-- domains map like their base type; the refusal names the domain
CREATE DOMAIN step_results_money AS numeric(10,2) CHECK (VALUE >= 0);
CREATE DOMAIN step_results_ts AS timestamptz;
CREATE DOMAIN step_results_bytes AS bytea;
SELECT df_internal.step_result($$SELECT 5::step_results_money AS m,
	'2024-01-01 00:00:00+00'::step_results_ts AS t$$);
SELECT df_internal.step_result($$SELECT '\x00'::step_results_bytes AS b$$);

-- several rows, column order, row_count, duplicate column names
SELECT df_internal.step_result($$SELECT g AS id, 'r' || g AS label FROM generate_series(1, 3) g$$);
SELECT df_internal.step_result($$SELECT 1 AS a, 2 AS a, 3 AS "Mixed Case", 4 AS "quo""te"$$);
SELECT df_internal.step_result($$SELECT 1 AS x WHERE false$$);

-- DML and utility statements
CREATE TABLE step_results_t (id int, note text);
SELECT df_internal.step_result($$INSERT INTO step_results_t VALUES (1, 'a'), (2, NULL)$$);
SELECT df_internal.step_result($$UPDATE step_results_t SET note = 'b' WHERE id = 2 RETURNING id, note$$);
SELECT df_internal.step_result($$DELETE FROM step_results_t WHERE id = 1$$);
SELECT df_internal.step_result($$DELETE FROM step_results_t RETURNING *$$);
SELECT df_internal.step_result($$CREATE TABLE step_results_u (a int)$$);
DROP TABLE step_results_t, step_results_u;

-- refused types, with the reference's message (even when the value is NULL)
SELECT df_internal.step_result($$SELECT 1 AS ok, '\xdeadbeef'::bytea AS payload$$);
SELECT df_internal.step_result($$SELECT NULL::bytea AS payload$$);
SELECT df_internal.step_result($$SELECT interval '1 day' AS span$$);
SELECT df_internal.step_result($$SELECT ARRAY[1, 2] AS ids$$);
SELECT df_internal.step_result($$SELECT ROW(1, 'a') AS rec$$);
SELECT df_internal.step_result($$SELECT 'x'::"char" AS c, 1::oid AS o$$);
-- no rows: nothing is converted, so nothing is refused (as in the reference)
SELECT df_internal.step_result($$SELECT '\x00'::bytea AS payload WHERE false$$);
-- the cast the message suggests works
SELECT df_internal.step_result($$SELECT '\xdeadbeef'::bytea::text AS payload, interval '1 day'::text AS span$$);

-- the result is valid JSON that jsonb reads back
SELECT df_internal.step_result($$SELECT 1.5::float8 AS f, now()::date - now()::date AS zero$$)::jsonb;

-- a large result stays linear
SELECT length(df_internal.step_result($$SELECT g, md5(g::text) FROM generate_series(1, 20000) g$$)) > 0 AS big_ok,
	df_internal.step_result($$SELECT g FROM generate_series(1, 20000) g$$)::jsonb -> 'row_count' AS n;

DROP DOMAIN step_results_money, step_results_ts, step_results_bytes;
RESET TimeZone;
RESET DateStyle;
RESET extra_float_digits;
