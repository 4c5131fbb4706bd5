-- Runs near the end: when Graphviz's dot is installed on the server's
-- machine, it accepts df.explain(…, format => 'dot') of every instance the
-- regression tests started (the live form) and of a dry graph of every
-- node type.  Without dot, nothing is checked (the output is the same);
-- scripts/install-deps (run by .ci/run and test/run) installs it.
CREATE TEMP TABLE dot_failures (what text, error text);
CREATE TEMP TABLE dry_graphs AS
SELECT * FROM (VALUES
	('SELECT 1' ~> 'SELECT 2' |=> 'two'),
	('SELECT 1' & 'SELECT 2' & 'SELECT 3'),
	(df.race('SELECT 1', df.sleep(5))),
	('SELECT true' ?> 'SELECT 1' !> 'SELECT 2'),
	(df.loop('SELECT 1' ~> df.break('done'), 'SELECT true')),
	(df.wait_for_schedule('*/5 * * * *') ~> df.wait_for_signal('go', 10)),
	(df.http('http://example.com/"q"') ~> df.http_multipart('http://example.com/up', parts => '[{"name": "f", "data": "x"}]')),
	(df.retry(df.timeout('SELECT pg_sleep(1)', 0.5), max_attempts => 3)),
	(df.catch(df.fail('no "way"'), 'SELECT $error.message')),
	(df.with_undo('INSERT INTO t VALUES (1)', 'DELETE FROM t') ~> 'SELECT 2'),
	(df.saga(df.with_undo('SELECT 1', 'SELECT 2') ~> 'SELECT 3', 'SELECT 4')),
	(df.with_breaker(df.http('http://example.com/b'), 'payments')),
	(df.map('SELECT g FROM generate_series(1, 3) g', 'SELECT $item.g', max_concurrent => 2)),
	(df.limit('SELECT 1', 'key:{sys_instance_id}', max_concurrent => 2))) AS g(graph);
DO $$
DECLARE
	r record;
BEGIN
	BEGIN
		COPY (SELECT 1) TO PROGRAM 'command -v dot >/dev/null';
	EXCEPTION WHEN OTHERS THEN
		RETURN; -- no dot here
	END;
	FOR r IN SELECT 'instance ' || i.id AS what, df.explain(i.id, format => 'dot') AS dot
			 FROM df.instances i
			 UNION ALL
			 SELECT 'dry ' || d.graph, df.explain(d.graph, format => 'dot') FROM dry_graphs d LOOP
		BEGIN
			EXECUTE format('COPY (SELECT translate(encode(convert_to(%L, ''UTF8''), ''base64''), E''\n'', '''')) '
						   'TO PROGRAM ''base64 -d | dot -Tsvg -o /dev/null''', r.dot);
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO dot_failures VALUES (r.what, SQLERRM);
		END;
	END LOOP;
END
$$;
SELECT count(*) AS dot_failures FROM dot_failures;
SELECT * FROM dot_failures LIMIT 5;
SELECT (SELECT count(*) FROM df.instances) > 10 AS instances_drawn,
	   (SELECT count(*) FROM dry_graphs) AS dry_graphs_drawn;
