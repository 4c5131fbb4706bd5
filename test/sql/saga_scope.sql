-- Sagas: df.saga(body, on_compensated, parallel, on_undo_failure),
-- node SAGA.  The undos registered inside a saga run when its body fails,
-- latest first (the order checked by a sequence), or all at once;
-- on_compensated's result is then the saga's; a saga without it fails with
-- its body's error and an enclosing saga compensates further.
-- on_undo_failure 'stop' leaves the rest for df.compensate, 'continue'
-- runs the others.  Sagas in loops and losing RACE branches.
SET ROLE df_user;

CREATE FUNCTION ss_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;
CREATE SEQUENCE ss_order;
CREATE TABLE ss_log (n bigint DEFAULT nextval('ss_order'), what text);
CREATE FUNCTION ss_note(what text) RETURNS text LANGUAGE sql AS $$
	INSERT INTO ss_log (what) VALUES (what) RETURNING what
$$;
-- the undos of an instance in the order they ran
CREATE FUNCTION ss_log_text() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(what, ', ' ORDER BY n) FROM ss_log
$$;

-- the builder: only the settings that differ from the defaults
SELECT df.saga('SELECT 1');
SELECT df.saga('SELECT 1', 'SELECT 2', true, 'continue');
SELECT df.saga('SELECT 1', on_undo_failure => 'stop');
SELECT df.saga(NULL);
SELECT df.saga('SELECT 1', parallel => NULL);
SELECT df.saga('SELECT 1', on_undo_failure => 'retry');
-- hand-written settings are checked at df.start
SELECT df.start('{"node_type":"SAGA","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"parallel\":1}"}');
SELECT df.start('{"node_type":"SAGA","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"on_undo_failure\":\"later\"}"}');
SELECT df.start('{"node_type":"SAGA","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"x\":1}"}');
SELECT df.start('{"node_type":"SAGA","query":"{}"}');
-- df.explain (dry)
SELECT df.explain(df.saga(('SELECT 1' <~> 'SELECT 2') ~> 'SELECT 3', 'SELECT 4', true));

-- a saga that completes: its undos stay registered and run if the
-- enclosing (implicit) saga fails later
SELECT df.start(df.saga(('SELECT ss_note(''a'')' <~> 'SELECT ss_note(''undo a'')'))
				~> ('SELECT ss_note(''b'')' <~> 'SELECT ss_note(''undo b'')')
				~> 'SELECT 1/0') AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();

-- a nested saga with on_compensated: its undos run (c, then b), a's does
-- not (it is outside), on_compensated's result is the saga's and the
-- instance goes on to completion
TRUNCATE ss_log;
SELECT df.start(('SELECT ss_note(''a'')' <~> 'SELECT ss_note(''undo a'')')
				~> df.saga(('SELECT ss_note(''b'')' <~> 'SELECT ss_note(''undo b'')')
						   ~> ('SELECT ss_note(''c'')' <~> 'SELECT ss_note(''undo c'')')
						   ~> 'SELECT 1/0',
						   on_compensated => 'SELECT ss_note(''recovered'') AS r' |=> 'r')
				~> 'SELECT ss_note(''after '' || $r::text)') AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT df.result(:'id');
SELECT n.status, n.status_details->'compensation'->>'error' AS original,
	   jsonb_array_length(n.status_details->'compensation'->'undos') AS undos
FROM df.nodes n WHERE n.instance_id = :'id' AND n.node_type = 'SAGA';

-- a nested saga without on_compensated fails with its body's error: the
-- enclosing implicit saga compensates further, and the instance ends
-- compensated
TRUNCATE ss_log;
SELECT df.start(('SELECT ss_note(''a'')' <~> 'SELECT ss_note(''undo a'')')
				~> df.saga(('SELECT ss_note(''b'')' <~> 'SELECT ss_note(''undo b'')')
						   ~> 'SELECT 1/0')) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT n.status, n.status_details->'error'->>'code' AS code
FROM df.nodes n WHERE n.instance_id = :'id' AND n.node_type = 'SAGA';
-- a CATCH around such a saga sees the body's own error code
TRUNCATE ss_log;
SELECT df.start(df.catch(df.saga(('SELECT ss_note(''b'')' <~> 'SELECT ss_note(''undo b'')')
								 ~> 'SELECT 1/0'),
						 'SELECT ss_note(''caught '' || $error.code)', ARRAY['sql:22012'])) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();

-- a df.timeout in the body fires: the saga compensates
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT ss_note(''a'')' <~> 'SELECT ss_note(''undo a'')')
						~> df.timeout(df.sleep(300), 0.5),
						'SELECT ss_note(''timed out'')')
				~> 'SELECT ss_note(''next'')') AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();

-- a df.timeout around a saga that is compensating: the undo under way is
-- interrupted (rolled back) and the instance's own compensation runs it
-- again, then the rest, each once
-- (before the deadline, 5 s away, the undo waits a minute)
TRUNCATE ss_log;
CREATE FUNCTION ss_slow_until_timeout(iid text, what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM df.history(iid) WHERE kind = 'timeout_fired') THEN
		PERFORM pg_sleep(60);
	END IF;
	RETURN ss_note(what);
