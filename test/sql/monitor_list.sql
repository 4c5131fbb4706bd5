-- Monitoring: df.list_instances (both overloads, paging, cursor and limit
-- errors), df.instance_info, df.instance_executions and df.metrics
-- (reference §2.3 "Monitoring").  Instance ids are random: they are
-- compared, never printed.
SET ROLE df_user;
CREATE TABLE mon_counter (n int);

-- ---------------------------------------------------------------------------
-- Output shape, and what a completed and a failed instance show
-- ---------------------------------------------------------------------------
SELECT df.start('SELECT 42 AS answer', 'mon-ok') AS ok_id \gset
SELECT df.await_instance(:'ok_id');
SELECT df.start('SELECT 1' ~> 'SELECT 1/0', 'mon-failed') AS failed_id \gset
SELECT df.await_instance(:'failed_id');

-- the newest instance first
SELECT instance_id = :'failed_id' AS newest_is_failed, label, function_name, status,
       execution_count, output
FROM df.list_instances(NULL, 1);
SELECT label, function_name, status, execution_count, output
FROM df.list_instances() WHERE instance_id IN (:'ok_id', :'failed_id') ORDER BY label;
SELECT count(*) AS completed_ok FROM df.list_instances('completed', 1000) WHERE instance_id = :'ok_id';
SELECT count(*) AS failed_not_completed FROM df.list_instances('completed', 1000) WHERE instance_id = :'failed_id';
SELECT bool_and(status = 'failed') AS only_failed FROM df.list_instances('failed');
-- the 4-argument form adds created_at, completed_at and next_cursor
SELECT label, function_name, status, execution_count, output,
       created_at = (SELECT created_at FROM df.instances WHERE id = :'ok_id') AS created_at_ok,
       completed_at IS NOT NULL AS has_completed_at, next_cursor
FROM df.list_instances(NULL, 10, 'mon-ok');
SELECT label, status, completed_at, next_cursor FROM df.list_instances(NULL, 10, 'mon-failed');
-- status, list_instances and instance_info agree
SELECT i.instance_id = :'ok_id' AS same_id, i.label, i.function_name, i.function_version = split_part(df.version(), ' ', 1) AS version_ok,
       i.current_execution_id, i.status, i.output,
       i.status = df.status(:'ok_id') AS agrees_with_status,
       (i.status, i.output, i.current_execution_id) IS NOT DISTINCT FROM
       (SELECT (l.status, l.output, l.execution_count) FROM df.list_instances(NULL, 10, 'mon-ok') l) AS agrees_with_list
FROM df.instance_info(:'ok_id') i;
SELECT label, status, output, current_execution_id FROM df.instance_info(:'failed_id');
SELECT count(*) AS unknown_id FROM df.instance_info('00000000');
SELECT count(*) AS null_id FROM df.instance_info(NULL);

-- executions: a completed instance has one
SELECT execution_id, status, event_count, duration_ms >= 0 AS has_duration, output
FROM df.instance_executions(:'ok_id');
SELECT execution_id, status, event_count, duration_ms >= 0 AS has_duration, output
FROM df.instance_executions(:'failed_id', 1);
SELECT count(*) AS unknown_id FROM df.instance_executions('00000000');
SELECT * FROM df.instance_executions(:'ok_id', 0);
SELECT * FROM df.instance_executions(:'ok_id', -5);
SELECT count(*) AS clamped FROM df.instance_executions(:'ok_id', 2000000000);

-- a root loop: one execution per iteration, newest first
SELECT df.start(df.loop('INSERT INTO mon_counter VALUES (1) RETURNING n',
                        'SELECT count(*) < 3 FROM mon_counter'), 'mon-loop') AS loop_id \gset
SELECT df.await_instance(:'loop_id');
SELECT execution_count, status FROM df.list_instances(NULL, 10, 'mon-loop');
SELECT current_execution_id, status FROM df.instance_info(:'loop_id');
SELECT execution_id, status, event_count > 0 AS has_events, duration_ms >= 0 AS has_duration, output
FROM df.instance_executions(:'loop_id');
SELECT execution_id, status FROM df.instance_executions(:'loop_id', 2);

-- ---------------------------------------------------------------------------
-- Paging: 5 instances, page size 2 => 3 pages
-- ---------------------------------------------------------------------------
SELECT df.start('SELECT 1', 'mon-page') AS x1 \gset
SELECT df.start('SELECT 2', 'mon-page') AS x2 \gset
SELECT df.start('SELECT 3', 'mon-page') AS x3 \gset
BEGIN;	-- two in one transaction: the same created_at, ordered by id
SELECT df.start('SELECT 4', 'mon-page') AS x4, df.start('SELECT 5', 'mon-page') AS x5 \gset
COMMIT;
SELECT df.await_instance(:'x1'), df.await_instance(:'x2'), df.await_instance(:'x3'),
       df.await_instance(:'x4'), df.await_instance(:'x5');
