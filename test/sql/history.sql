-- The event history (df.history): what a sequence, a join, a failed step,
-- a retried deadlock, a signal, a cancel and a loop record, in timeline
-- order, and who may read it.  Ids are random: instance and node ids are
-- masked as <id>.
CREATE ROLE df_other LOGIN;
GRANT USAGE ON SCHEMA df TO df_other;
GRANT SELECT ON df.instances, df.nodes TO df_other;
SET ROLE df_user;

CREATE FUNCTION hist(id text) RETURNS TABLE (kind text, node_type text, execution_id text,
											 attempt int, has_duration boolean, detail jsonb)
LANGUAGE sql AS $$
	SELECT kind, node_type, regexp_replace(execution_id, '[0-9a-f]{8}', '<id>', 'g'),
		   attempt, duration_ms IS NOT NULL, detail
	FROM df.history(id)
$$;

-- a sequence: every node starts and ends, in order
SELECT df.start('SELECT 1 AS a' ~> 'SELECT 2 AS b') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM hist(:'id');

-- timeline: times never go backwards, the instance starts first and ends
-- last, every node ends after it started
SELECT bool_and(at >= prev) AS ordered
FROM (SELECT at, lag(at, 1, '-infinity') OVER () AS prev FROM df.history(:'id')) s;
SELECT (array_agg(kind))[1] AS first, (array_agg(kind))[count(*)] AS last,
	   sum(duration_ms) >= 0 AS durations_known FROM df.history(:'id');

-- one step run with its start in one batch: the whole history is one row
-- of df_internal.events (instance_completed_at), four events in order
SELECT df.start('SELECT 7 AS one') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM hist(:'id');
SELECT bool_and(at >= prev) AS ordered, count(*) FILTER (WHERE has_duration) AS durations
FROM (SELECT at, duration_ms IS NOT NULL AS has_duration,
			 lag(at, 1, '-infinity') OVER () AS prev FROM df.history(:'id')) s;
RESET ROLE;
SELECT count(*) AS rows, count(instance_completed_at) AS whole_instance,
	   bool_and(instance_completed_at >= at) AS ends_after_its_node
FROM df_internal.events WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;

-- a join: both branches run in their own scopes (their order is not fixed)
SELECT df.start('SELECT 1' & ('SELECT 2' ~> 'SELECT 3')) AS id \gset
SELECT df.await_instance(:'id');
SELECT kind, node_type, execution_id, count(*)
FROM hist(:'id') GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- a branch's nodes end before the JOIN does
SELECT max(at) FILTER (WHERE node_type = 'SQL') < max(at) FILTER (WHERE node_type = 'JOIN')
	AS branches_first
FROM df.history(:'id');
-- a row keeps its scope without the instance's id in front ("::1"), and
-- df_internal.history_events puts it back: every execution_id read starts
-- with the instance's own id
SELECT bool_and(execution_id LIKE :'id' || '::%') AS own_id FROM df.history(:'id');
RESET ROLE;
SELECT count(*) > 0 AS rows, bool_and(e.scope LIKE '::%') AS kept_short,
	   bool_and(h.scope = e.instance_id || e.scope) AS put_back
FROM df_internal.events e
JOIN df_internal.history_events h ON h.row_id = e.id AND h.sub = 1
WHERE e.instance_id = :'id';
SET ROLE df_user;

-- a failed step: the error (truncated) is in the detail, the rest is skipped
SELECT df.start('SELECT 1/0' ~> 'SELECT 2') AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM hist(:'id');
SELECT df.start('SELECT repeat(''x'', 1000)::int') AS id \gset
SELECT df.await_instance(:'id');
SELECT kind, length(detail->>'error') AS error_length
FROM df.history(:'id') WHERE detail ? 'error';

