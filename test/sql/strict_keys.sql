-- References in keys and payloads (docs/concepts.md, "Substitution"):
-- in a lock key, a limit key, an HTTP idempotency_key and a PUBLISH
-- payload or key, a {var} that is not set or a $name that names no result
-- is never used as text (a typo would turn a per-order lock into one
-- global lock).  df.start refuses the workflow when it can tell (a
-- variable the role has not set, a name no step gives its result); a
-- name some step gives but that has no result when the key is made fails
-- the node with what is missing; an optional $name? that names no result
-- is the empty string.
SELECT df.grant_usage('df_user', include_http => true);
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO df_user;
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
SELECT df.setvar('order_id', '7');
CREATE FUNCTION sk_failure(iid text) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(DISTINCT result #>> '{}', ' | ')
	FROM df.nodes WHERE instance_id = iid AND status = 'failed' AND node_type <> 'THEN'
$$;

-- a lock key with a typo: refused at df.start
SELECT df.start(df.with_lock('SELECT 1', ARRAY['order:{order_idd}']));
-- the variable that is set
SELECT df.start(df.with_lock('SELECT 1', ARRAY['order:{order_id}'])) AS id \gset
SELECT df.await_instance(:'id', 60);
-- a limit key naming no result: refused; the optional form is empty
SELECT df.start(df.limit('SELECT 1', 'sk:$nores', 1));
SELECT df.start(df.limit('SELECT 1', 'sk:$nores?', 1)) AS id \gset
SELECT df.await_instance(:'id', 60);
-- a limit key's unknown variable
SELECT df.start(df.limit('SELECT 1', 'sk:{tenant}', 1));
-- a PUBLISH payload and key
SELECT df.start(df.publish('sk_topic', '{"order": "{order_idd}"}'));
SELECT df.start(df.publish('sk_topic', '{"order": {order_id}}', 'k-$nokey'));
-- JSON braces and a $ not followed by a name are text
SELECT df.start(df.publish('sk_topic', '{"order": {order_id}, "price": "$5"}')) AS id \gset
SELECT df.await_instance(:'id', 60), sk_failure(:'id');
-- an HTTP idempotency_key
SELECT df.start(df.http('{base}/echo', 'GET', idempotency_key => '{order_idd}:charge'));
-- a name a step gives, but whose step did not run before the key is made:
-- the node fails with what is missing
SELECT df.start(df.if('SELECT false', 'SELECT 1 AS id' |=> 'picked', 'SELECT 2')
                ~> df.with_lock('SELECT 1', ARRAY['order:$picked.id'])) AS id \gset
SELECT df.await_instance(:'id', 60), sk_failure(:'id');
SELECT df.start(df.if('SELECT false', 'SELECT 1 AS id' |=> 'picked', 'SELECT 2')
                ~> df.http('{base}/echo', 'GET', idempotency_key => 'charge:$picked.id')) AS id \gset
SELECT df.await_instance(:'id', 60), sk_failure(:'id');
