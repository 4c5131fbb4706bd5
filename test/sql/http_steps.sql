-- HTTP steps against the local test server (test/http_server.pl, started by
-- test/run; its base URL is the setting pgd_test.http_base): the envelope,
-- verbs, bodies, headers, binary bodies, 4xx and 5xx, redirects, timeouts,
-- connection errors, substitution, multipart, JOIN/RACE, the Idempotency-Key
-- and the EXECUTE re-check.  Durations, the server's port and libcurl's
-- wording of a refused connection are masked.
SELECT df.grant_usage('df_user', include_http => true);

-- the root node's result of a finished instance, masked
CREATE FUNCTION http_show(iid text) RETURNS text LANGUAGE sql AS $$
	SELECT i.status || ' ' || regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
		CASE WHEN jsonb_typeof(n.result) = 'object' THEN (n.result - 'duration_ms')::text
			 ELSE n.result #>> '{}' END,
		'localhost:[0-9]+', 'localhost:PORT', 'g'),
		'pg_durable/[0-9.]+', 'pg_durable/VERSION', 'g'),
		'after [0-9]+ ms', 'after N ms', 'g'),
		'[0-9a-f]{8}:[0-9a-f]{8}:[0-9]+', 'KEY', 'g'),
		'"content-length": "[0-9]+"', '"content-length": "N"', 'g'),
		-- (libcurl 7 says "Couldn't connect", 8 "Could not connect")
		'Could(n''t| not) connect', 'Could not connect', 'g'),
		-- the trace context every call carries
		'00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}', 'TRACEPARENT', 'g')
	FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
	WHERE i.id = iid
$$;
GRANT EXECUTE ON FUNCTION http_show(text) TO df_user;

SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));