-- a deadlock between two branches: the loser is retried, not failed
CREATE TABLE hist_pair (id int PRIMARY KEY, v int);
INSERT INTO hist_pair VALUES (1, 0), (2, 0);
CREATE FUNCTION hist_lock_both(first int, second int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	UPDATE hist_pair SET v = v + 1 WHERE id = first;
	PERFORM pg_sleep(0.3);
	UPDATE hist_pair SET v = v + 1 WHERE id = second;
	RETURN first;
END
$$;
SELECT df.start('SELECT hist_lock_both(1, 2)' & 'SELECT hist_lock_both(2, 1)') AS id \gset
SELECT df.await_instance(:'id');
SELECT count(*) >= 1 AS retried, min(attempt) AS first_retry, min(detail->>'sqlstate') AS sqlstate
FROM df.history(:'id') WHERE kind = 'step_retried';
SELECT count(*) FILTER (WHERE kind = 'node_failed') AS failed_nodes,
	   max(attempt) FILTER (WHERE kind = 'node_completed') >= 2 AS completed_on_a_later_attempt
FROM df.history(:'id');

-- a deadlock the statement raises itself, once (a sequence counts the
-- runs): retried, recorded, and the completion says which attempt it was,
-- whether the step ran with its instance's start or after another step
CREATE SEQUENCE hist_runs;
CREATE FUNCTION hist_deadlock_once() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('hist_runs') = 1 THEN
		RAISE EXCEPTION 'raised deadlock' USING ERRCODE = '40P01';
	END IF;
	RETURN 1;
END
$$;
SELECT df.start('SELECT hist_deadlock_once()') AS id \gset
SELECT df.await_instance(:'id');
SELECT kind, attempt, detail->>'sqlstate' AS sqlstate
FROM df.history(:'id') WHERE kind IN ('step_retried', 'node_completed');
SELECT setval('hist_runs', 1, false) IS NOT NULL AS reset;
SELECT df.start('SELECT 1' ~> 'SELECT hist_deadlock_once()') AS id \gset
SELECT df.await_instance(:'id');
SELECT kind, attempt, detail->>'sqlstate' AS sqlstate
FROM df.history(:'id') WHERE kind IN ('step_retried', 'node_completed');

-- a SQL step that df.retry runs three times ends with its third attempt
CREATE FUNCTION hist_boom() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'boom';
END
$$;
SELECT df.start(df.retry('SELECT hist_boom()', max_attempts => 3, initial_interval => '10 ms')) AS id \gset
SELECT df.await_instance(:'id');
SELECT kind, attempt FROM df.history(:'id')
WHERE kind IN ('retry_scheduled', 'retries_exhausted') OR (kind = 'node_failed' AND attempt IS NOT NULL);

-- a signal: received by the wait, then the wait completes
SELECT df.start(df.wait_for_signal('go') ~> 'SELECT 1') AS id \gset
SELECT df.signal(:'id', 'go', '{"n": 1}');
SELECT df.await_instance(:'id');
SELECT * FROM hist(:'id') WHERE node_type IS DISTINCT FROM 'THEN';

-- a cancel while sleeping
CREATE FUNCTION hist_wait_running(id text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE df.status(id) <> 'running' LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
SELECT df.start(df.sleep(600) ~> 'SELECT 1') AS id \gset
SELECT hist_wait_running(:'id');
SELECT df.cancel(:'id', 'no longer needed') IS NOT NULL AS cancelled;
SELECT * FROM hist(:'id');

-- a loop: each iteration's body runs in the next generation's scope
SELECT df.start(('SELECT 0 AS n' |=> 'c')
				~> df.loop(('SELECT $c + 1 AS n' |=> 'c'), 'SELECT $c < 2')) AS id \gset
SELECT df.await_instance(:'id');
SELECT * FROM hist(:'id');
SELECT execution_id, status, event_count, duration_ms >= 0 AS has_duration
FROM df.instance_executions(:'id');

-- another role sees no history of these instances, and cannot run df.check
RESET ROLE;
SET ROLE df_other;
SELECT count(*) AS visible FROM df.history(:'id');
SELECT count(*) AS unknown FROM df.history('00000000');
SELECT * FROM df.check();
RESET ROLE;
