-- df.map in lanes mode (docs/design/map.md §6): its JSON and argument
-- errors; collected results in row order from a few lanes; collect => false
-- with the step's own effects, each row exactly once; tolerated_failures
-- counted (within it the MAP completes and lists the failures, one more
-- fails it with the item); a cancel in the middle leaves no work behind;
-- rows of TASK steps that a worker's df.complete_task ends outside any
-- batch; df.check() clean.
SET ROLE df_user;

-- exact JSON: lanes mode is the overload with collect
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n', 4, true);
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n', NULL, false, tolerated_failures => 3);
-- collect chooses the mode, and max_concurrent must then be given (NULL: 32)
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n', collect => true);
-- the three-argument form keeps its own JSON
SELECT df.map('SELECT 1 AS n', 'SELECT $item.n', 4);
-- errors
SELECT df.map('SELECT 1', 'SELECT 2', 0, true);
SELECT df.map('SELECT 1', 'SELECT 2', 10001, true);
SELECT df.map('SELECT 1', 'SELECT 2', 2, NULL);
SELECT df.map('SELECT 1', 'SELECT 2', 2, true, -1);
SELECT df.map(NULL, 'SELECT 2', 2, true);
SELECT df.map('SELECT 1' ~> 'SELECT 2', 'SELECT 3', 2, false);
SELECT df.map('SELECT 1', 'SELECT 2', tolerated_failures => 1);
-- hand-written settings at df.start
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"lanes\":0}"}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"lanes\":2,\"collect\":\"yes\"}"}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"lanes\":2,\"tolerated_failures\":-1}"}');
SELECT df.start('{"node_type":"MAP","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"lanes\":2,\"max_concurrent\":3}"}');

CREATE FUNCTION lanes_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 120);
END $$;

-- 0 rows
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 0) g', 'SELECT $item.n', 2, true)) AS id \gset
SELECT lanes_wait(:'id');
SELECT df.result(:'id');
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 0) g', 'SELECT $item.n', 2, false)) AS id \gset
SELECT lanes_wait(:'id');
SELECT df.result(:'id');

-- 300 rows through 4 lanes of a two-step body: the results in row order,
-- one copy of the body per lane
SELECT df.start(df.map('SELECT g AS n FROM generate_series(300, 1, -1) g',
					   'SELECT $item.n AS n' ~> 'SELECT $item.n * 10 AS v', 4, true)) AS id \gset
SELECT lanes_wait(:'id');
SELECT jsonb_array_length(df.result(:'id')::jsonb) AS results,
	   (SELECT array_agg((e -> 'rows' -> 0 ->> 'v')::int ORDER BY o)
		FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o))
	   = (SELECT array_agg(g * 10 ORDER BY g DESC) FROM generate_series(1, 300) g) AS in_row_order;
SELECT node_type, count(*) FROM df.nodes WHERE instance_id = :'id' GROUP BY 1 ORDER BY 1;

-- collect => false: the step writes, the MAP counts; each row once
CREATE TABLE lanes_effects (n int);
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 200) g',
					   'INSERT INTO lanes_effects VALUES ($item.n)', 3, false)) AS id \gset
SELECT lanes_wait(:'id');
SELECT df.result(:'id');
SELECT count(*), count(DISTINCT n), min(n), max(n) FROM lanes_effects;

-- tolerated_failures: rows 5, 10, 15 and 20 fail; one lane runs them in order
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 20) g',
					   'SELECT 1 / ($item.n % 5) AS v', 1, false, tolerated_failures => 4)) AS id \gset
SELECT lanes_wait(:'id');
SELECT df.result(:'id')::jsonb - 'failures' AS counts,
	   (SELECT array_agg((f ->> 'item')::int ORDER BY (f ->> 'item')::int)
		FROM jsonb_array_elements(df.result(:'id')::jsonb -> 'failures') f) AS failed_items,
	   df.result(:'id')::jsonb -> 'failures' -> 0 ->> 'code' AS code;
-- collected, a failed row's place holds its error
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 6) g',
					   'SELECT 1 / ($item.n % 3) AS v', 2, true, tolerated_failures => 2)) AS id \gset
