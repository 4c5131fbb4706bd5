-- The engine: IF (df.if, ?> !>) with the truthiness of SQL results, and
-- df.if_rows; the untaken arm never runs (reference §1.7, §3.3).
SET ROLE df_user;
CREATE TABLE if_log (arm text);

-- which arm each condition takes; the arms write, so the untaken one would show
CREATE PROCEDURE show_arm(cond text) LANGUAGE plpgsql AS $$
DECLARE
	iid text;
	st text;
	taken text;
	untaken text;
BEGIN
	DELETE FROM if_log;
	iid := df.start(df.if(cond, 'INSERT INTO if_log VALUES (''then'') RETURNING arm',
	                     'INSERT INTO if_log VALUES (''else'') RETURNING arm'));
	COMMIT;
	st := df.await_instance(iid);
	SELECT string_agg(arm, ',' ORDER BY arm) INTO taken FROM if_log;
	SELECT string_agg(status, ',') INTO untaken FROM df.nodes
	WHERE instance_id = iid AND node_type = 'SQL' AND status <> 'completed';
	RAISE NOTICE '% -> %: % (not taken: %)', rpad(cond, 40), st, coalesce(taken, '-'), coalesce(untaken, '-');
END
$$;

CALL show_arm('SELECT true');
CALL show_arm('SELECT false');
CALL show_arm('SELECT 1 WHERE false');
CALL show_arm('SELECT NULL::int');
CALL show_arm('SELECT 0, true');
CALL show_arm('SELECT 1, false');
CALL show_arm('SELECT 0');
CALL show_arm('SELECT 0.0');
CALL show_arm('SELECT -2.5');
CALL show_arm('SELECT 42::bigint');
CALL show_arm('SELECT ''t''');
CALL show_arm('SELECT ''yes''');
CALL show_arm('SELECT '' YES ''');
CALL show_arm('SELECT ''no''');
CALL show_arm('SELECT ''f''');
CALL show_arm('SELECT ''false''');
CALL show_arm('SELECT ''''');
CALL show_arm('SELECT ''0''');
CALL show_arm('SELECT ''0.00''::numeric');
CALL show_arm('SELECT ''1.5''::numeric');
CALL show_arm('SELECT ''anything''');
CALL show_arm('SELECT ''[]''::jsonb');
CALL show_arm('SELECT ''{"a":1}''::jsonb');
CALL show_arm('SELECT ''null''::jsonb');
CALL show_arm('INSERT INTO if_log VALUES (''cond'')');
CALL show_arm('SELECT arm FROM if_log WHERE arm = ''nothing''');

-- the operators, and a THEN as the condition
SELECT df.start(('SELECT 2 > 1' ?> 'SELECT ''then'' AS arm' !> 'SELECT ''else'' AS arm')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start('SELECT 0' ~> 'SELECT 1 > 2' ?> 'SELECT ''then'' AS arm' !> 'SELECT ''else'' AS arm') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;
-- the condition may use named results
SELECT df.start(('SELECT 3 AS n' |=> 'n') ~> df.if('SELECT $n > 2', 'SELECT ''big'' AS size', 'SELECT ''small'' AS size')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- nested IFs
SELECT df.start(df.if('SELECT false', 'SELECT 1 AS arm',
                      df.if('SELECT true', 'SELECT 2 AS arm', 'SELECT 3 AS arm'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;

-- a failing condition fails the IF; neither arm runs
DELETE FROM if_log;
SELECT df.start(df.if('SELECT 1/0', 'INSERT INTO if_log VALUES (''then'')', 'INSERT INTO if_log VALUES (''else'')')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;
SELECT count(*) AS arms_run FROM if_log;
-- a failing arm fails the IF
SELECT df.start(df.if('SELECT true', 'SELECT 1/0', 'SELECT 1')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;

-- df.if_rows: decided by the named result's row_count, no SQL for the condition
SELECT df.start(('SELECT arm FROM (VALUES (''a''), (''b'')) v(arm)' |=> 'r')
                ~> df.if_rows('r', 'SELECT ''has rows'' AS arm', 'SELECT ''empty'' AS arm')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;
SELECT df.start(('SELECT 1 WHERE false' |=> 'r')
                ~> df.if_rows('r', 'SELECT ''has rows'' AS arm', 'SELECT ''empty'' AS arm')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- DML without RETURNING has no rows
SELECT df.start(('INSERT INTO if_log VALUES (''x'')' |=> 'r')
                ~> df.if_rows('r', 'SELECT ''has rows'' AS arm', 'SELECT ''empty'' AS arm')) AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- its errors
SELECT df.start(df.if_rows('missing', 'SELECT 1', 'SELECT 2')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2;
SELECT df.start(('SELECT 1' ~> 'SELECT 2') ~> df.if_rows('missing', 'SELECT 1', 'SELECT 2')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2, result::text;
SELECT df.start((df.join('SELECT 1', 'SELECT 2') |=> 'j') ~> df.if_rows('j', 'SELECT 1', 'SELECT 2')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'IF';
-- a failing df.if_rows as a JOIN branch and as a RACE branch
SELECT df.start(df.join(df.if_rows('missing', 'SELECT 1', 'SELECT 2'), 'SELECT 3')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'JOIN';
SELECT df.start(df.race(df.if_rows('missing', 'SELECT 1', 'SELECT 2'), 'SELECT 3')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'RACE';
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