-- GET: the envelope (status, body, encoding, headers, ok, duration_ms)
SELECT df.start(df.http('{base}/echo?a=1', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
SELECT jsonb_typeof(result->'duration_ms') AS duration_type, (result->'duration_ms')::int >= 0 AS duration_ok,
       result->'headers'->>'content-type' AS content_type, result->>'ok' AS ok
FROM df.nodes WHERE instance_id = :'id';
-- the Idempotency-Key: <instance>:<node>:<generation>
SELECT ((result->>'body')::jsonb->'headers'->>'idempotency-key') ~ ('^' || :'id' || ':' || id || ':[0-9]+$') AS key_ok
FROM df.nodes WHERE instance_id = :'id';

-- verbs, bodies and headers
SELECT df.start(df.http('{base}/echo', 'POST', 'hello body', '{"X-Test": "yes", "Content-Type": "text/plain", "X-Number": 5}')) AS id \gset
SELECT df.await_instance(:'id');
SELECT (result->>'body')::jsonb - 'headers' AS echo,
       (result->>'body')::jsonb->'headers'->>'x-test' AS x_test,
       (result->>'body')::jsonb->'headers'->>'content-type' AS content_type,
       (result->>'body')::jsonb->'headers' ? 'x-number' AS non_string_header_sent,
       regexp_replace((result->>'body')::jsonb->'headers'->>'user-agent', '[0-9.]+$', 'VERSION') AS user_agent
FROM df.nodes WHERE instance_id = :'id';
SELECT df.start(df.http('{base}/echo', 'put', 'body of put')) AS id_put,
       df.start(df.http('{base}/echo', 'patch', 'body of patch')) AS id_patch,
       df.start(df.http('{base}/echo', 'delete')) AS id_delete \gset
SELECT df.await_instance(x) FROM unnest(ARRAY[:'id_put', :'id_patch', :'id_delete']) x;
SELECT n.result->'status' AS status, (n.result->>'body')::jsonb->>'method' AS method,
       (n.result->>'body')::jsonb->>'body' AS body,
       (n.result->>'body')::jsonb->'headers'->>'content-type' AS content_type
FROM unnest(ARRAY[:'id_put', :'id_patch', :'id_delete']) WITH ORDINALITY u(iid, ord)
JOIN df.nodes n ON n.instance_id = u.iid ORDER BY ord;
SELECT df.start(df.http('{base}/echo', 'POST')) AS id \gset
SELECT df.await_instance(:'id');
SELECT (result->>'body')::jsonb->>'body' AS empty_body, (result->>'body')::jsonb->'headers'->>'content-length' AS length
FROM df.nodes WHERE instance_id = :'id';

-- 4xx completes the step (handled in the workflow), 5xx fails it
SELECT df.start(df.http('{base}/status/404', 'GET') |=> 'h' ~> 'SELECT $h.status AS status, $h.ok AS ok, $h.body AS body') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(df.http('{base}/status/500', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
SELECT df.start(df.http('{base}/status/503', 'POST', 'x') ~> 'SELECT 1') AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
-- redirects are returned, not followed
SELECT df.start(df.http('{base}/status/302', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');

-- binary bodies: base64 when declared binary or when not UTF-8; text otherwise
SELECT df.start(df.http('{base}/binary', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result->>'encoding' AS encoding,
       decode(result->>'body', 'base64') = (SELECT string_agg(set_byte('\x00'::bytea, 0, b), ''::bytea ORDER BY b) FROM generate_series(0, 255) b) AS round_trip
FROM df.nodes WHERE instance_id = :'id';
SELECT df.start(df.http('{base}/binary-undeclared', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result->>'encoding' AS encoding, length(decode(result->>'body', 'base64')) AS bytes FROM df.nodes WHERE instance_id = :'id';
SELECT df.start(df.http('{base}/utf8-undeclared', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result->>'encoding' AS encoding, result->>'body' AS body FROM df.nodes WHERE instance_id = :'id';
-- repeated response headers are joined
SELECT df.start(df.http('{base}/multi-header', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT result->'headers'->>'x-multi' AS x_multi FROM df.nodes WHERE instance_id = :'id';

-- timeouts and connection errors fail the step
SELECT df.start(df.http('{base}/delay/5000', 'GET', NULL, NULL, 1)) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
SELECT df.start(df.http('http://localhost:1/echo', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');

-- substitution: {vars} and $results in the url, the body and string header values
SELECT df.start('SELECT ''abc'' AS v, 7 AS n' |=> 'r'
       ~> df.http('{base}/echo?v=$r.v&n=$r.n', 'PUT', '{"v": "$r.v", "label": "{sys_label}"}', '{"X-V": "$r.v-{sys_label}"}'), 'lbl') AS id \gset
SELECT df.await_instance(:'id');
SELECT (result->>'body')::jsonb->>'query' AS query, (result->>'body')::jsonb->>'body' AS body,
       (result->>'body')::jsonb->'headers'->>'x-v' AS x_v
FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id AND i.root_node = n.id WHERE n.instance_id = :'id';
-- a strict reference that does not resolve fails the step before any call
SELECT df.start('SELECT 1 AS v WHERE false' |=> 'r' ~> df.http('{base}/echo?v=$r', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
-- a header value that becomes CR/LF after substitution, and a framing header
SELECT df.start('SELECT E''a\r\nInjected: 1'' AS v' |=> 'r' ~> df.http('{base}/echo', 'GET', NULL, '{"X-A": "$r.v"}')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
SELECT df.start(df.http('{base}/echo', 'GET', NULL, '{"Host": "other.example"}')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
-- a templated URL whose scheme is not http(s) once substituted
SELECT df.setvar('ftp', 'ftp://localhost/x');
SELECT df.start(df.http('{ftp}', 'GET')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');

-- multipart: data, data_b64, a whole-value reference, filename and content type
SELECT df.start('SELECT ''aGVsbG8gYjY0'' AS b, ''report'' AS f' |=> 'p'
       ~> df.http_multipart('{base}/echo', 'POST', '[{"name": "plain", "data": "hi there"},
            {"name": "raw", "data_b64": "AAEC/w=="},
            {"name": "ref", "data_b64": "$p.b", "filename": "$p.f.txt", "content_type": "text/plain"}]',
            '{"Content-Type": "ignored/type"}')) AS id \gset
SELECT df.await_instance(:'id');
SELECT (result->>'body')::jsonb->'headers'->>'content-type' LIKE 'multipart/form-data; boundary=%' AS multipart,
       position('name="plain"'::bytea IN decode((result->>'body')::jsonb->>'body_b64', 'base64')) > 0 AS has_plain,
       position('hi there'::bytea IN decode((result->>'body')::jsonb->>'body_b64', 'base64')) > 0 AS has_data,
       position('\x000102ff'::bytea IN decode((result->>'body')::jsonb->>'body_b64', 'base64')) > 0 AS has_binary,
       position('filename="report.txt"'::bytea IN decode((result->>'body')::jsonb->>'body_b64', 'base64')) > 0 AS has_filename,
       position('hello b64'::bytea IN decode((result->>'body')::jsonb->>'body_b64', 'base64')) > 0 AS has_decoded_ref
FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id AND i.root_node = n.id WHERE n.instance_id = :'id';
SELECT df.start('SELECT ''not base64!'' AS b' |=> 'p'
       ~> df.http_multipart('{base}/echo', 'POST', '[{"name": "f", "data_b64": "$p.b"}]')) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');

-- HTTP steps in JOIN and RACE; named results of HTTP steps downstream
SELECT df.start(df.join(df.http('{base}/delay/200', 'GET'), df.http('{base}/status/201', 'POST')) |=> 'j'
                ~> 'SELECT jsonb_array_length($j::jsonb) AS n') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT df.start(df.race(df.http('{base}/delay/20000', 'GET'), df.http('{base}/status/201', 'GET'))) AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');

-- EXECUTE on df.http is checked again when the step runs
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.http(text, text, text, jsonb, integer) FROM df_user;
SET ROLE df_user;
SELECT df.start('{"node_type":"HTTP","query":"{\"url\":\"{base}/echo\",\"method\":\"GET\",\"body\":null,\"headers\":null,\"timeout_seconds\":5}"}') AS id \gset
SELECT df.await_instance(:'id');
SELECT http_show(:'id');
RESET ROLE;
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.start('{"node_type":"HTTP","query":"{\"url\":\"{base}/echo\",\"method\":\"GET\",\"body\":null,\"headers\":null,\"timeout_seconds\":5}"}') AS id \gset
SELECT df.await_instance(:'id');
SELECT split_part(http_show(:'id'), ' ', 1) AS status;

-- every node execution has its own key; a re-run of the same one would reuse it
SELECT df.start(df.http('{base}/echo', 'GET') |=> 'a' ~> df.http('{base}/echo', 'GET') |=> 'b'
                ~> 'SELECT ($a.body::jsonb->''headers''->>''idempotency-key'') <> ($b.body::jsonb->''headers''->>''idempotency-key'') AS distinct_keys') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

SELECT df.clearvars();
RESET ROLE;
SELECT engine_idle();
