-- df.instances.status is what the instance's owner sees, and the reference's
-- grants let the owner UPDATE it.  The engine goes by its own
-- state (df_internal.runs, the instance_* events): a forged status does not
-- stop a live instance's signals nor its end, the engine writes the real
-- status when the instance ends, reconciliation does not take a forged
-- 'completed' for a finished instance (it would remove a live one's engine
-- state), and df.check() reports the forgery.
-- wait (with a deadline) until the engine holds no state of the instance
CREATE FUNCTION await_ended(inst text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE EXISTS (SELECT 1 FROM df_internal.runs WHERE instance_id = inst) LOOP
		IF clock_timestamp() > deadline THEN RETURN false; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
-- wait (with a deadline) until the instance has a registered signal wait
CREATE FUNCTION await_wait(inst text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.waits WHERE instance_id = inst) LOOP
		IF clock_timestamp() > deadline THEN RETURN false; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;

-- a live instance forged 'completed' by its owner
SET ROLE df_user;
SELECT df.start(df.wait_for_signal('go') ~> 'SELECT 1/0', 'forged') AS id \gset
RESET ROLE;
SELECT await_wait(:'id');
SET ROLE df_user;
UPDATE df.instances SET status = 'completed' WHERE id = :'id';
SELECT df.status(:'id') AS shown;
RESET ROLE;
-- df.check reports it; nothing reconciliation would repair by ending it
SELECT problem, detail FROM df.check() WHERE instance_id = :'id';
-- the signal still reaches the instance, which then fails as its workflow says
SET ROLE df_user;
SELECT df.signal(:'id', 'go', '1');
RESET ROLE;
SELECT await_ended(:'id');
SELECT status, completed_at IS NULL AS no_completed_at FROM df.instances WHERE id = :'id';
SELECT kind FROM df_internal.events WHERE instance_id = :'id' AND kind LIKE 'instance_%' ORDER BY id;
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';

-- a finished instance forged 'pending': reported, and it stays finished
SET ROLE df_user;
SELECT df.start('SELECT 1') AS done \gset
SELECT df.await_instance(:'done');
UPDATE df.instances SET status = 'pending' WHERE id = :'done';
SELECT set_config('test.id', :'done', false) IS NOT NULL AS noted;
DO $$
BEGIN
	PERFORM df.signal(current_setting('test.id'), 'go', '1');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;
RESET ROLE;
SELECT problem, detail FROM df.check() WHERE instance_id = :'done';
-- and forged 'failed': reported too
UPDATE df.instances SET status = 'failed' WHERE id = :'done';
SELECT problem, detail FROM df.check() WHERE instance_id = :'done';
UPDATE df.instances SET status = 'completed' WHERE id = :'done';
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'done';

DROP FUNCTION await_ended(text), await_wait(text);