END $$;
SELECT df.start(df.timeout(df.saga(('SELECT 1' <~> 'SELECT ss_note(''undo 1'')')
								   ~> ('SELECT 2' <~> 'SELECT ss_slow_until_timeout(''{sys_instance_id}'', ''undo 2'')')
								   ~> 'SELECT 1/0'), 5)) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT state, attempts FROM df.compensations(:'id') ORDER BY forward_completed_at;

-- nothing registered and no on_compensated: the saga simply fails
SELECT df.start(df.saga('SELECT 1/0')) AS id \gset
SELECT ss_wait(:'id');
-- nothing registered, with on_compensated: it runs
SELECT df.start(df.saga('SELECT 1/0', 'SELECT ''nothing to undo''::text AS r')) AS id \gset
SELECT ss_wait(:'id'), df.result(:'id');

-- the root a saga with on_compensated: status compensated, df.result its result
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT ss_note(''a'')' <~> 'SELECT ss_note(''undo a'')')
						~> 'SELECT 1/0',
						'SELECT ''order cancelled''::text AS outcome')) AS id \gset
SELECT ss_wait(:'id'), df.result(:'id');
SELECT ss_log_text();
SELECT kind FROM df.history(:'id')
WHERE kind IN ('compensation_started', 'undo_started', 'undo_completed', 'instance_compensated')
ORDER BY at;
-- the root a saga without it: compensated, df.result its compensation summary
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT 2') ~> 'SELECT 1/0')) AS id \gset
SELECT ss_wait(:'id'), df.result(:'id')::jsonb ? 'undos' AS summary;

-- parallel: every undo starts before the first one ends (in sequence each
-- one ends before the next starts); all three ran
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT ss_note(''undo 1'')')
						~> ('SELECT 2' <~> 'SELECT ss_note(''undo 2'')')
						~> ('SELECT 3' <~> 'SELECT ss_note(''undo 3'')')
						~> 'SELECT 1/0', parallel => true)) AS id \gset
SELECT ss_wait(:'id');
SELECT count(*) AS undone FROM ss_log;
SELECT max(i) FILTER (WHERE kind = 'undo_started')
	   < min(i) FILTER (WHERE kind = 'undo_completed') AS all_started_first
FROM (SELECT kind, row_number() OVER () AS i FROM df.history(:'id')) h;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT 1')
						~> ('SELECT 2' <~> 'SELECT 2')
						~> 'SELECT 1/0')) AS id \gset
SELECT ss_wait(:'id');
SELECT max(i) FILTER (WHERE kind = 'undo_started')
	   < min(i) FILTER (WHERE kind = 'undo_completed') AS all_started_first
FROM (SELECT kind, row_number() OVER () AS i FROM df.history(:'id')) h;

-- 'continue': the failing undo (division by zero is not retried) does not
-- stop the others; the saga fails with each failure reported
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT ss_note(''undo 1'')')
						~> ('SELECT 2' <~> 'SELECT 1/0')
						~> ('SELECT 3' <~> 'SELECT ss_note(''undo 3'')')
						~> 'SELECT 1/0', on_undo_failure => 'continue')) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT state, error FROM df.compensations(:'id') ORDER BY forward_completed_at;
SELECT jsonb_array_length(status_details->'compensation'->'failures') AS failures,
	   jsonb_array_length(status_details->'compensation'->'undos') AS undone
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SAGA';
SELECT detail->>'error' LIKE 'compensation of % failed: %division by zero%' AS reported
FROM df.history(:'id') WHERE kind = 'instance_failed';

-- 'stop', then df.compensate once the cause is fixed: the failed undo
-- runs again, then the one that was left
TRUNCATE ss_log;
CREATE TABLE ss_gate (open boolean);
INSERT INTO ss_gate VALUES (false);
CREATE FUNCTION ss_gated(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (SELECT open FROM ss_gate) THEN
		RAISE EXCEPTION 'gate closed for %', what USING ERRCODE = '22023';
	END IF;
	INSERT INTO ss_log (what) VALUES (what);
END $$;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT pg_sleep(1), ss_note(''undo 1'')')
						~> ('SELECT 2' <~> 'SELECT ss_gated(''undo 2'')')
						~> 'SELECT 1/0',
						'SELECT ''compensated after all''::text AS r')) AS id \gset
