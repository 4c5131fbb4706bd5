-- A LOOP that is the root of a JOIN or RACE branch runs in one execution
-- scope, the branch's (the reference's test 57): the loop node
-- and its body are stamped "<instance>::1::<loop id>::<generation>", the
-- generation growing with each iteration, never wrapped twice
-- ("...::<loop id>::1::<loop id>::<generation>").
SET ROLE df_user;
CREATE TABLE scope_body (i serial, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE scope_sibling (i serial);
-- a stamp without its generation: the execution it names
CREATE FUNCTION pg_temp.execution(stamp text) RETURNS text LANGUAGE sql AS $$
	SELECT regexp_replace(stamp, '::[0-9]+$', '') $$;

-- 1. a loop in a JOIN branch iterates twice, the other branch runs once
SELECT df.start((df.loop('INSERT INTO scope_body DEFAULT VALUES'
                         ~> ('SELECT count(*) >= 2 FROM scope_body' ?> df.break() !> df.sleep(1)))
                 & 'INSERT INTO scope_sibling DEFAULT VALUES'), 'loop-in-join') AS id \gset
SELECT df.await_instance(:'id', 60) AS status;
SELECT (SELECT count(*) FROM scope_body) AS body_runs, (SELECT count(*) FROM scope_sibling) AS sibling_runs;
SELECT id AS loop_id FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP' \gset
-- the loop node and every node of its body run in the branch's execution;
-- the loop node is stamped with the generation of the last iteration (2)
SELECT n.node_type, n.status,
	   pg_temp.execution(n.status_details->>'execution_id') = :'id' || '::1::' || :'loop_id' AS in_branch_execution
FROM df.nodes n
WHERE n.instance_id = :'id' AND n.node_type NOT IN ('JOIN') AND n.query IS DISTINCT FROM 'INSERT INTO scope_sibling DEFAULT VALUES'
ORDER BY 1, 2, 3;
SELECT status_details->>'execution_id' = :'id' || '::1::' || :'loop_id' || '::2' AS loop_stamp
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';
SELECT count(DISTINCT pg_temp.execution(status_details->>'execution_id')) AS executions
FROM df.nodes WHERE instance_id = :'id';

-- 2. race(loop, slow step): exactly three executions, the parent, the loop
-- branch (the loop and its body) and the other branch; the loop wins
TRUNCATE scope_body;
SELECT df.start(df.race(df.loop('INSERT INTO scope_body DEFAULT VALUES'
                                ~> ('SELECT count(*) >= 2 FROM scope_body' ?> df.break() !> df.sleep(1))),
                        'SELECT pg_sleep(30)'), 'loop-in-race') AS id \gset
SELECT df.await_instance(:'id', 60) AS status;
SELECT count(*) AS body_runs FROM scope_body;
SELECT id AS loop_id, pg_temp.execution(status_details->>'execution_id') AS loop_execution
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP' \gset
SELECT :'loop_execution' = :'id' || '::1::' || :'loop_id' AS loop_is_a_direct_child,
	   (SELECT pg_temp.execution(status_details->>'execution_id') FROM df.nodes
		WHERE instance_id = :'id' AND query = 'INSERT INTO scope_body DEFAULT VALUES') = :'loop_execution'
		   AS body_in_loop_execution,
	   (SELECT count(DISTINCT pg_temp.execution(status_details->>'execution_id')) FROM df.nodes
		WHERE instance_id = :'id' AND status_details->>'execution_id' IS NOT NULL) AS executions;

-- 2b. the same against a durable sleep, race(loop, sleep) as the
-- reference's test 57 has it: the sleep node is stamped in a scope of its own, so again
-- exactly three executions (parent, loop branch, sleep branch)
TRUNCATE scope_body;
SELECT df.start(df.race(df.loop('INSERT INTO scope_body DEFAULT VALUES'
                                ~> ('SELECT count(*) >= 2 FROM scope_body' ?> df.break() !> df.sleep(1))),
                        df.sleep(30)), 'loop-vs-sleep') AS id \gset
SELECT df.await_instance(:'id', 60) AS status;
SELECT id AS loop_id FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP' \gset
SELECT n.node_type,
	   CASE pg_temp.execution(n.status_details->>'execution_id')
		   WHEN :'id' THEN 'parent'
		   WHEN :'id' || '::1::' || :'loop_id' THEN 'loop branch'
		   WHEN :'id' || '::1::' || n.id THEN 'own branch'
		   ELSE coalesce(pg_temp.execution(n.status_details->>'execution_id'), 'none')
	   END AS execution
FROM df.nodes n
WHERE n.instance_id = :'id' AND n.status_details->>'execution_id' IS NOT NULL
	AND (n.node_type IN ('RACE', 'LOOP')
		 OR n.id = (SELECT right_node FROM df.nodes WHERE instance_id = :'id' AND node_type = 'RACE'))
ORDER BY 1;
SELECT count(DISTINCT pg_temp.execution(status_details->>'execution_id')) AS executions
FROM df.nodes WHERE instance_id = :'id' AND status_details->>'execution_id' IS NOT NULL;

-- 3. named results: carried across the iterations of a branch's loop and
-- merged back into the JOIN's scope when it ends
SELECT df.start(('SELECT 0 AS n' |=> 'n')
                ~> (df.loop('SELECT $n + 1 AS n' |=> 'n', 'SELECT $n < 3') & 'SELECT 1')
                ~> 'SELECT $n AS final', 'loop-results') AS id \gset
SELECT df.await_instance(:'id', 60) AS status;
SELECT df.result(:'id') AS result;

-- 4. a loop that loses a RACE is stamped failed in its branch's scope, at the
-- generation it had reached; nothing of it is left behind
SELECT df.start(df.loop('SELECT 1') | df.sleep(2), 'loop-loses') AS id \gset
SELECT df.await_instance(:'id', 60) AS status;
SELECT status, result, pg_temp.execution(status_details->>'execution_id') = :'id' || '::1::' || id AS in_branch_scope
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LOOP';
RESET ROLE;
SELECT engine_idle() AS idle;
SELECT (SELECT count(*) FROM df_internal.loops WHERE instance_id = :'id') AS loops_left,
	   (SELECT count(*) FROM df_internal.results WHERE instance_id = :'id') AS results_left;
SET ROLE df_user;

DROP TABLE scope_body, scope_sibling;
RESET ROLE;
