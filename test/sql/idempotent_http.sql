-- An HTTP step's own Idempotency-Key header (issue 17): a template,
-- substituted like any header, sent instead of the engine's
-- <instance>:<node>:<generation>, once; an empty one leaves the engine's.
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
SELECT df.setvar('order_id', 'o-42');

-- two instances acting on one order send the same key
SELECT df.start(df.http('{base}/echo', 'POST', '{}',
                        '{"Idempotency-Key": "{order_id}:charge"}')) AS a \gset
SELECT df.start(df.http('{base}/echo', 'POST', '{}',
                        '{"idempotency-key": "{order_id}:charge"}')) AS b \gset
SELECT df.await_instance(:'a'), df.await_instance(:'b');
SELECT i, (result->>'body')::jsonb->'headers'->>'idempotency-key' AS sent
FROM (VALUES (1, :'a'), (2, :'b')) v(i, iid)
JOIN df.instances f ON f.id = v.iid
JOIN df.nodes n ON n.instance_id = f.id AND n.id = f.root_node
ORDER BY i;

-- with df.start's key and a named result
SELECT df.start(df.seq('SELECT ''A7'' AS sku' |=> 'item',
                       df.http('{base}/echo', 'POST', '{}',
                               '{"Idempotency-Key": "{sys_idempotency_key}/$item.sku"}')),
                idempotency_key => 'req-9') AS c \gset
SELECT df.await_instance(:'c');
SELECT (result->>'body')::jsonb->'headers'->>'idempotency-key' AS sent
FROM df.nodes WHERE instance_id = :'c' AND node_type = 'HTTP';

-- an empty key leaves the engine's
SELECT df.start(df.http('{base}/echo', 'GET', NULL, '{"Idempotency-Key": ""}')) AS d \gset
SELECT df.await_instance(:'d');
SELECT ((result->>'body')::jsonb->'headers'->>'idempotency-key') ~ ('^' || :'d' || ':' || id || ':[0-9]+$') AS engine_key
FROM df.nodes WHERE instance_id = :'d';

-- a long key is sent whole
SELECT df.start(df.http('{base}/echo', 'GET', NULL,
                        jsonb_build_object('Idempotency-Key', repeat('k', 600)))) AS e \gset
SELECT df.await_instance(:'e');
SELECT length((result->>'body')::jsonb->'headers'->>'idempotency-key') AS sent_length
FROM df.nodes WHERE instance_id = :'e';
SELECT df.unsetvar('order_id');
RESET ROLE;
