-- Data never becomes SQL: every kind of reference in every kind of
-- PostgreSQL quoting is refused, by df.start before anything runs and by
-- the substituter when a step runs; where a reference stands as a value,
-- its value is one literal that nothing in it can end.

-- (df.start and df.subscribe as an ordinary role; df_internal.substitute
-- as the superuser)
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO df_user;
SET ROLE df_user;
-- What df.start (or df.subscribe, for $event) says about a workflow,
-- without keeping the instance or the subscription.
CREATE FUNCTION subst_try(wf text, subscribe boolean DEFAULT false) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	m text;
BEGIN
	BEGIN
		IF subscribe THEN
			PERFORM df.subscribe('subst_try', 'subst_try', wf);
		ELSE
			PERFORM df.start(wf);
		END IF;
		RAISE EXCEPTION 'accepted';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
		RETURN m;
	END;
END
$$;
-- What the substituter makes of a text, or its error.
CREATE FUNCTION subst_run(tpl text, results jsonb, vars jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN df_internal.substitute(tpl, vars, results);
EXCEPTION WHEN OTHERS THEN
	RETURN 'ERROR: ' || SQLERRM;
END
$$;

-- every kind of reference: the name, how the workflow binds it
CREATE TABLE subst_refs (ref text, wrap text);
INSERT INTO subst_refs VALUES
	('$r',			'named'),
	('$r.col',		'named'),
	('$r?',			'named'),
	('$r.col?',		'named'),
	('$r.*',		'named'),
	('$item',		'map'),
	('$item.g',		'map'),
	('$event.key',	'event'),
	('$event.payload', 'event'),
	('$error.message', 'catch'),
	('$lock.token',	'lock');
-- a workflow whose step is sql, binding the reference's name ($event: a
-- subscription's workflow)
CREATE FUNCTION subst_wf(wrap text, sql text) RETURNS text LANGUAGE sql AS $$
	SELECT CASE wrap
		WHEN 'named' THEN ('SELECT 1 AS col' |=> 'r') ~> sql
		WHEN 'map' THEN df.map('SELECT 1 AS g', sql)
		WHEN 'catch' THEN df.catch(df.fail('x'), sql)
		WHEN 'lock' THEN df.with_lock(sql, ARRAY['subst:k'])
		ELSE sql END
$$;

-- every kind of quoting: %s is where the reference goes
CREATE TABLE subst_quotes (kind text, tpl text);
INSERT INTO subst_quotes VALUES
	('string',				$q$SELECT 'k2:%s'$q$),
	('string, doubled quote', $q$SELECT 'it''s %s'$q$),
	('string after backslash', $q$SELECT 'a\' || '%s'$q$),
	('string continued',	E'SELECT \'a\'\n  \'%s\''),
	('string continued after a comment', E'SELECT \'a\' -- c\n  \'%s\''),
	('E string',			$q$SELECT E'\'%s'$q$),
	('E string, lower case', $q$SELECT e'x%s'$q$),
	('N string',			$q$SELECT N'%s'$q$),
	('bit string',			$q$SELECT B'%s'$q$),
	('hex string',			$q$SELECT X'%s'$q$),
	('unicode string',		$q$SELECT U&'%s'$q$),
	('quoted identifier',	$q$SELECT 1 AS "%s"$q$),
	('quoted identifier, doubled quote', $q$SELECT 1 AS "a""%s"$q$),
	('unicode identifier',	$q$SELECT 1 AS U&"%s"$q$),
	('dollar string',		$q$SELECT $$%s$$$q$),
	('tagged dollar string', $q$SELECT $body$ x %s $body$$q$),
	('function body',		$q$DO $$BEGIN PERFORM %s; END$$$q$),
	('line comment',		$q$SELECT 1 -- %s$q$),
	('line comment after operator', $q$SELECT 1 +-- %s$q$),
	('block comment',		$q$SELECT 1 /* %s */$q$),
	('nested block comment', $q$SELECT 1 /* a /* b */ %s */$q$),
	('identifier',			$q$SELECT x%s$q$),
	('identifier after $',	$q$SELECT a$b%s$q$);

-- df.start and df.subscribe refuse each of them, saying where the reference stands
SELECT q.kind, regexp_replace(subst_try(subst_wf(r.wrap, format(q.tpl, r.ref)), r.wrap = 'event'),
                              '^df\.(start|subscribe): ', '') AS refused, count(*) AS refs
FROM subst_quotes q CROSS JOIN subst_refs r
GROUP BY 1, 2 ORDER BY min(q.ctid), 2;
-- a dollar-quote tag that is a name the workflow binds
SELECT r.ref, subst_try(subst_wf(r.wrap, format('SELECT %s$ x %s$', r.ref, r.ref)), r.wrap = 'event') AS refused
FROM (VALUES ('$r', 'named'), ('$item', 'map'), ('$event', 'event'), ('$error', 'catch'),
             ('$lock', 'lock')) AS r(ref, wrap);
-- where the literal reads differently under standard_conforming_strings
SELECT subst_try(subst_wf('named', $q$SELECT 'C:\' || $r$q$)) AS refused;
SELECT subst_try(subst_wf('named', $q$SELECT E'C:\\' || $r$q$)) AS accepted;

-- the messages in full: the hint says how to write it
\set VERBOSITY default
SELECT df.subscribe('subst_s', 'subst_t', $q$SELECT 'k2:$event.key'$q$);
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> $q$SELECT 'x: $a.v, done'$q$);
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> $q$SELECT '$a'$q$);
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> df.join('SELECT 2', $q$SELECT 1 AS "$a"$q$));
SELECT df.start(df.map('SELECT 1 AS g', $q$DO $$BEGIN PERFORM $item.g; END$$$q$));
SELECT df.start(df.catch(df.fail('x'), $q$SELECT 1 -- $error.message$q$));
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> $q$SELECT tbl_$a$q$);
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> $q$SELECT $a$ x $a$$q$);
SELECT df.start(('SELECT 1 AS v' |=> 'a') ~> $q$SELECT 'C:\' || $a$q$);

-- accepted: references where a value stands, and $x that is no reference
SELECT s, subst_try(subst_wf('named', s)) AS accepted
FROM unnest(ARRAY[
	$q$SELECT $r, $r.col, $r?, $r.col?, 'k2:' || $r, $r::text, ($r)$q$,
	$q$SELECT * FROM $r.*$q$,
	$q$SELECT /* a /* b */ c */ $r -- $x$q$,
	$q$SELECT $$ a $x $$, $t$ $item $t$, $r$q$,
	$q$SELECT 'price: $5', 'cost: $total', "$other", x$y, $r$q$,
	$q$SELECT E'\'' || $r || U&'\0041' || B'1' || X'1F' || N'n'$q$,
	$q$SELECT 'a'
	   'b' || $r$q$,
	$q$SELECT $1$q$,
	$q$SELECT E'a\\' || $r, /* ' */ $r, $$ $w$ $$ || $r, $a$ x $ab$ $a$ || $r, "a""b" || $r$q$,
	$q$SELECT 'a' -- it's
	   || $r$q$
]) AS s;
-- an unknown name is kept wherever it stands, as before; $event is bound
-- only in a subscription's workflow
SELECT subst_try($q$SELECT 'price: $5, $nobody, $event.key'$q$) AS accepted;
SELECT subst_try(df.map('SELECT 1 AS g', $q$SELECT '$error, $lock, $r'$q$)) AS accepted;

RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM df_user;
-- the substituter, when the step runs: the same refusals for bound names
\set R '{"r": {"rows": [{"col": 1}], "row_count": 1}, "event": {"key": "k", "payload": {"a": 1}}, "item": {"g": 1}, "error": {"message": "m"}, "lock": {"token": 7}}'
SELECT q.kind, split_part(subst_run(format(q.tpl, r.ref), :'R'), ':', 2) AS refused, count(*) AS refs
FROM subst_quotes q CROSS JOIN subst_refs r
GROUP BY 1, 2 ORDER BY min(q.ctid), 2;
SELECT subst_run($q$SELECT 'k2:$event.key'$q$, :'R');
SELECT subst_run($q$SELECT $event$ x $event$$q$, :'R');
SELECT subst_run($q$SELECT 'C:\' || $r$q$, :'R');
-- a {variable} that opens a literal before a reference
SELECT subst_run($q$SELECT {open}$event.key'$q$, :'R', '{"open": "''k2:"}');
-- names not bound when the step runs stay as written
SELECT subst_run($q$SELECT '$other', $other$q$, :'R');

-- bound values, never spliced: each is one literal whatever it holds
SELECT jsonb_build_object(
	's', jsonb_build_object('rows', jsonb_build_array(jsonb_build_object('v',
		$v$a'b\c $$ $q$ -- /* ; " E'x'$v$)), 'row_count', 1),
	'p', jsonb_build_object('rows', jsonb_build_array(jsonb_build_object('v',
		$v$a'); DROP TABLE x; -- $$ */$v$)), 'row_count', 1),
	'n', '{"rows": [{"v": -1}], "row_count": 1}'::jsonb,
	'f', '{"rows": [{"v": 1.5e3}], "row_count": 1}'::jsonb,
	'b', '{"rows": [{"v": true}], "row_count": 1}'::jsonb,
	'j', jsonb_build_object('rows', jsonb_build_array(jsonb_build_object('v',
		jsonb_build_object('k', $v$';--\$v$))), 'row_count', 1)) AS e \gset
SELECT subst_run('SELECT $s', :'e');
SELECT subst_run('SELECT $p', :'e');
SELECT subst_run('SELECT $s.v, $j, $j.v, $b, $f', :'e');
SELECT subst_run('SELECT 5-$n, 5 -$n, 5*$n, 5@$n', :'e');
SELECT subst_run('SELECT $n?.5, $p?''x''', :'e');
SELECT subst_run('SELECT * FROM $s.*', :'e');
SELECT subst_run('SELECT * FROM $j.*', :'e');
-- and they read back as the values they were, whatever standard_conforming_strings is
SELECT subst_run($w$SELECT $s = $v$a'b\c $$ $q$ -- /* ; " E'x'$v$ AS same, $p AS p$w$, :'e') AS stmt \gset
SET standard_conforming_strings = on;
:stmt;
SET standard_conforming_strings = off;
:stmt;
RESET standard_conforming_strings;
SELECT subst_run('SELECT 5-$n AS six, $f AS f, $b AS b, $j::jsonb AS j', :'e') AS stmt \gset
:stmt;

-- PostgreSQL reads each accepted form as the scanner did: run with a value
-- made to break out of any quoting, each statement gives the value back whole
CREATE FUNCTION subst_exec(tpl text, results jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	v text;
BEGIN
	EXECUTE df_internal.substitute(tpl, '{}', results) INTO v;
	RETURN v;
END
$$;
SELECT jsonb_build_object('r', jsonb_build_object('rows', jsonb_build_array(jsonb_build_object('col',
		$v$x'"); SELECT 1/0; -- $$ $w$ */ \' E'$v$)), 'row_count', 1)) AS h \gset
SELECT t, subst_exec(t, :'h') = $v$x'"); SELECT 1/0; -- $$ $w$ */ \' E'$v$ AS whole
FROM unnest(ARRAY[
	$q$SELECT $r$q$,
	$q$SELECT $r.col?$q$,
	$q$SELECT col FROM $r.*$q$,
	$q$SELECT /* ' /* " */ $$ */ $r -- it's$q$,
	$q$SELECT substr(E'\\' || $r, 2)$q$,
	$q$SELECT substr(E'\'' || $r, 2)$q$,
	$q$SELECT substr(U&'\0041' || $r, 2)$q$,
	$q$SELECT substr($$ $w$ $$ || $r, 6)$q$,
	$q$SELECT substr($a$ x $ab$ $a$ || $r, 9)$q$,
	$q$SELECT substr('a' -- it's
	   'b' || $r, 3)$q$,
	$q$SELECT $r FROM (SELECT 1 AS "a""b$x") s$q$,
	$q$SELECT replace(replace('price: $5' || $r || '$other', 'price: $5', ''), '$other', '')$q$
]) AS t;
-- column names of a row set come from data too (an HTTP response's keys)
SELECT subst_run('SELECT * FROM $h.*', '{"h": {"x\"); DROP TABLE t; --": "v"}}');
SELECT subst_exec('SELECT * FROM $h.*', '{"h": {"x\"); DROP TABLE t; --": "v"}}') AS v;
SET standard_conforming_strings = off;
SELECT subst_exec($q$SELECT substr(E'\\' || $r, 2)$q$, :'h') = $v$x'"); SELECT 1/0; -- $$ $w$ */ \' E'$v$ AS whole_without_standard_strings;
RESET standard_conforming_strings;

-- end to end: hostile values bound by named results go in as data
SET ROLE df_user;
CREATE TABLE subst_sink (via text, v text);
CREATE TABLE subst_canary (what text);
INSERT INTO subst_canary VALUES ('intact');
SELECT df.start(
	($q$SELECT $v$'); DELETE FROM subst_canary; --$v$ AS a, $v$\'); DELETE FROM subst_canary; --$v$ AS b,
	           $v$$$; DELETE FROM subst_canary; $$$v$ AS c, $v$*/ DELETE FROM subst_canary; /*$v$ AS d,
	           -1 AS n$q$ |=> 'h')
	~> $q$INSERT INTO subst_sink VALUES ('a', $h), ('a.', $h.a), ('b', $h.b), ('c', $h.c), ('d', /* $x */ $h.d),
	                                    ('n', 0-$h.n), ('star', (SELECT a || b || c || d FROM $h.* ))$q$) AS id \gset
SELECT df.await_instance(:'id');
SELECT via, v FROM subst_sink ORDER BY via;
SELECT * FROM subst_canary;
-- a JSON result holding \u0000 cannot be read back; the step fails, the backend lives
SELECT df.start(($q$SELECT '{"v": "a\u0000b"}'::json AS j$q$ |=> 'z') ~> 'INSERT INTO subst_sink VALUES (''z'', $z.j)') AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS z_rows FROM subst_sink WHERE via = 'z';
SELECT n.result FROM df.nodes n WHERE n.instance_id = :'id' AND n.status = 'failed' AND n.node_type = 'SQL';
-- a NUL cannot be sent: text and jsonb refuse it before the bus sees it
SELECT df.publish_event('subst_nul', '{"k": "\u0000"}');
RESET ROLE;
SELECT 1 AS backend_alive;