CREATE TEMP TABLE page_order AS
SELECT id, row_number() OVER (ORDER BY created_at DESC, id) AS pos
FROM df.instances WHERE label = 'mon-page';
SELECT count(*) AS instances, count(DISTINCT created_at) AS distinct_times
FROM df.instances WHERE label = 'mon-page';

SELECT p.pos, l.next_cursor IS NOT NULL AS has_cursor
FROM df.list_instances(NULL, 2, 'mon-page') l JOIN page_order p ON p.id = l.instance_id
ORDER BY p.pos;
SELECT count(DISTINCT next_cursor) AS one_cursor FROM df.list_instances(NULL, 2, 'mon-page');
SELECT next_cursor AS c1 FROM df.list_instances(NULL, 2, 'mon-page') LIMIT 1 \gset
-- the cursor is the hex of 'v1|<created_at>|<id>' of the page's last row
SELECT convert_from(decode(:'c1', 'hex'), 'UTF8') =
       'v1|' || to_char(i.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.USOF') || '|' || i.id AS cursor_format,
       length(:'c1') <= 512 AS short
FROM page_order p JOIN df.instances i ON i.id = p.id WHERE p.pos = 2;
SELECT p.pos, l.next_cursor IS NOT NULL AS has_cursor
FROM df.list_instances(NULL, 2, 'mon-page', :'c1') l JOIN page_order p ON p.id = l.instance_id
ORDER BY p.pos;
SELECT next_cursor AS c2 FROM df.list_instances(NULL, 2, 'mon-page', :'c1') LIMIT 1 \gset
SELECT p.pos, l.next_cursor IS NULL AS last_page
FROM df.list_instances(NULL, 2, 'mon-page', :'c2') l JOIN page_order p ON p.id = l.instance_id
ORDER BY p.pos;
-- a full last page has no cursor either
SELECT count(*) AS rows, count(next_cursor) AS cursors FROM df.list_instances(NULL, 5, 'mon-page');
SELECT count(*) AS rows, count(next_cursor) AS cursors FROM df.list_instances(NULL, 4, 'mon-page');
-- page size 1 walks through the two with the same created_at in id order
SELECT next_cursor AS c3 FROM df.list_instances(NULL, 1, 'mon-page') \gset
SELECT p.pos FROM df.list_instances(NULL, 1, 'mon-page', :'c3') l JOIN page_order p ON p.id = l.instance_id;
-- filters combine with the cursor
SELECT count(*) AS completed_after_c1 FROM df.list_instances('completed', 10, 'mon-page', :'c1');
SELECT count(*) AS failed_pages FROM df.list_instances('failed', 10, 'mon-page');
SELECT count(*) AS no_such_label FROM df.list_instances(NULL, 10, 'mon-no-such-label');

-- ---------------------------------------------------------------------------
-- Cursor and limit errors
-- ---------------------------------------------------------------------------
SELECT * FROM df.list_instances(NULL, 2, NULL, 'zz');
SELECT * FROM df.list_instances(NULL, 2, NULL, 'abc');
SELECT * FROM df.list_instances(NULL, 2, NULL, '');
SELECT * FROM df.list_instances(NULL, 2, NULL, repeat('41', 257));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v2|2024-01-01T00:00:00.000000+00|deadbeef', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|yesterday|deadbeef', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|infinity|deadbeef', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|2024-02-31T00:00:00.000000+00|deadbeef', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|2024-01-01T00:00:00.000000+00|DEADBEEF', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|2024-01-01T00:00:00.000000+00|deadbeef|x', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|2024-01-01T00:00:00.000000+00', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 2, NULL, encode(convert_to('v1|2024-01-01T00:00:00.000000+00|déadbeef', 'UTF8'), 'hex'));
-- a well-formed cursor from far in the past or the future is fine
SELECT count(*) AS before_2000 FROM df.list_instances(NULL, 2, 'mon-page',
       encode(convert_to('v1|2000-01-01T00:00:00.000000+00|00000000', 'UTF8'), 'hex'));
SELECT count(*) AS before_3000 FROM df.list_instances(NULL, 10, 'mon-page',
       encode(convert_to('v1|3000-01-01T00:00:00.000000+05:30|00000000', 'UTF8'), 'hex'));
SELECT * FROM df.list_instances(NULL, 0);
SELECT * FROM df.list_instances('running', -1);
SELECT * FROM df.list_instances(NULL, 0, NULL);
SELECT * FROM df.list_instances(NULL, 1001);
SELECT count(*) <= 1000 AS at_most_max FROM df.list_instances(NULL, 1000);
SELECT count(*) <= 100 AS default_limit FROM df.list_instances(NULL, NULL);
RESET ROLE;
SET pg_durable.list_instances_max_limit = 3;
SET ROLE df_user;
SELECT count(*) AS equal_allowed FROM df.list_instances(NULL, 3, 'mon-page');
SELECT * FROM df.list_instances(NULL, 4, 'mon-page');
SELECT * FROM df.list_instances(NULL, 4);
RESET ROLE;
RESET pg_durable.list_instances_max_limit;

-- ---------------------------------------------------------------------------
-- Why a live instance waits: the waiting node's status_details, and
-- waiting_on (the last column of both overloads); a label filter with % or
-- _ is a LIKE pattern
-- ---------------------------------------------------------------------------
SET ROLE df_user;
SELECT df.start(df.sleep(600), 'mon-wait-sleep') AS w_sleep \gset
SELECT df.start(df.wait_for_signal('approve', 300), 'mon-wait-signal') AS w_signal \gset
SELECT df.start(df.wait_for_schedule('0 3 * * *'), 'mon-wait-cron') AS w_cron \gset
SELECT df.start(df.wait_for_event('mon_orders', '{"region": "eu"}', 600), 'mon-wait-event') AS w_event \gset
SELECT df.start(df.wait_for_event('mon_orders'), 'mon-wait-event-any') AS w_event_any \gset
SELECT wait_until($$SELECT count(*) = 5 FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id
				   WHERE i.label LIKE 'mon-wait-%' AND n.status_details ? 'waiting_on'$$) AS all_waiting;
SELECT i.label, n.node_type,
	   n.status_details->>'waiting_on' AS waiting_on,
	   n.status_details - '{execution_id,due_at,deadline}'::text[] AS details,
	   ((n.status_details->>'due_at')::timestamptz - n.updated_at) BETWEEN '595 s' AND '605 s' AS due_in_600s,
	   ((n.status_details->>'deadline')::timestamptz - n.updated_at) BETWEEN '295 s' AND '605 s' AS deadline_ahead,
	   ((n.status_details->>'due_at')::timestamptz - n.updated_at) BETWEEN '0 s' AND '1 day'
	   AND extract(second FROM (n.status_details->>'due_at')::timestamptz) = 0 AS next_cron
FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id
WHERE i.label LIKE 'mon-wait-%' AND n.status = 'running' ORDER BY i.label;
SELECT label, regexp_replace(waiting_on, '\d{4}-\d\d-\d\d [0-9:.+]+', '<time>', 'g') AS waiting_on
FROM df.list_instances(NULL, 100, 'mon-wait-%') ORDER BY label;
SELECT label, regexp_replace(waiting_on, '\d{4}-\d\d-\d\d [0-9:.+]+', '<time>', 'g') AS waiting_on
FROM df.list_instances(NULL, 100) WHERE label LIKE 'mon-wait-s%' ORDER BY label;
-- a plain label is matched exactly, a pattern with _ as LIKE does
SELECT count(*) AS exact FROM df.list_instances(NULL, 100, 'mon-wait');
SELECT label FROM df.list_instances(NULL, 100, 'mon_wait_cron');
-- an instance that ended waits on nothing
SELECT df.signal(:'w_signal', 'approve', '{}') IS NOT NULL AS signalled;
SELECT df.await_instance(:'w_signal', 30);
SELECT status, waiting_on FROM df.list_instances(NULL, 100, 'mon-wait-signal');
SELECT df.cancel(:'w_sleep', 'done') IS NOT NULL, df.cancel(:'w_cron', 'done') IS NOT NULL,
	   df.cancel(:'w_event', 'done') IS NOT NULL, df.cancel(:'w_event_any', 'done') IS NOT NULL;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- df.metrics: engine-wide, administrators only
-- ---------------------------------------------------------------------------
SET ROLE df_user;
SELECT * FROM df.metrics();
RESET ROLE;
SELECT total_instances = (SELECT count(*) FROM df.instances) AS total_ok,
       completed_instances = (SELECT count(*) FROM df.instances WHERE status = 'completed') AS completed_ok,
       failed_instances = (SELECT count(*) FROM df.instances WHERE status = 'failed') AS failed_ok,
       running_instances = (SELECT count(*) FROM df.instances WHERE status IN ('pending', 'running')) AS running_ok,
       total_executions >= total_instances + 2 AS executions_count_loop_iterations,
       total_events > 0 AS has_events
FROM df.metrics();
SELECT has_function_privilege('public', 'df.metrics()', 'EXECUTE') AS public_may_call;

-- the functions do not depend on the caller's search_path
SET ROLE df_user;
SET search_path = pg_temp;
SELECT count(*) AS listed FROM df.list_instances(NULL, 10, 'mon-page');
SELECT count(*) BETWEEN 5 AND 10 AS listed FROM df.list_instances('completed', 10);
SELECT status FROM df.instance_info(:'ok_id');
SELECT count(*) AS executions FROM df.instance_executions(:'loop_id');
SELECT count(*) AS nodes FROM df.instance_nodes(:'failed_id');
SELECT length(df.explain(:'failed_id')) > 0 AS explained;
RESET search_path;
RESET ROLE;
