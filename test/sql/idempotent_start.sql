-- df.start(…, idempotency_key): one instance per submitting role
-- and key; a second start returns it, during and after its run; the same key
-- with another workflow is an error; {sys_idempotency_key} in steps.
SET ROLE df_user;
CREATE TABLE idem_log (k text, at timestamptz DEFAULT clock_timestamp());

SELECT df.start('INSERT INTO idem_log (k) VALUES (''{sys_idempotency_key}'') RETURNING k',
                idempotency_key => 'order-1') AS id \gset
-- the same key again, in the same transaction as the first, returns it
SELECT df.start('INSERT INTO idem_log (k) VALUES (''{sys_idempotency_key}'') RETURNING k',
                idempotency_key => 'order-1') = :'id' AS same_instance;
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
-- after completion too, with another label (the label is not part of the key)
SELECT df.start('INSERT INTO idem_log (k) VALUES (''{sys_idempotency_key}'') RETURNING k',
                'another label', idempotency_key => 'order-1') = :'id' AS same_after_completion;
SELECT count(*) AS ran_once FROM idem_log WHERE k = 'order-1';
SELECT idempotency_key, label FROM df.instances WHERE id = :'id';
SELECT count(*) AS one_instance FROM df.instances WHERE idempotency_key = 'order-1';

-- the same key with another workflow is an error (the instance id masked)
CREATE FUNCTION idem_error(fut text, attempts int, key text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM df.start(fut, max_attempts => attempts, idempotency_key => key);
	RETURN 'no error';
EXCEPTION WHEN unique_violation THEN
	RETURN regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;
SELECT idem_error('SELECT 2', 1, 'order-1');
-- so is the same workflow with another instance-wide policy
SELECT idem_error('INSERT INTO idem_log (k) VALUES (''{sys_idempotency_key}'') RETURNING k',
                  3, 'order-1');
SELECT idem_error('INSERT INTO idem_log (k) VALUES (''{sys_idempotency_key}'') RETURNING k',
                  1, 'order-1') AS same_workflow;
DROP FUNCTION idem_error(text, int, text);
-- another key starts another instance
SELECT df.start('SELECT ''{sys_idempotency_key}'' AS k', idempotency_key => 'order-2') AS id2 \gset
SELECT :'id2' <> :'id' AS other_instance;
SELECT df.await_instance(:'id2'), df.result(:'id2');

-- without a key nothing is deduplicated, and the placeholder is empty
SELECT df.start('SELECT ''[{sys_idempotency_key}]'' AS k') AS a \gset
SELECT df.start('SELECT ''[{sys_idempotency_key}]'' AS k') AS b \gset
SELECT :'a' <> :'b' AS two_instances;
SELECT df.await_instance(:'a'), df.result(:'a');

-- a rolled-back start frees its key
BEGIN;
SELECT df.start('SELECT 3', idempotency_key => 'order-3') AS rolled \gset
ROLLBACK;
SELECT df.start('SELECT 3', idempotency_key => 'order-3') <> :'rolled' AS fresh_instance;

-- bad keys
SELECT df.start('SELECT 1', idempotency_key => '');
SELECT df.start('SELECT 1', idempotency_key => repeat('k', 1001));
RESET ROLE;

-- keys are per submitting role: another role's same key is another instance
CREATE ROLE idem_other LOGIN;
GRANT USAGE ON SCHEMA df TO idem_other;
GRANT SELECT ON df.instances TO idem_other;
SET ROLE idem_other;
SELECT df.start('SELECT 1', idempotency_key => 'order-1') <> :'id' AS own_instance;
-- and RLS hides df_user's instance of that key
SELECT count(*) AS visible FROM df.instances WHERE idempotency_key = 'order-1';
RESET ROLE;
SELECT count(*) AS two_roles FROM df.instances WHERE idempotency_key = 'order-1';
SELECT df.await_instance(id) FROM df.instances WHERE submitted_by = 'idem_other'::regrole;
DELETE FROM df.instances WHERE submitted_by = 'idem_other'::regrole;
REVOKE ALL ON df.instances FROM idem_other;
REVOKE USAGE ON SCHEMA df FROM idem_other;
DROP ROLE idem_other;
DROP TABLE idem_log;
