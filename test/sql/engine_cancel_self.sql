-- The engine: df.cancel called by a step.  A step may cancel
-- another instance (the cancel commits with the step), but not its own:
-- that is refused, the step fails and so does its instance, instead of
-- the instance staying 'running' with no task.
SET ROLE df_user;

-- its own instance: refused, the instance fails and is not stranded
SELECT df.start('SELECT df.cancel(''{sys_instance_id}'')', 'cancel-self') AS id \gset
SELECT df.await_instance(:'id', 20);
SELECT status, replace(result::text, :'id', '<id>') AS result
FROM df.nodes WHERE instance_id = :'id';
\set self :id

-- the same in a sequence: the step after it never runs
CREATE TABLE cancel_self_log (v text);
SELECT df.start('SELECT df.cancel(''{sys_instance_id}'', ''from inside'')'
                ~> 'INSERT INTO cancel_self_log VALUES (''after'')') AS id \gset
SELECT df.await_instance(:'id', 20);
SELECT count(*) AS never_ran FROM cancel_self_log;

-- another instance: cancelled by the step, which completes
SELECT df.start(df.sleep(3600), 'victim') AS victim \gset
SELECT df.start('SELECT df.cancel(''' || :'victim' || ''', ''by another workflow'') IS NOT NULL AS ok') AS id \gset
SELECT df.await_instance(:'id', 20);
SELECT df.result(:'id');
SELECT df.status(:'victim');
RESET ROLE;
-- nothing stranded: no problem reported for the refused instance
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'self';
