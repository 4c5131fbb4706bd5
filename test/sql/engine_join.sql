-- The engine: JOIN (df.join, df.join3, &), result arrays, waiting for every
-- branch, failures, named results inside branches and their merge-back,
-- branch stamps (reference §1.5, §1.6, §3.4).
SET ROLE df_user;
CREATE TABLE join_log (step text);

-- 2-way: an array of the branches' full results, in branch order
SELECT df.start(df.join('SELECT pg_sleep(0.2), 1 AS a', 'SELECT 2 AS b')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- 3-way with df.join3 and with chained & (which nests)
SELECT df.start(df.join3('SELECT 1 AS a', 'SELECT 2 AS b', 'SELECT 3 AS c')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT count(*) AS nodes, count(*) FILTER (WHERE node_type = 'JOIN') AS joins
FROM df.nodes WHERE instance_id = :'id';
SELECT df.start('SELECT 1 AS a' & 'SELECT 2 AS b' & 'SELECT 3 AS c') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- nested JOINs give nested arrays; DML branches give empty results
SELECT df.start(df.join(df.join('SELECT 1 AS a', 'INSERT INTO join_log VALUES (''x'')'),
                        df.join3('SELECT 2 AS b', 'SELECT 3 AS c', 'SELECT 4 AS d'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- every branch of a JOIN runs, even when another one fails first;
-- then the JOIN fails with the first failing branch in order (1-based)
SELECT df.start(df.join3('SELECT pg_sleep(0.3)' ~> 'INSERT INTO join_log VALUES (''slow sibling'')',
                         'SELECT 1/0',
                         'SELECT pg_sleep(0.1)' ~> 'SELECT no_such_column')) AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS sibling_finished FROM join_log WHERE step = 'slow sibling';
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id'
ORDER BY node_type, status, result::text;
SELECT df.result(:'id') IS NULL AS no_result;
SELECT df.start(df.join('SELECT 1', 'SELECT 2' ~> 'SELECT ''x''::int')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN';
SELECT df.start(df.join('SELECT 1/0', 'SELECT 2' ~> 'SELECT ''x''::int')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN';
-- a JOIN failing inside a JOIN
SELECT df.start(df.join('SELECT 1', df.join('SELECT 2', 'SELECT 1/0'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN' ORDER BY length(result::text);

-- names produced inside branches: visible to later steps of the branch,
-- merged back for the continuation after the JOIN
SELECT df.start(('SELECT 10 AS base' |=> 'base')
                ~> df.join(('SELECT $base + 1 AS v' |=> 'l') ~> 'SELECT $l * 2 AS doubled',
                           ('SELECT $base + 2 AS v' |=> 'r') ~> 'SELECT $r * 3 AS tripled')
                ~> 'SELECT $base AS base, $l AS l, $r AS r') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN';
-- a name written by several branches: merged in branch order, the last branch wins
SELECT df.start(df.join3(('SELECT 1 AS v, pg_sleep(0.2)' |=> 'x') ~> ('SELECT 1 AS v' |=> 'x'),
                         'SELECT 2 AS v' |=> 'x',
                         'SELECT 0 AS unnamed')
                ~> 'SELECT $x AS x') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(df.join3('SELECT 3 AS v' |=> 'x',
                         'SELECT 2 AS v, pg_sleep(0.2)' |=> 'x',
                         'SELECT 0 AS unnamed')
                ~> 'SELECT $x AS x') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- a sibling's name is not visible inside another branch ("$mine" comes
-- through a variable, as df.start refuses a bound name inside a literal)
SELECT df.setvar('mine_ref', '$mine');
SELECT df.start(df.join('SELECT 1 AS v' |=> 'mine',
                        'SELECT pg_sleep(0.2)' ~> 'SELECT ''{mine_ref}'' AS seen')) AS id \gset
SELECT df.unsetvar('mine_ref');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- statuses and stamps: the JOIN in the root scope, branch nodes in their
-- own scope "<instance>::1::<branch root id>::1"
SELECT df.start('SELECT 0' ~> df.join('SELECT 1' ~> 'SELECT 2', df.join('SELECT 3', 'SELECT 4'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status,
       CASE WHEN status_details->>'execution_id' = :'id' || '::1' THEN 'root scope'
            WHEN status_details->>'execution_id' ~ ('^' || :'id' || '::1::[0-9a-f]{8}::1$') THEN 'branch scope'
            WHEN status_details->>'execution_id' ~ ('^' || :'id' || '::1::[0-9a-f]{8}::1::[0-9a-f]{8}::1$') THEN 'nested branch scope'
            ELSE status_details::text END AS scope
FROM df.nodes WHERE instance_id = :'id'
ORDER BY 3, 1, result::text;
-- each branch scope is named after the branch's root node
SELECT count(*) AS branch_nodes_in_own_scope
FROM df.nodes n JOIN df.nodes j ON j.instance_id = n.instance_id AND j.node_type = 'JOIN'
WHERE n.instance_id = :'id'
  AND (n.id = j.left_node OR n.id = j.right_node)
  AND n.status_details->>'execution_id' LIKE '%::' || n.id || '::1';
-- the branch counter: no row while every branch runs, made by the first
-- branch that ends (width - 1), counted down, deleted by the last
SELECT df.start(df.join3(df.wait_for_signal('a'), df.wait_for_signal('b'),
                         df.wait_for_signal('c'))) AS id \gset
SELECT wait_until(format($$SELECT count(*) = 3 FROM df.nodes WHERE instance_id = %L
                           AND node_type = 'SIGNAL' AND status = 'running'$$, :'id')) AS waiting;
RESET ROLE;
SELECT count(*) AS counter_rows FROM df_internal.joins WHERE instance_id = :'id';
SET ROLE df_user;
SELECT df.signal(:'id', 'b', '2');
SELECT wait_until(format($$SELECT count(*) = 1 FROM df.nodes WHERE instance_id = %L
                           AND node_type = 'SIGNAL' AND status = 'completed'$$, :'id')) AS one_ended;
RESET ROLE;
SELECT remaining FROM df_internal.joins WHERE instance_id = :'id';
SET ROLE df_user;
SELECT df.signal(:'id', 'a', '1');
SELECT wait_until(format($$SELECT count(*) = 2 FROM df.nodes WHERE instance_id = %L
                           AND node_type = 'SIGNAL' AND status = 'completed'$$, :'id')) AS two_ended;
RESET ROLE;
SELECT remaining FROM df_internal.joins WHERE instance_id = :'id';
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;
SELECT df.signal(:'id', 'c', '3');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
SELECT count(*) AS join_counters_left FROM df_internal.joins;
