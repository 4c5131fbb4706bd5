/*
 * pg_durable install script.
 *
 * The control file sets schema = pg_catalog so that the unqualified CREATE
 * OPERATOR statements land in pg_catalog (usable whatever the search_path);
 * everything else is created in schema df, or in the private schema
 * df_internal that holds the engine's own objects.  Nothing is granted to
 * PUBLIC except where a statement below says so: schema USAGE on df is the
 * gate for ordinary users.
 */

\echo Use "CREATE EXTENSION pg_durable" to load this file. \quit

DO $check$
BEGIN
	IF current_setting('pg_durable.database', true) IS NULL THEN
		RAISE EXCEPTION 'pg_durable must be loaded via shared_preload_libraries'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Add pg_durable to shared_preload_libraries in postgresql.conf and restart the server.';
	END IF;
	IF current_database() OPERATOR(pg_catalog.<>) current_setting('pg_durable.database') THEN
		RAISE EXCEPTION 'pg_durable extension must be created in database "%" (currently in "%"). Connect to "%" or change pg_durable.database.',
			current_setting('pg_durable.database'), current_database(), current_setting('pg_durable.database')
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'pg_durable.database is a server setting; changing it requires a restart.';
	END IF;
END
$check$;

CREATE SCHEMA df;
CREATE SCHEMA df_internal;
REVOKE ALL ON SCHEMA df FROM PUBLIC;
REVOKE ALL ON SCHEMA df_internal FROM PUBLIC;

COMMENT ON SCHEMA df IS 'pg_durable: workflow DSL, control and monitoring functions';
COMMENT ON SCHEMA df_internal IS 'pg_durable: private engine state';

-- ---------------------------------------------------------------------------
-- Information
-- ---------------------------------------------------------------------------

CREATE FUNCTION df.version() RETURNS text
	LANGUAGE c STRICT STABLE AS 'MODULE_PATHNAME', 'pgd_version';
COMMENT ON FUNCTION df.version() IS 'pg_durable version and build time';

CREATE FUNCTION df.target_database() RETURNS text
	LANGUAGE c STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'pgd_target_database';
COMMENT ON FUNCTION df.target_database() IS 'the database the extension and its executors live in (pg_durable.database)';

-- The row checks of df.nodes and df_internal.events that name every node
-- type or event kind (src/store/row_checks.c): PostgreSQL prepares a table's
-- CHECK expressions again in every statement that writes a row, and as IN
-- lists and a CASE over the node types they took a third of an executor's
-- CPU.  Anyone may call them: whoever writes a node or an event runs them.
CREATE FUNCTION df_internal.id_ok(id text) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'pgd_id_ok';
COMMENT ON FUNCTION df_internal.id_ok(text) IS 'id is 8 lowercase hexadecimal digits, as an instance''s or a node''s';
CREATE FUNCTION df_internal.node_type_ok(node_type text) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'pgd_node_type_ok';
COMMENT ON FUNCTION df_internal.node_type_ok(text) IS 'node_type is one of pg_durable''s node types';
CREATE FUNCTION df_internal.node_shape_ok(node_type text, has_left boolean, has_right boolean,
										  has_query boolean) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'pgd_node_shape_ok';
COMMENT ON FUNCTION df_internal.node_shape_ok(text, boolean, boolean, boolean) IS
	'a node of this type has exactly the children and query its type takes';
CREATE FUNCTION df_internal.event_kind_ok(kind text) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'pgd_event_kind_ok';
COMMENT ON FUNCTION df_internal.event_kind_ok(text) IS 'kind is one of the kinds of df.history''s events';

CREATE FUNCTION df.duroxide_schema() RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT 'df_internal'::text $$;
COMMENT ON FUNCTION df.duroxide_schema() IS 'name of the private engine schema that holds _worker_ready';

-- ---------------------------------------------------------------------------
-- Variables
-- ---------------------------------------------------------------------------

CREATE TABLE df.vars (
	name text NOT NULL,
	value text,
	owner regrole NOT NULL DEFAULT pg_catalog.quote_ident(current_user)::regrole,
	PRIMARY KEY (owner, name)
);
ALTER TABLE df.vars ENABLE ROW LEVEL SECURITY;
CREATE POLICY vars_user_isolation ON df.vars FOR ALL
	USING (owner OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole)
	WITH CHECK (owner OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole);
SELECT pg_catalog.pg_extension_config_dump('df.vars', '');
COMMENT ON TABLE df.vars IS 'workflow variables per role, snapshotted by df.start';

CREATE FUNCTION df.setvar(name text, value text) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_setvar';
COMMENT ON FUNCTION df.setvar(text, text) IS 'set a workflow variable of the current role ({name} in workflow text)';

CREATE FUNCTION df.getvar(name text) RETURNS text
	LANGUAGE c STRICT STABLE AS 'MODULE_PATHNAME', 'pgd_getvar';
COMMENT ON FUNCTION df.getvar(text) IS 'value of a workflow variable of the current role, or NULL';

CREATE FUNCTION df.unsetvar(name text) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_unsetvar';
COMMENT ON FUNCTION df.unsetvar(text) IS 'remove a workflow variable of the current role';

CREATE FUNCTION df.clearvars() RETURNS text
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_clearvars';
COMMENT ON FUNCTION df.clearvars() IS 'remove every workflow variable of the current role';

-- ---------------------------------------------------------------------------
-- DSL builders: pure functions returning Durofut JSON text
-- ---------------------------------------------------------------------------

