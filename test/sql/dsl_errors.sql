-- DSL errors: every message a builder or operator raises, with its SQLSTATE.
\set VERBOSITY default

-- the error of a statement as "SQLSTATE: message" (for compact listings)
CREATE FUNCTION dsl_err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- result names: df.as, |=> and df.if_rows
SELECT df.as('SELECT 1', '1abc');
SELECT 'SELECT 1' |=> 'has space';
SELECT df.if_rows('bad-name', 'a', 'b');
SELECT s, dsl_err(format('SELECT df.as(%L, %L)', 'SELECT 1', s))
FROM unnest(ARRAY['', '9', 'a-b', 'a.b', '$a', 'é', 'a b', 'ok_1', '_', 'Z9']) AS s;

-- sleep
SELECT df.sleep(-1);
SELECT dsl_err('SELECT df.sleep(-9223372036854775808)');

-- cron expressions are checked by the builder (details come from the cron parser)
SELECT df.wait_for_schedule('* * * *');
SELECT df.wait_for_schedule('61 * * * *');
SELECT dsl_err('SELECT df.wait_for_schedule('''')');
SELECT dsl_err('SELECT df.wait_for_schedule(''* * * * * *'')');
SELECT dsl_err('SELECT df.wait_for_schedule(''* * * FOO *'')');

-- signals
SELECT df.wait_for_signal('');
SELECT dsl_err('SELECT df.wait_for_signal(''   '')');
SELECT dsl_err('SELECT df.wait_for_signal(NULL)');
SELECT df.wait_for_signal('s', 0);
SELECT dsl_err('SELECT df.wait_for_signal(''s'', -5)');

-- NULL where a value is required (non-STRICT builders)
SELECT df.loop(NULL);
SELECT df.loop(NULL, 'SELECT true');
-- STRICT builders and operators simply return NULL for NULL input
SELECT df.seq(NULL, 'a') IS NULL AS seq_null, ('a' ~> NULL) IS NULL AS op_null,
	   df.sleep(NULL) IS NULL AS sleep_null, df.as('a', NULL) IS NULL AS as_null;

-- text that is meant to be Durofut but is not valid JSON
SELECT df.seq('{"node_type":"SQL","query":"x"', 'b');
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x",}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL" "query":"x"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x"} trailing' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":''x''}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"\x"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"\u0000"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"\ud800"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"\udc00"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"\u12"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"a
b"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x","n":01}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x","n":1.}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x","n":-}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x","n":tru}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"é" é}' ~> 'b'$q$);
-- well-formed JSON with an unknown node_type, or the wrong shape
SELECT df.seq('{"node_type":"BOGUS"}', 'b');
SELECT dsl_err($q$SELECT '{"node_type":"sql","query":"x"}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":7}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"THEN","left_node":{"node_type":"NOPE"},"right_node":{"node_type":"SQL","query":"x"}}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"THEN","left_node":"SELECT 1","right_node":{"node_type":"SQL","query":"x"}}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"IF","condition_node":[1]}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"JOIN","extra_nodes":{"node_type":"SQL"}}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"JOIN","extra_nodes":["SELECT 1"]}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":{"a":1}}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"SQL","query":"x","result_name":5}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT '{"node_type":"THEN","left_node":{"query":"x"}}' ~> 'b'$q$);
SELECT dsl_err($q$SELECT 'a' ~> '{"node_type":"LOOP","left_node":{"node_type":"THEN","right_node":{"node_type":"X"}}}'$q$);

-- a partial if (?> without !>) cannot be used as a step
SELECT 'a' ~> ('c' ?> 'b');
SELECT dsl_err($q$SELECT ('c' ?> 'b') & 'a'$q$);
SELECT dsl_err($q$SELECT ('c' ?> 'b') |=> 'x'$q$);
SELECT dsl_err($q$SELECT @> ('c' ?> 'b')$q$);
SELECT dsl_err($q$SELECT df.if('c' ?> 'b', 'x', 'y')$q$);
SELECT dsl_err($q$SELECT 'c' ?> 'a' ?> 'b'$q$);
-- !> needs a ?> on its left
SELECT 'SELECT 1' !> 'b';
SELECT dsl_err($q$SELECT df.sql('x') !> 'b'$q$);
SELECT dsl_err($q$SELECT '{"_partial_if": false, "condition": "c", "then_branch": "t"}' !> 'b'$q$);
SELECT dsl_err($q$SELECT '{"_partial_if": true, "then_branch": "t"}' !> 'b'$q$);
SELECT dsl_err($q$SELECT '{"_partial_if": true, "condition": 1, "then_branch": "t"}' !> 'b'$q$);
SELECT dsl_err($q$SELECT '[1]' !> 'b'$q$);
-- a completed if is not a partial if
SELECT dsl_err($q$SELECT ('c' ?> 'a' !> 'b') !> 'd'$q$);
-- the branches of a hand-written partial are checked like any operand
SELECT dsl_err($q$SELECT '{"_partial_if": true, "condition": "{\"node_type\":\"X\"}", "then_branch": "t"}' !> 'b'$q$);

DROP FUNCTION dsl_err(text);
