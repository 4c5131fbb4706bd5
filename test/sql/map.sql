-- Dynamic fan-out (docs/design/map.md): df.map's JSON, its
-- build-time and df.start errors, and MAP runs over 0, 1 and 50 rows with
-- $item and $item.col, the result in row order, a failing child, a child
-- wrapped in df.catch, the graph node limit, and max_concurrent => 2 (never
-- more than 2 children running, from the enter/leave times each recorded).
SET ROLE df_user;

-- exact JSON
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n');
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n' ~> 'SELECT 2', 2);
-- errors
SELECT df.map(NULL, 'SELECT 1');
SELECT df.map('SELECT 1', NULL);
SELECT df.map('', 'SELECT 1');
SELECT df.map('  ', 'SELECT 1');
SELECT df.map('SELECT 1', 'SELECT 2', 0);
SELECT df.map('SELECT 1', 'SELECT 2', -3);
SELECT df.map('SELECT 1' ~> 'SELECT 2', 'SELECT 3');
SELECT df.map('SELECT 1', '{"node_type":"NOPE"}');
-- hand-written graphs at df.start
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SLEEP","query":"1"},"right_node":{"node_type":"SQL","query":"SELECT 2"}}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"max_concurrent\":0}"}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"width\":3}"}');

CREATE FUNCTION map_wait_running(iid text, want int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	LOOP
		IF (SELECT count(*) FROM df.nodes WHERE instance_id = iid AND node_type = 'SIGNAL'
			AND status = 'running') >= want THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.02);
	END LOOP;
END $$;
CREATE FUNCTION map_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 120);
END $$;

-- 0 rows: []
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 0) g', 'SELECT $item.n')) AS id \gset
SELECT map_wait(:'id');
SELECT df.result(:'id');

-- 1 row, $item whole and $item.col
SELECT df.start(df.map('SELECT 7 AS n, ''seven'' AS name',
					   'SELECT $item.n * 6 AS answer, $item.name AS name, $item::jsonb ->> ''name'' AS whole')) AS id \gset
SELECT map_wait(:'id');
SELECT df.result(:'id');

-- 50 rows: one child each, the results in row order (the query's order,
-- not the order the children finished in)
CREATE TABLE map_seen (n int, at timestamptz DEFAULT clock_timestamp());
SELECT df.start(df.map('SELECT g AS n FROM generate_series(50, 1, -1) g',
					   'INSERT INTO map_seen (n) VALUES ($item.n) RETURNING n * 10 AS v')) AS id \gset
SELECT map_wait(:'id');
SELECT jsonb_array_length(df.result(:'id')::jsonb) AS results,
	   (SELECT array_agg((e -> 'rows' -> 0 ->> 'v')::int ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o))
	   = (SELECT array_agg(g * 10 ORDER BY g DESC) FROM generate_series(1, 50) g) AS in_row_order;
SELECT count(*) AS children_ran, count(DISTINCT n) AS distinct_rows FROM map_seen;
-- the children are real nodes: one copy of the step per row, every one completed
SELECT node_type, status, count(*) FROM df.nodes WHERE instance_id = :'id'
GROUP BY 1, 2 ORDER BY 1, 2;

-- A graph of more than 64 nodes keeps a hash of its ids for its lookups
-- (engine/graph_cache.c), which takes the nodes it grows by: a map that grows
-- a small graph past 64 nodes, and a large graph (a JOIN of 40 branches)
-- whose map grows it again; every row's step runs once and the results keep
-- row order.
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 60) g',
					   'SELECT $item.n AS n' ~> 'SELECT $item.n * 2 AS v')) AS id \gset
SELECT map_wait(:'id');
SELECT (SELECT array_agg((e -> 'rows' -> 0 ->> 'v')::int ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o))
	   = (SELECT array_agg(g * 2 ORDER BY g) FROM generate_series(1, 60) g) AS in_row_order,
	   (SELECT count(*) FROM df.nodes WHERE instance_id = :'id') AS nodes;
WITH RECURSIVE j(k, g) AS (
	SELECT 1, 'SELECT 1'::text
	UNION ALL SELECT k + 1, df.join(g, format('SELECT %s', k + 1)) FROM j WHERE k < 40)