CREATE FUNCTION df.sql(query text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_sql';
COMMENT ON FUNCTION df.sql(text) IS 'a SQL step';

CREATE FUNCTION df.seq(a text, b text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_seq';
COMMENT ON FUNCTION df.seq(text, text) IS 'run a, then b (operator ~>)';

CREATE FUNCTION df.as(fut text, name text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_as';
COMMENT ON FUNCTION df.as(text, text) IS 'name the result of a step so later steps can use $name (operator |=>)';

CREATE FUNCTION df.as_op(fut text, name text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_as';
COMMENT ON FUNCTION df.as_op(text, text) IS 'implementation of operator |=>';

CREATE FUNCTION df.sleep(seconds bigint) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_sleep';
COMMENT ON FUNCTION df.sleep(bigint) IS 'a durable timer of the given number of seconds';

CREATE FUNCTION df.sleep(seconds float8) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_sleep_fraction';
COMMENT ON FUNCTION df.sleep(float8) IS
	'a durable timer of the given number of seconds, fractions allowed (to the millisecond); '
	'a whole number writes the same graph as df.sleep(bigint)';

-- Failure handling (docs/design/failure-handling.md): wrapper nodes whose settings
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

CREATE FUNCTION df.wait_for_schedule(cron_expr text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_wait_for_schedule';
COMMENT ON FUNCTION df.wait_for_schedule(text) IS 'wait for the next tick of a 5-field cron expression (UTC)';

-- df.loop, df.http, df.start and df.cancel keep pg_durable 0.2.6's
-- identities, so that a GRANT or REVOKE written for it names them, and take
-- their further options in an overload whose first parameter is varchar: a
-- call with only 0.2.6's arguments resolves to the 0.2.6 function (text is
-- the preferred string type), a call with an option to the overload.  The
-- overload runs only for a role that may execute the 0.2.6 function
-- (common/overloads.c), so that a privilege on it means what it did.
CREATE FUNCTION df.loop(body text, condition text DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_loop';
COMMENT ON FUNCTION df.loop(text, text) IS
	'repeat body forever, or while condition is true after each run (prefix operator @>)';
-- pg_durable 0.2.8 declared df.loop(text, text, boolean): kept, without
-- defaults, for the GRANTs written for it (with defaults it would make
-- df.loop(body) ambiguous).
CREATE FUNCTION df.loop(body text, condition text, continue_on_failure boolean) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_loop';
COMMENT ON FUNCTION df.loop(text, text, boolean) IS
	'df.loop with all three arguments, under the identity pg_durable 0.2.8 gave it';
CREATE FUNCTION df.loop(body varchar, condition text DEFAULT NULL,
						continue_on_failure boolean DEFAULT false) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_loop';
COMMENT ON FUNCTION df.loop(varchar, text, boolean) IS
	'repeat body forever, or while condition is true after each run (prefix operator @>); '
	'with continue_on_failure, a body run that fails with an error code starts the next '
	'iteration without the condition';

CREATE FUNCTION df.loop_prefix_op(body text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_loop_prefix';
COMMENT ON FUNCTION df.loop_prefix_op(text) IS 'implementation of prefix operator @>';

CREATE FUNCTION df.break(value text DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_break';
COMMENT ON FUNCTION df.break(text) IS 'leave the nearest enclosing loop with a value';

CREATE FUNCTION df.if(condition text, then_branch text, else_branch text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_if';
COMMENT ON FUNCTION df.if(text, text, text) IS 'run then_branch if condition is truthy, else else_branch (operators ?> and !>)';

CREATE FUNCTION df.if_rows(result_name text, then_branch text, else_branch text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_if_rows';
COMMENT ON FUNCTION df.if_rows(text, text, text) IS 'run then_branch if the named result has rows, else else_branch';

CREATE FUNCTION df.if_then_op(condition text, then_branch text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_if_then_op';
COMMENT ON FUNCTION df.if_then_op(text, text) IS 'implementation of operator ?> (a partial if, completed by !>)';

CREATE FUNCTION df.if_else_op(partial_if text, else_branch text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_if_else_op';
COMMENT ON FUNCTION df.if_else_op(text, text) IS 'implementation of operator !>';

CREATE FUNCTION df.join(a text, b text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_join';
COMMENT ON FUNCTION df.join(text, text) IS 'run a and b in parallel and wait for both (operator &)';

CREATE FUNCTION df.join3(a text, b text, c text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_join3';
COMMENT ON FUNCTION df.join3(text, text, text) IS 'run three branches in parallel and wait for all';

CREATE FUNCTION df.race(a text, b text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_race';
COMMENT ON FUNCTION df.race(text, text) IS 'run a and b in parallel; the first to finish decides (operator |)';

CREATE FUNCTION df.wait_for_signal(name text, timeout_seconds int DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_wait_for_signal';
COMMENT ON FUNCTION df.wait_for_signal(text, int) IS 'wait for df.signal(instance, name, data), optionally with a timeout';

CREATE FUNCTION df.http(url text, method text DEFAULT 'POST', body text DEFAULT NULL,
						headers jsonb DEFAULT NULL, timeout_seconds int DEFAULT 30) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_http';
COMMENT ON FUNCTION df.http(text, text, text, jsonb, int) IS
	'an HTTP request step (a 5xx fails it, a 4xx is its result); EXECUTE on this function is '
	'what lets a role''s workflows make HTTP calls';
CREATE FUNCTION df.http(url varchar, method text DEFAULT 'POST', body text DEFAULT NULL,
						headers jsonb DEFAULT NULL, timeout_seconds int DEFAULT 30,
						fail_on text DEFAULT NULL, idempotency_key text DEFAULT NULL,
						breaker text DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_http';
COMMENT ON FUNCTION df.http(varchar, text, text, jsonb, int, text, text, text) IS
	'an HTTP request step; fail_on lists the status classes or codes that fail it (''4xx,5xx'', '
	'''402,409''; default: 5xx fails, 4xx is returned); idempotency_key, a template, replaces '
	'the engine''s Idempotency-Key; breaker names the circuit breaker the call goes through';

CREATE FUNCTION df.http_multipart(url text, method text DEFAULT 'POST', parts jsonb DEFAULT NULL,
								  headers jsonb DEFAULT NULL, timeout_seconds int DEFAULT 30) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_http_multipart';
COMMENT ON FUNCTION df.http_multipart(text, text, jsonb, jsonb, int) IS 'an HTTP multipart/form-data request step';

REVOKE EXECUTE ON FUNCTION df.http(text, text, text, jsonb, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.http_multipart(text, text, jsonb, jsonb, int) FROM PUBLIC;

CREATE FUNCTION df_internal.validate_graph(graph text) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_validate_graph';
COMMENT ON FUNCTION df_internal.validate_graph(text) IS 'NULL if df.start would accept the graph, else the error message it would raise';

CREATE FUNCTION df.explain(input text) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_explain';
COMMENT ON FUNCTION df.explain(text) IS 'render a workflow graph, DSL expression or instance as a tree';

CREATE FUNCTION df.explain(input text, format text) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_explain_format';
COMMENT ON FUNCTION df.explain(text, text) IS 'render a workflow graph, DSL expression or instance as a tree (format ''text'') or as a Graphviz digraph (format ''dot''), live instances coloured by node status';

CREATE FUNCTION df_internal.cron_next(cron_expr text, after timestamptz) RETURNS timestamptz
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_cron_next';
COMMENT ON FUNCTION df_internal.cron_next(text, timestamptz) IS 'next tick of a cron expression strictly after a time (UTC); NULL if none';

-- ---------------------------------------------------------------------------
-- Operators (in pg_catalog: all share one precedence, left-associative)
-- ---------------------------------------------------------------------------

CREATE OPERATOR ~> (LEFTARG = text, RIGHTARG = text, FUNCTION = df.seq);
CREATE OPERATOR |=> (LEFTARG = text, RIGHTARG = text, FUNCTION = df.as_op);
CREATE OPERATOR & (LEFTARG = text, RIGHTARG = text, FUNCTION = df.join);
CREATE OPERATOR | (LEFTARG = text, RIGHTARG = text, FUNCTION = df.race);
CREATE OPERATOR ?> (LEFTARG = text, RIGHTARG = text, FUNCTION = df.if_then_op);
CREATE OPERATOR !> (LEFTARG = text, RIGHTARG = text, FUNCTION = df.if_else_op);
CREATE OPERATOR @> (RIGHTARG = text, FUNCTION = df.loop_prefix_op);

COMMENT ON OPERATOR ~> (text, text) IS 'pg_durable: sequence (df.seq)';
COMMENT ON OPERATOR |=> (text, text) IS 'pg_durable: name a result (df.as)';
COMMENT ON OPERATOR & (text, text) IS 'pg_durable: parallel join (df.join)';
COMMENT ON OPERATOR | (text, text) IS 'pg_durable: race (df.race)';
COMMENT ON OPERATOR ?> (text, text) IS 'pg_durable: if-then, completed by !>';
COMMENT ON OPERATOR !> (text, text) IS 'pg_durable: else (df.if)';
COMMENT ON OPERATOR @> (NONE, text) IS 'pg_durable: loop (df.loop)';

-- Sagas (docs/design/sagas.md): node COMPENSATED, a forward
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
CREATE FUNCTION df.saga(body text, on_compensated text DEFAULT NULL,
						parallel boolean DEFAULT false, on_undo_failure text DEFAULT 'stop')
	RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_saga';
COMMENT ON FUNCTION df.saga(text, text, boolean, text) IS
	'node SAGA: when body fails, the undos registered inside it run, latest first (all at once '
	'when parallel), then on_compensated, whose result is the saga''s; on_undo_failure ''stop'' '
	'ends the instance failed with the rest pending (df.compensate resumes), ''continue'' runs the others';

CREATE FUNCTION df.map(query text, step text, max_concurrent int DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_map';
COMMENT ON FUNCTION df.map(text, text, int) IS
	'node MAP: run query once (a SQL step), then step once per row with $item bound to the row, '
	'at most max_concurrent at a time; the result is the array of the steps'' results in row order';
-- Lanes mode: chosen by giving collect (no default, so that the three
-- arguments above never pick this one).
CREATE FUNCTION df.map(query text, step text, max_concurrent int, collect boolean,
	tolerated_failures int DEFAULT 0) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_map_lanes';
COMMENT ON FUNCTION df.map(text, text, int, boolean, int) IS
	'node MAP in lanes mode: the query''s rows go to a table, and max_concurrent lanes (32 when NULL) '
	'run step once per row, one row after another; the result is the array of the steps'' results '
	'(collect) or {"items", "succeeded", "failed"}; up to tolerated_failures rows may fail';

-- Keyed locks (docs/design/locks-and-limits.md §1): node LOCK.
CREATE FUNCTION df.with_lock(step text, keys text[], mode text DEFAULT 'exclusive',
							 wait_timeout interval DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_with_lock';
COMMENT ON FUNCTION df.with_lock(text, text[], text, interval) IS
	'node LOCK: step runs holding every key (templates, taken in byte order; exclusive or shared, '
	'FIFO waiters); wait_timeout fails it with kind lock_timeout; $lock.token is the fencing token';

-- ---------------------------------------------------------------------------
-- Instances and nodes (the reference's user-visible tables)
-- ---------------------------------------------------------------------------

CREATE TABLE df.instances (
	id varchar(8) PRIMARY KEY,
	label text,
	root_node varchar(8) NOT NULL,
	status text DEFAULT 'pending',
	submitted_by regrole NOT NULL,
	database text,
	created_at timestamptz DEFAULT now(),
	updated_at timestamptz DEFAULT now(),
	completed_at timestamptz,
	CONSTRAINT instances_identity_key UNIQUE (id, submitted_by),
	idempotency_key text,
	idempotency_digest text,
	trace_id text,
	traceparent text,
	tracestate text
) WITH (fillfactor = 50);
-- An instance's row is updated once or twice (running, then ended), never
-- HOT (its status is indexed, as in the reference): room on its page keeps
-- the new version there, without the lock record of a row moved to another
-- page.  A one-step workflow wrote 3,209 bytes of WAL on full pages, 3,089
-- at 50.
ALTER TABLE df.instances ADD CONSTRAINT instances_id_check
	CHECK (df_internal.id_ok(id)) NOT VALID;
ALTER TABLE df.instances ADD CONSTRAINT instances_root_node_check
	CHECK (df_internal.id_ok(root_node)) NOT VALID;
ALTER TABLE df.instances ADD CONSTRAINT instances_status_check
	CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'compensated')) NOT VALID;
CREATE INDEX idx_instances_status ON df.instances (status, created_at DESC, id);
CREATE INDEX idx_instances_created_at ON df.instances (created_at DESC, id);
CREATE INDEX idx_instances_label ON df.instances (label, created_at DESC, id) WHERE label IS NOT NULL;
-- df.start(idempotency_key => …): one instance per submitting role and key
CREATE UNIQUE INDEX idx_instances_idempotency_key ON df.instances (submitted_by, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
COMMENT ON TABLE df.instances IS 'one row per workflow instance';

CREATE TABLE df.nodes (
	id varchar(8) NOT NULL,
	instance_id varchar(8) NOT NULL,
	node_type text NOT NULL,
	query text,
	result_name text,
	left_node varchar(8),
	right_node varchar(8),
	status text DEFAULT 'pending',
	result jsonb,
	error text,
	submitted_by regrole,
	database text,
	created_at timestamptz DEFAULT now(),
	updated_at timestamptz DEFAULT now(),
	status_details jsonb,
	CONSTRAINT nodes_pkey PRIMARY KEY (instance_id, id)
) WITH (fillfactor = 30);
-- Every node row is updated once or twice (running, then done; a batch
-- makes both one update when they fall in it) and grows by its
-- result: room on its page keeps those updates HOT (no index entries, no
-- lock record of a row moved to another page).  At 50, 0.72 updates per
-- step of 200 20-step chains still moved rows off their page, at 30 none
-- (WAL per step 2,711 and 2,572 bytes).
ALTER TABLE df.nodes ADD CONSTRAINT nodes_id_check
	CHECK (df_internal.id_ok(id)) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_instance_id_check
	CHECK (df_internal.id_ok(instance_id)) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_submitted_by_not_null
	CHECK (submitted_by IS NOT NULL) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_node_type_check
	CHECK (df_internal.node_type_ok(node_type)) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_result_name_check
	CHECK (result_name IS NULL OR result_name OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_]*$') NOT VALID;
-- cancelled: still running when its instance ended (the engine stopped it)
ALTER TABLE df.nodes ADD CONSTRAINT nodes_status_check
	CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_result_check
	CHECK (result IS NULL OR status IN ('completed', 'failed')) NOT VALID;
-- which of left_node, right_node and query each node type has
ALTER TABLE df.nodes ADD CONSTRAINT nodes_structure_check
	CHECK (df_internal.node_shape_ok(node_type, left_node IS NOT NULL, right_node IS NOT NULL,
									 query IS NOT NULL)) NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_instance_identity_fkey
	FOREIGN KEY (instance_id, submitted_by) REFERENCES df.instances (id, submitted_by)
	ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
-- The graph references under the reference's names (its test 51 looks them
-- up, with instances_root_node_same_instance_fkey below, and wants all three
-- deferrable and deferred).
ALTER TABLE df.nodes ADD CONSTRAINT nodes_left_node_same_instance_fkey
	FOREIGN KEY (instance_id, left_node) REFERENCES df.nodes (instance_id, id)
	DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_right_node_same_instance_fkey
	FOREIGN KEY (instance_id, right_node) REFERENCES df.nodes (instance_id, id)
	DEFERRABLE INITIALLY DEFERRED;
-- An instance's root node is one of its nodes.  Not a foreign key: with one
-- from df.instances to df.nodes and one back, pg_dump finds a cycle between
-- the two configuration tables, and pg_restore loads each table in a
-- transaction of its own, so whichever comes first violates its key and the
-- restore loses every instance.  These constraint triggers (deferred, under
-- the key's name) check the same thing from both sides, except that an
-- instance may have no nodes at all for a while (an instance inserted by
-- hand before its nodes).  A restore's loads are not checked here
-- (df_internal.restore_loading): df.resume_restored() checks them.
CREATE FUNCTION df_internal.check_root_node() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	inst varchar(8);
	root varchar(8);
BEGIN
	IF TG_TABLE_NAME = 'instances' THEN
		inst := NEW.id;
	ELSIF TG_OP = 'DELETE' THEN
		inst := OLD.instance_id;
	ELSE
		inst := NEW.instance_id;
	END IF;
	-- locked as a foreign key's check locks: no concurrent delete in between
	SELECT i.root_node INTO root FROM df.instances i WHERE i.id = inst FOR KEY SHARE;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	PERFORM FROM df.nodes n WHERE n.instance_id = inst AND n.id = root FOR KEY SHARE;
	IF FOUND THEN
		RETURN NULL;
	END IF;
	IF TG_TABLE_NAME = 'instances' THEN
		IF NOT EXISTS (SELECT FROM df.nodes n WHERE n.instance_id = inst) THEN
			RETURN NULL;
		END IF;
		RAISE foreign_key_violation USING
			MESSAGE = format('insert or update on table "instances" violates foreign key constraint "%s"', TG_NAME),
			DETAIL = format('Key (id, root_node)=(%s, %s) is not present in table "nodes".', inst, root),
			TABLE = 'instances', SCHEMA = 'df', CONSTRAINT = TG_NAME;
	END IF;
	RAISE foreign_key_violation USING
		MESSAGE = format('insert, update or delete on table "nodes" violates foreign key constraint "%s" on table "instances"', TG_NAME),
		DETAIL = format('Key (id, root_node)=(%s, %s) of table "instances" is not present in table "nodes".', inst, root),
		TABLE = 'nodes', SCHEMA = 'df', CONSTRAINT = TG_NAME;
END
$$;
COMMENT ON FUNCTION df_internal.check_root_node() IS 'the check of instances_root_node_same_instance_fkey: an instance''s root node is one of its nodes';
REVOKE EXECUTE ON FUNCTION df_internal.check_root_node() FROM PUBLIC;
-- df.start's own rows skip both sides: it writes an instance's root with
-- its other nodes, in the transaction that inserts the instance, from one
-- graph (api/start.c).  Its node rows go in without an INSERT, so no
-- trigger of df.nodes fires for them; its instance row is inserted while
-- pg_durable.start_inserts_nodes is on, which the WHEN below reads when the
-- row is inserted.  The function's call and its two locking queries cost
-- df.start about as much as one of its statements, and two lock records of
-- WAL.  df.map's node rows skip the nodes side the same way.
-- The setting is superuser-only and on only then: every other row (a
-- restore, a row inserted by hand) is checked at commit.
CREATE CONSTRAINT TRIGGER instances_root_node_same_instance_fkey
	AFTER INSERT OR UPDATE OF id, root_node ON df.instances
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (pg_catalog.current_setting('pg_durable.start_inserts_nodes', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION df_internal.check_root_node();
CREATE CONSTRAINT TRIGGER instances_root_node_same_instance_fkey
	AFTER INSERT OR UPDATE OF instance_id, id OR DELETE ON df.nodes
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (pg_catalog.current_setting('pg_durable.start_inserts_nodes', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION df_internal.check_root_node();
-- No idx_nodes_instance (the reference has one on (instance_id)): nodes_pkey
-- (instance_id, id) serves every lookup by instance, and beside it the
-- engine's generic plans read a whole instance's nodes, through the
-- one-column index, to find one node by its id (quadratic fan-outs).
COMMENT ON TABLE df.nodes IS 'one row per node of each workflow instance';

ALTER TABLE df.instances ENABLE ROW LEVEL SECURITY;
ALTER TABLE df.nodes ENABLE ROW LEVEL SECURITY;
CREATE POLICY instances_user_isolation ON df.instances FOR ALL
	USING (submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole)
	WITH CHECK (submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole);
CREATE POLICY nodes_user_isolation ON df.nodes FOR ALL
	USING (submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole)
	WITH CHECK (submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole);

CREATE TABLE df._worker_epoch (
	epoch_id uuid PRIMARY KEY,
	started_at timestamptz DEFAULT now(),
	last_seen_at timestamptz DEFAULT now()
);
COMMENT ON TABLE df._worker_epoch IS 'heartbeat of the pg_durable executors';

SELECT pg_catalog.pg_extension_config_dump('df.instances', '');
SELECT pg_catalog.pg_extension_config_dump('df.nodes', '');

-- ---------------------------------------------------------------------------
-- Engine state (private).  Every state transition of an instance locks its
-- runs row first; see docs/design/batches-and-inbox.md §1.
-- ---------------------------------------------------------------------------

CREATE TABLE df_internal._worker_ready (
	sentinel boolean PRIMARY KEY DEFAULT true CHECK (sentinel),
	schema_version int NOT NULL,
	initialized_at timestamptz NOT NULL DEFAULT now()
);
GRANT USAGE ON SCHEMA df_internal TO PUBLIC;
GRANT SELECT ON df_internal._worker_ready TO PUBLIC;

-- one row per live instance: the per-instance lock and its captured context
CREATE TABLE df_internal.runs (
	instance_id varchar(8) PRIMARY KEY,
	submitted_by regrole NOT NULL,	-- regrole: a dump names the role, not its OID
	label text,
	database text,
	vars jsonb NOT NULL DEFAULT '{}',
	status text NOT NULL DEFAULT 'pending',
	created_at timestamptz NOT NULL DEFAULT now(),
	-- what df.start saw: an EVENT node takes only events it did not;
	-- NULL when the graph has no EVENT node (21 bytes and more a row)
	start_snapshot pg_snapshot DEFAULT pg_catalog.pg_current_snapshot()
) WITH (fillfactor = 50);
-- A runs row is updated when its instance starts: room on its page keeps
-- that update HOT, with no second runs_pkey entry (on full pages
-- it was not, 204 B of WAL and a key entry per instance).

-- the ready queue; timers are tasks with a future run_at.  HTTP steps
-- (kind 'http') belong to the HTTP worker, which leases them: a claimed
-- call sets lease_until and a fresh lease_token (committed before the call
-- is made); its completion applies only while the token is still the same,
-- and an expired lease makes the task claimable again (at-least-once).
-- Tasks of TASK nodes (kind 'external') belong to external workers
-- (df_internal.external_tasks); executors pass over them.
-- engine_errors counts the claims of the task that an unexpected error of
-- the engine rolled back (recorded after the rollback, with the last
-- error); df.check() reports a task whose errors repeat.
CREATE TABLE df_internal.tasks (
	id bigserial PRIMARY KEY,
	instance_id varchar(8) NOT NULL,
	node_id varchar(8),
	scope text NOT NULL,
	kind text NOT NULL CHECK (kind IN ('start', 'step', 'timer', 'deliver', 'http', 'apply', 'external')),
	run_at timestamptz NOT NULL DEFAULT now(),
	attempts int NOT NULL DEFAULT 0,
	lease_until timestamptz,
	lease_token uuid,
	engine_errors int NOT NULL DEFAULT 0,
	last_engine_error text
);
CREATE INDEX tasks_run_at_idx ON df_internal.tasks (run_at, id) WHERE kind <> 'http' AND kind <> 'external';
CREATE INDEX tasks_http_idx ON df_internal.tasks (run_at, id) WHERE kind = 'http';
CREATE INDEX tasks_instance_idx ON df_internal.tasks (instance_id);
-- an instance's apply tasks, looked for at every inbox take and hand-over:
-- through tasks_instance_idx that would read all of a wide JOIN's branch
-- tasks each time (a fan-out's cost per branch would grow with its width)
-- and by id, so that a hand-over looks only at the tasks after its own: the
-- entries of the ones already applied stay in the index until a VACUUM,
-- and a 5,000-branch fan-out's hand-overs walked them all (70 us a branch)
CREATE INDEX tasks_apply_idx ON df_internal.tasks (instance_id, id) WHERE kind = 'apply';

-- the inbox (docs/design/batches-and-inbox.md §4): a completion whose instance's runs
-- row another transaction held when its step ended, committed with the
-- step's effects and an 'apply' task; the next holder of the runs row
-- applies the instance's rows in id order and deletes them.  Insert only:
-- adding a row locks nothing another transaction waits for.
CREATE TABLE df_internal.inbox (
	id bigserial PRIMARY KEY,
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	attempt int NOT NULL,
	ok boolean NOT NULL,
	result text,			-- ok: the result JSON; else the error text
	code text,				-- failed: the error code
	error_node varchar(8),	-- failed: the node that failed first
	retryable boolean NOT NULL DEFAULT false,
	retry_after_ms bigint NOT NULL DEFAULT 0,
	compensated boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_instance_idx ON df_internal.inbox (instance_id, id);

-- named results, per execution scope (JOIN/RACE branches get their own)
CREATE TABLE df_internal.results (
	instance_id varchar(8) NOT NULL,
	scope text NOT NULL,
	name text NOT NULL,
	value json,				-- json, not jsonb: "first column" needs the column order
	seq bigserial,
	PRIMARY KEY (instance_id, scope, name)
);

-- branches still running per JOIN execution
CREATE TABLE df_internal.joins (
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	remaining int NOT NULL,
	PRIMARY KEY (instance_id, node_id, scope)
);

-- running loops: generation and iteration count per loop node and scope
CREATE TABLE df_internal.loops (
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	generation int NOT NULL DEFAULT 1,
	iterations bigint NOT NULL DEFAULT 1,
	iteration_started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (instance_id, node_id, scope)
);
SELECT pg_catalog.pg_extension_config_dump('df_internal.loops', '');

-- signals sent to an instance, delivered in order to waits of the same name
CREATE TABLE df_internal.signals (
	id bigserial PRIMARY KEY,
	instance_id varchar(8) NOT NULL,
	name text NOT NULL,
	payload jsonb,
	sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signals_instance_idx ON df_internal.signals (instance_id, name, id);

-- SIGNAL nodes waiting for a signal; an EVENT node's wait has the name '', which no
-- signal can have (store/event_bus.c)
CREATE TABLE df_internal.waits (
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	name text NOT NULL,
	seq bigserial,
	-- an EVENT wait: the xmin of the snapshot that found no event for it;
	-- every event of a lower xid was visible to that look
	event_xmin xid8,
	PRIMARY KEY (instance_id, node_id, scope)
);

-- the append-only history of every instance (events.c); rows are small:
-- never a step's result, at most a truncated error text
CREATE SEQUENCE df_internal.events_id_seq;
CREATE TABLE df_internal.events (
	id bigint NOT NULL DEFAULT pg_catalog.nextval('df_internal.events_id_seq'),
	instance_id varchar(8) NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	kind text NOT NULL CHECK (df_internal.event_kind_ok(kind)),
	node_id varchar(8),
	scope text,
	attempt int,
	duration_ms bigint,
	detail jsonb,
	-- a node_completed / node_failed row's own node_started
	started_at timestamptz,
	-- its end's place in the order, when its start's is the row's id
	ended_id bigint,
	-- a node_completed row that is also its instance's start and end: an
	-- instance of one step that ran in one batch; the start at
	-- instance_started_at, or at started_at when that is NULL
	instance_started_at timestamptz,
	instance_completed_at timestamptz,
	instance_duration_ms bigint
);
ALTER SEQUENCE df_internal.events_id_seq OWNED BY df_internal.events.id;
CREATE INDEX events_instance_idx ON df_internal.events (instance_id, id);
-- the OTLP exporter reads the events after its cursor by id:
-- a BRIN index, since ids follow the order rows are appended in; a btree
-- entry would be about 65 bytes of WAL per event
CREATE INDEX events_id_idx ON df_internal.events USING brin (id)
	WITH (pages_per_range = 32, autosummarize = on);
CREATE INDEX events_ended_id_idx ON df_internal.events USING brin (ended_id)
	WITH (pages_per_range = 32, autosummarize = on);
COMMENT ON TABLE df_internal.events IS 'append-only event history of the instances (df.history)';
SELECT pg_catalog.pg_extension_config_dump('df_internal.events', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.events_id_seq', '');
-- One row per event of the history, in the order (id, sub): a node's start
-- whose end the engine wrote in the same statements (a step that started
-- and ended in one batch, a THEN or a wrapper around it, an instance that
-- ran to its end in one) is not a row of its own but the started_at of its
-- end's row.  When the end was the next write, the start comes
-- here just before it, as sub 0 of the same id; else the row's id is the
-- one drawn at the start's place and the end's is ended_id, so both keep
-- their places in the order.  A row with instance_completed_at is also
-- its instance's instance_started (sub -1) and instance_completed (sub 2):
-- an instance whose only history is that node's start and end, all of it
-- written at once.
-- Every reader of the history reads this view (monitor/history.c,
-- spans.c, span_sources.c); one that windows by id also bounds row_id or
-- ended_id, so that the BRIN indexes find the rows.
-- A row keeps its scope without the instance's id in front ("::1" for
-- "<id>::1", 8 bytes less a row); the view puts it back.
CREATE VIEW df_internal.history_events AS
SELECT CASE x.sub WHEN 1 THEN COALESCE(e.ended_id, e.id) ELSE e.id END AS id,
	   x.sub, e.instance_id,
	   CASE x.sub WHEN 0 THEN e.started_at WHEN -1 THEN COALESCE(e.instance_started_at, e.started_at)
			WHEN 2 THEN e.instance_completed_at ELSE e.at END AS at,
	   CASE x.sub WHEN 1 THEN e.kind WHEN -1 THEN 'instance_started'
			WHEN 2 THEN 'instance_completed'
			ELSE CASE WHEN e.node_id IS NULL THEN 'instance_started' ELSE 'node_started' END END AS kind,
	   CASE WHEN x.sub OPERATOR(pg_catalog.=) ANY ('{0,1}') THEN e.node_id END AS node_id,
	   CASE WHEN pg_catalog.starts_with(e.scope, '::')
			THEN e.instance_id::text OPERATOR(pg_catalog.||) e.scope ELSE e.scope END AS scope,
	   CASE x.sub WHEN 1 THEN e.attempt END AS attempt,
	   CASE x.sub WHEN 1 THEN e.duration_ms WHEN 2 THEN e.instance_duration_ms END AS duration_ms,
	   CASE x.sub WHEN 1 THEN e.detail END AS detail,
	   e.id AS row_id, e.ended_id
FROM df_internal.events e
CROSS JOIN LATERAL (VALUES (-1), (0), (1), (2)) x (sub)
WHERE x.sub OPERATOR(pg_catalog.=) 1
   OR (x.sub OPERATOR(pg_catalog.=) 0 AND e.started_at IS NOT NULL)
   OR (x.sub OPERATOR(pg_catalog.<>) 0 AND e.instance_completed_at IS NOT NULL);
COMMENT ON VIEW df_internal.history_events IS
	'the events of df_internal.events one per row, a start kept in its end''s row (started_at) '
	'as a node_started of its own just before it, an instance that was one step around it '
	'(instance_completed_at) as its instance_started and instance_completed';

SELECT pg_catalog.pg_extension_config_dump('df_internal.signals', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.waits', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.runs', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.tasks', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.results', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.joins', '');
-- the sequences behind the bigserial columns: restored ids must not collide
-- with the ones the new cluster hands out
SELECT pg_catalog.pg_extension_config_dump('df_internal.tasks_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.signals_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.results_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.waits_seq_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.inbox_id_seq', '');

-- OTLP export: how far the HTTP worker has exported the spans
-- that history events ended.  One row; last_event_id only moves once a
-- batch was accepted (at least once), and only over event ids no running
-- transaction can still commit (worker/otel.c), which inserts the row.
CREATE TABLE df_internal.otel_export (
	id int PRIMARY KEY CHECK (id = 1),
	last_event_id bigint NOT NULL DEFAULT 0,
	exported_spans bigint NOT NULL DEFAULT 0,
	updated_at timestamptz
);
COMMENT ON TABLE df_internal.otel_export IS 'the OTLP exporter''s persisted cursor over df_internal.events';
SELECT pg_catalog.pg_extension_config_dump('df_internal.otel_export', '');

-- Sagas: the undos registered for an instance, one row each,
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
	PRIMARY KEY (instance_id, seq),
	-- the compensation that ran the undo: the body scope of its SAGA, a
	-- losing RACE branch's scope, or the root scope
	compensated_by text
);
COMMENT ON TABLE df_internal.compensations IS
	'the undos registered by completed forward steps of COMPENSATED nodes (df.compensations)';
SELECT pg_catalog.pg_extension_config_dump('df_internal.compensations', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.compensations_seq_seq', '');

-- Keyed locks (docs/design/locks-and-limits.md §1): node LOCK holds its keys
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
WITH me AS (
	SELECT pg_catalog.quote_ident(current_user)::regrole AS role,
		   coalesce((SELECT x.rolsuper OR x.rolbypassrls FROM pg_catalog.pg_roles x
					 WHERE x.rolname OPERATOR(pg_catalog.=) current_user), false) AS all_rows
)
SELECT pg_catalog.regexp_replace(l.key, '^~[0-9]+/', '') AS key,
	   l.instance_id::text AS holder, l.node_id::text AS node_id, l.mode,
	   CASE WHEN l.held THEN 'held' ELSE 'waiting' END AS state,
	   COALESCE(l.since, l.requested_at) AS since,
	   (SELECT pg_catalog.count(*) FROM df_internal.locks w
		WHERE w.key OPERATOR(pg_catalog.=) l.key AND NOT w.held) AS waiters,
	   l.token,
	   CASE WHEN pg_catalog.starts_with(l.key, '~')
			THEN pg_catalog.substring(l.key, '^~([0-9]+)/')::pg_catalog.oid::regrole::text END AS space,
	   CASE WHEN NOT l.held THEN
		   (SELECT pg_catalog.string_agg(DISTINCT CASE WHEN me.all_rows THEN hr.submitted_by::text
													   ELSE 'another role' END, ', ')
			FROM df_internal.locks h
			JOIN df_internal.runs hr ON hr.instance_id OPERATOR(pg_catalog.=) h.instance_id
			WHERE h.key OPERATOR(pg_catalog.=) l.key AND h.held
			  AND hr.submitted_by OPERATOR(pg_catalog.<>) r.submitted_by) END AS blocked_by,
	   CASE WHEN NOT l.held THEN
		   (SELECT pg_catalog.string_agg(DISTINCT h.instance_id::text, ', ')
			FROM df_internal.locks h
			JOIN df_internal.runs hr ON hr.instance_id OPERATOR(pg_catalog.=) h.instance_id
			WHERE h.key OPERATOR(pg_catalog.=) l.key AND h.held
			  AND (me.all_rows OR hr.submitted_by OPERATOR(pg_catalog.=) me.role)) END AS held_by
FROM df_internal.locks l
JOIN df_internal.runs r ON r.instance_id OPERATOR(pg_catalog.=) l.instance_id
CROSS JOIN me
WHERE me.all_rows OR r.submitted_by OPERATOR(pg_catalog.=) me.role;
COMMENT ON VIEW df.locks IS
	'the keys of df.with_lock held or waited for by the caller''s instances: key, holder (the '
	'instance), node, mode, state (held, waiting), since, waiters (of the key, all roles), token, '
	'space (the role whose own key it is; NULL: a shared lock space), blocked_by (a waiting '
	'entry''s key held by other roles: their names for a superuser or BYPASSRLS viewer, else '
	'''another role''), held_by (a waiting entry''s key: the instances holding it that the '
	'viewer may see)';
GRANT SELECT ON df.locks TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Limits: df.limit, node LIMIT.  One row per key (created by
-- the first LIMIT node that enters it, with the settings of the latest),
-- its holders (a slot each) and its FIFO queue.  Admission and hand-over
-- run under the key's row lock (df_internal.limit_pump), counting the
-- holders, so a key never has more than max_concurrent of them; a slot is
-- deleted in the transaction that ends its LIMIT node (orchestration/
-- limits.c, store/limit_slots.c).  A waiter admitted by another
-- instance's transaction gets a holder row with started = false and a
-- timer task on its LIMIT node, which starts the subtree.
-- ---------------------------------------------------------------------------
CREATE TABLE df_internal.limits (
	key text PRIMARY KEY,
	max_concurrent int,
	rate float8,
	burst int,
	tokens float8,
	tokens_at timestamptz
);
COMMENT ON TABLE df_internal.limits IS
	'one row per df.limit key: its settings and token bucket (df.limits)';
CREATE TABLE df_internal.limit_holders (
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	key text NOT NULL,
	submitted_by regrole NOT NULL,
	since timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	started boolean NOT NULL,
	PRIMARY KEY (instance_id, node_id, scope)
);
CREATE INDEX limit_holders_key_idx ON df_internal.limit_holders (key);
COMMENT ON TABLE df_internal.limit_holders IS
	'the slots of df.limit keys, one per LIMIT node execution inside its limit';
CREATE TABLE df_internal.limit_waiters (
	seq bigserial,
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	key text NOT NULL,
	submitted_by regrole NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	deadline timestamptz,
	PRIMARY KEY (instance_id, node_id, scope)
);
CREATE INDEX limit_waiters_key_idx ON df_internal.limit_waiters (key, seq);
COMMENT ON TABLE df_internal.limit_waiters IS
	'the FIFO queues of df.limit keys: LIMIT node executions waiting for a slot';
SELECT pg_catalog.pg_extension_config_dump('df_internal.limits', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.limit_holders', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.limit_waiters', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.limit_waiters_seq_seq', '');

-- Admit the waiters of key p_key, oldest first, while a slot and a token
-- are free, under the key's row lock.  Rows: 'start' (the waiter is
-- p_self: its subtree starts in this transaction), 'admit' (another
-- waiter got a slot: a timer now on its LIMIT node), 'arm' (the head
-- waits for a token: a timer at "at" on its node, unless it has one due
-- by then).
CREATE FUNCTION df_internal.limit_pump(p_key text, p_instance text, p_node text, p_scope text)
	RETURNS TABLE (action text, instance_id text, node_id text, scope text, at timestamptz)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $pump$
DECLARE
	l df_internal.limits;
	w df_internal.limit_waiters;
	now_ts timestamptz := clock_timestamp();
	t float8;
	token_at timestamptz;
	self boolean;
BEGIN
	SELECT * INTO l FROM df_internal.limits k WHERE k.key = p_key FOR UPDATE;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	LOOP
		SELECT * INTO w FROM df_internal.limit_waiters q WHERE q.key = p_key
		ORDER BY q.seq LIMIT 1;
		EXIT WHEN NOT FOUND;
		IF l.max_concurrent IS NOT NULL THEN
			EXIT WHEN (SELECT count(*) FROM df_internal.limit_holders h
					   WHERE h.key = p_key) >= l.max_concurrent;
		END IF;
		IF l.rate IS NOT NULL THEN
			t := least(l.burst::float8,
					   l.tokens + l.rate * extract(epoch FROM now_ts - l.tokens_at)::float8);
			IF t < 1 - 1e-9 THEN
				action := 'arm';
				instance_id := w.instance_id;
				node_id := w.node_id;
				scope := w.scope;
				at := now_ts + make_interval(secs => (1 - t) / l.rate);
				IF NOT EXISTS (SELECT 1 FROM df_internal.tasks k
							   WHERE k.instance_id = w.instance_id AND k.node_id = w.node_id
								 AND k.scope = w.scope AND k.kind = 'timer'
								 AND k.run_at <= at) THEN
					RETURN NEXT;
				END IF;
				EXIT;
			END IF;
			-- the head waited for this token: it is taken when it came, so
			-- that a timer's lateness (under one period) does not slow the
			-- rate down; the tokens before it still count as taken then
			token_at := l.tokens_at + make_interval(secs => (1 - l.tokens) / l.rate);
			IF l.tokens < 1 AND w.queued_at <= token_at
			   AND now_ts - token_at < make_interval(secs => 1 / l.rate) THEN
				l.tokens := 0;
				l.tokens_at := token_at;
			ELSE
				l.tokens := greatest(t - 1, 0);
				l.tokens_at := now_ts;
			END IF;
			UPDATE df_internal.limits k SET tokens = l.tokens, tokens_at = l.tokens_at
			WHERE k.key = p_key;
		END IF;
		self := w.instance_id = p_instance AND w.node_id = p_node AND w.scope = p_scope;
		DELETE FROM df_internal.limit_waiters q WHERE q.seq = w.seq;
		INSERT INTO df_internal.limit_holders AS h (instance_id, node_id, scope, key, submitted_by, started)
		VALUES (w.instance_id, w.node_id, w.scope, p_key, w.submitted_by, coalesce(self, false));
		action := CASE WHEN self THEN 'start' ELSE 'admit' END;
		instance_id := w.instance_id;
		node_id := w.node_id;
		scope := w.scope;
		at := now_ts;
		RETURN NEXT;
	END LOOP;
END
$pump$;
REVOKE EXECUTE ON FUNCTION df_internal.limit_pump(text, text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION df_internal.limit_pump(text, text, text, text) IS
	'admit the waiters of a df.limit key while a slot and a token are free (engine only)';

-- A LIMIT node execution enters key p_key with its node's settings: it
-- joins the end of the queue, then the queue is pumped.  The settings of
-- the key become the node's (the token bucket keeps its level).
CREATE FUNCTION df_internal.limit_enter(p_key text, p_max int, p_rate float8, p_burst int,
										p_instance text, p_node text, p_scope text,
										p_deadline timestamptz)
	RETURNS TABLE (action text, instance_id text, node_id text, scope text, at timestamptz)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $enter$
BEGIN
	INSERT INTO df_internal.limits AS k (key, max_concurrent, rate, burst, tokens, tokens_at)
	VALUES (p_key, p_max, p_rate, p_burst, p_burst, clock_timestamp())
	ON CONFLICT (key) DO UPDATE
		SET max_concurrent = EXCLUDED.max_concurrent, rate = EXCLUDED.rate,
			burst = EXCLUDED.burst,
			tokens = CASE WHEN k.tokens IS NULL THEN EXCLUDED.tokens
						  ELSE least(k.tokens, EXCLUDED.burst) END,
			tokens_at = CASE WHEN k.tokens IS NULL THEN EXCLUDED.tokens_at ELSE k.tokens_at END
		WHERE k.max_concurrent IS DISTINCT FROM EXCLUDED.max_concurrent
		   OR k.rate IS DISTINCT FROM EXCLUDED.rate OR k.burst IS DISTINCT FROM EXCLUDED.burst;
	INSERT INTO df_internal.limit_waiters (instance_id, node_id, scope, key, submitted_by, deadline)
	SELECT p_instance, p_node, p_scope, p_key, r.submitted_by, p_deadline
	FROM df_internal.runs r WHERE r.instance_id = p_instance;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'instance % has no runs row', p_instance;
	END IF;
	RETURN QUERY SELECT * FROM df_internal.limit_pump(p_key, p_instance, p_node, p_scope);
END
$enter$;
REVOKE EXECUTE ON FUNCTION df_internal.limit_enter(text, int, float8, int, text, text, text, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION df_internal.limit_enter(text, int, float8, int, text, text, text, timestamptz) IS
	'a LIMIT node execution joins the queue of its key, which is then pumped (engine only)';

-- A timer of a LIMIT node execution fell due: start its subtree if it was
-- admitted, take a token that is now there, or time it out at its
-- deadline ('timeout', after which the queue is pumped again).
CREATE FUNCTION df_internal.limit_timer(p_instance text, p_node text, p_scope text)
	RETURNS TABLE (action text, instance_id text, node_id text, scope text, at timestamptz)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $timer$
DECLARE
	k text;
	h df_internal.limit_holders;
	w df_internal.limit_waiters;
BEGIN
	SELECT u.key INTO k FROM (
		SELECT x.key FROM df_internal.limit_holders x
		WHERE x.instance_id = p_instance AND x.node_id = p_node AND x.scope = p_scope
		UNION ALL
		SELECT y.key FROM df_internal.limit_waiters y
		WHERE y.instance_id = p_instance AND y.node_id = p_node AND y.scope = p_scope) u
	LIMIT 1;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	-- the key's lock first: then the node's rows cannot change under us
	PERFORM 1 FROM df_internal.limits l WHERE l.key = k FOR UPDATE;
	SELECT * INTO h FROM df_internal.limit_holders x
	WHERE x.instance_id = p_instance AND x.node_id = p_node AND x.scope = p_scope;
	IF FOUND THEN
		IF NOT h.started THEN
			UPDATE df_internal.limit_holders x SET started = true
			WHERE x.instance_id = p_instance AND x.node_id = p_node AND x.scope = p_scope;
			RETURN QUERY SELECT 'start'::text, p_instance, p_node, p_scope, clock_timestamp();
		END IF;
		RETURN;
	END IF;
	RETURN QUERY SELECT * FROM df_internal.limit_pump(k, p_instance, p_node, p_scope);
	SELECT * INTO w FROM df_internal.limit_waiters y
	WHERE y.instance_id = p_instance AND y.node_id = p_node AND y.scope = p_scope;
	IF FOUND AND w.deadline <= clock_timestamp() THEN
		DELETE FROM df_internal.limit_waiters y WHERE y.seq = w.seq;
		RETURN QUERY SELECT 'timeout'::text, p_instance, p_node, p_scope, clock_timestamp();
		RETURN QUERY SELECT * FROM df_internal.limit_pump(k, NULL, NULL, NULL);
	END IF;
END
$timer$;
REVOKE EXECUTE ON FUNCTION df_internal.limit_timer(text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION df_internal.limit_timer(text, text, text) IS
	'a timer of a LIMIT node execution fell due: start, take a token, or time out (engine only)';


-- ---------------------------------------------------------------------------
-- Control.  df.start, df.cancel and df.signal (and df.metrics below) write or
-- read the engine's state with the bootstrap superuser's privileges: they
-- pin their search_path, so that no operator or function the caller planted
-- in a schema of its own can be picked up by those statements.
-- ---------------------------------------------------------------------------

CREATE FUNCTION df.start(fut text, label text DEFAULT NULL, database text DEFAULT NULL,
						 transaction_mode text DEFAULT 'caller') RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_start';
COMMENT ON FUNCTION df.start(text, text, text, text) IS
	'start a workflow instance; returns its 8-hex id';
CREATE FUNCTION df.start(fut varchar, label text DEFAULT NULL, database text DEFAULT NULL,
						 transaction_mode text DEFAULT 'caller', max_attempts int DEFAULT 1,
						 max_backoff interval DEFAULT '16 seconds',
						 on_failure text DEFAULT 'fail',
						 idempotency_key text DEFAULT NULL,
						 traceparent text DEFAULT NULL, tracestate text DEFAULT NULL) RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_start';
COMMENT ON FUNCTION df.start(varchar, text, text, text, int, interval, text, text, text, text) IS
	'start a workflow instance; returns its 8-hex id.  max_attempts, max_backoff and on_failure '
	'are the instance-wide failure policy: every SQL or HTTP step without its own df.retry is '
	'retried up to max_attempts with a back-off from 1 s, doubling, capped at max_backoff; '
	'on_failure ''continue'' lets a step that gives up end with {"error": {...}} as its result; '
	'idempotency_key: one instance per submitting role and key, a second start returns it; '
	'traceparent (W3C) continues the caller''s trace, else a new one begins; tracestate is '
	'passed on to HTTP steps';

CREATE FUNCTION df.status(instance_id text) RETURNS text
	LANGUAGE c STRICT STABLE AS 'MODULE_PATHNAME', 'pgd_status';
COMMENT ON FUNCTION df.status(text) IS 'status of an instance (pending, running, completed, failed, cancelled, compensated) or NULL';

CREATE FUNCTION df.result(instance_id text) RETURNS text
	LANGUAGE c STRICT STABLE AS 'MODULE_PATHNAME', 'pgd_result';
COMMENT ON FUNCTION df.result(text) IS 'result of a completed instance (its root node''s result); '
	'for a compensated one, its compensation summary {error, undos}; else NULL';

CREATE FUNCTION df.await_instance(instance_id text, timeout_seconds int DEFAULT 30) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_await_instance';
COMMENT ON FUNCTION df.await_instance(text, int) IS 'wait until an instance is finished; returns its status';

CREATE FUNCTION df.wait_for_completion(instance_id text, timeout_seconds int DEFAULT 30) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_wait_for_completion';
COMMENT ON FUNCTION df.wait_for_completion(text, int) IS 'deprecated: use df.await_instance';

-- df.await_instance as a procedure: a top-level CALL commits before it
-- waits, so that its wait holds no snapshot and no xmin (api/status.c)
CREATE PROCEDURE df.await(instance_id text, timeout_seconds int DEFAULT 30, INOUT status text DEFAULT NULL)
	LANGUAGE c AS 'MODULE_PATHNAME', 'pgd_await_call';
COMMENT ON PROCEDURE df.await(text, int, text) IS
	'wait until an instance is finished (status: its status); a top-level CALL holds back no VACUUM while it waits';

CREATE FUNCTION df.run(instance_id text DEFAULT NULL) RETURNS text
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_run';
COMMENT ON FUNCTION df.run(text) IS 'compatibility no-op: executors run instances by themselves';

CREATE FUNCTION df.cancel(instance_id text, reason text DEFAULT 'Cancelled by user') RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_cancel';
COMMENT ON FUNCTION df.cancel(text, text) IS 'cancel an instance that has not finished';
CREATE FUNCTION df.cancel(instance_id varchar, reason text DEFAULT 'Cancelled by user',
						  compensate boolean DEFAULT false) RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_cancel';
COMMENT ON FUNCTION df.cancel(varchar, text, boolean) IS
	'cancel an instance that has not finished; with compensate, a running instance whose completed '
	'steps registered undos runs them (latest first) and ends compensated';
CREATE FUNCTION df.compensate(instance_id text) RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_compensate';
COMMENT ON FUNCTION df.compensate(text) IS
	'resume the compensation of an instance that an undo failing for good stopped '
	'(on_undo_failure ''stop''): the instance runs again, the failed undo first, then the rest; '
	'an instance a plain df.cancel ended runs the undos it had registered';

CREATE FUNCTION df.signal(instance_id text, signal_name text, signal_data text DEFAULT '{}') RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_signal';
COMMENT ON FUNCTION df.signal(text, text, text) IS 'send a signal (buffered, in order) to a waiting or future df.wait_for_signal of an instance';
-- The same with transaction_mode: 'caller' (sent when the caller commits,
-- as the three-argument form) or 'new' (sent at once, in a transaction of
-- its own).  No defaults, so that calls of the reference's three-argument
-- form stay unambiguous: pass signal_data with transaction_mode.
CREATE FUNCTION df.signal(instance_id text, signal_name text, signal_data text, transaction_mode text) RETURNS text
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_signal';
COMMENT ON FUNCTION df.signal(text, text, text, text) IS 'send a signal; transaction_mode ''new'' sends it at once in a transaction of its own, ''caller'' when the caller commits';

-- The settings the HTTP worker applies now (it reads them from the server's
-- configuration; a reload reaches it asynchronously).  Superusers only.
CREATE FUNCTION df_internal.http_worker_settings() RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_http_worker_settings';
COMMENT ON FUNCTION df_internal.http_worker_settings() IS 'the HTTP destination policy and limits the running HTTP worker applies, or NULL when it does not run';
REVOKE EXECUTE ON FUNCTION df_internal.http_worker_settings() FROM PUBLIC;

CREATE FUNCTION df_internal.admission_slots_held() RETURNS integer
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_admission_slots_held';
COMMENT ON FUNCTION df_internal.admission_slots_held() IS 'how many admission slots of transaction_mode => ''new'' are taken now, in the whole server';
REVOKE EXECUTE ON FUNCTION df_internal.admission_slots_held() FROM PUBLIC;

-- Step results, substitution and truthiness (results_*.c), for the tests
-- ---------------------------------------------------------------------------

CREATE FUNCTION df_internal.step_result(query text) RETURNS text
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_step_result';
COMMENT ON FUNCTION df_internal.step_result(text) IS 'run a query as the caller and return the step result JSON a SQL node would record';

CREATE FUNCTION df_internal.substitute(template text, vars jsonb, results jsonb, raw boolean DEFAULT false) RETURNS text
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_substitute_sql';
COMMENT ON FUNCTION df_internal.substitute(text, jsonb, jsonb, boolean) IS 'substitute {variables} and $named results into a step text (raw: HTTP contexts)';

CREATE FUNCTION df_internal.truthy(value text) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_truthy_sql';
COMMENT ON FUNCTION df_internal.truthy(text) IS 'truthiness of a step result for IF and loop conditions';

CREATE FUNCTION df_internal.is_whole_value_reference(value text) RETURNS boolean
	LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_is_whole_value_reference_sql';
COMMENT ON FUNCTION df_internal.is_whole_value_reference(text) IS 'true if the text is exactly one reference ($n, $n?, $n.c, $n.c? or {v}), as multipart data_b64 requires';

REVOKE EXECUTE ON FUNCTION df_internal.validate_graph(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df_internal.cron_next(text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df_internal.step_result(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df_internal.substitute(text, jsonb, jsonb, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df_internal.truthy(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df_internal.is_whole_value_reference(text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Monitoring (monitor*.c, infer.c).  Everything but df.metrics reads as the
-- caller: row-level security decides which instances exist for it.
-- ---------------------------------------------------------------------------

CREATE FUNCTION df.list_instances(status_filter text DEFAULT NULL, limit_count int DEFAULT 100)
	RETURNS TABLE (instance_id text, label text, function_name text, status text,
				   execution_count bigint, output text, waiting_on text)
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_list_instances';
COMMENT ON FUNCTION df.list_instances(text, int) IS
	'instances visible to the caller, newest first (created_at DESC, id), optionally of one status; '
	'execution_count = number of root generations (1 + root-loop iterations), output = root result '
	'(completed) or failure text (failed); waiting_on = what a live instance waits on (a timer, a '
	'schedule, a signal, an event, a limit, a lock, a task queue, a retry, its start), NULL while '
	'its steps run or once it ended; limit_count NULL means 100';

CREATE FUNCTION df.list_instances(status_filter text, limit_count int, label_filter text,
								  after_cursor text DEFAULT NULL)
	RETURNS TABLE (instance_id text, label text, function_name text, status text,
				   execution_count bigint, output text, created_at timestamptz,
				   completed_at timestamptz, next_cursor text, waiting_on text)
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_list_instances_paged';
COMMENT ON FUNCTION df.list_instances(text, int, text, text) IS
	'one page of the instances visible to the caller (created_at DESC, id ASC), optionally of one '
	'status and label (a label_filter with % or _ is a LIKE pattern, any other matches exactly); '
	'pass next_cursor (the same on every row, NULL on the last page) as after_cursor for the next '
	'page; waiting_on as in the two-argument form';

CREATE FUNCTION df.instance_info(instance_id text)
	RETURNS TABLE (instance_id text, label text, function_name text, function_version text,
				   current_execution_id bigint, status text, output text)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_instance_info';
COMMENT ON FUNCTION df.instance_info(text) IS
	'one row describing an instance visible to the caller (no row otherwise); '
	'current_execution_id = number of root generations, function_version = the extension version';

CREATE FUNCTION df.instance_executions(instance_id text, limit_count int DEFAULT 5)
	RETURNS TABLE (execution_id bigint, status text, event_count bigint, duration_ms bigint,
				   output text)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_instance_executions';
COMMENT ON FUNCTION df.instance_executions(text, int) IS
	'the executions (root generations) of an instance visible to the caller, newest first, at most '
	'limit_count (clamped to 10000); earlier generations of a root loop show as continued_as_new; '
	'event_count is the number of events of that generation in df.history and duration_ms the time '
	'from its first event to its last (to now while it runs)';

CREATE FUNCTION df.instance_nodes(instance_id_param text)
	RETURNS TABLE (node_id text, node_type text, query text, result_name text, left_node text,
				   right_node text, status text, result text, status_details text,
				   inferred_status text, inferred_status_from_ancestor_id text,
				   updated_at timestamptz)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_instance_nodes';
COMMENT ON FUNCTION df.instance_nodes(text) IS
	'the nodes of an instance visible to the caller, in tree order, with the physical status and '
	'the status inferred from the execution stamps (pending, running, completed, failed, skipped) '
	'and the ancestor it was inferred from';

CREATE FUNCTION df.instance_nodes(instance_id_param text, _last_n_executions int)
	RETURNS TABLE (execution_id bigint, node_id text, node_type text, query text,
				   result_name text, left_node text, right_node text, status text, result text,
				   updated_at timestamptz)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_instance_nodes_compat';
COMMENT ON FUNCTION df.instance_nodes(text, int) IS
	'compatibility form of older releases: the nodes of an instance with execution_id 1 and no '
	'inferred status; _last_n_executions is ignored';

CREATE FUNCTION df.metrics()
	RETURNS TABLE (total_instances bigint, running_instances bigint, completed_instances bigint,
				   failed_instances bigint, total_executions bigint, total_events bigint,
				   task_queues jsonb)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_metrics';
COMMENT ON FUNCTION df.metrics() IS
	'engine-wide counters over every instance whoever submitted it (administrators only): '
	'running_instances counts pending and running ones, total_executions the root generations, '
	'total_events the rows of the event history; task_queues holds, per queue of external '
	'tasks the caller sees (df.task_queues), {"ready": n, "leased": n, '
	'"oldest_ready_age_seconds": s}';
REVOKE EXECUTE ON FUNCTION df.metrics() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Administration: granting the use of pg_durable to a role.  Schema USAGE on
-- df is the gate (ordinary functions keep PUBLIC EXECUTE); these helpers grant
-- or revoke the exact set the reference grants.  They run as the invoker, so
-- a caller can only pass on what it holds WITH GRANT OPTION (a superuser, or
-- a role given df.grant_usage(..., with_grant => true)).
-- ---------------------------------------------------------------------------

CREATE FUNCTION df_internal.refuse_on_standby(function text, action text) RETURNS void
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_refuse_on_standby_sql';
COMMENT ON FUNCTION df_internal.refuse_on_standby(text, text) IS
	'the check at the entry of every writing function of pg_durable: on a standby, the error '
	'"cannot <action> on a standby server" (SQLSTATE 25006) naming the function';

CREATE FUNCTION df.grant_usage(p_role text, include_http boolean DEFAULT false,
							   with_grant boolean DEFAULT false) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	opt text := CASE WHEN with_grant THEN ' WITH GRANT OPTION' ELSE '' END;
BEGIN
	PERFORM df_internal.refuse_on_standby('df.grant_usage', 'grant the use of pg_durable');
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
		EXECUTE format('GRANT EXECUTE ON FUNCTION df.http(text, text, text, jsonb, integer) TO %I%s', p_role, opt);
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
COMMENT ON FUNCTION df.grant_usage(text, boolean, boolean) IS
	'grant a role the use of pg_durable (schema df, its tables under row-level security); '
	'include_http adds df.http and df.http_multipart; with_grant makes every grant WITH GRANT '
	'OPTION and adds df.grant_usage, df.revoke_usage and df.metrics, so the role can delegate';

CREATE FUNCTION df.revoke_usage(p_role text) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	fn text;
BEGIN
	PERFORM df_internal.refuse_on_standby('df.revoke_usage', 'revoke the use of pg_durable');
	IF p_role IS NULL OR p_role = '' THEN
		RAISE EXCEPTION 'df.revoke_usage: role name cannot be empty'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT has_schema_privilege('df', 'USAGE WITH GRANT OPTION') THEN
		RAISE EXCEPTION 'permission denied to revoke pg_durable usage: current_user "%" does not hold USAGE on schema df WITH GRANT OPTION', current_user
			USING ERRCODE = 'insufficient_privilege';
	END IF;

	-- the caller may never have held these: nothing of its own to revoke
	FOREACH fn IN ARRAY ARRAY['df.http(text, text, text, jsonb, integer)',
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
COMMENT ON FUNCTION df.revoke_usage(text) IS
	'revoke what df.grant_usage granted a role, as far as the caller granted it (CASCADE: '
	'grants the role passed on go too); schema USAGE goes last';

REVOKE EXECUTE ON FUNCTION df.grant_usage(text, boolean, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.revoke_usage(text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- History (events.c) and self-check (check.c)
-- ---------------------------------------------------------------------------

CREATE FUNCTION df.history(instance_id text)
	RETURNS TABLE (at timestamptz, kind text, node_id text, node_type text, execution_id text,
				   attempt int, duration_ms bigint, detail jsonb)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_history';
COMMENT ON FUNCTION df.history(text) IS
	'the event history of an instance visible to the caller, oldest first: instance and node '
	'starts and ends (duration_ms for finished nodes and instances), retries, signals, cancels; '
	'execution_id is the scope the node ran in; no rows for an instance the caller cannot see';

-- Tracing: the spans of an instance, derived from its history
CREATE FUNCTION df.instance_spans(instance_id text)
	RETURNS TABLE (trace_id text, span_id text, parent_span_id text, name text, kind text,
				   start_time timestamptz, end_time timestamptz, status text, attributes jsonb)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_instance_spans';
COMMENT ON FUNCTION df.instance_spans(text) IS
	'the spans of an instance visible to the caller, derived from its history: the instance '
	'(SERVER), a span per node execution (INTERNAL), one per attempt of a SQL step (INTERNAL) or '
	'an HTTP call (CLIENT); ids as lower-case hex, end_time NULL while a span runs';

CREATE FUNCTION df.timeline(instance_id text)
	RETURNS TABLE (depth int, span text, attempt int, offset_ms float8, duration_ms float8,
				   status text, bar text)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_timeline';
COMMENT ON FUNCTION df.timeline(text) IS
	'a text Gantt chart of the spans of an instance visible to the caller: depth, the span''s '
	'name indented, attempt, offset from the instance''s start and duration in milliseconds, '
	'status (RUNNING while it runs) and a bar scaled to the instance';

CREATE FUNCTION df.compensations(instance_id text)
	RETURNS TABLE (node_id text, undo_node_id text, forward_completed_at timestamptz, state text,
				   attempts int, error text, execution_id text)
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_compensations';
COMMENT ON FUNCTION df.compensations(text) IS
	'the undos registered for an instance visible to the caller, in completion order of their '
	'forward steps: the COMPENSATED node, its undo, when the forward step completed, the undo''s '
	'state (registered, running, done, failed), attempts (the runs of the undo: each start and '
	'each retry of its steps, as df.history records them) and error; execution_id is the scope '
	'the forward step ran in';

-- A limit or lock key as df.check() names it: a key in a role's own space
-- (~<oid>/<key>, docs/design/tenancy.md) as written, with whose it is.
CREATE FUNCTION df_internal.key_label(p_key text) RETURNS text
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT CASE WHEN p_key ~ '^~[0-9]+/'
				THEN format('%s (role %s''s own)', regexp_replace(p_key, '^~[0-9]+/', ''),
							substring(p_key, '^~([0-9]+)/')::oid::regrole)
				ELSE p_key END
$fn$;
REVOKE EXECUTE ON FUNCTION df_internal.key_label(text) FROM PUBLIC;

-- One row per violated invariant, with the node and scope a repair needs.
-- One statement, so one snapshot: every transition is atomic, so what it
-- sees is a state some commit left behind.
CREATE FUNCTION df_internal.check_rows()
	RETURNS TABLE (instance_id text, problem text, node_id text, scope text, detail text)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $check$
WITH RECURSIVE ended AS (
	-- how an instance ended, by its last instance_* event: the engine's word,
	-- which its owner cannot change (df.instances.status it can: UPDATE)
	-- (df.compensate resumes a failed one: instance_resumed)
	SELECT x.id, x.status FROM (
		-- (a row with instance_completed_at is a one-step instance's end too)
		SELECT DISTINCT ON (e.instance_id) e.instance_id AS id,
			   CASE WHEN e.instance_completed_at IS NOT NULL THEN 'completed'
					ELSE substr(e.kind, 10) END AS status
		FROM df_internal.events e
		WHERE e.kind IN ('instance_completed', 'instance_failed', 'instance_cancelled',
						 'instance_compensated', 'instance_resumed')
		   OR e.instance_completed_at IS NOT NULL
		ORDER BY e.instance_id, e.id DESC) x
	WHERE x.status <> 'resumed'
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
		-- the children df.map made
		UNION ALL SELECT mi.node_id::text FROM df_internal.map_items mi
			WHERE n.node_type = 'MAP' AND mi.instance_id = n.instance_id AND mi.map_node = n.id
	) c(child)
	JOIN df.nodes x ON x.instance_id = n.instance_id AND x.id = c.child
	WHERE c.child IS NOT NULL
), leaves AS (
	SELECT n.* FROM nodes n JOIN live l ON l.id = n.instance_id AND l.status = 'running'
	WHERE n.status = 'running' AND n.stamp IS NOT NULL
	  AND n.node_type IN ('SQL', 'HTTP', 'HTTP_MULTIPART', 'SLEEP', 'WAIT_SCHEDULE', 'SIGNAL', 'EVENT')
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
-- a pending instance's start is queued: its runs row is its marker
WHERE l.status <> 'pending'
  AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = l.id)
  AND NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = l.id)
  AND NOT EXISTS (SELECT 1 FROM df_internal.limit_waiters q WHERE q.instance_id = l.id)
  -- a LOCK node waiting for a key is woken by the release that hands it over
  AND NOT EXISTS (SELECT 1 FROM df_internal.locks k WHERE k.instance_id = l.id AND NOT k.held)
  -- a completion in the inbox: its apply task is checked below
  AND NOT EXISTS (SELECT 1 FROM df_internal.inbox x WHERE x.instance_id = l.id)
UNION ALL
SELECT f.instance_id::text,
	   CASE f.node_type WHEN 'SIGNAL' THEN 'missing_wait' WHEN 'EVENT' THEN 'missing_wait'
			WHEN 'SLEEP' THEN 'missing_timer' WHEN 'WAIT_SCHEDULE' THEN 'missing_timer'
			ELSE 'stranded_step' END,
	   f.id::text, f.stamp,
	   format('running %s node %s in scope %s has no %s', f.node_type, f.id, f.stamp,
			  CASE f.node_type WHEN 'SIGNAL' THEN 'registered signal wait'
				   WHEN 'EVENT' THEN 'registered event wait'
				   WHEN 'SLEEP' THEN 'timer' WHEN 'WAIT_SCHEDULE' THEN 'timer' ELSE 'task' END)
FROM live_leaves f
WHERE CASE WHEN f.node_type IN ('SIGNAL', 'EVENT') THEN
		NOT EXISTS (SELECT 1 FROM df_internal.waits w WHERE w.instance_id = f.instance_id
					AND w.node_id = f.id AND w.scope = f.stamp)
	  ELSE
		NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = f.instance_id
					AND t.node_id = f.id AND t.scope = f.stamp)
		-- its completion waits in the inbox
		AND NOT EXISTS (SELECT 1 FROM df_internal.inbox x WHERE x.instance_id = f.instance_id
						AND x.node_id = f.id AND x.scope = f.stamp)
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
-- limits: a slot or a queue place of a LIMIT node execution
-- that ended, and a queue that nothing will move
SELECT x.instance_id::text,
	   CASE x.what WHEN 'slot' THEN 'limit_slot_of_ended_node' ELSE 'limit_wait_of_ended_node' END,
	   x.node_id::text, x.scope,
	   format('LIMIT node %s in scope %s %s key %s but is %s', x.node_id, x.scope,
			  CASE x.what WHEN 'slot' THEN 'holds a slot of' ELSE 'is queued on' END, df_internal.key_label(x.key),
			  CASE WHEN l.id IS NULL THEN 'in an instance that ended'
				   WHEN n.id IS NULL THEN 'missing'
				   ELSE format('%s in scope %s', n.status, n.status_details ->> 'execution_id') END)
FROM (SELECT 'slot' AS what, h.instance_id, h.node_id, h.scope, h.key FROM df_internal.limit_holders h
	  UNION ALL
	  SELECT 'wait', q.instance_id, q.node_id, q.scope, q.key FROM df_internal.limit_waiters q) x
LEFT JOIN live l ON l.id = x.instance_id
LEFT JOIN df.nodes n ON n.instance_id = x.instance_id AND n.id = x.node_id
WHERE l.id IS NULL OR n.id IS NULL OR n.status <> 'running'
   OR n.status_details ->> 'execution_id' IS DISTINCT FROM x.scope
UNION ALL
SELECT q.instance_id::text, 'limit_queue_stuck', q.node_id::text, q.scope,
	   format('LIMIT node %s in scope %s is queued on key %s with no way to wake: no slot of the key is held and no queued node of it has a timer',
			  q.node_id, q.scope, df_internal.key_label(q.key))
FROM df_internal.limit_waiters q
WHERE NOT EXISTS (SELECT 1 FROM df_internal.limit_holders h WHERE h.key = q.key)
  AND NOT EXISTS (SELECT 1 FROM df_internal.limit_waiters q2
				  JOIN df_internal.tasks t ON t.instance_id = q2.instance_id
					   AND t.node_id = q2.node_id AND t.scope = q2.scope
				  WHERE q2.key = q.key)
UNION ALL
SELECT h.instance_id::text, 'limit_admission_lost', h.node_id::text, h.scope,
	   format('LIMIT node %s in scope %s was given a slot of key %s but has no timer to start its step',
			  h.node_id, h.scope, df_internal.key_label(h.key))
FROM df_internal.limit_holders h
WHERE NOT h.started
  AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = h.instance_id
				  AND t.node_id = h.node_id AND t.scope = h.scope)
UNION ALL
-- keyed locks: nothing is held or waited for by a node that is
-- not running in the entry's scope, and every waiter has an entry ahead of
-- it that keeps it waiting (whose release will wake it)
SELECT k.instance_id::text, 'lock_of_ended_node', k.node_id::text, k.scope,
	   format('%s entry for key %s belongs to LOCK node %s, which is not running in scope %s',
			  CASE WHEN k.held THEN 'a held' ELSE 'a waiting' END, df_internal.key_label(k.key), k.node_id, k.scope)
FROM df_internal.locks k
LEFT JOIN df.nodes n ON n.instance_id = k.instance_id AND n.id = k.node_id
WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.id = k.instance_id)
   OR n.id IS NULL OR n.status IS DISTINCT FROM 'running'
   OR n.status_details ->> 'execution_id' IS DISTINCT FROM k.scope
UNION ALL
SELECT k.instance_id::text, 'lock_wait_stuck', k.node_id::text, k.scope,
	   format('LOCK node %s waits for key %s, but no entry ahead of it holds or waits for that key in a conflicting mode',
			  k.node_id, df_internal.key_label(k.key))
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
UNION ALL
-- the inbox: every completion in it has an apply task of its instance
SELECT x.instance_id::text, 'inbox_without_apply', NULL, NULL,
	   format('%s completions in the inbox and no apply task', count(*))
FROM df_internal.inbox x
WHERE NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = x.instance_id
				  AND t.kind = 'apply')
  AND EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = x.instance_id)
GROUP BY x.instance_id
UNION ALL
-- an instance that waits for a limit slot or a lock key an enclosing node
-- of its own holds: nothing but its own end would release it
SELECT q.instance_id::text, 'waits_for_itself', q.node_id::text, q.scope,
	   format('LIMIT node %s in scope %s is queued on key %s, a slot of which the enclosing node %s of its own instance holds',
			  q.node_id, q.scope, q.key, h.node_id)
FROM df_internal.limit_waiters q
JOIN df_internal.limit_holders h ON h.key = q.key AND h.instance_id = q.instance_id
WHERE (q.scope = h.scope OR starts_with(q.scope, h.scope || '::'))
  AND EXISTS (WITH RECURSIVE up(node) AS (
				SELECT e.parent::text FROM edges e
				WHERE e.instance_id = q.instance_id AND e.child = q.node_id::text
				UNION
				SELECT e.parent::text FROM up JOIN edges e
				  ON e.instance_id = q.instance_id AND e.child = up.node)
			  SELECT 1 FROM up WHERE up.node = h.node_id::text)
UNION ALL
SELECT k.instance_id::text, 'waits_for_itself', k.node_id::text, k.scope,
	   format('LOCK node %s in scope %s waits for key %s, which the enclosing node %s of its own instance holds',
			  k.node_id, k.scope, k.key, x.node_id)
FROM df_internal.locks k
JOIN df_internal.locks x ON x.key = k.key AND x.instance_id = k.instance_id AND x.held
WHERE NOT k.held
  AND (k.scope = x.scope OR starts_with(k.scope, x.scope || '::'))
  AND EXISTS (WITH RECURSIVE up(node) AS (
				SELECT e.parent::text FROM edges e
				WHERE e.instance_id = k.instance_id AND e.child = k.node_id::text
				UNION
				SELECT e.parent::text FROM up JOIN edges e
				  ON e.instance_id = k.instance_id AND e.child = up.node)
			  SELECT 1 FROM up WHERE up.node = x.node_id::text)
UNION ALL
-- an ended instance runs nothing: its end turns the nodes still running
-- into cancelled, records the completions in its inbox, and drops its
-- engine state
SELECT n.instance_id::text, 'running_node_of_ended_instance', n.id::text,
	   n.status_details ->> 'execution_id',
	   format('%s node %s is running in scope %s, but its instance ended %s', n.node_type, n.id,
			  n.status_details ->> 'execution_id', d.status)
FROM df.nodes n
JOIN ended d ON d.id = n.instance_id
WHERE n.status = 'running'
  AND NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = n.instance_id)
UNION ALL
-- (its apply task records a completion that committed after the end)
SELECT x.instance_id::text, 'inbox_of_ended_instance', NULL, NULL,
	   format('%s completions in the inbox of an instance that has ended, and no apply task',
			  count(*))
FROM df_internal.inbox x
WHERE NOT EXISTS (SELECT 1 FROM df_internal.runs r WHERE r.instance_id = x.instance_id)
  AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.instance_id = x.instance_id
				  AND t.kind = 'apply')
GROUP BY x.instance_id
$check$;
REVOKE EXECUTE ON FUNCTION df_internal.check_rows() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.check_rows() IS 'df.check with the node and scope each problem concerns, for reconciliation';

CREATE FUNCTION df_internal.engine_problems() RETURNS TABLE (problem text, detail text)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_engine_problems';
REVOKE EXECUTE ON FUNCTION df_internal.engine_problems() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.engine_problems() IS 'what keeps the engine from running this database''s instances, for df.check: '
	'this is not pg_durable.database (or that database does not exist), or pg_durable.worker_role was refused';

CREATE FUNCTION df_internal.batch_sizes() RETURNS TABLE (tasks integer, batches bigint)
	LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'pgd_batch_sizes';
REVOKE EXECUTE ON FUNCTION df_internal.batch_sizes() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.batch_sizes() IS 'how many committed executor transactions (batches) ran each number of tasks since the server started';

-- The columns of each table the engine writes without a statement, as its C
-- code knows them (src/store/row_layouts.c): the regression test row_layouts
-- compares them with the installed tables.
CREATE FUNCTION df_internal.row_layouts()
	RETURNS TABLE (table_name text, column_name text)
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_row_layouts';
REVOKE EXECUTE ON FUNCTION df_internal.row_layouts() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.row_layouts() IS 'the columns of each table the engine writes without a statement, as its C code knows them';

-- What an executor's batch holds in memory instead of rows, written now:
-- df.check() called by a step sees the engine's rows as the
-- batch's commit would leave them.  Outside a batch nothing is held.
CREATE FUNCTION df_internal.write_held() RETURNS void
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_write_held';
REVOKE EXECUTE ON FUNCTION df_internal.write_held() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.write_held() IS 'write what the executor''s batch under way holds in memory (node writes, step tasks, JOIN counts), for df.check() called by a step';
-- The step this process runs now, NULLs outside a step: df.check() called by
-- a step leaves out that step's own run (its node running, its task taken).
CREATE FUNCTION df_internal.running_step(OUT instance_id text, OUT scope text) RETURNS record
	LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'pgd_running_step';
REVOKE EXECUTE ON FUNCTION df_internal.running_step() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.running_step() IS 'the instance and scope of the workflow step this process runs now (NULLs outside a step), for df.check() called by a step';
CREATE FUNCTION df.check() RETURNS TABLE (instance_id text, problem text, detail text)
	LANGUAGE sql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT df_internal.write_held();
	      SELECT c.instance_id, c.problem, c.detail
	      FROM df_internal.check_rows() c, df_internal.running_step() s
	      WHERE c.instance_id IS DISTINCT FROM s.instance_id
	         OR NOT (c.problem = 'no_pending_work'
	                 OR (c.problem = 'stranded_step' AND c.scope = s.scope))
	      UNION ALL SELECT NULL, problem, detail FROM df_internal.engine_problems()
	      ORDER BY 1, 2, 3 $$;
REVOKE EXECUTE ON FUNCTION df.check() FROM PUBLIC;
COMMENT ON FUNCTION df.check() IS
	'one row per violated engine invariant (administrators only): a live instance with no task, '
	'timer or wait; a running step, timer or signal wait that lost its task, timer or wait; a THEN '
	'whose right child disagrees with it; a task or engine state of a finished instance; a live '
	'instance without engine state; a df.instances.status that disagrees with the engine''s state; '
	'a JOIN whose branch counter disagrees with its branches; a node waiting for a limit slot or lock key an enclosing node of its own instance holds (waits_for_itself); a task whose runs keep failing in the '
	'engine itself (repeated_engine_errors); and, without an instance, what keeps the engine from '
	'running this database''s instances (it is not pg_durable.database, or pg_durable.worker_role '
	'was refused) or its HTTP steps (no worker slot was left for the HTTP worker). Reconciliation '
	'repairs what it safely can';

-- ---------------------------------------------------------------------------
-- Circuit breakers (docs/design/breakers.md)
-- ---------------------------------------------------------------------------

-- The definitions.  The window of each breaker lives in shared memory; its
-- state is the latest row of circuit_breaker_transitions since created_at.
CREATE TABLE df_internal.circuit_breakers (
	name text PRIMARY KEY
		CHECK (name OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_.:-]{0,62}$'),
	failure_rate_threshold int NOT NULL CHECK (failure_rate_threshold BETWEEN 1 AND 100),
	minimum_calls int NOT NULL CHECK (minimum_calls >= 1),
	window_size int NOT NULL CHECK (window_size BETWEEN 1 AND 1000),
	wait_duration interval NOT NULL,
	half_open_calls int NOT NULL CHECK (half_open_calls BETWEEN 1 AND 100),
	slow_call_duration interval,
	slow_call_rate_threshold int NOT NULL CHECK (slow_call_rate_threshold BETWEEN 1 AND 100),
	record_on text[] NOT NULL,
	owner regrole NOT NULL,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE df_internal.circuit_breakers IS
	'the circuit breakers made by df.create_circuit_breaker (their windows are in shared memory)';
SELECT pg_catalog.pg_extension_config_dump('df_internal.circuit_breakers', '');

-- Every change of state, inserted by the transaction that made it (no row
-- is updated, so no engine transaction waits for another here).
CREATE TABLE df_internal.circuit_breaker_transitions (
	id bigserial PRIMARY KEY,
	name text NOT NULL,
	at timestamptz NOT NULL,
	from_state text NOT NULL CHECK (from_state IN ('closed', 'open', 'half_open')),
	to_state text NOT NULL CHECK (to_state IN ('closed', 'open', 'half_open')),
	opened_at timestamptz,
	open_until timestamptz,
	failure_rate float8,
	calls int,
	reason text,
	by_role regrole	-- the role whose call made the change (NULL: none, such as an expired permit)
);
CREATE INDEX circuit_breaker_transitions_name_at ON df_internal.circuit_breaker_transitions (name, at);
COMMENT ON TABLE df_internal.circuit_breaker_transitions IS
	'the history of the circuit breakers'' states; the latest row of a breaker is its state after a restart';
SELECT pg_catalog.pg_extension_config_dump('df_internal.circuit_breaker_transitions', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.circuit_breaker_transitions_id_seq', '');

CREATE FUNCTION df.create_circuit_breaker(name text, failure_rate_threshold int DEFAULT 50,
										  minimum_calls int DEFAULT 10, window_size int DEFAULT 20,
										  wait_duration interval DEFAULT '30 seconds',
										  half_open_calls int DEFAULT 3,
										  slow_call_duration interval DEFAULT NULL,
										  slow_call_rate_threshold int DEFAULT 100,
										  record_on text[] DEFAULT '{http:5xx,http:429,timeout,connection}')
	RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_create_circuit_breaker';
COMMENT ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]) IS
	'create a circuit breaker shared by every worker: it opens when, with at least minimum_calls in '
	'its window of the last window_size calls, the rate of calls failing with a code of record_on '
	'(or slower than slow_call_duration) reaches its threshold; open, calls fail at once with kind '
	'circuit_open for wait_duration, then half_open_calls probes decide. Needs EXECUTE, granted '
	'like df.http''s';
REVOKE EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]) FROM PUBLIC;

CREATE FUNCTION df.drop_circuit_breaker(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_drop_circuit_breaker';
COMMENT ON FUNCTION df.drop_circuit_breaker(text) IS
	'drop a circuit breaker and its history (its owner''s members only); steps that name it then fail';
REVOKE EXECUTE ON FUNCTION df.drop_circuit_breaker(text) FROM PUBLIC;

CREATE FUNCTION df.reset_circuit_breaker(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_reset_circuit_breaker';
COMMENT ON FUNCTION df.reset_circuit_breaker(text) IS
	'close a circuit breaker with an empty window (its owner''s members only)';
REVOKE EXECUTE ON FUNCTION df.reset_circuit_breaker(text) FROM PUBLIC;

CREATE FUNCTION df.circuit_breaker_states()
	RETURNS TABLE (name text, state text, failure_rate float8, calls_in_window int,
				   opened_at timestamptz, open_until timestamptz, half_open_permits_left int,
				   slow_call_rate float8, owner text)
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_circuit_breakers';
COMMENT ON FUNCTION df.circuit_breaker_states() IS
	'the rows of df.circuit_breakers: each breaker as the next call would find it';

CREATE VIEW df.circuit_breakers AS
	SELECT s.name, s.state, s.failure_rate, s.calls_in_window, s.opened_at, s.open_until,
		   s.half_open_permits_left, s.slow_call_rate, s.owner,
		   CASE WHEN s.state OPERATOR(pg_catalog.=) 'closed' OR o.by_role IS NULL THEN NULL
				WHEN o.by_role OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole
					 OR coalesce((SELECT x.rolsuper OR x.rolbypassrls FROM pg_catalog.pg_roles x
								  WHERE x.rolname OPERATOR(pg_catalog.=) current_user), false)
				THEN o.by_role::text ELSE 'another role' END AS opened_by
	FROM df.circuit_breaker_states() s
	LEFT JOIN LATERAL (SELECT t.by_role FROM df_internal.circuit_breaker_transitions t
					   WHERE t.name OPERATOR(pg_catalog.=) s.name
						 AND t.to_state OPERATOR(pg_catalog.=) 'open'
					   ORDER BY t.at DESC, t.id DESC LIMIT 1) o ON true;
COMMENT ON VIEW df.circuit_breakers IS
	'every circuit breaker: state (closed, open, half_open), failure rate (percent) and calls in its '
	'window, when it opened and until when, the half-open permits left, its owner, and opened_by: '
	'the role whose call opened it (named to that role, a superuser or a BYPASSRLS role; else '
	'''another role'')';
GRANT SELECT ON df.circuit_breakers TO PUBLIC;

CREATE VIEW df.circuit_breaker_history AS
	SELECT name, at, from_state, to_state, reason, failure_rate, calls, opened_at, open_until,
		   CASE WHEN by_role IS NULL THEN NULL
				WHEN by_role OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole
					 OR coalesce((SELECT x.rolsuper OR x.rolbypassrls FROM pg_catalog.pg_roles x
								  WHERE x.rolname OPERATOR(pg_catalog.=) current_user), false)
				THEN by_role::text ELSE 'another role' END AS by_role
	FROM df_internal.circuit_breaker_transitions;
COMMENT ON VIEW df.circuit_breaker_history IS
	'every change of state of the circuit breakers, with its reason and by_role, the role whose '
	'call made it (named to that role, a superuser or a BYPASSRLS role; else ''another role'')';
GRANT SELECT ON df.circuit_breaker_history TO PUBLIC;

CREATE FUNCTION df.with_breaker(step text, name text) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_with_breaker';
COMMENT ON FUNCTION df.with_breaker(text, text) IS
	'node BREAKER: the whole step is one call of circuit breaker name; open, it fails at once with '
	'kind circuit_open';

-- Dynamic fan-out (docs/design/map.md): the children df.map
-- made for a MAP node, one copy of its step per row, as df.nodes rows
-- (item: the row number from 0; node_id: the root of the copy).  They go
-- with their nodes.
CREATE TABLE df_internal.map_items (
	instance_id varchar(8) NOT NULL,
	map_node varchar(8) NOT NULL,
	item int NOT NULL CHECK (item >= 0),
	node_id varchar(8) NOT NULL,
	PRIMARY KEY (instance_id, map_node, item),
	FOREIGN KEY (instance_id, node_id) REFERENCES df.nodes (instance_id, id) ON DELETE CASCADE
);
COMMENT ON TABLE df_internal.map_items IS
	'the children of MAP nodes (df.map): the root of the copy of the step made for each row';
SELECT pg_catalog.pg_extension_config_dump('df_internal.map_items', '');
-- The counters of each running MAP execution: its children, how many
-- started and how many finished (changed under the instance's runs row).
CREATE TABLE df_internal.maps (
	instance_id varchar(8) NOT NULL REFERENCES df_internal.runs (instance_id) ON DELETE CASCADE,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	total int NOT NULL,
	started int NOT NULL,
	finished int NOT NULL DEFAULT 0,
	failed int NOT NULL DEFAULT 0,
	PRIMARY KEY (instance_id, node_id, scope)
);
COMMENT ON TABLE df_internal.maps IS
	'running MAP executions (df.map): children (or rows) in all, started, finished, failed';
SELECT pg_catalog.pg_extension_config_dump('df_internal.maps', '');
-- The rows of the query of a MAP execution in lanes mode, written by the
-- query's step as it returns them (item: the row number from 0), each
-- read when a lane takes it; an item's result (collect) or its error (a
-- tolerated failure) is kept here until the MAP ends, a row whose item
-- succeeded without collect goes at once.  They go with the runs row.
CREATE TABLE df_internal.map_rows (
	instance_id varchar(8) NOT NULL REFERENCES df_internal.runs (instance_id) ON DELETE CASCADE,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	item int NOT NULL CHECK (item >= 0),
	value jsonb NOT NULL,
	result jsonb,
	failed boolean NOT NULL DEFAULT false,
	PRIMARY KEY (instance_id, node_id, scope, item)
);
COMMENT ON TABLE df_internal.map_rows IS
	'the rows of the queries of MAP executions in lanes mode (df.map with collect), until each is done';
SELECT pg_catalog.pg_extension_config_dump('df_internal.map_rows', '');

-- Retention of key rows: a key nobody holds or waits for, whose
-- bucket is full again, is forgotten; the next LIMIT node to enter it
-- creates it anew.  The key's row is locked (SKIP LOCKED) before a
-- statement of its own looks at its holders and waiters.
CREATE FUNCTION df_internal.limit_forget_idle(p_max int) RETURNS int
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $forget$
DECLARE
	k text;
	n int := 0;
BEGIN
	FOR k IN
		SELECT l.key FROM df_internal.limits l
		WHERE NOT EXISTS (SELECT 1 FROM df_internal.limit_holders h WHERE h.key = l.key)
		  AND NOT EXISTS (SELECT 1 FROM df_internal.limit_waiters w WHERE w.key = l.key)
		  AND (l.rate IS NULL
			   OR l.tokens + l.rate * extract(epoch FROM clock_timestamp() - l.tokens_at)::float8
				  >= l.burst)
		LIMIT p_max
		FOR UPDATE SKIP LOCKED
	LOOP
		DELETE FROM df_internal.limits l
		WHERE l.key = k
		  AND NOT EXISTS (SELECT 1 FROM df_internal.limit_holders h WHERE h.key = k)
		  AND NOT EXISTS (SELECT 1 FROM df_internal.limit_waiters w WHERE w.key = k);
		IF FOUND THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$forget$;
REVOKE EXECUTE ON FUNCTION df_internal.limit_forget_idle(int) FROM PUBLIC;
COMMENT ON FUNCTION df_internal.limit_forget_idle(int) IS
	'forget up to p_max df.limit keys that nobody holds or waits for and whose bucket is full (retention)';

-- df.limits: a key is shown to the roles with an instance inside or
-- queued on it, with the counts of their own instances, like df.instances
-- under row-level security; superusers and BYPASSRLS roles see every key.
CREATE VIEW df.limits AS
WITH me AS (
	SELECT pg_catalog.quote_ident(current_user)::regrole AS role,
		   coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
					 WHERE r.rolname OPERATOR(pg_catalog.=) current_user), false) AS all_keys
), c AS (
	SELECT k.key, k.max_concurrent, k.rate, k.burst, k.tokens, k.tokens_at,
		   (SELECT pg_catalog.count(*) FROM df_internal.limit_holders h
			WHERE h.key OPERATOR(pg_catalog.=) k.key
			  AND (me.all_keys OR h.submitted_by OPERATOR(pg_catalog.=) me.role))::int AS held,
		   (SELECT pg_catalog.count(*) FROM df_internal.limit_waiters w
			WHERE w.key OPERATOR(pg_catalog.=) k.key
			  AND (me.all_keys OR w.submitted_by OPERATOR(pg_catalog.=) me.role))::int AS queued,
		   (SELECT pg_catalog.string_agg(DISTINCT CASE WHEN me.all_keys THEN h.submitted_by::text
													   ELSE 'another role' END, ', ')
			FROM df_internal.limit_holders h
			WHERE h.key OPERATOR(pg_catalog.=) k.key
			  AND h.submitted_by OPERATOR(pg_catalog.<>) me.role) AS others,
		   me.all_keys
	FROM df_internal.limits k CROSS JOIN me
)
SELECT pg_catalog.regexp_replace(c.key, '^~[0-9]+/', '') AS key,
	   c.max_concurrent, c.rate, c.burst, c.held, c.queued,
	   CASE WHEN c.rate IS NULL THEN NULL::timestamptz
			WHEN c.tokens OPERATOR(pg_catalog.+) c.rate OPERATOR(pg_catalog.*)
				 extract(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) c.tokens_at)::float8
				 OPERATOR(pg_catalog.>=) 1 THEN pg_catalog.clock_timestamp()
			ELSE c.tokens_at OPERATOR(pg_catalog.+)
				 pg_catalog.make_interval(secs => (1 OPERATOR(pg_catalog.-) c.tokens)
										  OPERATOR(pg_catalog./) c.rate) END AS next_admission,
	   CASE WHEN pg_catalog.starts_with(c.key, '~')
			THEN pg_catalog.substring(c.key, '^~([0-9]+)/')::pg_catalog.oid::regrole::text END AS space,
	   CASE WHEN c.queued OPERATOR(pg_catalog.>) 0 THEN c.others END AS blocked_by
FROM c
WHERE c.all_keys OR c.held OPERATOR(pg_catalog.>) 0 OR c.queued OPERATOR(pg_catalog.>) 0;
COMMENT ON VIEW df.limits IS
	'the df.limit keys: settings, slots held and places queued (of the caller''s own instances '
	'unless it is a superuser or BYPASSRLS), when the token bucket admits next (rate only), '
	'space (the role whose own key it is; NULL: a shared limit), blocked_by (with places queued: '
	'the other roles holding slots, named for a superuser or BYPASSRLS viewer, else '
	'''another role'')';
GRANT SELECT ON df.limits TO PUBLIC;

-- df.limit_queue: the places in the df.limit queues, each with its position
-- in its key's queue (1 = next), of the caller's own instances (all of
-- them for superusers and BYPASSRLS roles), like df.instances under
-- row-level security.
CREATE VIEW df.limit_queue AS
WITH me AS (
	SELECT pg_catalog.quote_ident(current_user)::regrole AS role,
		   coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
					 WHERE r.rolname OPERATOR(pg_catalog.=) current_user), false) AS all_keys
), q AS (
	SELECT w.key, pg_catalog.row_number() OVER (PARTITION BY w.key ORDER BY w.seq) AS position,
		   w.instance_id, w.node_id, w.scope, w.queued_at, w.deadline, w.submitted_by
	FROM df_internal.limit_waiters w
)
SELECT pg_catalog.regexp_replace(q.key, '^~[0-9]+/', '') AS key, q.position,
	   q.instance_id::text AS instance_id, q.node_id::text AS node_id,
	   q.scope AS execution_id, q.queued_at, q.deadline
FROM q CROSS JOIN me
WHERE me.all_keys OR q.submitted_by OPERATOR(pg_catalog.=) me.role;
COMMENT ON VIEW df.limit_queue IS
	'the LIMIT nodes of the caller''s instances queued on a df.limit key (every one for superusers '
	'and BYPASSRLS roles): the key, the position in its FIFO queue (1 = next), since when, until when';
GRANT SELECT ON df.limit_queue TO PUBLIC;

CREATE FUNCTION df.limit(step text, key text, max_concurrent int DEFAULT NULL,
						 rate float8 DEFAULT NULL, burst int DEFAULT NULL,
						 queue_timeout interval DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_limit';
COMMENT ON FUNCTION df.limit(text, text, int, float8, int, interval) IS
	'node LIMIT: at most max_concurrent executions of step with this key (a template) at once '
	'across every instance, and at most rate per second (token bucket of burst, default 1); '
	'the others wait in a FIFO queue per key, failing with kind queue_timeout after queue_timeout';

-- Events (docs/design/events.md): the bus, published to by
-- df.publish_event and PUBLISH nodes; EVENT nodes wait for its events and
-- subscriptions start a workflow per event (api/publish.c,
-- store/event_bus.c).  df_internal.events is the instances' history,
-- not this.
-- ---------------------------------------------------------------------------

-- one row per published event; xid is the publishing transaction's, so an
-- instance's start snapshot (runs.start_snapshot) says whether the event
-- came after the start, whatever the commit order of the ids
CREATE TABLE df_internal.bus_events (
	id bigserial PRIMARY KEY,
	topic text NOT NULL,
	key text,
	payload jsonb NOT NULL,
	published_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	published_by regrole NOT NULL,	-- regrole: a dump names the role
	xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id()
);
CREATE INDEX bus_events_topic_idx ON df_internal.bus_events (topic, xid);
CREATE INDEX bus_events_published_at_idx ON df_internal.bus_events (published_at);
COMMENT ON TABLE df_internal.bus_events IS
	'the event bus: df.publish_event and PUBLISH nodes append, retention removes (not the history)';

-- the events an instance's EVENT nodes took: each execution takes another
CREATE TABLE df_internal.bus_takes (
	instance_id varchar(8) NOT NULL,
	event_id bigint NOT NULL REFERENCES df_internal.bus_events (id) ON DELETE CASCADE,
	PRIMARY KEY (instance_id, event_id)
);
CREATE INDEX bus_takes_event_idx ON df_internal.bus_takes (event_id);

-- df.subscribe: each matching event starts one instance of workflow as owner
CREATE TABLE df_internal.subscriptions (
	name text NOT NULL,
	topic text NOT NULL,
	workflow text NOT NULL,
	filter jsonb NOT NULL DEFAULT '{}',
	owner regrole NOT NULL,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (owner, name)
);
CREATE INDEX subscriptions_topic_idx ON df_internal.subscriptions (topic);
SELECT pg_catalog.pg_extension_config_dump('df_internal.bus_events', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.bus_events_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.bus_takes', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.subscriptions', '');

CREATE FUNCTION df.publish(topic text, payload text DEFAULT '{}', key text DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_publish';
COMMENT ON FUNCTION df.publish(text, text, text) IS
	'node PUBLISH: publish an event in the step''s own transaction (exactly once); payload and key '
	'are templates ({var}, $name), the payload JSON once substituted';
CREATE FUNCTION df.wait_for_event(topic text, filter jsonb DEFAULT '{}',
								  timeout_seconds int DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_wait_for_event';
COMMENT ON FUNCTION df.wait_for_event(text, jsonb, int) IS
	'node EVENT: the first event of topic whose payload contains filter published after the '
	'instance started and not taken by another wait of the instance, '
	'{"topic","key","payload","published_at","event_id"}; {"timed_out": true} at the timeout';

CREATE FUNCTION df.publish_event(topic text, payload jsonb, key text DEFAULT NULL) RETURNS bigint
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_publish_event';
COMMENT ON FUNCTION df.publish_event(text, jsonb, text) IS
	'publish an event in the caller''s transaction (triggers too); returns its id.  Starts the '
	'matching subscriptions'' workflows in the same transaction.  Not granted to PUBLIC';
REVOKE EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) FROM PUBLIC;

CREATE FUNCTION df.subscribe(name text, topic text, workflow text, filter jsonb DEFAULT '{}') RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_subscribe';
COMMENT ON FUNCTION df.subscribe(text, text, text, jsonb) IS
	'every event of topic whose payload contains filter, published after this commits, starts one '
	'instance of workflow as the caller, with $event bound (idempotency key sub:<name>:<event id>).  '
	'Not granted to PUBLIC';
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM PUBLIC;

CREATE FUNCTION df.unsubscribe(name text) RETURNS boolean
	LANGUAGE c STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_unsubscribe';
COMMENT ON FUNCTION df.unsubscribe(text) IS
	'remove a subscription of the caller (a superuser: anyone''s); false when there is none';

CREATE VIEW df.subscriptions WITH (security_barrier) AS
	SELECT s.name, s.topic, s.workflow, s.filter, s.owner, s.created_at
	FROM df_internal.subscriptions s
	WHERE pg_catalog.pg_has_role(s.owner, 'USAGE');
COMMENT ON VIEW df.subscriptions IS 'the subscriptions of the roles the caller is a member of';
GRANT SELECT ON df.subscriptions TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Restores (docs/design/restores.md)
-- ---------------------------------------------------------------------------

-- The tables a restore loaded rows into: while any row is here the workers
-- run nothing in this database, until df.resume_restored() empties it.  Not
-- a configuration table: a dump never carries a hold, each restore makes
-- its own.
CREATE TABLE df_internal.restore_hold (
	table_name text PRIMARY KEY,
	loaded_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	loaded_by text NOT NULL DEFAULT pg_catalog.session_user()
);
COMMENT ON TABLE df_internal.restore_hold IS
	'the engine tables a restore loaded rows into; while not empty the workers run nothing here (df.resume_restored)';

-- Fired after every INSERT and COPY into the tables that carry work: a
-- COPY ... FROM into this very table that the client sent itself (as
-- pg_restore and a plain dump send it) records a hold in its own
-- transaction, so the rows and their hold commit together.  The engine
-- never copies, and passes.  ENABLE ALWAYS: it fires under
-- session_replication_role = replica too.
CREATE FUNCTION df_internal.restore_arrived() RETURNS trigger
	LANGUAGE c SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_restore_arrived';
REVOKE EXECUTE ON FUNCTION df_internal.restore_arrived() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.restore_arrived() IS
	'trigger: rows a client loaded straight into an engine table (a restore) hold the workers until df.resume_restored()';
CREATE TRIGGER restore_hold AFTER INSERT ON df.instances
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.runs
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.tasks
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df.nodes
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.map_items
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.maps
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.map_rows
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
CREATE TRIGGER restore_hold AFTER INSERT ON df_internal.bus_takes
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_arrived();
ALTER TABLE df.instances ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.runs ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.tasks ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df.nodes ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.map_items ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.maps ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.map_rows ENABLE ALWAYS TRIGGER restore_hold;
ALTER TABLE df_internal.bus_takes ENABLE ALWAYS TRIGGER restore_hold;

-- Fired before every INSERT and COPY into the tables with foreign keys or
-- the root node's check: a load (as above) runs with
-- session_replication_role = replica, so that its rows' references are not
-- checked while the tables they point into may still be loading (pg_restore
-- -j loads them in any order, each in a transaction of its own);
-- restore_arrived() sets it back after the statement, and
-- df.resume_restored() checks every reference once the restore is complete.
CREATE FUNCTION df_internal.restore_loading() RETURNS trigger
	LANGUAGE c SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_restore_loading';
REVOKE EXECUTE ON FUNCTION df_internal.restore_loading() FROM PUBLIC;
COMMENT ON FUNCTION df_internal.restore_loading() IS
	'trigger: a restore''s load into an engine table is not checked against the tables it references until df.resume_restored()';
CREATE TRIGGER restore_load BEFORE INSERT ON df.instances
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
CREATE TRIGGER restore_load BEFORE INSERT ON df.nodes
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
CREATE TRIGGER restore_load BEFORE INSERT ON df_internal.map_items
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
CREATE TRIGGER restore_load BEFORE INSERT ON df_internal.maps
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
CREATE TRIGGER restore_load BEFORE INSERT ON df_internal.map_rows
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
CREATE TRIGGER restore_load BEFORE INSERT ON df_internal.bus_takes
	FOR EACH STATEMENT EXECUTE FUNCTION df_internal.restore_loading();
ALTER TABLE df.instances ENABLE ALWAYS TRIGGER restore_load;
ALTER TABLE df.nodes ENABLE ALWAYS TRIGGER restore_load;
ALTER TABLE df_internal.map_items ENABLE ALWAYS TRIGGER restore_load;
ALTER TABLE df_internal.maps ENABLE ALWAYS TRIGGER restore_load;
ALTER TABLE df_internal.map_rows ENABLE ALWAYS TRIGGER restore_load;
ALTER TABLE df_internal.bus_takes ENABLE ALWAYS TRIGGER restore_load;

-- The end of a restore, run by the administrator once every part of it is
-- in: each engine sequence moved past the largest id its table holds (a
-- restore sets them last, a partial one may not at all), a start task for
-- each pending instance without one, the hold dropped.  Returns how many
-- live instances it lets go on.
CREATE FUNCTION df.resume_restored() RETURNS bigint
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	s record;
	top bigint;
	live bigint;
	broken text;
BEGIN
	PERFORM df_internal.refuse_on_standby('df.resume_restored', 'resume a restore');
	-- one at a time: a second caller waits for the first
	LOCK TABLE df_internal.restore_hold IN SHARE ROW EXCLUSIVE MODE;
	-- the references the loads did not check (restore_loading): whole now,
	-- or the restore is not complete and the workflows stay held
	SELECT pg_catalog.string_agg(x.what, '; ') INTO broken FROM (
		SELECT pg_catalog.format('%s nodes without their instance', count(*)) AS what
		  FROM df.nodes n
		 WHERE NOT EXISTS (SELECT FROM df.instances i
						   WHERE i.id OPERATOR(pg_catalog.=) n.instance_id
							 AND i.submitted_by OPERATOR(pg_catalog.=) n.submitted_by)
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s nodes whose left or right node is missing', count(*))
		  FROM df.nodes n
		 WHERE (n.left_node IS NOT NULL AND NOT EXISTS (
					SELECT FROM df.nodes m WHERE m.instance_id OPERATOR(pg_catalog.=) n.instance_id
											 AND m.id OPERATOR(pg_catalog.=) n.left_node))
			OR (n.right_node IS NOT NULL AND NOT EXISTS (
					SELECT FROM df.nodes m WHERE m.instance_id OPERATOR(pg_catalog.=) n.instance_id
											 AND m.id OPERATOR(pg_catalog.=) n.right_node))
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s instances whose root node is missing', count(*))
		  FROM df.instances i
		 WHERE NOT EXISTS (SELECT FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) i.id
													AND n.id OPERATOR(pg_catalog.=) i.root_node)
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s map items without their node', count(*))
		  FROM df_internal.map_items m
		 WHERE NOT EXISTS (SELECT FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) m.instance_id
													AND n.id OPERATOR(pg_catalog.=) m.node_id)
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s map counters without their run', count(*))
		  FROM df_internal.maps m
		 WHERE NOT EXISTS (SELECT FROM df_internal.runs r
						   WHERE r.instance_id OPERATOR(pg_catalog.=) m.instance_id)
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s map rows without their run', count(*))
		  FROM df_internal.map_rows m
		 WHERE NOT EXISTS (SELECT FROM df_internal.runs r
						   WHERE r.instance_id OPERATOR(pg_catalog.=) m.instance_id)
		HAVING count(*) OPERATOR(pg_catalog.>) 0
		UNION ALL
		SELECT pg_catalog.format('%s event takes without their event', count(*))
		  FROM df_internal.bus_takes t
		 WHERE NOT EXISTS (SELECT FROM df_internal.bus_events e
						   WHERE e.id OPERATOR(pg_catalog.=) t.event_id)
		HAVING count(*) OPERATOR(pg_catalog.>) 0) x;
	IF broken IS NOT NULL THEN
		RAISE EXCEPTION 'the restore is not complete: %', broken
			USING ERRCODE = 'foreign_key_violation',
				  HINT = 'Load the rest of the dump (or restore it again), then call df.resume_restored() again; until then the workflows stay held.';
	END IF;
	FOR s IN SELECT * FROM (VALUES
			('df_internal.tasks_id_seq', 'df_internal.tasks', 'id'),
			('df_internal.signals_id_seq', 'df_internal.signals', 'id'),
			('df_internal.results_seq_seq', 'df_internal.results', 'seq'),
			('df_internal.waits_seq_seq', 'df_internal.waits', 'seq'),
			('df_internal.events_id_seq', 'df_internal.events', 'id'),
			('df_internal.inbox_id_seq', 'df_internal.inbox', 'id'),
			('df_internal.compensations_seq_seq', 'df_internal.compensations', 'seq'),
			('df_internal.locks_seq_seq', 'df_internal.locks', 'seq'),
			('df_internal.limit_waiters_seq_seq', 'df_internal.limit_waiters', 'seq'),
			('df_internal.circuit_breaker_transitions_id_seq', 'df_internal.circuit_breaker_transitions', 'id'),
			('df_internal.bus_events_id_seq', 'df_internal.bus_events', 'id')) v (seq, tab, col)
	LOOP
		CONTINUE WHEN pg_catalog.to_regclass(s.seq) IS NULL OR pg_catalog.to_regclass(s.tab) IS NULL;
		EXECUTE pg_catalog.format('SELECT max(%I) FROM %s', s.col, s.tab) INTO top;
		IF top IS NOT NULL THEN
			PERFORM pg_catalog.setval(s.seq, top)
			  FROM pg_catalog.pg_sequences q
			 WHERE pg_catalog.format('%I.%I', q.schemaname, q.sequencename) OPERATOR(pg_catalog.=) s.seq
			   AND COALESCE(q.last_value, 0) OPERATOR(pg_catalog.<) top;
		END IF;
	END LOOP;
	-- a pending start of the dump has no marker: the queue's scans find its task
	INSERT INTO df_internal.tasks (instance_id, scope, kind)
	SELECT r.instance_id, r.instance_id, 'start' FROM df_internal.runs r
	 WHERE r.status OPERATOR(pg_catalog.=) 'pending'
	   AND NOT EXISTS (SELECT FROM df_internal.tasks t
					   WHERE t.instance_id OPERATOR(pg_catalog.=) r.instance_id
						 AND t.kind OPERATOR(pg_catalog.=) 'start');
	DELETE FROM df_internal.restore_hold;
	SELECT count(*) INTO live FROM df_internal.runs;
	RETURN live;
END
$$;
REVOKE EXECUTE ON FUNCTION df.resume_restored() FROM PUBLIC;
COMMENT ON FUNCTION df.resume_restored() IS
	'after a restore is complete (administrators only): move the engine''s sequences past the restored ids '
	'and let the workers run the restored instances; returns how many live instances go on';

-- Owners and grants of the coordination objects (docs/design/tenancy.md).
-- A limit, a lock space or a topic made by df.create_limit,
-- df.create_lock_space or df.create_topic is shared: its owner and the roles
-- it is granted to use it by its name.  Any other name a role uses is its
-- own: df_internal.space_name qualifies it with the role ('~<role oid>/'),
-- so two roles' unshared keys and topics never meet.  Circuit breakers are
-- always made (df.create_circuit_breaker) and always shared the same way.
-- ---------------------------------------------------------------------------
CREATE TABLE df_internal.shared_objects (
	kind text NOT NULL CHECK (kind IN ('limit', 'lock_space', 'topic')),
	name text COLLATE "C" NOT NULL
		CHECK (name OPERATOR(pg_catalog.<>) '' AND NOT pg_catalog.starts_with(name, '~')),
	owner regrole NOT NULL,
	max_concurrent int CHECK (max_concurrent >= 1),
	rate float8 CHECK (rate > 0),
	burst int CHECK (burst >= 1),
	created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (kind, name)
);
COMMENT ON TABLE df_internal.shared_objects IS
	'the shared limits, lock spaces and topics, with their owners (df.shared_objects)';
-- grantee 0 ('-'::regrole) is PUBLIC
CREATE TABLE df_internal.object_grants (
	kind text NOT NULL CHECK (kind IN ('circuit_breaker', 'limit', 'lock_space', 'topic')),
	name text COLLATE "C" NOT NULL,
	grantee regrole NOT NULL,
	privilege text NOT NULL CHECK (privilege IN ('use', 'publish', 'subscribe')),
	granted_by regrole NOT NULL,
	granted_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (kind, name, grantee, privilege)
);
COMMENT ON TABLE df_internal.object_grants IS
	'who may use a circuit breaker or a shared limit, lock space or topic besides its owner';
SELECT pg_catalog.pg_extension_config_dump('df_internal.shared_objects', '');
SELECT pg_catalog.pg_extension_config_dump('df_internal.object_grants', '');

-- May role p_role use object p_name of kind p_kind with privilege p_privilege
-- ('use'; for a topic 'publish' or 'subscribe')?  Its owner's members may,
-- and the members of a role it is granted to.
CREATE FUNCTION df_internal.may_use(p_kind text, p_name text, p_role oid, p_privilege text)
	RETURNS boolean
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT EXISTS (SELECT 1 FROM df_internal.shared_objects o
				   WHERE o.kind = p_kind AND o.name = p_name
					 AND pg_has_role(p_role, o.owner, 'USAGE'))
		OR EXISTS (SELECT 1 FROM df_internal.circuit_breakers b
				   WHERE p_kind = 'circuit_breaker' AND b.name = p_name
					 AND pg_has_role(p_role, b.owner, 'USAGE'))
		OR (EXISTS (SELECT 1 FROM df_internal.object_grants g
					WHERE g.kind = p_kind AND g.name = p_name AND g.privilege = p_privilege
					  AND (g.grantee = 0 OR pg_has_role(p_role, g.grantee, 'USAGE')))
			AND (EXISTS (SELECT 1 FROM df_internal.shared_objects o
						 WHERE o.kind = p_kind AND o.name = p_name)
				 OR EXISTS (SELECT 1 FROM df_internal.circuit_breakers b
							WHERE p_kind = 'circuit_breaker' AND b.name = p_name)))
$fn$;
COMMENT ON FUNCTION df_internal.may_use(text, text, oid, text) IS
	'whether a role owns (is a member of the owner of) or was granted a coordination object';

-- The name the engine uses for name p_name of kind p_kind ('limit',
-- 'lock_space' for a lock key, 'topic') used by role p_role: the name itself
-- when a shared object of that name exists that the role may use with
-- p_privilege (a lock key's space is its text before the first ':'), else
-- the name in the role's own space, '~<role oid>/<name>'.
CREATE FUNCTION df_internal.space_name(p_kind text, p_name text, p_role oid, p_privilege text)
	RETURNS text
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT CASE WHEN df_internal.may_use(p_kind,
										 CASE p_kind WHEN 'lock_space' THEN split_part(p_name, ':', 1)
													 ELSE p_name END,
										 p_role, p_privilege)
				THEN p_name
				ELSE '~' || p_role::text || '/' || p_name END
$fn$;
COMMENT ON FUNCTION df_internal.space_name(text, text, oid, text) IS
	'the engine''s name of a limit key, lock key or topic a role uses: shared, or in the role''s own space';

CREATE FUNCTION df.create_limit(key text, max_concurrent int DEFAULT NULL, rate float8 DEFAULT NULL,
								burst int DEFAULT NULL) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_create_limit';
COMMENT ON FUNCTION df.create_limit(text, int, float8, int) IS
	'create a shared df.limit key owned by the caller: its settings win over those of the nodes '
	'that use it; the owner''s members and the roles granted it (df.grant_limit) share it, any '
	'other role naming the key uses a key of its own';
CREATE FUNCTION df.create_lock_space(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_create_lock_space';
COMMENT ON FUNCTION df.create_lock_space(text) IS
	'create a shared space of df.with_lock keys owned by the caller: the keys name and name:… '
	'exclude each other across the owner''s members and the roles granted it (df.grant_lock_space)';
CREATE FUNCTION df.create_topic(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_create_topic';
COMMENT ON FUNCTION df.create_topic(text) IS
	'create a shared event topic owned by the caller: its owner''s members and the roles granted '
	'publish or subscribe (df.grant_topic) publish to it and read it';
CREATE FUNCTION df.drop_limit(key text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_drop_limit';
COMMENT ON FUNCTION df.drop_limit(text) IS
	'drop a shared limit and its grants (its owner''s members only): the key is each role''s own again';
CREATE FUNCTION df.drop_lock_space(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_drop_lock_space';
COMMENT ON FUNCTION df.drop_lock_space(text) IS
	'drop a shared lock space and its grants (its owner''s members only): its keys are each role''s own again';
CREATE FUNCTION df.drop_topic(name text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_drop_topic';
COMMENT ON FUNCTION df.drop_topic(text) IS
	'drop a shared topic and its grants (its owner''s members only): the topic is each role''s own again';

CREATE FUNCTION df.grant_circuit_breaker(name text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_grant_circuit_breaker';
COMMENT ON FUNCTION df.grant_circuit_breaker(text, text) IS
	'let role (or PUBLIC) name the circuit breaker in its steps (its owner''s members only)';
CREATE FUNCTION df.revoke_circuit_breaker(name text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_revoke_circuit_breaker';
COMMENT ON FUNCTION df.revoke_circuit_breaker(text, text) IS
	'take back df.grant_circuit_breaker (its owner''s members only)';
CREATE FUNCTION df.grant_limit(key text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_grant_limit';
COMMENT ON FUNCTION df.grant_limit(text, text) IS
	'let role (or PUBLIC) take slots of the shared limit (its owner''s members only)';
CREATE FUNCTION df.revoke_limit(key text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_revoke_limit';
COMMENT ON FUNCTION df.revoke_limit(text, text) IS
	'take back df.grant_limit (its owner''s members only)';
CREATE FUNCTION df.grant_lock_space(name text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_grant_lock_space';
COMMENT ON FUNCTION df.grant_lock_space(text, text) IS
	'let role (or PUBLIC) take the keys of the shared lock space (its owner''s members only)';
CREATE FUNCTION df.revoke_lock_space(name text, role text) RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_revoke_lock_space';
COMMENT ON FUNCTION df.revoke_lock_space(text, text) IS
	'take back df.grant_lock_space (its owner''s members only)';
CREATE FUNCTION df.grant_topic(name text, role text, privileges text[] DEFAULT '{publish,subscribe}')
	RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_grant_topic';
COMMENT ON FUNCTION df.grant_topic(text, text, text[]) IS
	'let role (or PUBLIC) publish to the shared topic, subscribe to it and wait for its events '
	'(privileges publish, subscribe; its owner''s members only)';
CREATE FUNCTION df.revoke_topic(name text, role text, privileges text[] DEFAULT '{publish,subscribe}')
	RETURNS void
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_revoke_topic';
COMMENT ON FUNCTION df.revoke_topic(text, text, text[]) IS
	'take back df.grant_topic (its owner''s members only)';

CREATE VIEW df.shared_objects AS
	SELECT o.kind, o.name, o.owner, o.max_concurrent, o.rate, o.burst, o.created_at,
		   ARRAY(SELECT CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
							 ELSE g.grantee::text END
						OPERATOR(pg_catalog.||) '=' OPERATOR(pg_catalog.||) g.privilege
				 FROM df_internal.object_grants g
				 WHERE g.kind OPERATOR(pg_catalog.=) o.kind AND g.name OPERATOR(pg_catalog.=) o.name
				 ORDER BY 1) AS grants
	FROM df_internal.shared_objects o
	UNION ALL
	SELECT 'circuit_breaker', b.name, b.owner, NULL, NULL, NULL, b.created_at,
		   ARRAY(SELECT CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
							 ELSE g.grantee::text END
						OPERATOR(pg_catalog.||) '=' OPERATOR(pg_catalog.||) g.privilege
				 FROM df_internal.object_grants g
				 WHERE g.kind OPERATOR(pg_catalog.=) 'circuit_breaker' AND g.name OPERATOR(pg_catalog.=) b.name
				 ORDER BY 1)
	FROM df_internal.circuit_breakers b;
COMMENT ON VIEW df.shared_objects IS
	'the circuit breakers and the shared limits, lock spaces and topics: kind, name, owner, '
	'a limit''s settings, and the grants (grantee=privilege)';
GRANT SELECT ON df.shared_objects TO PUBLIC;
REVOKE EXECUTE ON FUNCTION df.create_limit(text, int, float8, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.create_lock_space(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION df.create_topic(text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- External workers (docs/guides/external-workers.md): a TASK node's execution
-- is a df_internal.tasks row of kind 'external' (the engine's: retries keep
-- it, whatever abandons the node deletes it; executors never claim it) and
-- an external_tasks row with the same id (the workers': queue, payload,
-- lease, attempt, deadline).  Workers claim, heartbeat and end tasks through
-- df.claim_tasks, df.heartbeat_task, df.complete_task and df.fail_task, of
-- the queues df.grant_worker gave their role.
-- ---------------------------------------------------------------------------

CREATE TABLE df_internal.external_tasks (
	task_id bigint PRIMARY KEY,	-- its df_internal.tasks row's id
	instance_id varchar(8) NOT NULL,
	node_id varchar(8) NOT NULL,
	scope text NOT NULL,
	submitted_by regrole NOT NULL,
	queue text NOT NULL,
	state text NOT NULL DEFAULT 'ready'
		CHECK (state IN ('ready', 'leased', 'completed', 'failed', 'cancelled')),
	attempt int NOT NULL DEFAULT 0,
	worker text,
	lease_token uuid,
	lease_until timestamptz,
	lease_seconds float8,
	lease_expiries int NOT NULL DEFAULT 0,
	payload jsonb NOT NULL,
	timeout_seconds int,
	heartbeat_seconds int,
	deadline timestamptz,
	idempotency_key text NOT NULL,
	traceparent text,
	created_at timestamptz NOT NULL DEFAULT now(),
	ready_at timestamptz NOT NULL DEFAULT now(),
	ended_at timestamptz
);
-- a claim: the oldest ready tasks of one queue
CREATE INDEX external_tasks_ready_idx ON df_internal.external_tasks (queue, ready_at, task_id)
	WHERE state = 'ready';
-- the sweep: leases and deadlines that ran out
CREATE INDEX external_tasks_leased_idx ON df_internal.external_tasks (lease_until)
	WHERE state = 'leased';
SELECT pg_catalog.pg_extension_config_dump('df_internal.external_tasks', '');

-- df.grant_worker: a role (and its members) may work on the queues whose
-- names match queue_pattern ('*' stands for any characters)
CREATE TABLE df_internal.worker_grants (
	role regrole NOT NULL,
	queue_pattern text NOT NULL,
	like_pattern text NOT NULL,
	granted_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (role, queue_pattern)
);
SELECT pg_catalog.pg_extension_config_dump('df_internal.worker_grants', '');
-- a role sees its own grants and those of the roles it is a member of
ALTER TABLE df_internal.worker_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY worker_grants_own ON df_internal.worker_grants FOR SELECT
	USING (pg_catalog.pg_has_role(current_user, role, 'MEMBER'));
GRANT SELECT ON df_internal.worker_grants TO PUBLIC;

-- may the current user see the tasks of queue (as one of its workers)?
-- As the invoker: current_user is the role that reads df.tasks.
CREATE FUNCTION df_internal.works_on(p_queue text) RETURNS boolean
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
SELECT EXISTS (SELECT 1 FROM df_internal.worker_grants g
			   WHERE p_queue OPERATOR(pg_catalog.~~) g.like_pattern
			   AND pg_catalog.pg_has_role(current_user, g.role, 'MEMBER'))
$fn$;
COMMENT ON FUNCTION df_internal.works_on(text) IS
	'is the current user a worker of the queue (df.grant_worker)? the row-level security of df.tasks';

ALTER TABLE df_internal.external_tasks ENABLE ROW LEVEL SECURITY;
-- the instance's submitter and the queue's workers see a task
CREATE POLICY external_tasks_visibility ON df_internal.external_tasks FOR SELECT
	USING (submitted_by OPERATOR(pg_catalog.=) pg_catalog.quote_ident(current_user)::regrole
		   OR df_internal.works_on(queue));
GRANT SELECT (task_id, queue, state, attempt, worker, lease_until, instance_id, node_id,
			  created_at, ready_at, ended_at)
	ON df_internal.external_tasks TO PUBLIC;

-- is a ready external task still offered?  Its df_internal.tasks row is gone
-- once its node was abandoned (df.cancel, a TIMEOUT, a lost RACE): it is never
-- claimed, and maintenance forgets it a few seconds later
CREATE FUNCTION df_internal.task_offered(p_task_id bigint) RETURNS boolean
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
SELECT EXISTS (SELECT 1 FROM df_internal.tasks t
			   WHERE t.id OPERATOR(pg_catalog.=) p_task_id AND t.kind OPERATOR(pg_catalog.=) 'external')
$fn$;
COMMENT ON FUNCTION df_internal.task_offered(bigint) IS
	'does the ready external task p_task_id still have its node (df.tasks leaves out those that do not)';

CREATE VIEW df.tasks WITH (security_invoker = true) AS
	SELECT task_id, queue, state, attempt, worker,
		   CASE WHEN state OPERATOR(pg_catalog.=) 'leased' THEN lease_until END AS leased_until,
		   instance_id::text AS instance_id, node_id::text AS node_id,
		   created_at, ready_at, ended_at
	FROM df_internal.external_tasks
	WHERE state OPERATOR(pg_catalog.<>) 'ready' OR df_internal.task_offered(task_id);
COMMENT ON VIEW df.tasks IS
	'the external tasks (df.task) the current user may see, under row-level security: '
	'those of its own instances and of the queues it works on (df.grant_worker); '
	'a ready task whose node was abandoned (df.cancel) is left out';
GRANT SELECT ON df.tasks TO PUBLIC;

-- df.events: the events of the bus (docs/design/events.md) a role may see,
-- under row-level security: those it published (or a role it is a member
-- of did), those of its own topics, and those of the shared topics it may
-- subscribe to (df.grant_topic).  Superusers and BYPASSRLS roles see all.
CREATE FUNCTION df_internal.may_read_topic(p_topic text, p_role oid)
	RETURNS boolean
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT df_internal.may_use('topic', p_topic, p_role, 'subscribe')
$fn$;
COMMENT ON FUNCTION df_internal.may_read_topic(text, oid) IS
	'may role p_role subscribe to the shared topic p_topic (the row-level security of df.events)';
ALTER TABLE df_internal.bus_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY bus_events_visibility ON df_internal.bus_events FOR SELECT
	USING (pg_catalog.pg_has_role(published_by, 'USAGE')
		   OR pg_catalog.starts_with(topic, '~' OPERATOR(pg_catalog.||)
									 pg_catalog.quote_ident(current_user)::regrole::oid::text
									 OPERATOR(pg_catalog.||) '/')
		   OR (NOT pg_catalog.starts_with(topic, '~')
			   AND df_internal.may_read_topic(topic, pg_catalog.quote_ident(current_user)::regrole::oid)));
GRANT SELECT (id, topic, key, payload, published_at, published_by)
	ON df_internal.bus_events TO PUBLIC;

CREATE VIEW df.events WITH (security_invoker = true) AS
	SELECT id AS event_id, pg_catalog.regexp_replace(topic, '^~[0-9]+/', '') AS topic,
		   CASE WHEN pg_catalog.starts_with(topic, '~')
				THEN pg_catalog.substring(topic, '^~([0-9]+)/')::pg_catalog.oid::regrole::text
		   END AS space,
		   key, payload, published_at, published_by::text AS published_by
	FROM df_internal.bus_events;
COMMENT ON VIEW df.events IS
	'the events of the bus the current user may see, under row-level security: those it '
	'published, those of its own topics and those of the shared topics it may subscribe to; '
	'space is the role whose own topic it is (NULL: a shared topic)';
GRANT SELECT ON df.events TO PUBLIC;

CREATE FUNCTION df.task(queue text, payload text DEFAULT '{}', timeout_seconds int DEFAULT NULL,
						heartbeat_seconds int DEFAULT NULL) RETURNS text
	LANGUAGE c IMMUTABLE AS 'MODULE_PATHNAME', 'pgd_task';
COMMENT ON FUNCTION df.task(text, text, int, int) IS
	'node TASK: a step that an external worker of queue runs (df.claim_tasks); payload is a '
	'template ({var}, $name), JSON once substituted; the result is the JSON the worker completes '
	'it with; timeout_seconds bounds each attempt, heartbeat_seconds the time between heartbeats';

CREATE FUNCTION df.claim_tasks(queue text, worker_id text, max_tasks int DEFAULT 1,
							   lease interval DEFAULT '30 seconds')
	RETURNS TABLE (task_id bigint, lease_token text, attempt int, instance_id text, payload jsonb,
				   deadline timestamptz, idempotency_key text, traceparent text)
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_claim_tasks';
COMMENT ON FUNCTION df.claim_tasks(text, text, int, interval) IS
	'lease up to max_tasks ready tasks of queue, oldest first, to worker_id (FOR UPDATE SKIP '
	'LOCKED: two workers never get the same task); only the queues df.grant_worker gave the role';

CREATE FUNCTION df.heartbeat_task(task_id bigint, lease_token text, extend interval DEFAULT NULL)
	RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_heartbeat_task';
COMMENT ON FUNCTION df.heartbeat_task(bigint, text, interval) IS
	'extend a lease (by extend, else by its length): ''ok'', ''lost'' (it expired or another '
	'attempt holds the task) or ''cancel_requested'' (the node is no longer wanted)';

CREATE FUNCTION df.complete_task(task_id bigint, lease_token text, result jsonb DEFAULT '{}')
	RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_complete_task';
COMMENT ON FUNCTION df.complete_task(bigint, text, jsonb) IS
	'complete a leased task with result (the TASK node''s result): ''ok'', ''stale'' (not the '
	'current lease: nothing changes) or ''already'' (the task had ended)';

CREATE FUNCTION df.fail_task(task_id bigint, lease_token text, error text,
							 retryable boolean DEFAULT true, code text DEFAULT NULL)
	RETURNS text
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'pgd_fail_task';
COMMENT ON FUNCTION df.fail_task(bigint, text, text, boolean, text) IS
	'fail the attempt of a leased task with error and code (default task_failed); df.retry '
	'decides about the next attempt unless retryable is false: ''ok'', ''stale'' or ''already''';

CREATE FUNCTION df.grant_worker(role name, queue_pattern text) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r oid;
BEGIN
	SELECT oid INTO r FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) role;
	IF r IS NULL THEN
		RAISE EXCEPTION 'df.grant_worker: role "%" does not exist', role
			USING ERRCODE = 'undefined_object';
	END IF;
	IF queue_pattern IS NULL OR queue_pattern OPERATOR(pg_catalog.=) ''
	   OR length(queue_pattern) OPERATOR(pg_catalog.>) 200 THEN
		RAISE EXCEPTION 'df.grant_worker: queue_pattern must be 1 to 200 characters'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A queue name, or a pattern where * stands for any characters: ''payments.*''.';
	END IF;
	INSERT INTO df_internal.worker_grants (role, queue_pattern, like_pattern)
	VALUES (r, queue_pattern,
			replace(replace(replace(replace(queue_pattern, '\', '\\'), '%', '\%'), '_', '\_'),
					'*', '%'))
	ON CONFLICT DO NOTHING;
	EXECUTE format('GRANT USAGE ON SCHEMA df TO %I', role);
END
$fn$;
COMMENT ON FUNCTION df.grant_worker(name, text) IS
	'let role (and its members) claim, heartbeat, complete and fail the tasks of the queues '
	'matching queue_pattern (* stands for any characters); superusers only';
REVOKE EXECUTE ON FUNCTION df.grant_worker(name, text) FROM PUBLIC;

CREATE FUNCTION df.revoke_worker(role name, queue_pattern text) RETURNS boolean
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	n int;
BEGIN
	DELETE FROM df_internal.worker_grants g
	WHERE g.role OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_roles
										 WHERE rolname OPERATOR(pg_catalog.=) revoke_worker.role)
	AND g.queue_pattern OPERATOR(pg_catalog.=) revoke_worker.queue_pattern;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n OPERATOR(pg_catalog.>) 0;
END
$fn$;
COMMENT ON FUNCTION df.revoke_worker(name, text) IS
	'take back df.grant_worker(role, queue_pattern); true when there was such a grant; '
	'superusers only';
REVOKE EXECUTE ON FUNCTION df.revoke_worker(name, text) FROM PUBLIC;

-- the depth and age of each queue, as the caller sees its tasks (df.tasks)
CREATE VIEW df.task_queues WITH (security_invoker = true) AS
	SELECT queue,
		   count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'ready') AS ready,
		   count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'leased') AS leased,
		   max(pg_catalog.now() OPERATOR(pg_catalog.-) ready_at)
			   FILTER (WHERE state OPERATOR(pg_catalog.=) 'ready') AS oldest_ready_age,
		   sum(attempt) FILTER (WHERE state OPERATOR(pg_catalog.=) 'leased') AS leased_attempts
	FROM df.tasks
	WHERE state OPERATOR(pg_catalog.=) ANY ('{ready,leased}'::text[])
	GROUP BY queue;
COMMENT ON VIEW df.task_queues IS
	'per queue of external tasks the caller sees: how many are ready and leased, and how long '
	'the oldest ready one has waited';
GRANT SELECT ON df.task_queues TO PUBLIC;
