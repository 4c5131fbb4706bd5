-- Loops and breaks: do-while, break values, break outside a loop, nested
-- loops, loops with JOIN/RACE inside and inside JOIN/RACE, generations in
-- the stamps, the one-second floor, failures, cancel, and bounded state.
SET ROLE df_user;
CREATE TABLE counter (n int);
CREATE TABLE o (i serial);
CREATE TABLE t (label text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE ticks (at timestamptz DEFAULT clock_timestamp());

-- do-while: the body runs until the condition is false; the result is the last body result
SELECT df.start(df.loop('INSERT INTO counter VALUES (1) RETURNING (SELECT count(*) + 1 FROM counter) AS runs',
                        'SELECT count(*) < 4 FROM counter')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT count(*) AS body_runs FROM counter;
-- a root loop moves the whole instance to a new generation per iteration
SELECT node_type, status, status_details->>'execution_id' = :'id' || '::4' AS fourth_generation
FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type;

-- break values: JSON kept, other text becomes a JSON string, none is null
SELECT df.start(@> ('SELECT 1' ~> df.break('{"done": true}'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(@> df.break('plain text')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(@> df.break()) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- a break inside an IF inside the body, and in the while-condition
TRUNCATE counter;
SELECT df.start(@> ('INSERT INTO counter VALUES (1)'
                    ~> ('SELECT count(*) >= 2 FROM counter' ?> df.break('"two"') !> 'SELECT 1'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT count(*) AS body_runs FROM counter;
SELECT df.start(df.loop('SELECT 1', df.break('"condition-done"'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- a break outside any loop fails the instance
SELECT df.start('SELECT 1' ~> df.break('x')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type;

-- a non-root loop: prefix and suffix run once, named results carry across
-- iterations and back to the suffix
SELECT df.start(('SELECT 0 AS n' |=> 'cnt')
                ~> df.loop('SELECT $cnt + 1 AS n' |=> 'cnt', 'SELECT $cnt < 3')
                ~> 'SELECT $cnt AS final') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT status_details->>'execution_id' ~ ('^' || :'id' || '::1$') AS loop_node_in_root_scope
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- nested loops run in order 1.1, 1.2, 2.1, 2.2, 3.1, 3.2
SELECT df.start(@> ('INSERT INTO o DEFAULT VALUES'
                    ~> df.loop($$INSERT INTO t (label) SELECT (SELECT count(*) FROM o) || '.' ||
                                   (SELECT count(*) + 1 FROM t WHERE label LIKE (SELECT count(*) FROM o) || '.%')$$,
                               $$SELECT count(*) < 2 FROM t WHERE label LIKE (SELECT count(*) FROM o) || '.%'$$)
                    ~> ('SELECT count(*) >= 3 FROM o' ?> df.break('"nested-done"') !> 'SELECT 1'))) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.result(:'id');
SELECT string_agg(label, ',' ORDER BY at) AS order_of_runs FROM t;

-- a JOIN inside a loop body, and a loop inside a JOIN branch
TRUNCATE counter;
SELECT df.start(df.loop('INSERT INTO counter VALUES (1)' & 'INSERT INTO counter VALUES (2)',
                        'SELECT count(*) < 4 FROM counter')
                & df.loop('SELECT 1', df.break('"inner"'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT n, count(*) FROM counter GROUP BY n ORDER BY n;

-- a loop that loses a RACE is stamped failed in its branch scope, at the
-- generation it had reached (the branch's root loop moves the branch on)
SELECT df.start(df.loop('SELECT 1') | df.sleep(1)) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT status, result, status_details->>'execution_id' ~ ('^' || :'id' || '::1::' || id || '::[0-9]+$') AS branch_stamp
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- at most one iteration per second: a busy loop racing a 3 second sleep
SELECT df.start(df.loop('INSERT INTO ticks DEFAULT VALUES') | df.sleep(3)) AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) BETWEEN 2 AND 5 AS iterations_bounded FROM ticks;

-- a RACE inside a loop body, and a break inside a RACE branch
TRUNCATE counter;
SELECT df.start(df.loop(('INSERT INTO counter VALUES (1)' | df.sleep(5)),
                        'SELECT count(*) < 3 FROM counter')) AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS body_runs FROM counter;
SELECT df.start(@> (df.break('"from-race"') | df.sleep(5))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- a break inside a JOIN branch ends the loop; the other branch is dropped
TRUNCATE counter;
SELECT df.start(@> (df.break('"from-join"') & 'INSERT INTO counter SELECT 1 FROM pg_sleep(2)')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT engine_idle() AS idle;
SET ROLE df_user;
SELECT count(*) AS dropped_branch_rows FROM counter;

-- the iteration cap: a loop that reaches 8,388,608 iterations fails (the counter is
-- set just below it rather than run up to it)
SELECT df.start(df.loop('SELECT 1', 'SELECT true')) AS id \gset
RESET ROLE;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.loops) LOOP
		IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'the loop never started'; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
UPDATE df_internal.loops SET iterations = 8388607;
SET ROLE df_user;
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';

-- a failing body fails the loop and the instance, with the error visible
SELECT df.start(df.loop('SELECT 1/0')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type;

-- cancel during an infinite loop
SELECT df.start(@> 'SELECT 1') AS id \gset
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
SELECT df.await_instance(:'id');

-- nothing of the loops is left in the engine
RESET ROLE;
SELECT engine_idle();
SELECT (SELECT count(*) FROM df_internal.loops) AS loops,
       (SELECT count(*) FROM df_internal.runs) AS runs,
       (SELECT count(*) FROM df_internal.results) AS results,
       (SELECT count(*) FROM df_internal.joins) AS joins;
