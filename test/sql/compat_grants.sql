-- A script written for pg_durable 0.2.6 that delegates its functions one by
-- one, GRANT EXECUTE ON FUNCTION df.<name>(<0.2.6 argument types>), runs
-- unchanged and means what it meant (docs/compatibility.md, GRANT and REVOKE
-- scripts): every 0.2.6 identity exists, and the overloads that carry the
-- newer options follow the privileges of the 0.2.6 function.
CREATE ROLE compat_app LOGIN;
GRANT USAGE ON SCHEMA df TO compat_app;
GRANT SELECT ON df.instances, df.nodes TO compat_app;
REVOKE EXECUTE ON FUNCTION df.start(text, text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.cancel(text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.loop(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION df.sql(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.seq(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.as(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.sleep(bigint) TO compat_app;
GRANT EXECUTE ON FUNCTION df.wait_for_schedule(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.loop(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.break(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.if(text,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.if_rows(text,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.join(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.join3(text,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.race(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.wait_for_signal(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.http(text,text,text,jsonb,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.http_multipart(text,text,jsonb,jsonb,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.as_op(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.if_then_op(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.if_else_op(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.loop_prefix_op(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.start(text,text,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.cancel(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.signal(text,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.status(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.result(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.await_instance(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.wait_for_completion(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.run(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.setvar(text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.getvar(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.unsetvar(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.clearvars() TO compat_app;
GRANT EXECUTE ON FUNCTION df.list_instances(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.list_instances(text,integer,text,text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.instance_info(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.instance_executions(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.metrics() TO compat_app;
GRANT EXECUTE ON FUNCTION df.instance_nodes(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.instance_nodes(text,integer) TO compat_app;
GRANT EXECUTE ON FUNCTION df.explain(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.version() TO compat_app;
GRANT EXECUTE ON FUNCTION df.target_database() TO compat_app;
GRANT EXECUTE ON FUNCTION df.grant_usage(text,boolean,boolean) TO compat_app;
GRANT EXECUTE ON FUNCTION df.revoke_usage(text) TO compat_app;
GRANT EXECUTE ON FUNCTION df.duroxide_schema() TO compat_app;
-- the overloads, each with one of its options
SET ROLE compat_app;
SELECT df.start('SELECT 1', 'compat', max_attempts => 2) IS NOT NULL AS started_with_option;
SELECT df.start('SELECT 1', 'compat') IS NOT NULL AS started;
SELECT df.loop('SELECT 1', continue_on_failure => true) LIKE '%continue_on_failure%' AS loop_option;
SELECT df.http('http://127.0.0.1:1/', breaker => 'b') LIKE '%breaker%' AS http_option;
SELECT df.start(df.sleep(600), 'compat_cancel') AS id \gset
SELECT df.cancel(:'id', 'compat', compensate => false) LIKE 'Instance % cancelled: compat' AS cancelled;
-- a call with 0.2.6's arguments only runs the 0.2.6 function: with the
-- overload's own EXECUTE revoked, it still works, and an option does not
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.start(varchar, text, text, text, integer, interval, text, text, text, text) FROM PUBLIC;
SET ROLE compat_app;
SELECT df.start('SELECT 1', 'compat', NULL, 'caller') IS NOT NULL AS started_by_the_026_function;
SELECT df.start('SELECT 1', 'compat', idempotency_key => 'k');
RESET ROLE;
GRANT EXECUTE ON FUNCTION df.start(varchar, text, text, text, integer, interval, text, text, text, text) TO PUBLIC;
-- a REVOKE of the 0.2.6 function stops its overload too
REVOKE EXECUTE ON FUNCTION df.start(text, text, text, text) FROM compat_app;
REVOKE EXECUTE ON FUNCTION df.http(text, text, text, jsonb, integer) FROM compat_app;
REVOKE EXECUTE ON FUNCTION df.cancel(text, text) FROM compat_app;
REVOKE EXECUTE ON FUNCTION df.loop(text, text) FROM compat_app;
SET ROLE compat_app;
SELECT df.start('SELECT 1');
SELECT df.start('SELECT 1', max_attempts => 2);
SELECT df.http('http://127.0.0.1:1/');
SELECT df.http('http://127.0.0.1:1/', breaker => 'b');
SELECT df.cancel(:'id', 'again', compensate => true);
SELECT df.loop('SELECT 1', continue_on_failure => true);
-- 0.2.8's df.loop(text, text, boolean) is there for its grants, and runs
SELECT df.loop('SELECT 1', NULL, true) LIKE '%continue_on_failure%' AS loop_028;
RESET ROLE;
GRANT EXECUTE ON FUNCTION df.start(text, text, text, text), df.cancel(text, text),
	df.loop(text, text) TO PUBLIC;
SELECT wait_until($$SELECT count(*) = 0 FROM df.instances WHERE label LIKE 'compat%' AND status IN ('pending', 'running')$$);
DELETE FROM df.instances WHERE label LIKE 'compat%';
DROP OWNED BY compat_app;
DROP ROLE compat_app;
