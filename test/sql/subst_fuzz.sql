-- Data never becomes SQL, fuzzed: 2,000 events whose keys and payloads are
-- random runs of quotes, backslashes, dollar quotes, comment marks,
-- semicolons and SQL go through a subscription's SQL steps, the first
-- writing $event.key and $event.payload into a table, the second the same
-- values again through the named result of the first, with the payload's
-- negative number after a minus sign (0-$e.n, where a value written
-- without care would start a "--" comment).  Afterwards the table holds
-- exactly the values sent, twice, and nothing else ran: the canary table
-- is as it was and no other event was published.
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO df_user;
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO df_user;
SET ROLE df_user;
CREATE TABLE fuzz_sink (event_id bigint, via text, k text, p jsonb, n float8);
CREATE TABLE fuzz_canary (what text);
INSERT INTO fuzz_canary VALUES ('intact');
-- random text from pieces that open or end quotes, comments and statements
CREATE FUNCTION fuzz_text(n int) RETURNS text LANGUAGE sql VOLATILE AS $f$
	SELECT string_agg((ARRAY['''', '''''', '"', '\', '\''', '\\', '$', '$$', '$q$', '$event.key',
	                          '$e.k', '--', '/*', '*/', ';', E'\n', E'\r', 'E''', 'U&''', 'U&"', ')',
	                          '(', ',', '{sys_label}', 'x', 'é', ' ', '; DELETE FROM fuzz_canary; ',
	                          '; SELECT df.publish_event($$leak$$, $${}$$); ', '::', '$1', chr(1),
	                          '-1', 'NULL'])[1 + floor(random() * 34)::int], '')
	FROM generate_series(1, n)
$f$;
SELECT df.subscribe('fuzz', 'fuzz',
	('INSERT INTO fuzz_sink VALUES ($event.event_id::bigint, ''event'', $event.key?, $event.payload::jsonb, 0) '
	 'RETURNING event_id, k, p, (p->>''n'')::float8 AS n' |=> 'e')
	~> 'INSERT INTO fuzz_sink VALUES ($e.event_id, ''chain'', $e.k?, $e.p::jsonb, 0-$e.n)');
RESET ROLE;
SELECT engine_idle();  -- nothing else publishes meanwhile
SELECT setseed(0.42);
SELECT coalesce(max(id), 0) AS before_id FROM df_internal.bus_events \gset
SET ROLE df_user;
-- one in ten keys NULL; payloads with strings, arrays, nested objects and
-- negative numbers
SELECT count(df.publish_event('fuzz',
		jsonb_build_object('s', fuzz_text(1 + (random() * 12)::int),
		                   'a', jsonb_build_array(fuzz_text(3), -(random() * 100)::int, fuzz_text(2)),
		                   'o', jsonb_build_object(fuzz_text(2), fuzz_text(4)),
		                   'n', -random()),
		CASE WHEN g % 10 = 0 THEN NULL ELSE fuzz_text(1 + (random() * 16)::int) END)) AS published
FROM generate_series(1, 2000) g;
RESET ROLE;
SELECT engine_idle(300);
SELECT status, count(*) FROM df.instances WHERE idempotency_key LIKE 'sub:fuzz:%' GROUP BY 1;
-- exactly the values sent, through both steps
SELECT via, count(*) AS rows,
       count(*) FILTER (WHERE e.key IS NOT DISTINCT FROM s.k AND e.payload = s.p
                        AND (s.via = 'event' OR abs(s.n - (e.payload->>'n')::float8 * -1) < 1e-12)) AS exact
FROM fuzz_sink s JOIN df_internal.bus_events e ON e.id = s.event_id AND regexp_replace(e.topic, '^~[0-9]+/', '') = 'fuzz'
GROUP BY via ORDER BY via;
SELECT count(*) AS rows_of_no_event FROM fuzz_sink s
WHERE NOT EXISTS (SELECT FROM df_internal.bus_events e WHERE e.id = s.event_id AND regexp_replace(e.topic, '^~[0-9]+/', '') = 'fuzz');
SELECT count(*) AS keys_that_would_have_ended_a_literal FROM df_internal.bus_events
WHERE regexp_replace(topic, '^~[0-9]+/', '') = 'fuzz' AND id > :before_id AND key ~ '[''\\$;]';
-- a NUL cannot be sent at all: text and jsonb refuse it before the bus
SET ROLE df_user;
\set VERBOSITY terse
SELECT df.publish_event('fuzz', '{}', 'a' || chr(0) || 'b');
SELECT df.publish_event('fuzz', '{"s": "a\u0000b"}');
SELECT df.publish_event('fuzz', '{}', convert_from('\x610062', 'UTF8'));
\set VERBOSITY default
RESET ROLE;
-- nothing else ran
SELECT * FROM fuzz_canary;
SELECT regexp_replace(topic, '^~[0-9]+/', '') AS topic, count(*) FROM df_internal.bus_events WHERE id > :before_id GROUP BY 1 ORDER BY 1;
SELECT df.unsubscribe('fuzz');
REVOKE EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) FROM df_user;
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM df_user;
