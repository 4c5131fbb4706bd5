-- Signals and cancels are delivered when the caller's transaction commits.
-- df.await_instance refuses at once to wait for an instance
-- its own transaction has signalled or cancelled (instead of waiting out
-- its timeout), and df.signal(..., transaction_mode => 'new') sends at
-- once, outside the caller's transaction, like the reference.
SET ROLE df_user;
CREATE FUNCTION pg_temp.waiting() RETURNS text LANGUAGE sql AS $$
	SELECT df.start(df.wait_for_signal('go') |=> 'sig' ~> 'SELECT $sig::text AS got', 'signal-commit') $$;
-- wait (with a deadline) until an instance runs
CREATE FUNCTION pg_temp.running(inst text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE df.status(inst) IS DISTINCT FROM 'running' LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
-- a statement's single value, or its error with detail and hint (ids masked)
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
	m text;
	d text;
	h text;
BEGIN
	EXECUTE stmt INTO r;
	RETURN regexp_replace(r, '\m[0-9a-f]{8}\M', '<id>', 'g');
EXCEPTION WHEN OTHERS OR query_canceled THEN
	GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
	RETURN regexp_replace(concat_ws(E'\n', 'ERROR: ' || m, 'DETAIL: ' || nullif(d, ''), 'HINT: ' || nullif(h, '')),
						  '\m[0-9a-f]{8}\M', '<id>', 'g');
END
$$;
SELECT pg_temp.waiting() AS id \gset
SELECT pg_temp.running(:'id') AS running;

-- 1. signal, then wait, in one transaction: refused at once
BEGIN;
SELECT df.signal(:'id', 'go', '"early"');
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 30)', :'id')) AS await;
ROLLBACK;
-- also through the four-argument form in caller mode, and the deprecated alias
BEGIN;
SELECT df.signal(:'id', 'go', '"early"', transaction_mode => 'caller');
SELECT pg_temp.try(format('SELECT df.wait_for_completion(%L, 30)', :'id')) AS await;
ROLLBACK;
-- a signal sent in a subtransaction that was released counts, one rolled
-- back does not (the wait then runs to its timeout: nothing was sent)
BEGIN;
SAVEPOINT s;
SELECT df.signal(:'id', 'go', '"early"');
RELEASE SAVEPOINT s;
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 30)', :'id')) AS await;
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT df.signal(:'id', 'go', '"early"');
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 1)', :'id')) AS await;
ROLLBACK;
-- waiting for another instance is not affected
SELECT pg_temp.waiting() AS other \gset
BEGIN;
SELECT df.signal(:'other', 'go', '"other"');
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 1)', :'id')) AS await;
ROLLBACK;

-- 2. cancel, then wait, in one transaction: refused; the rollback undoes the cancel
BEGIN;
SELECT pg_temp.try(format('SELECT df.cancel(%L, %L)', :'id', 'not yet')) AS cancel;
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 30)', :'id')) AS await;
ROLLBACK;
SELECT df.status(:'id') AS still_running;

-- 3. transaction_mode => 'new' sends at once: the same transaction sees the
-- instance react, and a rollback does not take the signal back
BEGIN;
SELECT df.signal(:'id', 'go', '"now"', transaction_mode => 'new');
SELECT df.await_instance(:'id', 30) AS status;
SELECT df.result(:'id') AS result;
ROLLBACK;
SELECT df.status(:'id') AS after_rollback;
-- the same from a DO block, the reference's way of signalling and waiting
CREATE TEMP TABLE do_instance AS SELECT pg_temp.waiting() AS id;
DO $$
DECLARE
	inst text := (SELECT id FROM do_instance);
BEGIN
	PERFORM df.signal(inst, 'go', 'from-do', 'new');
	RAISE NOTICE 'status %, result %', df.await_instance(inst, 30), df.result(inst)::jsonb #>> '{rows,0,got}';
END
$$;
-- the mode is case-insensitive; errors of df.signal come back unchanged
SELECT df.signal(:'other', 'go', '"other"', 'NEW');
SELECT df.await_instance(:'other', 30) AS other_status;
SELECT pg_temp.try(format('SELECT df.signal(%L, %L, %L, %L)', :'other', 'go', '{}', 'new')) AS finished;
SELECT pg_temp.try($$SELECT df.signal('0000dead', 'go', '{}', 'new')$$) AS missing;
SELECT df.signal(:'id', '', '{}', 'new');
SELECT df.signal(:'id', 'go', '{}', 'later');
-- an instance started in the caller's uncommitted transaction is not seen there
BEGIN;
SELECT pg_temp.waiting() AS uncommitted \gset
SELECT pg_temp.try(format('SELECT df.signal(%L, %L, %L, %L)', :'uncommitted', 'go', '{}', 'new')) AS uncommitted;
-- and waiting for it there is refused at once, not after the timeout
SELECT pg_temp.try(format('SELECT df.await_instance(%L, 30)', :'uncommitted')) AS await_own_start;
ROLLBACK;
-- the same start, committed first: the wait is allowed
SELECT df.start('SELECT 1 AS one', 'start-then-await') AS committed \gset
SELECT df.await_instance(:'committed', 30) AS committed_status;
RESET ROLE;
SELECT df_internal.admission_slots_held() AS slots_held;
-- refused inside a workflow (a step's work commits with the step)
SET ROLE df_user;
SELECT df.start(format('SELECT df.signal(%L, %L, %L, %L)', :'id', 'go', '{}', 'new'), 'signal-new-in-step') AS step_id \gset
SELECT df.await_instance(:'step_id', 30) AS step_status;
SELECT result #>> '{}' AS step_error FROM df.nodes
WHERE instance_id = :'step_id' AND node_type = 'SQL';

-- 4. the reference's form is unchanged: df.signal(text, text, text DEFAULT '{}')
SELECT pg_get_function_identity_arguments(p.oid) AS arguments, pg_get_function_arguments(p.oid) AS with_defaults
FROM pg_proc p WHERE p.oid = 'df.signal(text, text, text)'::regprocedure
   OR p.oid = 'df.signal(text, text, text, text)'::regprocedure ORDER BY 1;
SELECT pg_temp.waiting() AS id \gset
SELECT df.signal(:'id', 'go');
SELECT df.await_instance(:'id', 30) AS two_arguments, df.result(:'id') AS result;
RESET ROLE;