SELECT ss_wait(:'id');
SELECT state FROM df.compensations(:'id') ORDER BY forward_completed_at;
SELECT count(*) AS undone FROM ss_log;
-- not fixed yet: it stops again
SELECT replace(df.compensate(:'id'), :'id', '<id>');
SELECT ss_wait(:'id');
SELECT state, attempts FROM df.compensations(:'id') ORDER BY forward_completed_at;
UPDATE ss_gate SET open = true;
SELECT replace(df.compensate(:'id'), :'id', '<id>');
-- resumed, the instance is live again for df.check (its undo 1 takes a second)
RESET ROLE;
SELECT df.status(:'id'), count(*) AS problems FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;
SELECT ss_wait(:'id'), df.result(:'id');
RESET ROLE;
SELECT count(*) AS problems FROM df.check() WHERE instance_id = :'id';
SET ROLE df_user;
SELECT ss_log_text();
SELECT state, attempts FROM df.compensations(:'id') ORDER BY forward_completed_at;
SELECT count(*) AS resumed FROM df.history(:'id') WHERE kind = 'instance_resumed';
-- nothing to resume
SELECT set_config('ss.id', :'id', false) IS NOT NULL AS set;
DO $$
BEGIN
	PERFORM df.compensate(current_setting('ss.id'));
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE '%', replace(SQLERRM, current_setting('ss.id'), '<id>');
END $$;
SELECT df.compensate('ffffffff');
-- the root as implicit saga stops and resumes the same way
UPDATE ss_gate SET open = false;
TRUNCATE ss_log;
SELECT df.start(('SELECT 1' <~> 'SELECT ss_note(''undo 1'')')
				~> ('SELECT 2' <~> 'SELECT ss_gated(''undo 2'')')
				~> 'SELECT 1/0') AS id \gset
SELECT ss_wait(:'id');
UPDATE ss_gate SET open = true;
SELECT replace(df.compensate(:'id'), :'id', '<id>');
SELECT ss_wait(:'id');
SELECT ss_log_text();

-- a RACE: the undos of the losing branch run when the race is decided,
-- before the race ends with its winner's result
CREATE FUNCTION ss_until_registered(iid text, n int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		IF (SELECT count(*) FROM df.compensations(iid)) >= n THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END $$;
TRUNCATE ss_log;
SELECT df.start(df.race(('SELECT ss_note(''hold'')' <~> 'SELECT ss_note(''release hold'')')
						~> df.sleep(300),
						'SELECT ss_until_registered(''{sys_instance_id}'', 1)'
						~> 'SELECT ss_note(''won'') AS w')
				~> 'SELECT ss_note(''after race'')') AS id \gset
SELECT ss_wait(:'id'), df.result(:'id');
SELECT ss_log_text();
SELECT state FROM df.compensations(:'id');
SELECT jsonb_array_length(status_details->'compensation'->'undos') AS undone
FROM df.nodes WHERE instance_id = :'id' AND node_type = 'RACE';

-- a saga in a loop: an iteration's saga compensates that iteration only
-- (iteration 1 fails and undoes its own step; iteration 2 completes and
-- its undo stays registered)
TRUNCATE ss_log;
CREATE SEQUENCE ss_iter;
SELECT df.start(df.loop(df.saga(('SELECT nextval(''ss_iter'') AS i' |=> 'i'
								 <~> 'SELECT ss_note(''undo iteration '' || $i)')
								~> 'SELECT 1 / ($i::int - 1)',
								'SELECT ss_note(''iteration compensated'')'),
						'SELECT (SELECT last_value FROM ss_iter) < 2')) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT state FROM df.compensations(:'id') ORDER BY forward_completed_at;

-- a saga inside df.retry(mode => 'subtree'): the failed generation undoes
-- its own step before the next one runs (its error, P0001, is retried)
TRUNCATE ss_log;
CREATE FUNCTION ss_fail_first(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM df.history(iid) WHERE kind = 'retry_scheduled') THEN
		RAISE EXCEPTION 'first generation fails';
	END IF;
	RETURN ss_note('second generation');
END $$;
SELECT df.start(df.retry(df.saga(('SELECT ss_note(''step'')' <~> 'SELECT ss_note(''undo step'')')
								 ~> 'SELECT ss_fail_first(''{sys_instance_id}'')'),
						 max_attempts => 2, initial_interval => '0.1 seconds', mode => 'subtree')) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT state FROM df.compensations(:'id') ORDER BY forward_completed_at;

-- a JOIN inside a saga with a failing branch: the branch that completed is
-- compensated (the failing branch waits until it registered its undo)
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT ss_note(''undo branch a'')')
						& ('SELECT ss_until_registered(''{sys_instance_id}'', 1)' ~> 'SELECT 1/0'),
						'SELECT ''joined and undone''::text AS r')) AS id \gset
SELECT ss_wait(:'id'), df.result(:'id');
SELECT ss_log_text();

-- a branch still running when another fails is cancelled first: the JOIN
-- does not wait for its 300 s sleep, the branch's step never runs
TRUNCATE ss_log;
SELECT df.start(df.saga(('SELECT 1' <~> 'SELECT ss_note(''undo a'')')
						& ('SELECT ss_until_registered(''{sys_instance_id}'', 1)' ~> 'SELECT 1/0')
						& (df.sleep(300) ~> ('SELECT ss_note(''c'')' <~> 'SELECT ss_note(''undo c'')')))
				) AS id \gset
SELECT ss_wait(:'id');
SELECT ss_log_text();
SELECT node_type, status, error IS NULL AS no_error_text
FROM df.nodes WHERE instance_id = :'id' AND status_details->'error'->>'code' = 'cancelled';

-- df.explain (live) marks the compensated steps and the saga
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

RESET ROLE;
