-- Truthiness of step results for IF conditions and loop while-conditions
-- (reference 1.7), through df_internal.truthy(text).

-- SQL results: no rows is false, else the first key of the first row
SELECT v, df_internal.truthy(v)
FROM unnest(ARRAY[
	'{"rows":[],"row_count":0}',
	'{"rows":[{"ok":true}],"row_count":1}',
	'{"rows":[{"ok":false}],"row_count":1}',
	'{"rows":[{"ok":false},{"ok":true}],"row_count":2}',
	'{"rows":[{"a":0,"b":1}],"row_count":1}',
	'{"rows":[{"b":1,"a":0}],"row_count":1}',
	'{"rows":[{"a":null}],"row_count":1}',
	'{"rows":[{"a":"no"}],"row_count":1}',
	'{"rows":[{"a":" Yes "}],"row_count":1}',
	'{"rows":[{"a":"0.0"}],"row_count":1}',
	'{"rows":[{"a":"1.10"}],"row_count":1}',
	'{"rows":[{"a":[]}],"row_count":1}',
	'{"rows":[{"a":{"rows":[]}}],"row_count":1}',
	'{"rows":[{}],"row_count":1}',
	'{"rows":[false],"row_count":1}',
	'{"rows":"not an array"}'
]) AS v;

-- the step results of real queries
SELECT q, df_internal.truthy(df_internal.step_result(q))
FROM unnest(ARRAY[
	'SELECT 1 WHERE false',
	'SELECT count(*) FROM pg_class WHERE false',
	'SELECT count(*) > 0 FROM pg_class',
	'SELECT NULL::int',
	'SELECT 0.0::numeric',
	'SELECT ''t''::text, false',
	'SELECT now()'
]) AS q;

-- whole values: null, booleans, numbers, arrays, objects
SELECT v, df_internal.truthy(v)
FROM unnest(ARRAY['null', 'true', 'false', '0', '-0', '0.0', '0e10', '-0.0E-5', '1', '-1',
	'0.001', '1e-300', '[]', '[0]', '[false]', '{}', '{"a":false}',
	'{"status":200,"ok":false}', '{"signal_name":"s","timed_out":true,"data":null}']) AS v;

-- strings (JSON strings and non-JSON text use the same rule): trimmed,
-- empty false, true/t/yes and false/f/no in any case, numeric text by value,
-- any other text true
SELECT v, df_internal.truthy(v) AS as_text, df_internal.truthy(to_json(v)::text) AS as_json_string
FROM unnest(ARRAY['', '   ', E'\t\n', 'true', 'TRUE', ' t ', 'T', 'yes', 'YeS', 'false', 'False',
	'f', 'F', 'no', 'NO', ' no ', '0', '00', '+0', '-0', '0.', '.0', '0.000', '0e5', ' 0 ',
	'1', '-2.5', '.5', '1e3', '0x0', '0e', 'e0', '.', '-', 'nan', 'off', 'n', 'y', 'on',
	'nope', 'falsehood', 'yes please', 'done']) AS v;

-- text that is not JSON at all
SELECT v, df_internal.truthy(v)
FROM unnest(ARRAY['approve', '{not json', '[1,', 'True ', ' FALSE', '0 0', '1 2']) AS v;
