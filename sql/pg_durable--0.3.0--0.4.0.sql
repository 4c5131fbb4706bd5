/*
 * pg_durable upgrade script, 0.3.0 -> 0.4.0.
 *
 * Every change to the schema of sql/pg_durable.sql since 0.3.0 (tables,
 * columns, constraints, functions, operators, grants, comments) is repeated
 * here, so that ALTER EXTENSION pg_durable UPDATE gives a database that is
 * the same as a fresh CREATE EXTENSION.  test/t/022_upgrade.pl compares the
 * two and fails when they differ.
 */

\echo Use "ALTER EXTENSION pg_durable UPDATE TO '0.4.0'" to load this file. \quit

-- The graph references under the reference's names (issue 21).
ALTER TABLE df.nodes RENAME CONSTRAINT nodes_left_node_fkey TO nodes_left_node_same_instance_fkey;
ALTER TABLE df.nodes RENAME CONSTRAINT nodes_right_node_fkey TO nodes_right_node_same_instance_fkey;

-- df.signal with transaction_mode (issue 21).
-- The same with transaction_mode: 'caller' (sent when the caller commits,
-- as the three-argument form) or 'new' (sent at once, in a transaction of
-- its own).  No defaults, so that calls of the reference's three-argument
-- form stay unambiguous: pass signal_data with transaction_mode.
CREATE FUNCTION df.signal(instance_id text, signal_name text, signal_data text, transaction_mode text) RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_signal';
COMMENT ON FUNCTION df.signal(text, text, text, text) IS 'send a signal; transaction_mode ''new'' sends it at once in a transaction of its own, ''caller'' when the caller commits';

-- df.check: a branch whose root is a loop ends in a later generation (issue 21).
CREATE OR REPLACE FUNCTION df_internal.check_rows()
	RETURNS TABLE (instance_id text, problem text, node_id text, scope text, detail text)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $check$
WITH RECURSIVE ended AS (
	-- how an instance ended, by its last instance_* event: the engine's word,
	-- which its owner cannot change (df.instances.status it can: UPDATE)
	SELECT DISTINCT ON (e.instance_id) e.instance_id AS id, substr(e.kind, 10) AS status
	FROM df_internal.events e
	WHERE e.kind IN ('instance_completed', 'instance_failed', 'instance_cancelled',
					 'instance_compensated')
	ORDER BY e.instance_id, e.id DESC
), live AS (
	-- live by the engine's own state: a runs row of an instance that has not ended
	SELECT i.id, r.status, i.status AS shown
	FROM df.instances i JOIN df_internal.runs r ON r.instance_id = i.id
	WHERE NOT EXISTS (SELECT 1 FROM ended d WHERE d.id = i.id)
), nodes AS (
	SELECT n.instance_id, n.id, n.node_type, n.status, n.query, n.left_node, n.right_node,
		   n.status_details ->> 'execution_id' AS stamp
	FROM df.nodes n JOIN live l ON l.id = n.instance_id
), edges AS (
	SELECT n.instance_id, c.child, n.id AS parent
	FROM nodes n
	CROSS JOIN LATERAL (
		SELECT n.left_node::text
		UNION ALL SELECT n.right_node::text
		UNION ALL SELECT n.query::jsonb ->> 'condition_node'
			WHERE n.node_type IN ('IF', 'LOOP') AND n.query LIKE '{%'
		UNION ALL SELECT e FROM jsonb_array_elements_text(
			CASE WHEN n.node_type = 'JOIN' AND n.query LIKE '{%'
				 AND jsonb_typeof(n.query::jsonb -> 'extra_nodes') = 'array'
			THEN n.query::jsonb -> 'extra_nodes' ELSE '[]' END) e
	) c(child)
	JOIN df.nodes x ON x.instance_id = n.instance_id AND x.id = c.child
	WHERE c.child IS NOT NULL
), leaves AS (
	SELECT n.* FROM nodes n JOIN live l ON l.id = n.instance_id AND l.status = 'running'
	WHERE n.status = 'running' AND n.stamp IS NOT NULL
	  AND n.node_type IN ('SQL', 'HTTP', 'HTTP_MULTIPART', 'SLEEP', 'WAIT_SCHEDULE', 'SIGNAL')
), walk AS (
	-- from each running leaf up to the root: every ancestor must be running
	-- and stamped with the leaf's scope or an enclosing one
	SELECT f.instance_id, f.id AS leaf, f.id AS node, f.stamp, true AS ok FROM leaves f
	UNION ALL
	SELECT w.instance_id, w.leaf, p.id, p.stamp,
		   p.status = 'running' AND p.stamp IS NOT NULL
		   AND (w.stamp = p.stamp OR starts_with(w.stamp, p.stamp || '::'))
	FROM walk w
	JOIN edges e ON e.instance_id = w.instance_id AND e.child = w.node
	JOIN nodes p ON p.instance_id = e.instance_id AND p.id = e.parent
	WHERE w.ok
), live_leaves AS (
	SELECT f.* FROM leaves f
	WHERE NOT EXISTS (SELECT 1 FROM walk w
					  WHERE w.instance_id = f.instance_id AND w.leaf = f.id AND NOT w.ok)
)
SELECT l.id::text, 'no_pending_work', NULL::text, NULL::text,
	   format('%s instance has no task, timer or signal wait', l.status)
FROM live l
WHERE NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = l.id)
  AND NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = l.id)
UNION ALL
SELECT f.instance_id::text,
	   CASE f.node_type WHEN 'SIGNAL' THEN 'missing_wait'
			WHEN 'SLEEP' THEN 'missing_timer' WHEN 'WAIT_SCHEDULE' THEN 'missing_timer'
			ELSE 'stranded_step' END,
	   f.id::text, f.stamp,
	   format('running %s node %s in scope %s has no %s', f.node_type, f.id, f.stamp,
			  CASE f.node_type WHEN 'SIGNAL' THEN 'registered signal wait'
				   WHEN 'SLEEP' THEN 'timer' WHEN 'WAIT_SCHEDULE' THEN 'timer' ELSE 'task' END)
