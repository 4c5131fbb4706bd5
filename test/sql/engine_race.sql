-- The engine: RACE (df.race, |): the first branch to finish decides, the
-- loser's effects are rolled back, failures of the first finisher, named
-- results of the winner only (reference §1.6, §3.4).
SET ROLE df_user;
CREATE TABLE race_log (step text);

-- fast left, slow right: the winner's result is the RACE's result; the
-- slow branch's write (in the step that was running when it lost, and in
-- the step after it) never appears, and its nodes that were running are
-- cancelled when the instance ends
SELECT df.start(df.race('SELECT ''fast'' AS winner',
                        'WITH s AS (SELECT pg_sleep(1)) INSERT INTO race_log SELECT ''loser same step'' FROM s RETURNING step'
                        ~> 'INSERT INTO race_log VALUES (''loser next step'')')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT engine_idle();
SET ROLE df_user;
SELECT count(*) AS loser_writes FROM race_log;
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id'
ORDER BY node_type, status, result::text;

-- the same with the operator, the slow branch on the left
SELECT df.start('SELECT pg_sleep(1)' ~> 'INSERT INTO race_log VALUES (''slow left'')'
                | 'INSERT INTO race_log VALUES (''fast right'') RETURNING step') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT engine_idle();
SET ROLE df_user;
SELECT step FROM race_log ORDER BY step;

-- a RACE inside a sequence: the continuation runs once, after the winner
SELECT df.start('SELECT 1'
                ~> ('SELECT 2 AS v' | ('SELECT pg_sleep(1)' ~> 'SELECT 3 AS v'))
                ~> 'INSERT INTO race_log VALUES (''after race'') RETURNING step') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT engine_idle();
SET ROLE df_user;
SELECT count(*) AS after_race_once FROM race_log WHERE step = 'after race';

-- a failing first finisher fails the RACE, naming its side
SELECT df.start(df.race('SELECT 1/0', 'SELECT pg_sleep(1)' ~> 'INSERT INTO race_log VALUES (''never'')')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type IN ('RACE')
ORDER BY node_type;
SELECT df.start(df.race('SELECT pg_sleep(1)' ~> 'INSERT INTO race_log VALUES (''never'')',
                        'SELECT pg_sleep(0.1)' ~> 'SELECT ''x''::int')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type IN ('RACE')
ORDER BY node_type;
SELECT df.result(:'id') IS NULL AS no_result;
RESET ROLE;
SELECT engine_idle();
SET ROLE df_user;
SELECT count(*) AS never_ran FROM race_log WHERE step = 'never';

-- named results: only the winner's merge back.  "$loser" reaches the
-- last step through a variable (df.start refuses a name the workflow
-- binds written inside a literal): unbound, it stays as written
SELECT df.setvar('loser_ref', '$loser');
SELECT df.start(df.race(('SELECT ''w'' AS v' |=> 'winner') ~> ('SELECT ''both'' AS v' |=> 'shared'),
                        ('SELECT pg_sleep(1), ''l'' AS v' |=> 'loser') ~> ('SELECT ''l'' AS v' |=> 'shared'))
                ~> 'SELECT $winner AS winner, $shared AS shared, ''{loser_ref}'' AS loser') AS id \gset
SELECT df.unsetvar('loser_ref');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- stamps of branch nodes
SELECT df.start(df.race('SELECT 1', 'SELECT pg_sleep(1)')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status,
       CASE WHEN status_details->>'execution_id' = :'id' || '::1' THEN 'root scope'
            WHEN status_details->>'execution_id' ~ ('^' || :'id' || '::1::[0-9a-f]{8}::1$') THEN 'branch scope'
            ELSE status_details::text END AS scope
FROM df.nodes WHERE instance_id = :'id'
ORDER BY 1, 2;
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
SELECT count(*) AS results_left FROM df_internal.results;
