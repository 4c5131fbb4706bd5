-- Substitution of {variables} and $named results into step text (reference
-- 1.6), through df_internal.substitute(template, vars, results, raw).
-- The maps arrive as jsonb, so keys inside each result are in jsonb's order
-- (shorter keys first, then bytewise): column names below are chosen so
-- that this order is the intended one.

\set R '{"q": {"rows": [{"a": 1, "b": "it''s", "c": true}], "row_count": 1}, "s": {"rows": [{"v": "x\\\\y \\"z\\""}], "row_count": 1}, "empty": {"rows": [], "row_count": 0}, "n": {"rows": [{"a": null, "b": 2}], "row_count": 1}, "o": {"rows": [{"j": {"k": [1, "x''y"]}}], "row_count": 1}, "a": {"rows": [{"x": "A"}], "row_count": 1}, "ab": {"rows": [{"x": "AB"}], "row_count": 1}, "loop": {"rows": [{"v": "$a {v}"}], "row_count": 1}, "http": {"ok": true, "body": "hello", "status": 200, "headers": {"h": "v"}}, "sig": {"data": "approve", "timed_out": false}, "brk": "done", "num": 42, "nul": null, "jn": [{"rows": [], "row_count": 0}, 5], "1": {"rows": [{"x": "never"}], "row_count": 1}}'

-- variables: raw text, single pass, not rescanned, unknown kept
SELECT df_internal.substitute('SELECT {v}, ''{w}'' -- {v}', '{"v": "1 + 1", "w": "it''s"}', '{}');
SELECT df_internal.substitute('{x} {} { v} {v } {{v}} {v}{v} }{v}{', '{"v": "V"}', '{}');
SELECT df_internal.substitute('{one} {two}', '{"one": "{two}", "two": "2"}', '{}');
SELECT df_internal.substitute('{my var}/{sys_instance_id}/{sys_label}/', '{"my var": "a b", "sys_instance_id": "0a1b2c3d", "sys_label": ""}', '{}');
SELECT df_internal.substitute('[{n}] [{z}] [{o}]', '{"n": 5, "z": null, "o": {"k": "v"}}', '{}');
-- variables come first: a value holding a reference is then substituted
SELECT df_internal.substitute('SELECT {ref}', '{"ref": "$a.x"}', :'R');
-- and a variable in a substituted value is not
SELECT df_internal.substitute('SELECT $loop', '{"v": "V"}', :'R');

