-- Sagas: compensation of the root, an implicit saga.  When the
-- body fails, the registered undos run in reverse completion order (the
-- order is checked by a sequence), each with the named results its own
-- forward step saw; the instance ends 'compensated', df.result its
-- compensation summary; an
-- undo that fails ends it 'failed' ("compensation of <node> failed: ...")
-- with the remaining undos left registered.
SET ROLE df_user;

CREATE FUNCTION sc_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;
CREATE SEQUENCE sc_order;
CREATE TABLE sc_log (n bigint DEFAULT nextval('sc_order'), what text);

-- three steps, the third fails: undo 2 runs, then undo 1; undo 3 never
-- (its forward failed and registered nothing)
SELECT df.start(('INSERT INTO sc_log (what) VALUES (''reserve'') RETURNING 7 AS order_id' |=> 'order_id'
				 <~> 'INSERT INTO sc_log (what) VALUES (''release '' || $order_id)')
				~> ('INSERT INTO sc_log (what) VALUES (''charge'') RETURNING 70 AS pay_id' |=> 'pay_id'
					<~> 'INSERT INTO sc_log (what) VALUES (''refund '' || $pay_id || '' of '' || $order_id)')
				~> ('SELECT 1/0' <~> 'INSERT INTO sc_log (what) VALUES (''never'')')) AS id \gset
SELECT sc_wait(:'id');
SELECT df.status(:'id'), df.result(:'id')::jsonb ? 'undos' AS result_summary;
SELECT n, what FROM sc_log ORDER BY n;
SELECT state, attempts, error FROM df.compensations(:'id');
SELECT kind FROM df.history(:'id')
WHERE kind IN ('undo_registered', 'compensation_started', 'undo_started', 'undo_completed',
			   'undo_failed', 'instance_compensated', 'instance_failed') ORDER BY at;
SELECT (status_details->'compensation'->>'error') AS original_failure,
	   jsonb_array_length(status_details->'compensation'->'undos') AS undos_run
FROM df.nodes WHERE instance_id = :'id' AND id = (SELECT root_node FROM df.instances WHERE id = :'id');
SELECT status FROM df.instances WHERE id = :'id';
-- df.explain marks the forward steps that were compensated and the undos that ran
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- nothing registered: the instance just fails
SELECT df.start('SELECT 1/0' <~> 'INSERT INTO sc_log (what) VALUES (''not run'')') AS id \gset
SELECT sc_wait(:'id');
SELECT count(*) AS not_run FROM sc_log WHERE what = 'not run';

-- a body that completes: no undo runs
SELECT df.start('SELECT 1' <~> 'INSERT INTO sc_log (what) VALUES (''not run either'')') AS id \gset
SELECT sc_wait(:'id');
SELECT count(*) AS not_run FROM sc_log WHERE what = 'not run either';
SELECT state FROM df.compensations(:'id');