SELECT lanes_wait(:'id');
SELECT o AS item, COALESCE(e -> 'rows' -> 0 ->> 'v', e ->> 'error') AS r
FROM jsonb_array_elements(df.result(:'id')::jsonb) WITH ORDINALITY AS x(e, o) ORDER BY o;
-- one failure more than tolerated fails the MAP with that item
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 20) g',
					   'SELECT 1 / ($item.n % 5) AS v', 1, false, tolerated_failures => 3)) AS id \gset
SELECT lanes_wait(:'id');
SELECT status, result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';
-- and with none tolerated, the first failure does
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 20) g',
					   'SELECT 1 / ($item.n % 5) AS v', 1, true)) AS id \gset
SELECT lanes_wait(:'id');
SELECT status, result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'id' AND node_type = 'MAP';

-- a cancel in the middle: nothing of the MAP is left to run, and no row
-- starts after it (a step that ran on rolls its effects back)
CREATE TABLE lanes_cancel (n int);
CREATE FUNCTION lanes_wait_effects(want int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE (SELECT count(*) FROM lanes_cancel) < want LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.02);
	END LOOP;
	RETURN true;
END $$;
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 100000) g',
					   'INSERT INTO lanes_cancel SELECT $item.n FROM pg_sleep(0.01)', 4, false)) AS id \gset
SELECT lanes_wait_effects(20);
SELECT df.cancel(:'id') LIKE '%cancelled%' AS cancelled;
SELECT count(*) AS at_cancel FROM lanes_cancel \gset
SELECT lanes_wait(:'id');
RESET ROLE;
-- (a step the cancel interrupted deletes its task as it rolls back)
SELECT wait_until(format('SELECT NOT EXISTS (SELECT 1 FROM df_internal.tasks WHERE instance_id = %L)', :'id'), 60) AS no_tasks_left;
SELECT count(*) AS rows_left FROM df_internal.map_rows WHERE instance_id = :'id';
SELECT count(*) AS counters_left FROM df_internal.maps WHERE instance_id = :'id';
SELECT count(*) = :at_cancel AS none_after_cancel, count(*) < 100000 AS stopped FROM lanes_cancel;

-- rows whose steps end outside an executor's batch: TASK steps completed
-- by this session's df.complete_task count on the counters row itself
SELECT df.grant_worker('df_user', 'lanes.*');
SET ROLE df_user;
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 5) g',
					   df.task('lanes.q', '{"n": $item.n}'), 2, true)) AS id \gset
RESET ROLE;
SELECT wait_until('SELECT count(*) = 2 FROM df.tasks WHERE queue = ''lanes.q'' AND state = ''ready''', 60) AS two_ready;
SET ROLE df_user;
SELECT count(*) FILTER (WHERE df.complete_task(task_id, lease_token, jsonb_build_object('n', payload -> 'n')) = 'ok') AS completed
  FROM df.claim_tasks('lanes.q', 'w', 10);
SELECT count(*) FILTER (WHERE df.complete_task(task_id, lease_token, jsonb_build_object('n', payload -> 'n')) = 'ok') AS completed
  FROM df.claim_tasks('lanes.q', 'w', 10);
SELECT count(*) FILTER (WHERE df.complete_task(task_id, lease_token, jsonb_build_object('n', payload -> 'n')) = 'ok') AS completed
  FROM df.claim_tasks('lanes.q', 'w', 10);
SELECT lanes_wait(:'id');
SELECT df.result(:'id');
RESET ROLE;
SELECT df.revoke_worker('df_user', 'lanes.*');

-- nothing left behind by the ended MAPs, and df.check() clean
SELECT count(*) AS rows_left FROM df_internal.map_rows;
SELECT count(*) AS problems FROM df.check();

-- df.explain names the lanes, and its children are the lanes
SET ROLE df_user;
SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, 10) g', 'SELECT $item.n AS n', 3, true)) AS id \gset
SELECT lanes_wait(:'id');
SELECT line FROM regexp_split_to_table(df.explain(:'id'), E'\n') AS line WHERE line LIKE '%MAP%';