FROM live_leaves f
WHERE CASE WHEN f.node_type = 'SIGNAL' THEN
		NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = f.instance_id
					AND w.node_id = f.id AND w.scope = f.stamp)
	  ELSE
		NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = f.instance_id
					AND t.node_id = f.id AND t.scope = f.stamp)
	  END
UNION ALL
SELECT p.instance_id::text, 'node_state_mismatch', p.id::text, p.stamp,
	   format('completed THEN node %s has its right child %s %s in the same scope',
			  p.id, c.id, c.status)
FROM df.nodes p0
JOIN LATERAL (SELECT p0.instance_id, p0.id, p0.status_details ->> 'execution_id' AS stamp) p ON true
JOIN df.nodes c ON c.instance_id = p0.instance_id AND c.id = p0.right_node
WHERE p0.node_type = 'THEN' AND p0.status = 'completed'
  AND c.status IN ('running', 'failed')
  AND c.status_details ->> 'execution_id' = p.stamp
UNION ALL
SELECT t.instance_id::text, 'task_of_finished_instance', t.node_id::text, t.scope,
	   format('%s task %s points at a %s instance', t.kind, t.id,
			  CASE WHEN i.id IS NULL THEN 'missing' ELSE COALESCE(d.status, 'finished') END)
FROM df_internal.tasks t
LEFT JOIN df.instances i ON i.id = t.instance_id
LEFT JOIN ended d ON d.id = t.instance_id
WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.id = t.instance_id)
UNION ALL
SELECT r.instance_id::text, 'orphan_run', NULL, NULL,
	   format('engine state kept for a %s instance',
			  CASE WHEN i.id IS NULL THEN 'missing' ELSE d.status END)
FROM df_internal.runs r
LEFT JOIN df.instances i ON i.id = r.instance_id
LEFT JOIN ended d ON d.id = r.instance_id
WHERE i.id IS NULL OR d.id IS NOT NULL
UNION ALL
SELECT i.id::text, 'missing_run', NULL, NULL, format('%s instance has no engine state', i.status)
FROM df.instances i
WHERE i.status IN ('pending', 'running')
  AND NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = i.id)
  AND NOT EXISTS (SELECT 1 FROM ended d WHERE d.id = i.id)
UNION ALL
-- df.instances.status disagrees with the engine (its owner may UPDATE it):
-- shown only, the engine goes by its own state and writes the status again
-- when the instance starts or ends
SELECT l.id::text, 'status_mismatch', NULL, NULL,
	   format('df.instances shows %s, the engine has the instance %s', l.shown, l.status)
FROM live l
WHERE l.shown IS DISTINCT FROM l.status
UNION ALL
SELECT i.id::text, 'status_mismatch', NULL, NULL,
	   format('df.instances shows %s, the instance ended %s', i.status, d.status)
FROM df.instances i
JOIN ended d ON d.id = i.id
WHERE i.status IS DISTINCT FROM d.status
  AND NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = i.id)
UNION ALL
SELECT j.instance_id::text, 'join_counter', j.node_id::text, j.scope,
	   format('JOIN %s in scope %s counts %s running branches, %s are unfinished',
			  j.node_id, j.scope, j.remaining, u.unfinished)
FROM df_internal.joins j
JOIN df.nodes jn ON jn.instance_id = j.instance_id AND jn.id = j.node_id
CROSS JOIN LATERAL (
	SELECT count(*) AS unfinished
	FROM edges e
	JOIN df.nodes b ON b.instance_id = e.instance_id AND b.id = e.child
	WHERE e.instance_id = j.instance_id AND e.parent = j.node_id
	  AND NOT (b.status IN ('completed', 'failed')
			   -- a branch ends in its own scope: "<scope>::<id>::1", or a later
			   -- generation when its root is a loop
			   AND starts_with(b.status_details ->> 'execution_id', j.scope || '::' || b.id || '::')
			   AND substr(b.status_details ->> 'execution_id',
						  length(j.scope || '::' || b.id || '::') + 1) ~ '^[0-9]+$')
) u
WHERE u.unfinished <> j.remaining
UNION ALL
SELECT t.instance_id::text, 'repeated_engine_errors', t.node_id::text, t.scope,
	   format('%s task %s%s failed %s times in the engine; last error: %s', t.kind, t.id,
			  CASE WHEN t.node_id IS NOT NULL THEN format(' of node %s', t.node_id) ELSE '' END,
			  t.engine_errors, left(t.last_engine_error, 200))
FROM df_internal.tasks t
WHERE t.engine_errors >= 2
$check$;

-- Failure handling (issue 15): df.sleep(float8), df.retry, df.timeout, df.catch, df.fail.
CREATE FUNCTION df.sleep(seconds float8) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_sleep_fraction';
COMMENT ON FUNCTION df.sleep(float8) IS
	'a durable timer of the given number of seconds, fractions allowed (to the millisecond); '
	'a whole number writes the same graph as df.sleep(bigint)';

-- Failure handling (orchestration-api.md §1): wrapper nodes whose settings
-- are one JSON object in query, with only the keys that differ from the
-- defaults.
CREATE FUNCTION df.retry(step text, max_attempts int DEFAULT 3,
						 initial_interval interval DEFAULT '1 second',
						 backoff_rate float8 DEFAULT 2.0,
						 max_interval interval DEFAULT '100 seconds',
						 jitter text DEFAULT 'full', retry_on text[] DEFAULT NULL,
						 non_retryable text[] DEFAULT NULL, max_duration interval DEFAULT NULL,
						 attempt_timeout interval DEFAULT NULL, mode text DEFAULT 'step')
	RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_retry';