SELECT df.start(g ~> df.map('SELECT g AS n FROM generate_series(1, 30) g', 'SELECT $item.n * 3 AS v')) AS id
FROM j WHERE k = 40 \gset
SELECT map_wait(:'id');
SELECT df.status(:'id') AS status,
	   (SELECT array_agg((e -> 'rows' -> 0 ->> 'v')::int ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o))
	   = (SELECT array_agg(g * 3 ORDER BY g) FROM generate_series(1, 30) g) AS in_row_order,
	   (SELECT count(*) FROM df.nodes WHERE instance_id = :'id') AS nodes;

-- the named result of a MAP, used by the next step
SELECT df.start((df.map('SELECT g AS n FROM generate_series(1, 3) g', 'SELECT $item.n * 2 AS d') |=> 'm')
				~> 'SELECT jsonb_array_length($m::jsonb) AS len') AS id \gset
SELECT map_wait(:'id');
SELECT df.result(:'id');

-- a failing child fails the MAP (and the instance), like a JOIN branch
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 5) g',
					   'SELECT 10 / ($item.n - 3) AS v')) AS id \gset
SELECT map_wait(:'id');
SELECT status FROM df.instances WHERE id = :'id';
SELECT status, result #>> '{}' AS error
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';
-- the other children are abandoned: row 1 fails once rows 2 and 3 are
-- asleep (it waits for that, with a deadline); caught around the MAP, the
-- instance goes on to wait for a signal, and the sleeping children have no
-- timer left
CREATE FUNCTION map_wait_asleep(iid text, want int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE (SELECT count(*) FROM df.nodes WHERE instance_id = iid AND node_type = 'SLEEP'
		   AND status = 'running') < want AND clock_timestamp() < deadline LOOP
		PERFORM pg_sleep(0.02);
	END LOOP;
	RETURN 0;
END $$;
SELECT df.start(df.catch(df.map('SELECT g AS n FROM generate_series(1, 3) g',
								'SELECT 1 / ($item.n - 1) AS v FROM (SELECT CASE WHEN $item.n = 1 THEN map_wait_asleep(''{sys_instance_id}'', 2) END) w'
								~> df.sleep(60)),
						 'SELECT ''caught'' AS c')
				~> df.wait_for_signal('end')) AS id \gset
SELECT map_wait_running(:'id', 1);
RESET ROLE;
SELECT kind, count(*) FROM df_internal.tasks WHERE instance_id = :'id' GROUP BY kind;
SELECT count(*) AS waits FROM df_internal.waits WHERE instance_id = :'id';
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;
SELECT status, result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';
SELECT node_type, status, count(*) FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SLEEP'
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT df.signal(:'id', 'end');
SELECT map_wait(:'id');
-- ... unless the step is wrapped in df.catch
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 5) g',
					   df.catch('SELECT 10 / ($item.n - 3) AS v', 'SELECT ''caught'' AS v'))) AS id \gset
SELECT map_wait(:'id');
SELECT (SELECT array_agg(coalesce(e -> 'rows' -> 0 ->> 'v', '?') ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o)) AS results;
-- a failing query fails the MAP with its error
SELECT df.start(df.map('SELECT 1 / 0 AS n', 'SELECT 1')) AS id \gset
SELECT map_wait(:'id');
SELECT status, result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';

-- the graph node limit counts the copies: past it the MAP fails and says the limit
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 3400) g',
					   'SELECT 1' ~> 'SELECT 2' ~> 'SELECT 3')) AS id \gset
SELECT map_wait(:'id');
SELECT status, result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';
SELECT count(*) AS nodes_made FROM df.nodes WHERE instance_id = :'id';

-- a MAP in a MAP: the inner query sees the outer row, the inner step its own
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 3) g',
					   df.map('SELECT $item.n AS outer, h AS inner FROM generate_series(1, $item.n) h',
							  'SELECT $item.outer * 10 + $item.inner AS v'))) AS id \gset