-- $name: first column of the first row, as a SQL literal
SELECT df_internal.substitute('SELECT $q, $q.b, $q.c, $s, $o', '{}', :'R');
SELECT df_internal.substitute('SELECT $q.a + 1, $n.b, $q.a?, $n.b?', '{}', :'R');
-- longest name; the name must not be followed by an identifier character
SELECT df_internal.substitute('$a $ab $abc $a_ $a1 $ab.x $a.x $aé $a. $a-$ab,$a)', '{}', :'R');
-- unknown $x, $1, $$ and a lone $ are left alone (a result named "1" is ignored)
SELECT df_internal.substitute('SELECT $1, $$x$$, $, $ a, $x, $.a, $1.x, a$b', '{}', :'R');
-- SQL text is read as PostgreSQL reads it: a known reference inside a
-- literal, a comment or a dollar quote, used as a dollar-quote tag or
-- joined to a word is refused (subst_quoting has every case); raw text
-- has no quoting and is substituted everywhere
SELECT df_internal.substitute('SELECT ''cost: $q''', '{}', :'R');
SELECT df_internal.substitute('SELECT 1 -- $q', '{}', :'R');
SELECT df_internal.substitute('SELECT $$ $a $$', '{}', :'R');
SELECT df_internal.substitute('SELECT $a$body$a$', '{}', :'R');
SELECT df_internal.substitute('SELECT x$a', '{}', :'R');
SELECT df_internal.substitute('''cost: $q'' -- $q' || chr(10) || '$$ $a $$, $a$body$a$, x$a', '{}', :'R', raw => true);
-- non-SQL results: whole value for $name, top-level key for $name.col
SELECT df_internal.substitute('$http.status $http.ok $http.body $http.headers', '{}', :'R');
SELECT df_internal.substitute('$http', '{}', :'R');
SELECT df_internal.substitute('$sig.data $sig.timed_out $brk $num $jn', '{}', :'R');
-- an unknown column is kept as written in SQL mode; with ? it is NULL
SELECT df_internal.substitute('SELECT $q.nope, $http.nope, $brk.x, $q.nope?', '{}', :'R');

-- ? turns a missing value into NULL
SELECT df_internal.substitute('$empty? $empty.a? $n? $n.a? $nul?', '{}', :'R');
-- strict errors
SELECT df_internal.substitute('SELECT $empty', '{}', :'R');
SELECT df_internal.substitute('SELECT $empty.a', '{}', :'R');
SELECT df_internal.substitute('SELECT $n', '{}', :'R');
SELECT df_internal.substitute('SELECT $n.a', '{}', :'R');
SELECT df_internal.substitute('SELECT $nul', '{}', :'R');
SELECT df_internal.substitute('SELECT $q, $n, $empty', '{}', :'R');   -- the first failure wins

-- $name.*: a VALUES list with the first row's columns
\set M '{"m": {"rows": [{"a": 1, "b": "x''y", "c": true, "d": {"k": 1}, "e": null}, {"a": 2.5, "c": false, "d": [1, 2], "e": null}], "row_count": 2}, "w": {"rows": [{"we\\"ird": "v"}], "row_count": 1}, "none": {"rows": [{}], "row_count": 1}, "empty": {"rows": [], "row_count": 0}, "http": {"ok": true, "status": 200}, "brk": "done"}'
SELECT df_internal.substitute('SELECT * FROM $m.*', '{}', :'M');
SELECT df_internal.substitute('SELECT * FROM $empty.*', '{}', :'M');
SELECT df_internal.substitute('SELECT * FROM $w.* JOIN $http.* ON true', '{}', :'M');
SELECT df_internal.substitute('$m.*?', '{}', :'M');
SELECT df_internal.substitute('SELECT * FROM $brk.*', '{}', :'M');
SELECT df_internal.substitute('SELECT * FROM $none.*', '{}', :'M');
-- the expansions run
SELECT df_internal.step_result(df_internal.substitute('SELECT a, b, c, d, e FROM $m.* ORDER BY a', '{}', :'M'));
SELECT df_internal.step_result(df_internal.substitute('SELECT count(*) AS n FROM $empty.*', '{}', :'M'));

-- at most 10,000 rows, expanded in linear time
CREATE TEMP TABLE subst_big AS
SELECT jsonb_build_object('big', jsonb_build_object('rows', jsonb_agg(jsonb_build_object('g', g, 's', 'r' || g)), 'row_count', 10000)) AS r10k,
	jsonb_build_object('big', jsonb_build_object('rows', jsonb_agg(jsonb_build_object('g', g)) || '[{"g": 0}]', 'row_count', 10001)) AS r10k1
FROM generate_series(1, 10000) g;
SELECT left(x, 60) AS head, right(x, 40) AS tail, length(x) AS len
FROM (SELECT df_internal.substitute('SELECT * FROM $big.*', '{}', r10k) AS x FROM subst_big) s;
SELECT df_internal.step_result(df_internal.substitute('SELECT count(*) AS n, sum(g) AS total, max(s) AS top FROM $big.*', '{}', r10k)) FROM subst_big;
SELECT df_internal.substitute('SELECT * FROM $big.*', '{}', r10k1) FROM subst_big;
SELECT df_internal.substitute('$big.*', '{}', r10k1, raw => true) FROM subst_big;

-- raw mode (HTTP contexts): plain text, JSON for non-strings, '' for ?
SELECT df_internal.substitute('https://x.test/{p}?id=$q&name=$q.b&ok=$q.c&s=$s', '{"p": "v1"}', :'R', raw => true);
SELECT df_internal.substitute('{"h": $http.headers, "all": $http, "o": $o, "brk": "$brk", "num": $num}', '{}', :'R', raw => true);
SELECT df_internal.substitute('[$empty?][$empty.a?][$n?][$n.a?][$nul?][$q.nope?]', '{}', :'R', raw => true);
SELECT df_internal.substitute('$m.* $empty.* $http.*', '{}', :'M', raw => true);
SELECT df_internal.substitute('$1 $$ $x', '{}', :'R', raw => true);
-- raw strict errors, including the unknown field
SELECT df_internal.substitute('$q.nope', '{}', :'R', raw => true);
SELECT df_internal.substitute('$http.nope', '{}', :'R', raw => true);
SELECT df_internal.substitute('$brk.x', '{}', :'R', raw => true);
SELECT df_internal.substitute('$empty', '{}', :'R', raw => true);
SELECT df_internal.substitute('$n.a', '{}', :'R', raw => true);
SELECT df_internal.substitute('$brk.*', '{}', :'M', raw => true);

-- nothing to substitute
SELECT df_internal.substitute('SELECT $a, {v}', '{}', '{}');
SELECT df_internal.substitute('', '{"v": "x"}', :'R');

-- whole-value references (multipart data_b64)
SELECT v, df_internal.is_whole_value_reference(v)
FROM unnest(ARRAY['$n', '$n?', '$n.c', '$n.c?', '$n_1.col_2', '{v}', '{my var}',
	'$n.*', ' $n', '$n ', '$n.', '$1', '$', '{}', '{v}{w}', '{v}x', 'x{v}', '$n$m', '$n.c.d',
	'$n??', 'abc', '']) AS v;
