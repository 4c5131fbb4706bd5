-- df.start(..., transaction_mode => 'new'): the start commits in a background
-- session of its own, as the caller's current_user, so it survives the
-- caller's ROLLBACK and captures only committed variables.  Refused inside a
-- workflow; LOGIN checked; errors of df.start come back unchanged; the
-- admission slot is never left behind.  The 4-concurrent-
-- launches scenario of the reference is in t/013_new_transaction.pl.
CREATE ROLE tn_alice LOGIN;
CREATE ROLE tn_bob LOGIN;
CREATE ROLE tn_nologin NOLOGIN;
SELECT df.grant_usage('tn_alice');
SELECT df.grant_usage('tn_bob');
SELECT df.grant_usage('tn_nologin');
CREATE TABLE tn_effects (who text, what text);
GRANT INSERT, SELECT ON tn_effects TO tn_alice, tn_bob;

-- admission slots held by anyone (in shared memory, server-wide)
CREATE FUNCTION tn_slots_held() RETURNS integer LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog AS 'SELECT df_internal.admission_slots_held()';
CREATE VIEW tn_slots AS SELECT tn_slots_held() AS held;
GRANT SELECT ON tn_slots TO tn_alice, tn_bob;

-- 1. survives the caller's ROLLBACK, runs as the caller's current_user
SET ROLE tn_alice;
BEGIN;
SELECT df.start('INSERT INTO tn_effects SELECT current_user, ''survived'' RETURNING who',
                'tn-rollback', transaction_mode => 'new') AS id \gset
INSERT INTO tn_effects VALUES ('tn_alice', 'rolled back');
ROLLBACK;
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT who, what FROM tn_effects ORDER BY what;
SELECT label, submitted_by, database IS NULL AS here FROM df.instances WHERE id = :'id';
SELECT held FROM tn_slots;

-- 2. bob cannot see alice's instance
SET ROLE tn_bob;
SELECT count(*) AS bob_sees FROM df.instances WHERE id = :'id';
SELECT df.status(:'id') IS NULL AS bob_gets_no_status;
-- and his own 'new' start is his (mode is case-insensitive)
SELECT df.start('SELECT current_user AS u', transaction_mode => 'NEW') AS bob_id \gset
SELECT df.await_instance(:'bob_id');
SELECT df.result(:'bob_id');
SELECT submitted_by FROM df.instances WHERE id = :'bob_id';
SET ROLE tn_alice;
SELECT count(*) AS alice_sees_bobs FROM df.instances WHERE id = :'bob_id';

-- 3. only committed variables are captured
SELECT df.setvar('colour', 'blue');
BEGIN;
SELECT df.setvar('colour', 'red');
SELECT df.start('SELECT ''{colour}'' AS colour', transaction_mode => 'new') AS id \gset
ROLLBACK;
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- caller mode sees the caller's own uncommitted value, for comparison
BEGIN;
SELECT df.setvar('colour', 'red');
SELECT df.start('SELECT ''{colour}'' AS colour') AS id \gset
COMMIT;
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- 4. df.start's errors come back unchanged, and nothing is left behind
SELECT count(*) AS instances_before FROM df.instances \gset
SELECT df.start('{"node_type":"NOPE"}', transaction_mode => 'new');
SELECT df.start('SELECT 1', NULL, 'tn_no_such_database', 'new');
SELECT df.start('{"node_type":"SQL","query":"SELECT 1","result_name":"1bad"}', transaction_mode => 'new');
SELECT df.start('SELECT 1', transaction_mode => 'newer');
SELECT count(*) - :instances_before AS no_rows_left_behind FROM df.instances;
SELECT held FROM tn_slots;

-- 5. refused inside a workflow: with the setting, and from a real step
SET df.in_workflow = 'true';
SELECT df.start('SELECT 1', transaction_mode => 'new');
RESET df.in_workflow;
SELECT df.start('SELECT df.start(''SELECT 1'', transaction_mode => ''new'')') AS id \gset
SELECT df.await_instance(:'id');
SELECT status, result #>> '{}' AS step_error FROM df.nodes WHERE instance_id = :'id';
SELECT count(*) - :instances_before AS only_the_outer_instance FROM df.instances;
RESET ROLE;

-- 6. LOGIN is checked before a slot is taken
SET ROLE tn_nologin;
SELECT df.start('SELECT 1', transaction_mode => 'new');
RESET ROLE;
SELECT held FROM tn_slots;

-- 7. superusers are refused by default, as in caller mode
SELECT df.start('SELECT 1', transaction_mode => 'new');
SELECT held FROM tn_slots;

-- 8. a cancelled caller leaves no slot, no session and no instance: the
--    background session waits for a lock held here and the caller's
--    statement_timeout cancels the wait (the instances are counted once the
--    session is gone: one that outlived the caller's ROLLBACK could still
--    get the lock and commit)
SELECT count(*) AS instances_before FROM df.instances \gset
BEGIN;
LOCK df.instances IN SHARE MODE;
SET LOCAL statement_timeout = '500ms';
SET LOCAL ROLE tn_alice;
SELECT df.start('SELECT 1', transaction_mode => 'new');
ROLLBACK;
SELECT held FROM tn_slots;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable session') LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'a background session outlived its cancelled caller';
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT count(*) - :instances_before AS no_rows_left_behind FROM df.instances;

SELECT engine_idle();
SET ROLE tn_alice;
SELECT df.clearvars();
RESET ROLE;
DROP TABLE tn_effects;
DROP VIEW tn_slots;
DROP FUNCTION tn_slots_held();