SELECT map_wait(:'id');
SELECT (SELECT jsonb_agg((SELECT jsonb_agg(i -> 'rows' -> 0 -> 'v' ORDER BY k)
						   FROM jsonb_array_elements(o) WITH ORDINALITY AS y(i, k)) ORDER BY j)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(o, j)) AS results;

-- a MAP in a loop runs again in each iteration, with that iteration's
-- rows: the children it made before are reused, the missing ones made
CREATE TABLE map_loop (n int);
CREATE TABLE map_loop_gen (g serial);
SELECT df.start(df.loop(
	df.map('SELECT g AS n FROM generate_series(1, (SELECT count(*) + 1 FROM map_loop_gen)::int) g',
		   'INSERT INTO map_loop VALUES ($item.n) RETURNING n')
	~> 'INSERT INTO map_loop_gen DEFAULT VALUES',
	'SELECT count(*) < 3 FROM map_loop_gen')) AS id \gset
SELECT map_wait(:'id');
SELECT n, count(*) FROM map_loop GROUP BY n ORDER BY n;
SELECT count(*) AS children FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL' AND query LIKE 'INSERT INTO map_loop VALUES%';
-- while it waits, a MAP that ended has left no named results of its children
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 3) g', 'SELECT $item.n AS v' |=> 'v')
				~> df.wait_for_signal('end')) AS id \gset
SELECT map_wait_running(:'id', 1);
RESET ROLE;
SELECT name, count(*) FROM df_internal.results WHERE instance_id = :'id' GROUP BY name ORDER BY name;
SET ROLE df_user;
SELECT df.signal(:'id', 'end');
SELECT map_wait(:'id');

-- max_concurrent => 2: each child records when it entered and when it left
-- (a sleep between, in separate steps), and at no time were more than two
-- inside at once
CREATE TABLE map_spans (n int, what text, at timestamptz DEFAULT clock_timestamp());
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 8) g',
					   'INSERT INTO map_spans (n, what) VALUES ($item.n, ''enter'')'
					   ~> df.sleep(0.2)
					   ~> 'INSERT INTO map_spans (n, what) VALUES ($item.n, ''leave'') RETURNING n',
					   max_concurrent => 2)) AS id \gset
SELECT map_wait(:'id');
SELECT count(*) FILTER (WHERE what = 'enter') AS entered,
	   count(*) FILTER (WHERE what = 'leave') AS left_ FROM map_spans;
-- the most children inside at any enter time
SELECT max(inside) AS most_at_once FROM (
	SELECT e.n, (SELECT count(*) FROM map_spans e2
				 JOIN map_spans l2 ON l2.n = e2.n AND l2.what = 'leave'
				 WHERE e2.what = 'enter' AND e2.at <= e.at AND l2.at > e.at) AS inside
	FROM map_spans e WHERE e.what = 'enter') s;
-- the result, in row order
SELECT (SELECT array_agg((e -> 'rows' -> 0 ->> 'n')::int ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o)) AS results;

-- df.explain: the template, dry and live
SELECT df.explain(df.map('SELECT 1 AS n', 'SELECT $item.n', 4));
SELECT regexp_replace(df.explain(:'id'), '^Instance: [0-9a-f]{8}', 'Instance: <id>') AS explain;
-- live, while it runs: one child waits for a signal, the others wait their turn

SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 3) g',
					   df.wait_for_signal('go') ~> 'SELECT $item.n AS n', 1)) AS id \gset
SELECT map_wait_running(:'id', 1);
-- df.check() walks from the waiting child through the MAP to the root: clean,
-- and the child's wait, taken away for a moment, is missed
RESET ROLE;
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';
CREATE TEMP TABLE map_saved_wait AS SELECT * FROM df_internal.waits WHERE instance_id = :'id';
DELETE FROM df_internal.waits WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id' ORDER BY problem;
INSERT INTO df_internal.waits SELECT * FROM map_saved_wait;
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;
SELECT regexp_replace(df.explain(:'id'), '^Instance: [0-9a-f]{8}', 'Instance: <id>') AS explain;
SELECT df.signal(:'id', 'go');
SELECT df.signal(:'id', 'go');
SELECT df.signal(:'id', 'go');
SELECT map_wait(:'id');
SELECT df.result(:'id');
RESET ROLE;
