-- Monitoring and row-level security: another role sees none of df_user's
-- instances through any monitoring function, and df.metrics is for
-- administrators only (reference §2.3, §3.12).
CREATE ROLE df_mon_other LOGIN;
GRANT USAGE ON SCHEMA df TO df_mon_other;
GRANT SELECT ON df.instances, df.nodes TO df_mon_other;

SET ROLE df_user;
SELECT df.start('SELECT 1' ~> 'SELECT 2', 'mine') AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) AS own_listed FROM df.list_instances(NULL, 1000) WHERE instance_id = :'id';
SELECT count(*) AS own_info FROM df.instance_info(:'id');
RESET ROLE;

SET ROLE df_mon_other;
SELECT count(*) AS listed FROM df.list_instances();
SELECT count(*) AS listed FROM df.list_instances(NULL, 1000, NULL);
SELECT count(*) AS listed FROM df.list_instances(NULL, 1000, 'mine');
SELECT count(*) AS info FROM df.instance_info(:'id');
SELECT count(*) AS executions FROM df.instance_executions(:'id');
SELECT count(*) AS nodes FROM df.instance_nodes(:'id');
SELECT count(*) AS nodes FROM df.instance_nodes(:'id', 1);
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;
SELECT df.status(:'id') AS status;
SELECT * FROM df.metrics();
RESET ROLE;

-- a superuser sees everything, and may grant df.metrics
SELECT count(*) AS superuser_listed FROM df.list_instances(NULL, 1000, 'mine');
SELECT count(*) AS superuser_nodes FROM df.instance_nodes(:'id');
GRANT EXECUTE ON FUNCTION df.metrics() TO df_mon_other;
SET ROLE df_mon_other;
SELECT total_instances >= 1 AS engine_wide FROM df.metrics();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.metrics() FROM df_mon_other;

REVOKE ALL ON df.instances, df.nodes FROM df_mon_other;
REVOKE USAGE ON SCHEMA df FROM df_mon_other;
DROP ROLE df_mon_other;
