-- Security: the submitter is checked again when the engine loads an
-- instance and before every step.  A forged submitted_by (written by a
-- superuser or a BYPASSRLS role with UPDATE on it) fails the instance before
-- anything runs; a submitter dropped, deprived of LOGIN or made a superuser
-- after df.start fails its later steps with a message saying so.
CREATE ROLE sec_carol LOGIN;
CREATE ROLE sec_dave LOGIN;
CREATE ROLE sec_gone LOGIN;
CREATE ROLE sec_super SUPERUSER LOGIN;
CREATE ROLE sec_bypass BYPASSRLS;
SELECT df.grant_usage('sec_carol');
SELECT df.grant_usage('sec_dave');
SELECT df.grant_usage('sec_gone');
GRANT USAGE ON SCHEMA df TO sec_bypass;
GRANT SELECT, UPDATE ON df.instances, df.nodes TO sec_bypass;

-- the nodes of an instance: how many ran (not pending) and how many failed
CREATE FUNCTION sec_nodes(iid text) RETURNS TABLE (nodes bigint, not_pending bigint, failed bigint)
LANGUAGE sql AS $$
	SELECT count(*), count(*) FILTER (WHERE status <> 'pending'), count(*) FILTER (WHERE status = 'failed')
	FROM df.nodes WHERE instance_id = iid
$$;
-- a table the workflows write to: nothing may be written by a failed instance
CREATE TABLE sec_effects (who text);
GRANT INSERT, SELECT ON sec_effects TO sec_carol, sec_dave, sec_gone;

-- 1. a BYPASSRLS role makes carol's new instance look like a superuser's
BEGIN;
SET ROLE sec_carol;
SELECT df.start('INSERT INTO sec_effects VALUES (current_user)', 'sec-forged-super') AS id \gset
SET ROLE sec_bypass;
UPDATE df.instances SET submitted_by = 'sec_super' WHERE id = :'id';
UPDATE df.nodes SET submitted_by = 'sec_super' WHERE instance_id = :'id';
COMMIT;
SELECT df.await_instance(:'id');
SELECT * FROM sec_nodes(:'id');
SELECT df.result(:'id');

-- 2. the same by a superuser, to another ordinary role: still not carol's
BEGIN;
SET ROLE sec_carol;
SELECT df.start('INSERT INTO sec_effects VALUES (current_user)', 'sec-forged-dave') AS id \gset
RESET ROLE;
UPDATE df.instances SET submitted_by = 'sec_dave' WHERE id = :'id';
UPDATE df.nodes SET submitted_by = 'sec_dave' WHERE instance_id = :'id';
COMMIT;
SELECT df.await_instance(:'id');
SELECT * FROM sec_nodes(:'id');
SELECT count(*) AS effects FROM sec_effects;

-- 3. carol becomes a superuser before the engine loads her instance
BEGIN;
SET ROLE sec_carol;
SELECT df.start('INSERT INTO sec_effects VALUES (current_user)', 'sec-became-super') AS id \gset
RESET ROLE;
ALTER ROLE sec_carol SUPERUSER;
COMMIT;
SELECT df.await_instance(:'id');
SELECT * FROM sec_nodes(:'id');
ALTER ROLE sec_carol NOSUPERUSER;

-- an untouched instance of carol runs, as carol
SET ROLE sec_carol;
SELECT df.start('INSERT INTO sec_effects VALUES (current_user) RETURNING who', 'sec-fine') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
RESET ROLE;

-- 4. after df.start: a superuser now, no LOGIN any more, or dropped.  Each
--    instance waits for a signal, then tries to write.
CREATE FUNCTION sec_wait_then_write(r text, label text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	iid text;
BEGIN
	EXECUTE format('SET LOCAL ROLE %I', r);
	iid := df.start(df.wait_for_signal('go') ~> 'INSERT INTO sec_effects VALUES (current_user)', label);
	RETURN iid;
END
$$;
SELECT sec_wait_then_write('sec_carol', 'sec-later-super') AS id_super \gset
SELECT sec_wait_then_write('sec_dave', 'sec-later-nologin') AS id_nologin \gset
SELECT sec_wait_then_write('sec_gone', 'sec-later-dropped') AS id_gone \gset
SELECT engine_idle();
SELECT count(*) AS running FROM df.instances
WHERE id IN (:'id_super', :'id_nologin', :'id_gone') AND status = 'running';
ALTER ROLE sec_carol SUPERUSER;
ALTER ROLE sec_dave NOLOGIN;
REVOKE ALL ON sec_effects FROM sec_gone;
SET ROLE sec_super;
SELECT df.revoke_usage('sec_gone');
RESET ROLE;
DROP ROLE sec_gone;
SELECT df.signal(:'id_super', 'go'), df.signal(:'id_nologin', 'go'), df.signal(:'id_gone', 'go');
SELECT df.await_instance(:'id_super') AS made_super,
       df.await_instance(:'id_nologin') AS lost_login,
       df.await_instance(:'id_gone') AS dropped;
SELECT i.label, regexp_replace(n.result #>> '{}', 'OID [0-9]+', 'OID N') AS step_failure
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.node_type = 'SQL'
WHERE i.id IN (:'id_super', :'id_nologin', :'id_gone')
ORDER BY i.label;
ALTER ROLE sec_carol NOSUPERUSER;
ALTER ROLE sec_dave LOGIN;

-- nothing was written by any of the refused instances
SELECT who, count(*) FROM sec_effects GROUP BY who ORDER BY who;
