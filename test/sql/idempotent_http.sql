-- An HTTP step's own Idempotency-Key header: a template,
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

-- df.http(idempotency_key): the same template as an argument; the
-- service's log shows one key for the two instances of one order
SELECT df.start(df.http('{base}/echo', 'POST', '{}',
                        idempotency_key => '{order_id}:refund')) AS f \gset
SELECT df.start(df.http('{base}/echo', 'POST', '{}',
                        idempotency_key => '{order_id}:refund')) AS g \gset
SELECT df.await_instance(:'f'), df.await_instance(:'g');
SELECT (result->>'body')::jsonb->'headers'->>'idempotency-key' AS sent
FROM df.nodes WHERE instance_id IN (:'f', :'g') ORDER BY instance_id;
-- a key header the step sets itself wins over the argument
SELECT df.start(df.http('{base}/echo', 'POST', '{}', '{"Idempotency-Key": "own-{order_id}"}',
                        idempotency_key => '{order_id}:arg')) AS h \gset
SELECT df.await_instance(:'h');
SELECT (result->>'body')::jsonb->'headers'->>'idempotency-key' AS sent
FROM df.nodes WHERE instance_id = :'h';
-- a template that substitutes to nothing leaves the engine's key
SELECT df.start('SELECT '''' AS k' |=> 'r'
                ~> df.http('{base}/echo', 'GET', idempotency_key => '$r.k')) AS j \gset
SELECT df.await_instance(:'j');
SELECT ((result->>'body')::jsonb->'headers'->>'idempotency-key') ~ ('^' || :'j' || ':' || id || ':[0-9]+$') AS engine_key
FROM df.nodes WHERE instance_id = :'j' AND node_type = 'HTTP';
-- the config JSON: keys only when given, breaker a name
SELECT df.http('http://x.example/', idempotency_key => 'k-{a}', breaker => 'payments')::jsonb->>'query' AS both_keys;
SELECT df.http('http://x.example/')::jsonb->>'query' AS plain,
       df.http('http://x.example/') = df.http('http://x.example/', 'POST', NULL, NULL, 30, NULL, NULL, NULL) AS same_json;
-- validation
SELECT df.http('http://x.example/', idempotency_key => '');
SELECT df.http('http://x.example/', idempotency_key => E'a\r\nb');
SELECT df.http('http://x.example/', breaker => '');
SELECT df.http('http://x.example/', breaker => repeat('b', 64));
SELECT length(df.http('http://x.example/', breaker => repeat('b', 63))) > 0 AS name_63_ok;
SELECT df.start('{"id":"a1b2c3d4","node_type":"HTTP","query":"{\"url\":\"http://x.example/\",\"idempotency_key\":5}"}');
SELECT df.start('{"id":"a1b2c3d4","node_type":"HTTP","query":"{\"url\":\"http://x.example/\",\"breaker\":\"\"}"}');
SELECT df.unsetvar('order_id');
RESET ROLE;
