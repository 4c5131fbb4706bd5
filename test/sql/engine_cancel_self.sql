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

-- the same when one batch starts the victims and then runs the steps that
-- cancel them (all started in one transaction): the victims' node rows
-- the batch has just written are written again inside a step
CREATE TABLE cancel_pairs (victim text, canceller text);
BEGIN;
INSERT INTO cancel_pairs (victim)
SELECT df.start(df.sleep(3600), 'victim') FROM generate_series(1, 20);
UPDATE cancel_pairs
SET canceller = df.start(format('SELECT df.cancel(%L, ''in the same batch'') IS NOT NULL AS ok', victim));
COMMIT;
SELECT df.status(canceller) AS canceller, df.status(victim) AS victim, count(*)
FROM cancel_pairs, LATERAL df.await_instance(canceller, 20)
GROUP BY 1, 2;
-- none left running for the tests after this one, whatever happened above
SELECT count(*) AS left_running FROM cancel_pairs
WHERE df.status(victim) = 'running' AND df.cancel(victim) IS NOT NULL;
RESET ROLE;
-- nothing stranded: no problem reported for the refused instance
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'self';
