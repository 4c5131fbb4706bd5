-- DSL operators: ~> |=> & | ?> !> @>, their equivalence with the builders,
-- and the precedence/associativity PostgreSQL gives them (one level, left).

-- each operator equals its builder
SELECT ('a' ~> 'b') = df.seq('a', 'b') AS seq,
	   ('a' |=> 'n') = df.as('a', 'n') AS named,
	   ('a' & 'b') = df.join('a', 'b') AS join_,
	   ('a' | 'b') = df.race('a', 'b') AS race,
	   ('c' ?> 'a' !> 'b') = df.if('c', 'a', 'b') AS if_,
	   (@> 'a') = df.loop('a') AS loop;

SELECT 'SELECT 1' ~> 'SELECT 2';
SELECT 'SELECT 1' |=> 'one';
SELECT 'SELECT 1' & 'SELECT 2';
SELECT 'SELECT 1' | 'SELECT 2';
SELECT @> 'SELECT 1';
SELECT 'SELECT true' ?> 'SELECT 1' !> 'SELECT 2';

-- ?> alone is a partial if: jsonb text, completed by !>
SELECT 'SELECT true' ?> 'SELECT 1';
SELECT df.sleep(1) ?> ('a' ~> 'b');		-- operands are kept as given
SELECT pg_typeof('c' ?> 'a');
SELECT ('c' ?> 'a')::jsonb ? '_partial_if' AS is_jsonb;
-- !> also accepts a partial written by hand, with branches as strings or objects
SELECT '{"_partial_if": true, "condition": "SELECT true", "then_branch": "SELECT 1"}' !> 'SELECT 2';
SELECT '{"_partial_if": true, "condition": {"node_type":"SQL","query":"SELECT true"},
		 "then_branch": {"node_type":"SLEEP","query":"1"}}' !> df.break();

-- operators compose with builders and Durofut operands
SELECT df.sleep(1) ~> df.wait_for_signal('go') |=> 'sig';
SELECT ('a' & 'b') & 'c';		-- nested joins stay nested
SELECT 'a' & ('b' & 'c');

-- one precedence level, left-associative
SELECT 'a' ~> 'b' ~> 'c' = df.seq(df.seq('a', 'b'), 'c') AS seq_left_assoc;
SELECT ('a' |=> 'x' ~> 'b') = df.seq(df.as('a', 'x'), 'b') AS name_then_seq;
SELECT 'a' |=> 'x' ~> 'b';
SELECT ('a' ~> 'b' |=> 'n') = df.as(df.seq('a', 'b'), 'n') AS names_the_then;
SELECT 'a' ~> 'b' |=> 'n';
SELECT ('x' ~> 'c' ?> 'a' !> 'b') = df.if(df.seq('x', 'c'), 'a', 'b') AS then_is_condition;
SELECT 'x' ~> 'c' ?> 'a' !> 'b';
SELECT ('c' ?> 'a' !> 'b' ~> 'd') = df.seq(df.if('c', 'a', 'b'), 'd') AS if_then_seq;
SELECT (@> 'a' ~> 'b') = df.seq(df.loop('a'), 'b') AS loop_only_a;
SELECT @> 'a' ~> 'b';
SELECT (@> ('a' ~> 'b')) = df.loop(df.seq('a', 'b')) AS parenthesized_loop;
SELECT ('a' & 'b' | 'c') = df.race(df.join('a', 'b'), 'c') AS join_then_race;
SELECT ('a' | 'b' & 'c') = df.join(df.race('a', 'b'), 'c') AS race_then_join;
SELECT ('a' ~> 'b' & 'c') = df.join(df.seq('a', 'b'), 'c') AS seq_then_join;
SELECT ('a' & 'b' ~> 'c') = df.seq(df.join('a', 'b'), 'c') AS join_then_seq;
-- parentheses override
SELECT ('a' ~> ('b' & 'c')) = df.seq('a', df.join('b', 'c')) AS parenthesized;
SELECT ('c' ?> ('a' ~> 'b') !> 'd') = df.if('c', df.seq('a', 'b'), 'd') AS then_group;

-- the operators live in pg_catalog: they work with an empty search_path
SET search_path = '';
SELECT 'a' ~> 'b' |=> 'n' = df.as(df.seq('a', 'b'), 'n') AS empty_path_seq_as;
SELECT ('a' & 'b' | 'c') = df.race(df.join('a', 'b'), 'c') AS empty_path_join_race;
SELECT ('c' ?> 'a' !> 'b') = df.if('c', 'a', 'b') AS empty_path_if;
SELECT (@> 'a') = df.loop('a') AS empty_path_loop;
RESET search_path;
