-- HTTP steps: df.http and df.http_multipart, their JSON and every build-time check.

CREATE FUNCTION dsl_err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- the config is the query string: url, method, body, headers, timeout_seconds
SELECT df.http('https://api.example.com/v1');
SELECT df.http('http://api.example.com/v1?q=1', 'get', NULL, NULL, 5);
SELECT df.http('https://api.example.com/v1', 'Patch', '{"x": $n.id}',
			   '{"X-Count": 3, "Authorization": "Bearer {token}", "X-Opt": null, "X-Obj": {"b": [1, 2.50, true]}}', 120);
SELECT (df.http('https://h.example/', m)::json->>'query')::json->>'method' AS method
FROM unnest(ARRAY['get', 'POST', 'put', 'delete', 'pAtCh']) AS m;
-- named arguments
SELECT df.http(url => 'https://h.example/', body => 'b', timeout_seconds => 1);
-- templated URLs (containing '{') are checked when the step runs
SELECT df.http('{base_url}/items');
SELECT df.http('ftp://{host}/file');
-- composes like any step
SELECT df.http('https://h.example/') |=> 'resp' ~> 'SELECT $resp.status';

-- scheme
SELECT df.http('ftp://h.example/file');
SELECT dsl_err($$SELECT df.http('FILE:///etc/passwd')$$);
SELECT dsl_err($$SELECT df.http('javascript:alert(1)')$$);
SELECT dsl_err($$SELECT df.http('gopher://h.example:70/')$$);
SELECT dsl_err($$SELECT df.http('HTTPS://h.example/')$$);
-- not an absolute URL
SELECT dsl_err($$SELECT df.http('h.example/path')$$);
SELECT dsl_err($$SELECT df.http('$base/path')$$);
SELECT dsl_err($$SELECT df.http('')$$);
SELECT dsl_err($$SELECT df.http('https://')$$);
SELECT dsl_err($$SELECT df.http('http:/h.example')$$);
SELECT dsl_err($$SELECT df.http(E'https://h.example/\r\nX-Injected: 1')$$);

-- method
SELECT df.http('https://h.example/', 'FETCH');
SELECT dsl_err($$SELECT df.http('https://h.example/', 'get ')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', '')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'HEAD')$$);

-- headers: a JSON object; names and string values without CR or LF
SELECT df.http('https://h.example/', 'GET', NULL, '["X-A"]');
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '"X-A: 1"')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, 'null')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '{"X-A": "1\r\nX-B: 2"}')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '{"X-A\nX-B": "1"}')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '{"": "1"}')$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '{"X-A": ["a\nb"]}')$$);	-- non-string: allowed

-- timeout
SELECT df.http('https://h.example/', 'GET', NULL, NULL, 0);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, NULL, -1)$$);
-- NULL where a value is required
SELECT df.http(NULL);
SELECT dsl_err($$SELECT df.http('https://h.example/', NULL)$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, NULL, NULL)$$);
-- checks run in argument order: the first problem is reported
SELECT dsl_err($$SELECT df.http('ftp://h.example/', 'FETCH', NULL, '[1]', 0)$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'FETCH', NULL, '[1]', 0)$$);
SELECT dsl_err($$SELECT df.http('https://h.example/', 'GET', NULL, '[1]', 0)$$);

-- multipart: url, method, parts, headers, timeout_seconds
SELECT df.http_multipart('https://up.example/files', parts => '[{"name": "f", "data": "hello"}]');
SELECT df.http_multipart('https://up.example/files', 'put',
	'[{"name": "doc", "filename": "a.pdf", "content_type": "application/pdf", "data_b64": "JVBERi0x\nLjQ="},
	  {"name": "meta", "data": "{\"k\": 1}"}]', '{"X-Trace": "t"}', 60);
-- data_b64 may be a whole-value reference instead of base64
SELECT v, dsl_err(format($$SELECT df.http_multipart('https://up.example/', 'POST', %L)$$,
						 json_build_array(json_build_object('name', 'p', 'data_b64', v))))
FROM unnest(ARRAY['$file', '$file?', '$file.body', '$file.body?', '{blob}', '', 'YQ==', 'YWI=', 'YWJj',
				  ' Y W J j ', E'YWJj\r\nZGVm', '$file.body.x', 'x$file', '$file x', '{blob}x', '${blob}',
				  '{1blob}', '$', 'YQ=', 'YQ', 'Y===', 'YQ==YQ==', 'ab!d', 'YQ=a', E'\u00e9AAA']) AS v;

-- multipart methods: POST, PUT, PATCH only
SELECT df.http_multipart('https://up.example/', 'GET', '[{"name": "f", "data": "x"}]');
SELECT dsl_err($$SELECT df.http_multipart('https://up.example/', 'delete', '[{"name": "f", "data": "x"}]')$$);
SELECT dsl_err($$SELECT df.http_multipart('https://up.example/', 'patch', '[{"name": "f", "data": "x"}]')$$);
-- parts
SELECT df.http_multipart('https://up.example/');
SELECT df.http_multipart('https://up.example/', 'POST', '{"name": "f", "data": "x"}');
SELECT df.http_multipart('https://up.example/', 'POST', '[]');
SELECT p, dsl_err(format($$SELECT df.http_multipart('https://up.example/', 'POST', %L)$$, p))
FROM unnest(ARRAY[
	'null', '"x"', '[1]', '[null]', '[{"data": "x"}]', '[{"name": "", "data": "x"}]', '[{"name": 5, "data": "x"}]',
	'[{"name": "a\r\nb", "data": "x"}]', '[{"name": "f"}]', '[{"name": "f", "data": null, "data_b64": null}]',
	'[{"name": "f", "data": "x", "data_b64": "YQ=="}]', '[{"name": "f", "data": 5}]', '[{"name": "f", "data_b64": 5}]',
	'[{"name": "f", "data": "x", "filename": "a\nb"}]', '[{"name": "f", "data": "x", "filename": 1}]',
	'[{"name": "f", "data": "x", "content_type": "text/plain\r\nX: y"}]',
	'[{"name": "f", "data": "x"}, {"name": "g", "data_b64": "!!"}]',
	'[{"name": "f", "data": "x", "filename": null, "content_type": null, "extra": 1}]']) AS p;
-- multipart headers, timeout and NULLs
SELECT dsl_err($$SELECT df.http_multipart('https://up.example/', 'POST', '[{"name": "f", "data": "x"}]', '{"A": "\n"}')$$);
SELECT dsl_err($$SELECT df.http_multipart('https://up.example/', 'POST', '[{"name": "f", "data": "x"}]', NULL, 0)$$);
SELECT dsl_err($$SELECT df.http_multipart(NULL, 'POST', '[{"name": "f", "data": "x"}]')$$);
SELECT dsl_err($$SELECT df.http_multipart('ftp://up.example/', 'POST', '[{"name": "f", "data": "x"}]')$$);

-- the HTTP builders are not executable by PUBLIC (df.grant_usage(..., include_http) grants them)
SELECT has_function_privilege('public', 'df.http(text,text,text,jsonb,integer)', 'EXECUTE') AS public_http,
	   has_function_privilege('public', 'df.http_multipart(text,text,jsonb,jsonb,integer)', 'EXECUTE') AS public_multipart,
	   has_function_privilege('public', 'df.sql(text)', 'EXECUTE') AS public_sql;

DROP FUNCTION dsl_err(text);