-- a failing undo stops the compensation: 'failed', the message names the
-- COMPENSATED node, the undo before it in the order stays registered
TRUNCATE sc_log;
CREATE TABLE sc_gate (open boolean);
INSERT INTO sc_gate VALUES (false);
CREATE FUNCTION sc_gated(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (SELECT open FROM sc_gate) THEN
		RAISE EXCEPTION 'gate closed for %', what USING ERRCODE = '22023';
	END IF;
	INSERT INTO sc_log (what) VALUES (what);
END $$;
SELECT df.start(('SELECT 1 AS a' <~> 'INSERT INTO sc_log (what) VALUES (''undo a'')')
				~> ('SELECT 2 AS b' <~> 'SELECT sc_gated(''undo b'')')
				~> 'SELECT 1/0') AS id \gset
SELECT sc_wait(:'id');
SELECT df.status(:'id');
SELECT detail->>'error' = 'compensation of '
	   || (SELECT node_id FROM df.compensations(:'id') WHERE state = 'failed')
	   || ' failed: SQL execution failed: gate closed for undo b' AS names_node
FROM df.history(:'id') WHERE kind = 'instance_failed';
SELECT state, attempts, error FROM df.compensations(:'id');
SELECT count(*) AS undone FROM sc_log;

-- an undo is retried by default (1 s to 60 s, full jitter): it fails
-- twice with a retryable error, then succeeds; each failed attempt rolled back
CREATE SEQUENCE sc_tries;
CREATE FUNCTION sc_flaky() RETURNS void LANGUAGE plpgsql AS $$
DECLARE t bigint := nextval('sc_tries');
BEGIN
	INSERT INTO sc_log (what) VALUES ('try ' || t);
	IF t < 3 THEN
		RAISE EXCEPTION 'try % fails', t;
	END IF;
END $$;
TRUNCATE sc_log;
SELECT df.start(('SELECT 1' <~> 'SELECT sc_flaky()') ~> 'SELECT 1/0') AS id \gset
SELECT sc_wait(:'id');
SELECT what FROM sc_log ORDER BY n;
SELECT count(*) AS retries, bool_and((detail->>'delay_ms')::bigint BETWEEN 0 AND 2000) AS within_backoff
FROM df.history(:'id') WHERE kind = 'retry_scheduled';
SELECT state FROM df.compensations(:'id');

-- df.cancel: without compensate the instance is cancelled and no undo
-- runs; with compensate the body is abandoned (its sleep removed) and the
-- undos run, latest first
CREATE FUNCTION sc_until_registered(iid text, n int) RETURNS boolean LANGUAGE plpgsql AS $$
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
TRUNCATE sc_log;
SELECT df.start(('SELECT 1' <~> 'INSERT INTO sc_log (what) VALUES (''plain undo'')')
				~> df.sleep(300)) AS id \gset
SELECT sc_until_registered(:'id', 1);
SELECT replace(df.cancel(:'id'), :'id', '<id>');
SELECT sc_wait(:'id');
SELECT count(*) AS undone FROM sc_log;
SELECT df.start(('SELECT 1' <~> 'INSERT INTO sc_log (what) VALUES (''undo 1'')')
				~> ('SELECT 2' <~> 'INSERT INTO sc_log (what) VALUES (''undo 2'')')
				~> df.sleep(300)) AS id \gset
SELECT sc_until_registered(:'id', 2);
SELECT replace(df.cancel(:'id', 'order withdrawn', compensate => true), :'id', '<id>');
SELECT sc_wait(:'id');
SELECT what FROM sc_log ORDER BY n;
SELECT state FROM df.compensations(:'id');
SELECT status_details->'compensation'->>'error' AS original,
	   status_details->'error'->>'code' AS code
FROM df.nodes WHERE instance_id = :'id' AND id = (SELECT root_node FROM df.instances WHERE id = :'id');
-- compensate on an instance with nothing registered: cancelled as without it
SELECT df.start(df.sleep(300)) AS id \gset
SELECT replace(df.cancel(:'id', compensate => true), :'id', '<id>');
SELECT sc_wait(:'id');

-- df.timeout over the body: the deadline fails the root, the undos run
TRUNCATE sc_log;
SELECT df.start(df.timeout(('SELECT 1' <~> 'INSERT INTO sc_log (what) VALUES (''undo t'')')
						   ~> df.sleep(300), 0.5)) AS id \gset
SELECT sc_wait(:'id');
SELECT what FROM sc_log ORDER BY n;
SELECT status_details->'compensation'->>'error' AS original
FROM df.nodes WHERE instance_id = :'id' AND id = (SELECT root_node FROM df.instances WHERE id = :'id');

-- a JOIN with a failing branch (it fails once the other one completed and
-- registered its undo): the branch that completed is compensated
TRUNCATE sc_log;
SELECT df.start(('SELECT 1 AS a' <~> 'INSERT INTO sc_log (what) VALUES (''undo branch a'')')
				& ('SELECT sc_until_registered(''{sys_instance_id}'', 1)' ~> 'SELECT 1/0')) AS id \gset
SELECT sc_wait(:'id');
SELECT what FROM sc_log ORDER BY n;

RESET ROLE;