COMMENT ON FUNCTION df.retry(text, int, interval, float8, interval, text, text[], text[], interval,
							 interval, text) IS
	'node RETRY: every SQL or HTTP step under it that fails with a retryable error runs again '
	'after a durable back-off, up to max_attempts tries in all (0 = unlimited)';

CREATE FUNCTION df.timeout(step text, seconds float8) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_timeout';
COMMENT ON FUNCTION df.timeout(text, float8) IS
	'node TIMEOUT: a durable deadline over the step; when it passes, the step is abandoned '
	'(its running SQL interrupted and rolled back) and the node fails with kind timeout';

CREATE FUNCTION df.catch(step text, handler text, errors text[] DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_catch';
COMMENT ON FUNCTION df.catch(text, text, text[]) IS
	'node CATCH: when the step fails with an error matching the patterns (every error when NULL), '
	'the handler runs with $error (kind, code, message, node) and its outcome is the node''s';

CREATE FUNCTION df.fail(message text, retryable boolean DEFAULT false) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_fail';
COMMENT ON FUNCTION df.fail(text, boolean) IS
	'node FAIL: fails with kind fail and the message (substitution applies)';


-- df.http gains fail_on, idempotency_key and breaker: a new signature, so the function is made anew; the
-- roles that could call the old one (df.grant_usage) keep their EXECUTE.
DO $upgrade$
DECLARE
	g record;
	holders text[] := '{}';
	fn oid;
	init aclitem[];
BEGIN
	FOR g IN
		SELECT a.grantee::regrole::text AS role, a.is_grantable
		FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		WHERE p.oid = 'df.http(text, text, text, jsonb, integer)'::pg_catalog.regprocedure
		  AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
	LOOP
		holders := holders || pg_catalog.format('%s%s', g.role,
						CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
	DROP FUNCTION df.http(text, text, text, jsonb, integer);
	CREATE FUNCTION df.http(url text, method text DEFAULT 'POST', body text DEFAULT NULL,
							headers jsonb DEFAULT NULL, timeout_seconds int DEFAULT 30,
							fail_on text DEFAULT NULL, idempotency_key text DEFAULT NULL,
							breaker text DEFAULT NULL) RETURNS text
		LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_http';
	REVOKE EXECUTE ON FUNCTION df.http(text, text, text, jsonb, int, text, text, text) FROM PUBLIC;
	fn := 'df.http(text, text, text, jsonb, integer, text, text, text)'::pg_catalog.regprocedure;
	SELECT p.proacl INTO init FROM pg_catalog.pg_proc p WHERE p.oid = fn;
	FOR i IN 1 .. coalesce(pg_catalog.array_length(holders, 1), 0) LOOP
		EXECUTE 'GRANT EXECUTE ON FUNCTION df.http(text, text, text, jsonb, integer, text, text, text) TO '
			|| holders[i];
	END LOOP;
	-- A grant made in an extension script is recorded as one of the
	-- extension's initial privileges, which pg_dump leaves out: the roles'
	-- grants above would be lost by a dump and restore.  The initial
	-- privileges stay those of a fresh install.
	UPDATE pg_catalog.pg_init_privs SET initprivs = init
	WHERE objoid = fn AND classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND objsubid = 0;
END
$upgrade$;
COMMENT ON FUNCTION df.http(text, text, text, jsonb, int, text, text, text) IS
	'an HTTP request step; fail_on lists the status classes or codes that fail it (''4xx,5xx'', '
	'''402,409''; default: 5xx fails, 4xx is returned); idempotency_key, a template, replaces '
	'the engine''s Idempotency-Key; breaker names the circuit breaker the call goes through';

-- df.start gains the instance-wide failure policy.
DROP FUNCTION df.start(text, text, text, text);
CREATE FUNCTION df.start(fut text, label text DEFAULT NULL, database text DEFAULT NULL,
						 transaction_mode text DEFAULT 'caller', max_attempts int DEFAULT 1,
						 max_backoff interval DEFAULT '16 seconds',
						 on_failure text DEFAULT 'fail') RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_start';
COMMENT ON FUNCTION df.start(text, text, text, text, int, interval, text) IS
	'start a workflow instance; returns its 8-hex id.  max_attempts, max_backoff and on_failure '
	'are the instance-wide failure policy: every SQL or HTTP step without its own df.retry is '
	'retried up to max_attempts with a back-off from 1 s, doubling, capped at max_backoff; '
	'on_failure ''continue'' lets a step that gives up end with {"error": {...}} as its result';


-- The new node types and events.
ALTER TABLE df.nodes DROP CONSTRAINT nodes_node_type_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_node_type_check
	CHECK (node_type IN ('SQL', 'THEN', 'IF', 'JOIN', 'LOOP', 'BREAK', 'RACE', 'SLEEP',
						 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						 'RETRY', 'TIMEOUT', 'CATCH', 'FAIL')) NOT VALID;
ALTER TABLE df.nodes DROP CONSTRAINT nodes_structure_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_structure_check CHECK (
	CASE
		WHEN node_type IN ('SQL', 'BREAK', 'SLEEP', 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						   'FAIL')
			THEN left_node IS NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type IN ('RETRY', 'TIMEOUT')
			THEN left_node IS NOT NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type = 'CATCH'
			THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'THEN' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		WHEN node_type = 'IF' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'LOOP' THEN left_node IS NOT NULL AND right_node IS NULL
		WHEN node_type = 'JOIN' THEN left_node IS NOT NULL AND right_node IS NOT NULL
		WHEN node_type = 'RACE' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		ELSE false
	END) NOT VALID;
ALTER TABLE df_internal.events DROP CONSTRAINT events_kind_check;
ALTER TABLE df_internal.events ADD CONSTRAINT events_kind_check
	CHECK (kind IN ('instance_started', 'node_started', 'node_completed',
					'node_failed', 'step_retried', 'signal_received',
					'instance_completed', 'instance_failed',
					'instance_cancelled',
					'retry_scheduled', 'retries_exhausted',
					'error_caught', 'timeout_fired'));

-- df.grant_usage and df.revoke_usage name the new df.http.
CREATE OR REPLACE FUNCTION df.grant_usage(p_role text, include_http boolean DEFAULT false,
							   with_grant boolean DEFAULT false) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	opt text := CASE WHEN with_grant THEN ' WITH GRANT OPTION' ELSE '' END;
BEGIN
	IF p_role IS NULL OR p_role = '' THEN
		RAISE EXCEPTION 'df.grant_usage: role name cannot be empty'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT has_schema_privilege('df', 'USAGE WITH GRANT OPTION') THEN
		RAISE EXCEPTION 'permission denied to grant pg_durable usage: current_user "%" does not hold USAGE on schema df WITH GRANT OPTION', current_user
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'A superuser can delegate this with df.grant_usage(role, with_grant => true).';
	END IF;

	EXECUTE format('GRANT USAGE ON SCHEMA df TO %I%s', p_role, opt);
	IF include_http THEN
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.http(text, text, text, jsonb, integer, text, text, text) TO %I%s', p_role, opt);
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.http_multipart(text, text, jsonb, jsonb, integer) TO %I%s', p_role, opt);
	END IF;
	IF with_grant THEN
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.grant_usage(text, boolean, boolean) TO %I%s', p_role, opt);
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.revoke_usage(text) TO %I%s', p_role, opt);
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.metrics() TO %I%s', p_role, opt);
	END IF;
	EXECUTE format('GRANT SELECT, UPDATE (status, updated_at), '
				   'INSERT (id, label, root_node, submitted_by, database) ON df.instances TO %I%s',
				   p_role, opt);
	EXECUTE format('GRANT SELECT, INSERT (id, instance_id, node_type, query, result_name, left_node, '
				   'right_node, submitted_by, database) ON df.nodes TO %I%s',
				   p_role, opt);
	EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON df.vars TO %I%s', p_role, opt);

	RAISE NOTICE 'pg_durable: granted df usage privileges to "%"', p_role;
END
$fn$;

CREATE OR REPLACE FUNCTION df.revoke_usage(p_role text) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	fn text;
BEGIN
	IF p_role IS NULL OR p_role = '' THEN
		RAISE EXCEPTION 'df.revoke_usage: role name cannot be empty'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT has_schema_privilege('df', 'USAGE WITH GRANT OPTION') THEN
		RAISE EXCEPTION 'permission denied to revoke pg_durable usage: current_user "%" does not hold USAGE on schema df WITH GRANT OPTION', current_user
			USING ERRCODE = 'insufficient_privilege';
	END IF;

	-- the caller may never have held these: nothing of its own to revoke
	FOREACH fn IN ARRAY ARRAY['df.http(text, text, text, jsonb, integer, text, text, text)',
							  'df.http_multipart(text, text, jsonb, jsonb, integer)',
							  'df.grant_usage(text, boolean, boolean)',
							  'df.revoke_usage(text)',
							  'df.metrics()']
	LOOP
		BEGIN
			EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %I CASCADE', fn, p_role);
		EXCEPTION WHEN insufficient_privilege THEN
			NULL;
		END;
	END LOOP;
	EXECUTE format('REVOKE SELECT, UPDATE (status, updated_at), '
				   'INSERT (id, label, root_node, submitted_by, database) ON df.instances FROM %I CASCADE',
				   p_role);
	EXECUTE format('REVOKE SELECT, INSERT (id, instance_id, node_type, query, result_name, left_node, '
				   'right_node, submitted_by, database) ON df.nodes FROM %I CASCADE',
				   p_role);
	EXECUTE format('REVOKE SELECT, INSERT, UPDATE, DELETE ON df.vars FROM %I CASCADE', p_role);
	EXECUTE format('REVOKE USAGE ON SCHEMA df FROM %I CASCADE', p_role);

	RAISE NOTICE 'pg_durable: revoked df usage privileges granted by "%" from "%"', current_user, p_role;
END
$fn$;

-- df.start's own node rows skip the nodes side of the root-node check (the
-- instance side checks them at the same commit), and no idx_nodes_instance:
-- the primary key serves every lookup by instance (issues 14, 22).
DROP TRIGGER instances_root_node_same_instance_fkey ON df.nodes;
CREATE CONSTRAINT TRIGGER instances_root_node_same_instance_fkey
	AFTER INSERT OR UPDATE OF instance_id, id OR DELETE ON df.nodes
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (pg_catalog.current_setting('pg_durable.start_inserts_nodes', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION df_internal.check_root_node();
DROP INDEX df.idx_nodes_instance;

-- Sagas (issue 16, orchestration-api.md §2): node COMPENSATED, a forward
-- step paired with its undo.  <~> has the precedence of ~> and groups left
-- to right, so it refuses a sequence as its left operand.
CREATE FUNCTION df.with_undo(forward text, undo text) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_with_undo';
COMMENT ON FUNCTION df.with_undo(text, text) IS
	'node COMPENSATED: run forward; when a later step of the saga fails, undo runs to compensate it '
	'(operator <~>)';
CREATE FUNCTION df.with_undo_op(forward text, undo text) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_with_undo_op';
COMMENT ON FUNCTION df.with_undo_op(text, text) IS
	'forward <~> undo: df.with_undo, refusing a sequence as forward (write a <~> a2 ~> (b <~> b2))';
CREATE OPERATOR <~> (LEFTARG = text, RIGHTARG = text, FUNCTION = df.with_undo_op);
COMMENT ON OPERATOR <~> (text, text) IS 'pg_durable: a step with its undo (df.with_undo)';
-- Node COMPENSATED (issue 16): a forward step (left) and its undo (right), no query.
ALTER TABLE df.nodes DROP CONSTRAINT nodes_node_type_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_node_type_check
	CHECK (node_type IN ('SQL', 'THEN', 'IF', 'JOIN', 'LOOP', 'BREAK', 'RACE', 'SLEEP',
						 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						 'RETRY', 'TIMEOUT', 'CATCH', 'FAIL', 'COMPENSATED')) NOT VALID;
ALTER TABLE df.nodes DROP CONSTRAINT nodes_structure_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_structure_check CHECK (
	CASE
		WHEN node_type IN ('SQL', 'BREAK', 'SLEEP', 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						   'FAIL')
			THEN left_node IS NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type IN ('RETRY', 'TIMEOUT')
			THEN left_node IS NOT NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type = 'CATCH'
			THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'COMPENSATED'
			THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		WHEN node_type = 'THEN' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		WHEN node_type = 'IF' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'LOOP' THEN left_node IS NOT NULL AND right_node IS NULL
		WHEN node_type = 'JOIN' THEN left_node IS NOT NULL AND right_node IS NOT NULL
		WHEN node_type = 'RACE' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		ELSE false
	END) NOT VALID;

-- Sagas (issue 16): the undos registered for an instance, one row each,
-- written in the transaction where the forward step of a COMPENSATED node
-- completed, with the named results visible there (json, to keep the
-- column order of "first column").  seq is the completion order.
CREATE TABLE df_internal.compensations (
	instance_id varchar(8) NOT NULL,
	seq bigserial,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	results json NOT NULL,
	registered_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	state text NOT NULL DEFAULT 'registered'
		CHECK (state IN ('registered', 'running', 'done', 'failed')),
	attempts int NOT NULL DEFAULT 0,
	error text,
	PRIMARY KEY (instance_id, seq)
);
COMMENT ON TABLE df_internal.compensations IS
	'the undos registered by completed forward steps of COMPENSATED nodes (df.compensations)';
SELECT pg_catalog.pg_extension_config_dump('df_internal.compensations', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.compensations_seq_seq', '');
ALTER TABLE df_internal.events DROP CONSTRAINT events_kind_check;
ALTER TABLE df_internal.events ADD CONSTRAINT events_kind_check
	CHECK (kind IN ('instance_started', 'node_started', 'node_completed',
					'node_failed', 'step_retried', 'signal_received',
					'instance_completed', 'instance_failed',
					'instance_cancelled',
					'retry_scheduled', 'retries_exhausted',
					'error_caught', 'timeout_fired',
					'undo_registered', 'compensation_started', 'undo_started',
					'undo_completed', 'undo_failed', 'instance_compensated'));
ALTER TABLE df.instances DROP CONSTRAINT instances_status_check;
ALTER TABLE df.instances ADD CONSTRAINT instances_status_check
	CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'compensated')) NOT VALID;

CREATE FUNCTION df.compensations(instance_id text)
	RETURNS TABLE (node_id text, undo_node_id text, forward_completed_at timestamptz, state text,
				   attempts int, error text, execution_id text)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_compensations';
COMMENT ON FUNCTION df.compensations(text) IS
	'the undos registered for an instance visible to the caller, in completion order of their '
	'forward steps: the COMPENSATED node, its undo, when the forward step completed, the undo''s '
	'state (registered, running, done, failed), attempts (the times the undo was started; the '
	'retries of its steps are in df.history) and error; execution_id is the scope the forward '
	'step ran in';
COMMENT ON FUNCTION df.status(text) IS 'status of an instance (pending, running, completed, failed, cancelled, compensated) or NULL';

-- df.cancel gains compensate (issue 16): a new signature, made anew.
DROP FUNCTION df.cancel(text, text);
CREATE FUNCTION df.cancel(instance_id text, reason text DEFAULT 'Cancelled by user',
						  compensate boolean DEFAULT false) RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_cancel';
COMMENT ON FUNCTION df.cancel(text, text, boolean) IS
	'cancel an instance that has not finished; with compensate, a running instance whose completed '
	'steps registered undos runs them (latest first) and ends compensated';
-- Idempotent starts (issue 17): df.start(…, idempotency_key), one instance
-- per submitting role and key.
ALTER TABLE df.instances ADD COLUMN idempotency_key text;
ALTER TABLE df.instances ADD COLUMN idempotency_digest text;
CREATE UNIQUE INDEX idx_instances_idempotency_key ON df.instances (submitted_by, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
DROP FUNCTION df.start(text, text, text, text, int, interval, text);
CREATE FUNCTION df.start(fut text, label text DEFAULT NULL, database text DEFAULT NULL,
						 transaction_mode text DEFAULT 'caller', max_attempts int DEFAULT 1,
						 max_backoff interval DEFAULT '16 seconds',
						 on_failure text DEFAULT 'fail',
						 idempotency_key text DEFAULT NULL) RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_start';
COMMENT ON FUNCTION df.start(text, text, text, text, int, interval, text, text) IS
	'start a workflow instance; returns its 8-hex id.  max_attempts, max_backoff and on_failure '
	'are the instance-wide failure policy: every SQL or HTTP step without its own df.retry is '
	'retried up to max_attempts with a back-off from 1 s, doubling, capped at max_backoff; '
	'on_failure ''continue'' lets a step that gives up end with {"error": {...}} as its result; '
	'idempotency_key: one instance per submitting role and key, a second start returns it';
-- the sizes of the executors' batches (issue 14)
CREATE FUNCTION df_internal.batch_sizes() RETURNS TABLE (tasks integer, batches bigint)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_batch_sizes';
REVOKE EXECUTE ON FUNCTION df_internal.batch_sizes() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.batch_sizes() IS 'how many committed executor transactions (batches) ran each number of tasks since the server started (issue 14)';

-- Keyed locks (issue 17, orchestration-api.md §3): node LOCK, df.with_lock,
-- their tables, df.locks, and df.check's lock problems.
CREATE FUNCTION df.with_lock(step text, keys text[], mode text DEFAULT 'exclusive',
							 wait_timeout interval DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_with_lock';
COMMENT ON FUNCTION df.with_lock(text, text[], text, interval) IS
	'node LOCK: step runs holding every key (templates, taken in byte order; exclusive or shared, '
	'FIFO waiters); wait_timeout fails it with kind lock_timeout; $lock.token is the fencing token';
ALTER TABLE df.nodes DROP CONSTRAINT nodes_node_type_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_node_type_check
	CHECK (node_type IN ('SQL', 'THEN', 'IF', 'JOIN', 'LOOP', 'BREAK', 'RACE', 'SLEEP',
						 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						 'RETRY', 'TIMEOUT', 'CATCH', 'FAIL', 'COMPENSATED', 'LOCK')) NOT VALID;
ALTER TABLE df.nodes DROP CONSTRAINT nodes_structure_check;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_structure_check CHECK (
	CASE
		WHEN node_type IN ('SQL', 'BREAK', 'SLEEP', 'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL',
						   'FAIL')
			THEN left_node IS NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type IN ('RETRY', 'TIMEOUT', 'LOCK')
			THEN left_node IS NOT NULL AND right_node IS NULL AND query IS NOT NULL
		WHEN node_type = 'CATCH'
			THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'COMPENSATED'
			THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		WHEN node_type = 'THEN' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		WHEN node_type = 'IF' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NOT NULL
		WHEN node_type = 'LOOP' THEN left_node IS NOT NULL AND right_node IS NULL
		WHEN node_type = 'JOIN' THEN left_node IS NOT NULL AND right_node IS NOT NULL
		WHEN node_type = 'RACE' THEN left_node IS NOT NULL AND right_node IS NOT NULL AND query IS NULL
		ELSE false
	END) NOT VALID;

-- Keyed locks (issue 17, orchestration-api.md §3): node LOCK holds its keys
-- while its step runs.  locks has one row per key a LOCK node execution
-- holds or waits for (seq: the order of the requests, FIFO per key);
-- lock_keys one row per key with entries, the row every change of that
-- key's entries locks first.  Fencing tokens come from one sequence, so
-- every key's tokens only grow.  Keys compare in byte order (COLLATE "C"),
-- the canonical order in which they are taken.
CREATE SEQUENCE df_internal.lock_tokens;
CREATE TABLE df_internal.lock_keys (
	key text COLLATE "C" PRIMARY KEY
);
CREATE TABLE df_internal.locks (
	seq bigserial NOT NULL,
	key text COLLATE "C" NOT NULL,
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	mode text NOT NULL CHECK (mode IN ('exclusive', 'shared')),
	held boolean NOT NULL,
	token bigint,
	requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	since timestamptz,
	PRIMARY KEY (key, seq)
);
CREATE INDEX locks_instance_idx ON df_internal.locks (instance_id, node_id);
COMMENT ON TABLE df_internal.lock_keys IS 'the keys of df.with_lock that have holders or waiters';
COMMENT ON TABLE df_internal.locks IS
	'the keys each LOCK node execution (df.with_lock) holds or waits for, in request order';
SELECT pg_catalog.pg_extension_config_dump('df_internal.lock_keys', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.locks', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.locks_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.lock_tokens', '');

-- What the caller may see of them: the entries of the instances df.instances
-- shows it (its own; everything for a superuser or a BYPASSRLS role).
-- waiters counts every waiter of the key.
CREATE VIEW df.locks AS
SELECT l.key, l.instance_id::text AS holder, l.node_id::text AS node_id, l.mode,
	   CASE WHEN l.held THEN 'held' ELSE 'waiting' END AS state,
	   COALESCE(l.since, l.requested_at) AS since,
	   (SELECT pg_catalog.count(*) FROM df_internal.locks w
		WHERE w.key OPERATOR(pg_catalog.=) l.key AND NOT w.held) AS waiters,
	   l.token
FROM df_internal.locks l
JOIN df_internal.runs r ON r.instance_id OPERATOR(pg_catalog.=) l.instance_id
WHERE r.submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole
   OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles x
			  WHERE x.rolname OPERATOR(pg_catalog.=) current_user AND (x.rolsuper OR x.rolbypassrls));
COMMENT ON VIEW df.locks IS
	'the keys of df.with_lock held or waited for by the caller''s instances: key, holder (the '
	'instance), node, mode, state (held, waiting), since, waiters (of the key, all roles), token';
GRANT SELECT ON df.locks TO PUBLIC;

CREATE OR REPLACE FUNCTION df_internal.check_rows()
	RETURNS TABLE (instance_id text, problem text, node_id text, scope text, detail text)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $check$
WITH RECURSIVE ended AS (
	-- how an instance ended, by its last instance_* event: the engine's word,
	-- which its owner cannot change (df.instances.status it can: UPDATE)
	SELECT DISTINCT ON (e.instance_id) e.instance_id AS id, substr(e.kind, 10) AS status
	FROM df_internal.events e
	WHERE e.kind IN ('instance_completed', 'instance_failed', 'instance_cancelled',
					 'instance_compensated')
	ORDER BY e.instance_id, e.id DESC
), live AS (
	-- live by the engine's own state: a runs row of an instance that has not ended
	SELECT i.id, r.status, i.status AS shown
	FROM df.instances i JOIN df_internal.runs r ON r.instance_id = i.id
	WHERE NOT EXISTS (SELECT 1 FROM ended d WHERE d.id = i.id)
), nodes AS (
	SELECT n.instance_id, n.id, n.node_type, n.status, n.query, n.left_node, n.right_node,
		   n.status_details ->> 'execution_id' AS stamp
	FROM df.nodes n JOIN live l ON l.id = n.instance_id
), edges AS (
	SELECT n.instance_id, c.child, n.id AS parent
	FROM nodes n
	CROSS JOIN LATERAL (
		SELECT n.left_node::text
		UNION ALL SELECT n.right_node::text
		UNION ALL SELECT n.query::jsonb ->> 'condition_node'
			WHERE n.node_type IN ('IF', 'LOOP') AND n.query LIKE '{%'
		UNION ALL SELECT e FROM jsonb_array_elements_text(
			CASE WHEN n.node_type = 'JOIN' AND n.query LIKE '{%'
				 AND jsonb_typeof(n.query::jsonb -> 'extra_nodes') = 'array'
			THEN n.query::jsonb -> 'extra_nodes' ELSE '[]' END) e
	) c(child)
	JOIN df.nodes x ON x.instance_id = n.instance_id AND x.id = c.child
	WHERE c.child IS NOT NULL
), leaves AS (
	SELECT n.* FROM nodes n JOIN live l ON l.id = n.instance_id AND l.status = 'running'
	WHERE n.status = 'running' AND n.stamp IS NOT NULL
	  AND n.node_type IN ('SQL', 'HTTP', 'HTTP_MULTIPART', 'SLEEP', 'WAIT_SCHEDULE', 'SIGNAL')
), walk AS (
	-- from each running leaf up to the root: every ancestor must be running
	-- and stamped with the leaf's scope or an enclosing one
	SELECT f.instance_id, f.id AS leaf, f.id AS node, f.stamp, true AS ok FROM leaves f
	UNION ALL
	SELECT w.instance_id, w.leaf, p.id, p.stamp,
		   p.status = 'running' AND p.stamp IS NOT NULL
		   AND (w.stamp = p.stamp OR starts_with(w.stamp, p.stamp || '::'))
	FROM walk w
	JOIN edges e ON e.instance_id = w.instance_id AND e.child = w.node
	JOIN nodes p ON p.instance_id = e.instance_id AND p.id = e.parent
	WHERE w.ok
), live_leaves AS (
	SELECT f.* FROM leaves f
	WHERE NOT EXISTS (SELECT 1 FROM walk w
					  WHERE w.instance_id = f.instance_id AND w.leaf = f.id AND NOT w.ok)
)
SELECT l.id::text, 'no_pending_work', NULL::text, NULL::text,
	   format('%s instance has no task, timer or signal wait', l.status)
FROM live l
WHERE NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = l.id)
  AND NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = l.id)
  -- a LOCK node waiting for a key is woken by the release that hands it over
  AND NOT EXISTS (SELECT 1 FROM df_internal.locks k WHERE k.instance_id = l.id AND NOT k.held)
UNION ALL
SELECT f.instance_id::text,
	   CASE f.node_type WHEN 'SIGNAL' THEN 'missing_wait'
			WHEN 'SLEEP' THEN 'missing_timer' WHEN 'WAIT_SCHEDULE' THEN 'missing_timer'
			ELSE 'stranded_step' END,
	   f.id::text, f.stamp,
	   format('running %s node %s in scope %s has no %s', f.node_type, f.id, f.stamp,
			  CASE f.node_type WHEN 'SIGNAL' THEN 'registered signal wait'
				   WHEN 'SLEEP' THEN 'timer' WHEN 'WAIT_SCHEDULE' THEN 'timer' ELSE 'task' END)
FROM live_leaves f
WHERE CASE WHEN f.node_type = 'SIGNAL' THEN
		NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = f.instance_id
					AND w.node_id = f.id AND w.scope = f.stamp)
	  ELSE
		NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = f.instance_id
					AND t.node_id = f.id AND t.scope = f.stamp)
	  END
UNION ALL
SELECT p.instance_id::text, 'node_state_mismatch', p.id::text, p.stamp,
	   format('completed THEN node %s has its right child %s %s in the same scope',
			  p.id, c.id, c.status)
FROM df.nodes p0
JOIN LATERAL (SELECT p0.instance_id, p0.id, p0.status_details ->> 'execution_id' AS stamp) p ON true
JOIN df.nodes c ON c.instance_id = p0.instance_id AND c.id = p0.right_node
WHERE p0.node_type = 'THEN' AND p0.status = 'completed'
  AND c.status IN ('running', 'failed')
  AND c.status_details ->> 'execution_id' = p.stamp
UNION ALL
SELECT t.instance_id::text, 'task_of_finished_instance', t.node_id::text, t.scope,
	   format('%s task %s points at a %s instance', t.kind, t.id,
			  CASE WHEN i.id IS NULL THEN 'missing' ELSE COALESCE(d.status, 'finished') END)
FROM df_internal.tasks t
LEFT JOIN df.instances i ON i.id = t.instance_id
LEFT JOIN ended d ON d.id = t.instance_id
WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.id = t.instance_id)
UNION ALL
SELECT r.instance_id::text, 'orphan_run', NULL, NULL,
	   format('engine state kept for a %s instance',
			  CASE WHEN i.id IS NULL THEN 'missing' ELSE d.status END)
FROM df_internal.runs r
LEFT JOIN df.instances i ON i.id = r.instance_id
LEFT JOIN ended d ON d.id = r.instance_id
WHERE i.id IS NULL OR d.id IS NOT NULL
UNION ALL
SELECT i.id::text, 'missing_run', NULL, NULL, format('%s instance has no engine state', i.status)
FROM df.instances i
WHERE i.status IN ('pending', 'running')
  AND NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = i.id)
  AND NOT EXISTS (SELECT 1 FROM ended d WHERE d.id = i.id)
UNION ALL
-- df.instances.status disagrees with the engine (its owner may UPDATE it):
-- shown only, the engine goes by its own state and writes the status again
-- when the instance starts or ends
SELECT l.id::text, 'status_mismatch', NULL, NULL,
	   format('df.instances shows %s, the engine has the instance %s', l.shown, l.status)
FROM live l
WHERE l.shown IS DISTINCT FROM l.status
UNION ALL
SELECT i.id::text, 'status_mismatch', NULL, NULL,
	   format('df.instances shows %s, the instance ended %s', i.status, d.status)
FROM df.instances i
JOIN ended d ON d.id = i.id
WHERE i.status IS DISTINCT FROM d.status
  AND NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = i.id)
UNION ALL
SELECT j.instance_id::text, 'join_counter', j.node_id::text, j.scope,
	   format('JOIN %s in scope %s counts %s running branches, %s are unfinished',
			  j.node_id, j.scope, j.remaining, u.unfinished)
FROM df_internal.joins j
JOIN df.nodes jn ON jn.instance_id = j.instance_id AND jn.id = j.node_id
CROSS JOIN LATERAL (
	SELECT count(*) AS unfinished
	FROM edges e
	JOIN df.nodes b ON b.instance_id = e.instance_id AND b.id = e.child
	WHERE e.instance_id = j.instance_id AND e.parent = j.node_id
	  AND NOT (b.status IN ('completed', 'failed')
			   -- a branch ends in its own scope: "<scope>::<id>::1", or a later
			   -- generation when its root is a loop
			   AND starts_with(b.status_details ->> 'execution_id', j.scope || '::' || b.id || '::')
			   AND substr(b.status_details ->> 'execution_id',
						  length(j.scope || '::' || b.id || '::') + 1) ~ '^[0-9]+$')
) u
WHERE u.unfinished <> j.remaining
UNION ALL
SELECT t.instance_id::text, 'repeated_engine_errors', t.node_id::text, t.scope,
	   format('%s task %s%s failed %s times in the engine; last error: %s', t.kind, t.id,
			  CASE WHEN t.node_id IS NOT NULL THEN format(' of node %s', t.node_id) ELSE '' END,
			  t.engine_errors, left(t.last_engine_error, 200))
FROM df_internal.tasks t
WHERE t.engine_errors >= 2
UNION ALL
-- keyed locks (issue 17): nothing is held or waited for by a node that is
-- not running in the entry's scope, and every waiter has an entry ahead of
-- it that keeps it waiting (whose release will wake it)
SELECT k.instance_id::text, 'lock_of_ended_node', k.node_id::text, k.scope,
	   format('%s entry for key %s belongs to LOCK node %s, which is not running in scope %s',
			  CASE WHEN k.held THEN 'a held' ELSE 'a waiting' END, k.key, k.node_id, k.scope)
FROM df_internal.locks k
LEFT JOIN df.nodes n ON n.instance_id = k.instance_id AND n.id = k.node_id
WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.id = k.instance_id)
   OR n.id IS NULL OR n.status IS DISTINCT FROM 'running'
   OR n.status_details ->> 'execution_id' IS DISTINCT FROM k.scope
UNION ALL
SELECT k.instance_id::text, 'lock_wait_stuck', k.node_id::text, k.scope,
	   format('LOCK node %s waits for key %s, but no entry ahead of it holds or waits for that key in a conflicting mode',
			  k.node_id, k.key)
FROM df_internal.locks k
WHERE NOT k.held
  AND NOT EXISTS (SELECT 1 FROM df_internal.locks x
				  WHERE x.key = k.key AND x.seq < k.seq
					AND (x.mode = 'exclusive' OR k.mode = 'exclusive'))
UNION ALL
-- a LOCK node that waited and has neither a key to wait for nor a task to go on
SELECT n.instance_id::text, 'lock_wait_stuck', n.id::text, n.stamp,
	   format('LOCK node %s in scope %s waits, but has no waiting entry and no task', n.id, n.stamp)
FROM nodes n
JOIN live l ON l.id = n.instance_id AND l.status = 'running'
JOIN df.nodes d ON d.instance_id = n.instance_id AND d.id = n.id
WHERE n.node_type = 'LOCK' AND n.status = 'running' AND n.stamp IS NOT NULL
  AND d.status_details ->> 'lock_state' = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM df_internal.locks k WHERE k.instance_id = n.instance_id
				  AND k.node_id = n.id AND k.scope = n.stamp AND NOT k.held)
  AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = n.instance_id
				  AND t.node_id = n.id AND t.scope = n.stamp)
$check$;

-- keyed locks (issue 17): the events of a LOCK node that had to wait
ALTER TABLE df_internal.events DROP CONSTRAINT events_kind_check;
ALTER TABLE df_internal.events ADD CONSTRAINT events_kind_check
	CHECK (kind IN ('instance_started', 'node_started', 'node_completed',
					'node_failed', 'step_retried', 'signal_received',
					'instance_completed', 'instance_failed',
					'instance_cancelled',
					'retry_scheduled', 'retries_exhausted',
					'error_caught', 'timeout_fired',
					'undo_registered', 'compensation_started', 'undo_started',
					'undo_completed', 'undo_failed', 'instance_compensated',
					'lock_waiting', 'lock_acquired', 'lock_timeout'));
