/*-------------------------------------------------------------------------
 *
 * store.c
 *	  The engine store: every statement the engine runs, named in one
 *	  table at the top, prepared once per process and run one way
 *	  (store_run); typed functions around them (store.h); and the buffer
 *	  of node writes with its commit hook.
 *
 * Statements use $n parameters, schema-qualified names and
 * OPERATOR(pg_catalog.x), so neither search_path nor user data can change
 * what they do.  Each is prepared on first use with a generic plan and
 * kept (SPI_keepplan); the plan cache re-plans it after DDL.  Every
 * statement takes a fresh snapshot (read committed), which the engine
 * relies on: a read on the transaction's first snapshot could miss the
 * commit that made a task ready.
 *
 * Node writes.  A step usually ends a node, ends its parent and starts the
 * next node; three UPDATEs of df.nodes would cost three executor start-ups
 * (each re-reading the table's CHECK constraints).  So node starts and
 * ends are buffered and written by one statement (STMT_NODE_WRITES), with
 * their events.  The buffer is written before any other statement of the
 * store runs, so nothing ever reads a node row that is behind; a node
 * already in the buffer flushes it first, so each row appears once per
 * statement.  The driver (apply.c) flushes at the end of every transition;
 * the commit hook refuses a commit with writes still buffered and forgets
 * them on abort.  Each write comes with its event: node_started, or
 * node_completed / node_failed with the duration since the node started
 * (the old row's updated_at, read before the update) and the truncated
 * error or a SQL step's row count, never the result itself.
 *
 * Locks: see store.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/spi.h"
#include "core/settings.h"
#include "engine/store.h"
#include "engine/wake.h"

#define T TEXTOID
#define TA TEXTARRAYOID

/*
 * The statements.  The order of the enum and of the table is the same;
 * each entry says what the statement is for.
 */
typedef enum PgdStmt
{
	STMT_RUN_LOCK,
	STMT_RUN_LOAD,
	STMT_RUN_STARTED,
	STMT_INSTANCE_STARTED,
	STMT_INSTANCE_FINISHED,
	STMT_INSTANCE_SUBMITTER,
	STMT_END_INSTANCE,
	STMT_INSTANCE_ROOT,
	STMT_NODES_LOAD,
	STMT_TASK_START,
	STMT_TASK_STEP,
	STMT_TASK_HTTP,
	STMT_TASK_DELIVER,
	STMT_TASK_TIMER,
	STMT_TASK_REQUEUE,
	STMT_TASK_DELETE,
	STMT_TASKS_DROP_SCOPE,
	STMT_WAITS_DROP_SCOPE,
	STMT_TASK_DROP_WAIT_TIMER,
	STMT_TASK_CLAIM,
	STMT_TASK_OLDEST_READY,
	STMT_TASK_NEXT_DUE,
	STMT_HTTP_DUE,
	STMT_HTTP_LEASE,
	STMT_HTTP_LEASE_TOKEN,
	STMT_HTTP_NEXT_DUE,
	STMT_NODE_WRITES,
	STMT_NODE_STATE,
	STMT_NODE_STAMPS,
	STMT_EVENT_ADD,
	STMT_JOIN_OPEN,
	STMT_JOIN_COUNT,
	STMT_JOIN_CLOSE,
	STMT_JOINS_DROP_SCOPE,
	STMT_LOOP_OPEN,
	STMT_LOOP_FORGET,
	STMT_LOOP_NEXT_GENERATION,
	STMT_LOOP_MOVE_SCOPE,
	STMT_LOOP_COUNT_ITERATION,
	STMT_RESULT_SAVE,
	STMT_RESULTS_COPY,
	STMT_RESULTS_DROP_SCOPE,
	STMT_RESULTS_MOVE,
	STMT_RESULTS_DROP_BELOW,
	STMT_RESULTS_IN,
	STMT_SIGNAL_TAKE,
	STMT_SIGNAL_SEND,
	STMT_WAIT_ADD,
	STMT_WAIT_REMOVE,
	STMT_WAIT_MATCHED,
	STMT_READY_ANNOUNCE,
	STMT_EPOCH_CLEAR,
	STMT_EPOCH_NEW,
	STMT_HEARTBEAT,
	STMT_RETENTION_BATCH,
	STMT_PROBLEMS,
	STMT_PROBLEM_STILL_THERE,
	STMT_DROP_TASKS_OF_FINISHED,
	STMT_RESTORE_STEP_TASK,
	STMT_RESTORE_TIMER,
	STMT_COUNT
} PgdStmt;

#define PGD_STMT_MAX_ARGS 9

typedef struct PgdStmtDef
{
	const char *name;
	const char *sql;
	int			nargs;
	Oid			types[PGD_STMT_MAX_ARGS];
} PgdStmtDef;

/* A task of this scope or of a scope below it. */
#define IN_SCOPE(col, arg) \
	"(" col " OPERATOR(pg_catalog.=) " arg \
	" OR pg_catalog.starts_with(" col ", " arg " OPERATOR(pg_catalog.||) '::'))"

/* The position of a node's id in the arrays of STMT_NODE_WRITES. */
#define K "pg_catalog.array_position($2, n.id::text)"

static const PgdStmtDef stmts[STMT_COUNT] = {
	[STMT_RUN_LOCK] = {"lock the runs row",
		"SELECT status FROM df_internal.runs "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 FOR UPDATE", 1, {T}},
	[STMT_RUN_LOAD] = {"read the runs row",
		"SELECT submitted_by, label, vars::text, status, created_at::text, database "
		"FROM df_internal.runs WHERE instance_id OPERATOR(pg_catalog.=) $1", 1, {T}},
	[STMT_RUN_STARTED] = {"the runs row of a started instance",
		"UPDATE df_internal.runs SET status = 'running' "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1", 1, {T}},

	/*
	 * 'pending' is a parameter: written as a constant, the (generic) plan
	 * found the row through idx_instances_status, reading every pending
	 * instance when thousands wait.
	 */
	[STMT_INSTANCE_STARTED] = {"an instance starts",
		"UPDATE df.instances SET status = 'running', updated_at = pg_catalog.now() "
		"WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) $2", 2, {T, T}},
	[STMT_INSTANCE_FINISHED] = {"an instance ends",
		"UPDATE df.instances SET status = $2, updated_at = pg_catalog.now(), "
		"completed_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'completed' THEN pg_catalog.now() END "
		"WHERE id OPERATOR(pg_catalog.=) $1 "
		"AND status NOT IN " PGD_SQL_TERMINAL_STATUSES, 2, {T, T}},
	[STMT_INSTANCE_SUBMITTER] = {"the submitter df.instances records",
		"SELECT submitted_by::pg_catalog.oid FROM df.instances "
		"WHERE id OPERATOR(pg_catalog.=) $1", 1, {T}},
	/* one statement: an instance ends at every workflow's last step */
	[STMT_END_INSTANCE] = {"remove an ended instance's engine state",
		"WITH t AS (DELETE FROM df_internal.tasks WHERE id IN ("
		" SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		" FOR UPDATE SKIP LOCKED)), "
		"r AS (DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		"j AS (DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		"l AS (DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		"s AS (DELETE FROM df_internal.signals WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		"w AS (DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1) "
		"DELETE FROM df_internal.runs WHERE instance_id OPERATOR(pg_catalog.=) $1", 1, {T}},
	[STMT_INSTANCE_ROOT] = {"an instance's root node",
		"SELECT root_node FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1", 1, {T}},
	[STMT_NODES_LOAD] = {"an instance's graph",
		"SELECT id, node_type, query, result_name, left_node, right_node "
		"FROM df.nodes WHERE instance_id OPERATOR(pg_catalog.=) $1", 1, {T}},

	[STMT_TASK_START] = {"the task that starts an instance",
		"INSERT INTO df_internal.tasks (instance_id, scope, kind) VALUES ($1, $1, 'start') "
		"RETURNING id", 1, {T}},
	[STMT_TASK_STEP] = {"a SQL step's task",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		"VALUES ($1, $2, $3, 'step') RETURNING id", 3, {T, T, T}},
	[STMT_TASK_HTTP] = {"an HTTP step's task (the HTTP worker's)",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		"VALUES ($1, $2, $3, 'http')", 3, {T, T, T}},
	[STMT_TASK_DELIVER] = {"a task that delivers signals",
		"INSERT INTO df_internal.tasks (instance_id, scope, kind) VALUES ($1, $1, 'deliver')",
		1, {T}},
	[STMT_TASK_TIMER] = {"a timer",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
		"VALUES ($1, $2, $3, 'timer', $4)", 4, {T, T, T, TIMESTAMPTZOID}},
	[STMT_TASK_REQUEUE] = {"a task put back for a later attempt",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, attempts, run_at) "
		"VALUES ($1, $2, $3, $4, $5, $6)", 6, {T, T, T, T, INT4OID, TIMESTAMPTZOID}},
	[STMT_TASK_DELETE] = {"a consumed task",
		"DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1", 1, {INT8OID}},
	[STMT_TASKS_DROP_SCOPE] = {"the unclaimed tasks of an abandoned scope",
		"DELETE FROM df_internal.tasks WHERE id IN ("
		" SELECT id FROM df_internal.tasks "
		" WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		" AND " IN_SCOPE("scope", "$2") " "
		" FOR UPDATE SKIP LOCKED)", 2, {T, T}},
	[STMT_WAITS_DROP_SCOPE] = {"the signal waits of an abandoned scope",
		"DELETE FROM df_internal.waits "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND " IN_SCOPE("scope", "$2"), 2, {T, T}},
	[STMT_TASK_DROP_WAIT_TIMER] = {"the timeout of a wait that got its signal",
		"DELETE FROM df_internal.tasks WHERE id IN ("
		" SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		" AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		" AND kind OPERATOR(pg_catalog.=) 'timer' FOR UPDATE SKIP LOCKED)", 3, {T, T, T}},
	/* choose FOR UPDATE SKIP LOCKED (never waits), delete, read the runs row */
	[STMT_TASK_CLAIM] = {"claim a task by its id",
		"WITH t AS (DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) "
		"(SELECT id FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1 "
		" AND run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		" AND kind OPERATOR(pg_catalog.<>) 'http' FOR UPDATE SKIP LOCKED) "
		"RETURNING id, instance_id, node_id, scope, kind, attempts) "
		"SELECT t.id, t.instance_id, t.node_id, t.scope, t.kind, t.attempts, "
		"r.submitted_by, r.label, r.vars::text, r.status, r.created_at::text, r.database "
		"FROM t LEFT JOIN df_internal.runs r ON r.instance_id OPERATOR(pg_catalog.=) t.instance_id",
		1, {INT8OID}},
	[STMT_TASK_OLDEST_READY] = {"the oldest due task nobody holds",
		"SELECT id FROM df_internal.tasks "
		"WHERE run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		"AND kind OPERATOR(pg_catalog.<>) 'http' "
		"ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED", 0, {0}},
	[STMT_TASK_NEXT_DUE] = {"when the next future task is due (read without locks)",
		"SELECT min(run_at) FROM df_internal.tasks "
		"WHERE run_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() "
		"AND kind OPERATOR(pg_catalog.<>) 'http'", 0, {0}},

	[STMT_HTTP_DUE] = {"due HTTP tasks whose lease is free",
		"SELECT id, instance_id, node_id, scope, attempts FROM df_internal.tasks "
		"WHERE kind OPERATOR(pg_catalog.=) 'http' "
		"AND run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		"AND (lease_until IS NULL OR lease_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()) "
		"ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED", 1, {INT8OID}},
	[STMT_HTTP_LEASE] = {"lease an HTTP task",
		"UPDATE df_internal.tasks SET attempts = attempts OPERATOR(pg_catalog.+) 1, "
		"lease_token = pg_catalog.gen_random_uuid(), "
		"lease_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
		"pg_catalog.make_interval(secs => $2) "
		"WHERE id OPERATOR(pg_catalog.=) $1 RETURNING lease_token::text", 2, {INT8OID, INT4OID}},
	[STMT_HTTP_LEASE_TOKEN] = {"the lease token of an HTTP task",
		"SELECT lease_token::text FROM df_internal.tasks "
		"WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED", 1, {INT8OID}},
	[STMT_HTTP_NEXT_DUE] = {"milliseconds until an HTTP task or lease falls due",
		"SELECT (EXTRACT(epoch FROM min(GREATEST(run_at, COALESCE(lease_until, run_at))) "
		"OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint "
		"FROM df_internal.tasks WHERE kind OPERATOR(pg_catalog.=) 'http'", 0, {0}},

	/*
	 * The rows are found by the primary key (id = ANY), each row's new
	 * values by its id's position k in $2: a join with the arrays let the
	 * generic plan hash-join a scan of the whole table.
	 */
	[STMT_NODE_WRITES] = {"buffered node starts and ends, with their events",
		"WITH o AS (SELECT n.id, n.updated_at FROM df.nodes n "
		" WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		" AND n.id OPERATOR(pg_catalog.=) ANY ($2)), "
		"u AS (UPDATE df.nodes n SET "
		" status = CASE ($4)[" K "] WHEN 'r' THEN 'running' WHEN 'c' THEN 'completed' "
		"  ELSE 'failed' END, "
		" result = CASE ($4)[" K "] WHEN 'r' THEN NULL "
		"  WHEN 'c' THEN (($5)[" K "])::pg_catalog.jsonb "
		"  ELSE pg_catalog.to_jsonb(($5)[" K "]) END, "
		" status_details = pg_catalog.jsonb_build_object('execution_id', ($3)[" K "]), "
		" updated_at = pg_catalog.now() "
		" WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		" AND n.id OPERATOR(pg_catalog.=) ANY ($2) "
		" RETURNING n.id, n.result, " K " AS k) "
		"INSERT INTO df_internal.events "
		"(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
		"SELECT $1, CASE ($4)[u.k] WHEN 'r' THEN 'node_started' WHEN 'c' THEN 'node_completed' "
		" ELSE 'node_failed' END, u.id, ($3)[u.k], "
		"CASE WHEN ($4)[u.k] OPERATOR(pg_catalog.<>) 'r' THEN NULLIF(($6)[u.k], 0) END, "
		"CASE WHEN ($4)[u.k] OPERATOR(pg_catalog.<>) 'r' THEN "
		" GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
		" OPERATOR(pg_catalog.-) o.updated_at) OPERATOR(pg_catalog.*) 1000)::bigint) END, "
		"CASE ($4)[u.k] WHEN 'r' THEN NULL WHEN 'f' THEN (($7)[u.k])::pg_catalog.jsonb "
		" ELSE CASE WHEN pg_catalog.jsonb_typeof(u.result OPERATOR(pg_catalog.->) 'row_count') "
		" OPERATOR(pg_catalog.=) 'number' "
		" THEN pg_catalog.jsonb_build_object('row_count', u.result OPERATOR(pg_catalog.->) 'row_count') "
		" END END "
		"FROM u LEFT JOIN o ON o.id OPERATOR(pg_catalog.=) u.id ORDER BY u.k",
		7, {T, TA, TA, TA, TA, INT4ARRAYOID, TA}},
	[STMT_NODE_STATE] = {"a node's status and result",
		"SELECT status, result::text, "
		"CASE WHEN pg_catalog.jsonb_typeof(result) = 'string' "
		"THEN result OPERATOR(pg_catalog.#>>) '{}' END "
		"FROM df.nodes "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2", 2, {T, T}},
	[STMT_NODE_STAMPS] = {"status and stamp of a node and its ancestors",
		"SELECT id, status, status_details OPERATOR(pg_catalog.->>) 'execution_id' "
		"FROM df.nodes WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND id OPERATOR(pg_catalog.=) ANY ($2)", 2, {T, TA}},
	[STMT_EVENT_ADD] = {"an event of the history",
		"INSERT INTO df_internal.events "
		"(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
		"SELECT $1, $2, $3, $4, NULLIF($5::pg_catalog.int4, 0), "
		"CASE WHEN $2 OPERATOR(pg_catalog.~) '^instance_(completed|failed|cancelled)$' THEN "
		"(SELECT GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
		"OPERATOR(pg_catalog.-) i.created_at) OPERATOR(pg_catalog.*) 1000)::bigint) "
		"FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $1) END, "
		"$6::pg_catalog.jsonb", 6, {T, T, T, T, T, T}},

	[STMT_JOIN_OPEN] = {"a JOIN's branch counter",
		"INSERT INTO df_internal.joins (instance_id, node_id, scope, remaining) "
		"VALUES ($1, $2, $3, $4)", 4, {T, T, T, INT4OID}},
	[STMT_JOIN_COUNT] = {"one JOIN branch fewer running",
		"UPDATE df_internal.joins SET remaining = remaining OPERATOR(pg_catalog.-) 1 "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		"AND scope OPERATOR(pg_catalog.=) $3 RETURNING remaining", 3, {T, T, T}},
	[STMT_JOIN_CLOSE] = {"a finished JOIN's counter",
		"DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3", 3, {T, T, T}},
	[STMT_JOINS_DROP_SCOPE] = {"the JOIN counters of an abandoned scope",
		"DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND " IN_SCOPE("scope", "$2"), 2, {T, T}},
	[STMT_LOOP_OPEN] = {"a loop's state",
		"INSERT INTO df_internal.loops (instance_id, node_id, scope) VALUES ($1, $2, $3) "
		"ON CONFLICT (instance_id, node_id, scope) DO UPDATE "
		"SET generation = 1, iterations = 1, iteration_started_at = pg_catalog.clock_timestamp()",
		3, {T, T, T}},
	[STMT_LOOP_FORGET] = {"an ended loop's state",
		"DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3", 3, {T, T, T}},
	[STMT_LOOP_NEXT_GENERATION] = {"a loop's next generation begins",
		"UPDATE df_internal.loops SET generation = generation OPERATOR(pg_catalog.+) 1, "
		"iteration_started_at = pg_catalog.clock_timestamp() "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		"AND scope OPERATOR(pg_catalog.=) $3 RETURNING generation", 3, {T, T, T}},
	[STMT_LOOP_MOVE_SCOPE] = {"a root loop moves to its next root scope",
		"UPDATE df_internal.loops SET scope = $3 "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		"AND scope OPERATOR(pg_catalog.=) $4", 4, {T, T, T, T}},
	[STMT_LOOP_COUNT_ITERATION] = {"count a loop iteration",
		"UPDATE df_internal.loops SET iterations = iterations OPERATOR(pg_catalog.+) 1 "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		"AND scope OPERATOR(pg_catalog.=) $3 "
		"RETURNING iterations, iteration_started_at", 3, {T, T, T}},

	[STMT_RESULT_SAVE] = {"a named result",
		"INSERT INTO df_internal.results AS r (instance_id, scope, name, value) "
		"VALUES ($1, $2, $3, $4::pg_catalog.json) "
		"ON CONFLICT (instance_id, scope, name) DO UPDATE "
		"SET value = EXCLUDED.value, seq = EXCLUDED.seq", 4, {T, T, T, T}},
	[STMT_RESULTS_COPY] = {"a branch's named results join the enclosing scope",
		"INSERT INTO df_internal.results (instance_id, scope, name, value) "
		"SELECT instance_id, $3, name, value FROM df_internal.results "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2 "
		"ORDER BY seq "
		"ON CONFLICT (instance_id, scope, name) DO UPDATE "
		"SET value = EXCLUDED.value, seq = EXCLUDED.seq", 3, {T, T, T}},
	[STMT_RESULTS_DROP_SCOPE] = {"the named results of a scope and below",
		"DELETE FROM df_internal.results "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND " IN_SCOPE("scope", "$2"), 2, {T, T}},
	[STMT_RESULTS_MOVE] = {"a loop body's named results carried to its next generation",
		"UPDATE df_internal.results SET scope = $3 "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2",
		3, {T, T, T}},
	[STMT_RESULTS_DROP_BELOW] = {"the named results of the scopes below one",
		"DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::')", 2, {T, T}},
	/* outermost first, so that inner scopes overwrite */
	[STMT_RESULTS_IN] = {"the named results of some scopes",
		"SELECT name, value::text FROM df_internal.results "
		"WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND scope OPERATOR(pg_catalog.=) ANY ($2) "
		"ORDER BY pg_catalog.length(scope), seq", 2, {T, TA}},

	[STMT_SIGNAL_TAKE] = {"take the oldest buffered signal of a name",
		"DELETE FROM df_internal.signals WHERE id = ("
		" SELECT id FROM df_internal.signals "
		" WHERE instance_id OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 "
		" ORDER BY id LIMIT 1) RETURNING payload::text", 2, {T, T}},
	[STMT_SIGNAL_SEND] = {"a signal into the mailbox",
		"INSERT INTO df_internal.signals (instance_id, name, payload) "
		"VALUES ($1, $2, CASE WHEN $4 THEN $3::pg_catalog.jsonb ELSE pg_catalog.to_jsonb($3) END)",
		4, {T, T, T, BOOLOID}},
	[STMT_WAIT_ADD] = {"a SIGNAL node waits",
		"INSERT INTO df_internal.waits (instance_id, node_id, scope, name) "
		"VALUES ($1, $2, $3, $4) "
		"ON CONFLICT (instance_id, node_id, scope) DO UPDATE SET name = EXCLUDED.name",
		4, {T, T, T, T}},
	[STMT_WAIT_REMOVE] = {"a wait ends",
		"DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		"AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3", 3, {T, T, T}},
	[STMT_WAIT_MATCHED] = {"the oldest wait that has a signal",
		"SELECT w.node_id, w.scope, w.name FROM df_internal.waits w "
		"WHERE w.instance_id OPERATOR(pg_catalog.=) $1 AND EXISTS ("
		" SELECT 1 FROM df_internal.signals s "
		" WHERE s.instance_id OPERATOR(pg_catalog.=) w.instance_id "
		" AND s.name OPERATOR(pg_catalog.=) w.name) "
		"ORDER BY w.seq LIMIT 1", 1, {T}},

	[STMT_READY_ANNOUNCE] = {"the engine is ready",
		"INSERT INTO df_internal._worker_ready (sentinel, schema_version) VALUES (true, 1) "
		"ON CONFLICT (sentinel) DO UPDATE SET schema_version = 1, "
		"initialized_at = pg_catalog.now()", 0, {0}},
	[STMT_EPOCH_CLEAR] = {"forget the previous worker epoch",
		"DELETE FROM df._worker_epoch", 0, {0}},
	[STMT_EPOCH_NEW] = {"a new worker epoch",
		"INSERT INTO df._worker_epoch (epoch_id) VALUES (pg_catalog.gen_random_uuid()) "
		"RETURNING epoch_id::text", 0, {0}},
	[STMT_HEARTBEAT] = {"the heartbeat",
		"UPDATE df._worker_epoch SET last_seen_at = pg_catalog.now() "
		"WHERE epoch_id OPERATOR(pg_catalog.=) $1::uuid", 1, {T}},
	[STMT_RETENTION_BATCH] = {"remove a batch of old finished instances",
		"WITH ranked AS ("
		" SELECT id, COALESCE(completed_at, created_at) AS t, "
		" pg_catalog.row_number() OVER (ORDER BY COALESCE(completed_at, created_at) DESC, id) AS rn "
		" FROM df.instances WHERE status IN " PGD_SQL_TERMINAL_STATUSES "), "
		"victims AS ("
		" SELECT i.id FROM df.instances i JOIN ranked r ON r.id OPERATOR(pg_catalog.=) i.id "
		" WHERE (r.rn OPERATOR(pg_catalog.>) $2 OR r.t OPERATOR(pg_catalog.<) "
		"  (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(days => $1))) "
		" AND i.status IN " PGD_SQL_TERMINAL_STATUSES " "
		" LIMIT $3 FOR UPDATE OF i SKIP LOCKED), "
		"ev AS (DELETE FROM df_internal.events e USING victims v "
		" WHERE e.instance_id OPERATOR(pg_catalog.=) v.id), "
		"nd AS (DELETE FROM df.nodes d USING victims v "
		" WHERE d.instance_id OPERATOR(pg_catalog.=) v.id) "
		"DELETE FROM df.instances i USING victims v "
		"WHERE i.id OPERATOR(pg_catalog.=) v.id", 3, {INT4OID, INT4OID, INT4OID}},
	[STMT_PROBLEMS] = {"what df.check() reports",
		"SELECT instance_id, problem, node_id, scope, detail "
		"FROM df_internal.check_rows() ORDER BY 1, 2, 3", 0, {0}},
	[STMT_PROBLEM_STILL_THERE] = {"is a reported problem still there",
		"SELECT 1 FROM df_internal.check_rows() c "
		"WHERE c.instance_id OPERATOR(pg_catalog.=) $1 "
		"AND c.problem OPERATOR(pg_catalog.=) $2 "
		"AND c.node_id IS NOT DISTINCT FROM $3", 3, {T, T, T}},
	[STMT_DROP_TASKS_OF_FINISHED] = {"the unclaimed tasks of a finished instance",
		"DELETE FROM df_internal.tasks WHERE id IN ("
		" SELECT t.id FROM df_internal.tasks t "
		" WHERE t.instance_id OPERATOR(pg_catalog.=) $1 AND NOT EXISTS ("
		"  SELECT 1 FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) t.instance_id "
		"  AND i.status IN ('pending', 'running')) "
		" FOR UPDATE SKIP LOCKED)", 1, {T}},
	[STMT_RESTORE_STEP_TASK] = {"a stranded step gets its task back",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		"SELECT n.instance_id, n.id, $3, "
		"CASE WHEN n.node_type IN ('HTTP', 'HTTP_MULTIPART') THEN 'http' ELSE 'step' END "
		"FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		"AND n.id OPERATOR(pg_catalog.=) $2 RETURNING kind", 3, {T, T, T}},
	[STMT_RESTORE_TIMER] = {"a running SLEEP or WAIT_SCHEDULE gets its timer back",
		"INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
		"SELECT n.instance_id, n.id, $3, 'timer', "
		"CASE n.node_type WHEN 'SLEEP' THEN n.updated_at OPERATOR(pg_catalog.+) "
		" pg_catalog.make_interval(secs => n.query::pg_catalog.float8) "
		"ELSE df_internal.cron_next(n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'cron_expr', "
		" n.updated_at) END "
		"FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		"AND n.id OPERATOR(pg_catalog.=) $2", 3, {T, T, T}},
};

#undef K
#undef T
#undef TA

static SPIPlanPtr plans[STMT_COUNT];

static void store_flush_node_writes(void);

/*
 * The one way the engine runs a statement: buffered node writes first,
 * then the statement's kept plan.  Returns SPI_processed; the rows are in
 * SPI_tuptable.
 */
static int
store_run(PgdStmt s, const Datum *values, const char *nulls)
{
	const PgdStmtDef *def = &stmts[s];
	int			rc;

	if (s != STMT_NODE_WRITES)
		store_flush_node_writes();
	if (plans[s] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(def->sql, def->nargs, (Oid *) def->types,
											  CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "could not prepare the engine statement \"%s\": %s",
				 def->name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "could not keep the plan of the engine statement \"%s\"", def->name);
		plans[s] = plan;
	}
	rc = SPI_execute_plan(plans[s], (Datum *) values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "engine statement \"%s\" failed: %s", def->name, SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/* store_run with text arguments only (a NULL pointer is SQL NULL). */
static int
store_run_text(PgdStmt s, int nargs, const char *const *args)
{
	Datum		values[PGD_STMT_MAX_ARGS];
	char		nulls[PGD_STMT_MAX_ARGS];
	int			i;

	Assert(nargs == stmts[s].nargs && nargs <= PGD_STMT_MAX_ARGS);
	for (i = 0; i < nargs; i++)
	{
		values[i] = args[i] ? pgd_text_datum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	return store_run(s, values, nulls);
}

#define RUN(stmt, ...) \
	store_run_text((stmt), (int) (sizeof((const char *[]) {__VA_ARGS__}) / sizeof(const char *)), \
				   (const char *[]) {__VA_ARGS__})

static char *
get_string(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

static Datum
get_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

static Datum
text_array(int n, const char *const *items)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	int			i;

	for (i = 0; i < n; i++)
	{
		nulls[i] = items[i] == NULL;
		elems[i] = nulls[i] ? (Datum) 0 : pgd_text_datum(items[i]);
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false, TYPALIGN_INT));
}

/* ---------------------------------------------------------------------
 * Instances and their runs rows
 * ---------------------------------------------------------------------
 */

/*
 * Lock the instance's runs row.  Returns false when the instance has no
 * runs row (finished and cleaned up, or never existed); else sets *status
 * (when status is not NULL).
 */
bool
pgd_store_lock_run(const char *instance_id, char **status)
{
	if (RUN(STMT_RUN_LOCK, instance_id) == 0)
		return false;
	if (status)
		*status = get_string(0, 1);
	return true;
}

/*
 * The runs row in the first result row, from column col on: submitted_by,
 * label, vars::text, status, created_at::text, database.  False when the
 * row had none (submitted_by NULL: an outer join found no runs row).
 */
static bool
read_run(int col, PgdRunInfo *run)
{
	char	   *submitted_by = get_string(0, col);

	if (submitted_by == NULL)
		return false;
	run->submitted_by = (Oid) strtoul(submitted_by, NULL, 10);
	run->label = get_string(0, col + 1);
	run->vars = get_string(0, col + 2);
	run->status = get_string(0, col + 3);
	run->token = get_string(0, col + 4);
	run->database = get_string(0, col + 5);
	/* steps of the engine's own database run here */
	if (run->database != NULL && strcmp(run->database, pgd_database) == 0)
		run->database = NULL;
	return true;
}

bool
pgd_store_load_run(const char *instance_id, PgdRunInfo *run)
{
	return RUN(STMT_RUN_LOAD, instance_id) > 0 &&
		read_run(1, run);
}

/* An instance begins: it is running (the caller holds its runs row). */
void
pgd_store_instance_started(const char *instance_id)
{
	RUN(STMT_INSTANCE_STARTED, instance_id, "pending");
	RUN(STMT_RUN_STARTED, instance_id);
}

/* An instance ends with status, unless it has ended already; true if it changed. */
bool
pgd_store_instance_finished(const char *instance_id, PgdInstanceStatus status)
{
	return RUN(STMT_INSTANCE_FINISHED, instance_id, pgd_instance_status_name(status)) > 0;
}

/* The submitter df.instances records, InvalidOid if none. */
Oid
pgd_store_instance_submitter(const char *instance_id)
{
	if (RUN(STMT_INSTANCE_SUBMITTER, instance_id) == 0)
		return InvalidOid;
	return (Oid) strtoul(get_string(0, 1), NULL, 10);
}

/*
 * An instance has ended: remove its engine state.  Tasks claimed by
 * running steps are skipped; those steps find the runs row gone and
 * discard themselves.
 */
void
pgd_store_end_instance(const char *instance_id)
{
	RUN(STMT_END_INSTANCE, instance_id);
}

/* The node rows of an instance and its root's id; 0 when it has none. */
int
pgd_store_load_nodes(const char *instance_id, char **root_id, PgdStoredNode **rows)
{
	int			n,
				i;

	if (RUN(STMT_INSTANCE_ROOT, instance_id) == 0)
		return 0;
	*root_id = get_string(0, 1);
	n = RUN(STMT_NODES_LOAD, instance_id);
	*rows = palloc(sizeof(PgdStoredNode) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		(*rows)[i].id = get_string(i, 1);
		(*rows)[i].type = get_string(i, 2);
		(*rows)[i].query = get_string(i, 3);
		(*rows)[i].result_name = get_string(i, 4);
		(*rows)[i].left = get_string(i, 5);
		(*rows)[i].right = get_string(i, 6);
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Tasks
 * ---------------------------------------------------------------------
 */

/*
 * A task that is ready now, with the wake-up its commit owes: an executor
 * for start and step tasks (by id), the HTTP worker for http tasks, a
 * queue scan for deliver tasks.  Timers go through pgd_store_timer_add.
 */
void
pgd_store_task_add(const char *instance_id, const char *node_id, const char *scope,
				   PgdTaskKind kind)
{
	switch (kind)
	{
		case PGD_TASK_START:
			RUN(STMT_TASK_START, instance_id);
			pgd_task_ready_at_commit(strtoll(get_string(0, 1), NULL, 10));
			break;
		case PGD_TASK_STEP:
			RUN(STMT_TASK_STEP, instance_id, node_id, scope);
			pgd_task_ready_at_commit(strtoll(get_string(0, 1), NULL, 10));
			break;
		case PGD_TASK_HTTP:
			RUN(STMT_TASK_HTTP, instance_id, node_id, scope);
			pgd_http_wake_at_commit();
			break;
		case PGD_TASK_DELIVER:
			RUN(STMT_TASK_DELIVER, instance_id);
			pgd_wake_at_commit(1);
			break;
		case PGD_TASK_TIMER:
			elog(ERROR, "a timer needs its time: use pgd_store_timer_add");
			break;
	}
}

/* A timer task due at 'at'; an idle executor must recompute how long to sleep. */
void
pgd_store_timer_add(const char *instance_id, const char *node_id, const char *scope,
					TimestampTz at)
{
	Datum		values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	store_run(STMT_TASK_TIMER, values, NULL);
	pgd_task_due_at_commit(at);
}

/* Put a claimed task back, one attempt further, due at 'at'. */
void
pgd_store_task_requeue(const PgdClaim *task, TimestampTz at)
{
	Datum		values[6];
	char		nulls[6] = "      ";

	values[0] = pgd_text_datum(task->instance_id);
	if (task->node_id)
		values[1] = pgd_text_datum(task->node_id);
	else
		nulls[1] = 'n';
	values[2] = pgd_text_datum(task->scope);
	values[3] = pgd_text_datum(pgd_task_kind_name(task->kind));
	values[4] = Int32GetDatum(task->attempts + 1);
	values[5] = TimestampTzGetDatum(at);
	store_run(STMT_TASK_REQUEUE, values, nulls);
	pgd_task_due_at_commit(at);
}

void
pgd_store_task_delete(int64 task_id)
{
	Datum		values[1];

	values[0] = Int64GetDatum(task_id);
	store_run(STMT_TASK_DELETE, values, NULL);
}

/*
 * A scope is abandoned (a lost RACE branch, a loop body that broke or
 * moved to its next generation): remove the pending tasks of the scope and
 * everything below it (running ones are skipped) and its registered signal
 * waits, which would otherwise stay until the instance ends, one more per
 * loop iteration.
 */
void
pgd_store_drop_scope(const char *instance_id, const char *scope)
{
	RUN(STMT_TASKS_DROP_SCOPE, instance_id, scope);
	RUN(STMT_WAITS_DROP_SCOPE, instance_id, scope);
}

/* A wait got its signal: its timeout timer is not needed (one being fired finds the wait gone). */
void
pgd_store_drop_wait_timer(const char *instance_id, const char *node_id, const char *scope)
{
	RUN(STMT_TASK_DROP_WAIT_TIMER, instance_id, node_id, scope);
}

/* Claim the task with this id if it is due and nobody holds it. */
bool
pgd_store_claim_by_id(int64 task_id, PgdClaim *c)
{
	Datum		values[1];
	char	   *kind;

	values[0] = Int64GetDatum(task_id);
	if (store_run(STMT_TASK_CLAIM, values, NULL) == 0)
		return false;
	c->id = strtoll(get_string(0, 1), NULL, 10);
	c->instance_id = get_string(0, 2);
	c->node_id = get_string(0, 3);
	c->scope = get_string(0, 4);
	kind = get_string(0, 5);
	if (!pgd_task_kind_parse(kind, &c->kind))
		elog(ERROR, "unknown task kind \"%s\"", kind);
	c->attempts = atoi(get_string(0, 6));
	c->has_run = read_run(7, &c->run);
	return true;
}

/* The id of the oldest due task nobody holds (the caller claims it). */
bool
pgd_store_oldest_ready(int64 *task_id)
{
	if (store_run(STMT_TASK_OLDEST_READY, NULL, NULL) == 0)
		return false;
	*task_id = strtoll(get_string(0, 1), NULL, 10);
	return true;
}

/*
 * When the next future task is due.  Read without locks: a scan that
 * skipped rows another executor held (with SKIP LOCKED) would report a
 * later time and hide a timer until the safety poll.
 */
bool
pgd_store_next_due(TimestampTz *at)
{
	bool		isnull;
	Datum		next;

	store_run(STMT_TASK_NEXT_DUE, NULL, NULL);
	next = get_datum(0, 1, &isnull);
	if (isnull)
		return false;
	*at = DatumGetTimestampTz(next);
	return true;
}

/* ---------------------------------------------------------------------
 * HTTP leases
 * ---------------------------------------------------------------------
 */

/* Up to max due HTTP tasks whose lease is free, locked (SKIP LOCKED). */
int
pgd_store_http_due(int max, PgdHttpDue **rows)
{
	Datum		values[1];
	int			n,
				i;

	values[0] = Int64GetDatum(max);
	n = store_run(STMT_HTTP_DUE, values, NULL);
	*rows = palloc(sizeof(PgdHttpDue) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		(*rows)[i].id = strtoll(get_string(i, 1), NULL, 10);
		(*rows)[i].instance_id = get_string(i, 2);
		(*rows)[i].node_id = get_string(i, 3);
		(*rows)[i].scope = get_string(i, 4);
		(*rows)[i].attempts = atoi(get_string(i, 5));
	}
	return n;
}

/* Lease a task for 'seconds': returns the new lease token. */
char *
pgd_store_http_lease(int64 task_id, int seconds)
{
	Datum		values[2];

	values[0] = Int64GetDatum(task_id);
	values[1] = Int32GetDatum(seconds);
	store_run(STMT_HTTP_LEASE, values, NULL);
	return get_string(0, 1);
}

/*
 * Is the lease this token names still held?  Locks the task row (SKIP
 * LOCKED: a row another worker holds is not ours any more).
 */
bool
pgd_store_http_lease_held(int64 task_id, const char *token)
{
	Datum		values[1];
	char	   *held;

	values[0] = Int64GetDatum(task_id);
	return store_run(STMT_HTTP_LEASE_TOKEN, values, NULL) > 0 &&
		(held = get_string(0, 1)) != NULL && strcmp(held, token) == 0;
}

/* Milliseconds until the next HTTP task or lease falls due; false when none. */
bool
pgd_store_http_next_due(long *ms)
{
	char	   *v;

	if (store_run(STMT_HTTP_NEXT_DUE, NULL, NULL) == 0 || (v = get_string(0, 1)) == NULL)
		return false;
	*ms = strtol(v, NULL, 10);
	return true;
}

/* ---------------------------------------------------------------------
 * Node writes
 * ---------------------------------------------------------------------
 */
#define MAX_NODE_WRITES 32

typedef struct NodeWrite
{
	char		id[PGD_ID_LEN + 1];
	char	   *scope;
	bool		done;			/* else: started */
	bool		ok;
	char	   *result;
	int			attempt;
	char	   *detail;			/* the error event detail (jsonb text) */
} NodeWrite;

static char pending_instance[PGD_ID_LEN + 1];
static NodeWrite pending[MAX_NODE_WRITES];
static int	npending = 0;
static bool flushing = false;

/* The step task being run, so that its node's end event carries the attempt. */
static char current_node[PGD_ID_LEN + 1];
static int	current_attempt = 0;

static void
store_flush_node_writes(void)
{
	Datum		values[7];
	const char *ids[MAX_NODE_WRITES];
	const char *scopes[MAX_NODE_WRITES];
	const char *results[MAX_NODE_WRITES];
	const char *details[MAX_NODE_WRITES];
	const char *states[MAX_NODE_WRITES];
	Datum		attempts[MAX_NODE_WRITES];
	int			n = npending;
	int			i;

	if (n == 0 || flushing)
		return;
	for (i = 0; i < n; i++)
	{
		NodeWrite  *w = &pending[i];

		ids[i] = w->id;
		scopes[i] = w->scope;
		/* 'r'unning, 'c'ompleted, 'f'ailed */
		states[i] = !w->done ? "r" : w->ok ? "c" : "f";
		results[i] = w->result;
		details[i] = w->detail;
		attempts[i] = Int32GetDatum(w->attempt);
	}
	values[0] = pgd_text_datum(pending_instance);
	values[1] = text_array(n, ids);
	values[2] = text_array(n, scopes);
	values[3] = text_array(n, states);
	values[4] = text_array(n, results);
	values[5] = PointerGetDatum(construct_array(attempts, n, INT4OID, 4, true, TYPALIGN_INT));
	values[6] = text_array(n, details);

	npending = 0;
	flushing = true;
	PG_TRY();
	{
		store_run(STMT_NODE_WRITES, values, NULL);
	}
	PG_FINALLY();
	{
		flushing = false;
	}
	PG_END_TRY();
}

void
pgd_store_flush(void)
{
	store_flush_node_writes();
}

static int
current_attempt_of(const char *node_id)
{
	if (current_node[0] != '\0' && strcmp(node_id, current_node) == 0)
		return current_attempt;
	return 0;
}

static void
buffer_node_write(const char *instance_id, const char *node_id, const char *scope,
				  bool done, PgdOutcome outcome)
{
	NodeWrite  *w;
	int			i;

	if (npending > 0 && strcmp(pending_instance, instance_id) != 0)
		store_flush_node_writes();
	for (i = 0; i < npending; i++)
		if (strcmp(pending[i].id, node_id) == 0)
		{
			store_flush_node_writes();
			break;
		}
	if (npending == MAX_NODE_WRITES)
		store_flush_node_writes();

	strlcpy(pending_instance, instance_id, sizeof(pending_instance));
	w = &pending[npending++];
	strlcpy(w->id, node_id, sizeof(w->id));
	w->scope = MemoryContextStrdup(TopTransactionContext, scope);
	w->done = done;
	w->ok = outcome.ok;
	w->result = done && outcome.result ? MemoryContextStrdup(TopTransactionContext, outcome.result) : NULL;
	w->attempt = done ? current_attempt_of(node_id) : 0;
	w->detail = done && !outcome.ok ?
		MemoryContextStrdup(TopTransactionContext, pgd_event_detail("error", outcome.result)) : NULL;
}

/* The node starts in scope (its node_started event goes with the update). */
void
pgd_store_node_running(const char *instance_id, const char *node_id, const char *scope)
{
	PgdOutcome	none = {true, NULL};

	buffer_node_write(instance_id, node_id, scope, false, none);
}

/* The node ends in scope with outcome. */
void
pgd_store_node_done(const char *instance_id, const char *node_id, const char *scope,
					PgdOutcome outcome)
{
	buffer_node_write(instance_id, node_id, scope, true, outcome);
}

/* Status and result (as JSON text; the error text of a failed node) of a node. */
void
pgd_store_node_state(const char *instance_id, const char *node_id, char **status,
					 char **result)
{
	if (RUN(STMT_NODE_STATE, instance_id, node_id) == 0)
		elog(ERROR, "node %s of instance %s disappeared", node_id, instance_id);
	*status = get_string(0, 1);
	if (*status != NULL && strcmp(*status, "failed") == 0)
		*result = get_string(0, 3);
	else
		*result = get_string(0, 2);
}

/* id, status and stamp (execution_id) of the named nodes that exist. */
int
pgd_store_node_stamps(const char *instance_id, const char *const *node_ids, int n,
					  char ***ids, char ***statuses, char ***stamps)
{
	Datum		values[2];
	int			rows,
				i;

	values[0] = pgd_text_datum(instance_id);
	values[1] = text_array(n, node_ids);
	rows = store_run(STMT_NODE_STAMPS, values, NULL);
	*ids = palloc(sizeof(char *) * Max(rows, 1));
	*statuses = palloc(sizeof(char *) * Max(rows, 1));
	*stamps = palloc(sizeof(char *) * Max(rows, 1));
	for (i = 0; i < rows; i++)
	{
		(*ids)[i] = get_string(i, 1);
		(*statuses)[i] = get_string(i, 2);
		(*stamps)[i] = get_string(i, 3);
	}
	return rows;
}

/* ---------------------------------------------------------------------
 * History
 * ---------------------------------------------------------------------
 */

/*
 * Events are written by the transitions themselves, in the transaction
 * that applies them (DESIGN.md §5 rule 3): a rolled-back step leaves no
 * event, and a committed transition always has its events.  Node starts
 * and ends go with the node writes; this adds the other kinds (retries,
 * signals, instance starts and ends, cancels).  detail is a JSON object as
 * text, or NULL; node_id and scope may be NULL; attempt 0 records NULL.
 * The duration of instance ends is computed from the instance's creation.
 */
void
pgd_store_event_add(const char *instance_id, const char *kind, const char *node_id,
					const char *scope, int attempt, const char *detail)
{
	char		attempt_s[16];

	snprintf(attempt_s, sizeof(attempt_s), "%d", attempt);
	RUN(STMT_EVENT_ADD, instance_id, kind, node_id, scope, attempt_s, detail);
}

/* {"<key>": "<text truncated to PGD_EVENT_ERROR_LEN>"} */
char *
pgd_event_detail(const char *key, const char *text)
{
	DfJson	   *o = dfjson_make_object();
	char	   *t = pstrdup(text ? text : "");

	if (strlen(t) > PGD_EVENT_ERROR_LEN)
		t[pg_mbcliplen(t, strlen(t), PGD_EVENT_ERROR_LEN)] = '\0';
	dfjson_object_add(o, key, dfjson_make_string(t));
	return dfjson_to_text(o);
}

/* The attempt that node_id's end event records (NULL node_id: none). */
void
pgd_store_set_attempt(const char *node_id, int attempt)
{
	if (node_id == NULL)
	{
		current_node[0] = '\0';
		current_attempt = 0;
		return;
	}
	strlcpy(current_node, node_id, sizeof(current_node));
	current_attempt = attempt;
}

/* ---------------------------------------------------------------------
 * JOIN counters and loop state
 * ---------------------------------------------------------------------
 */

void
pgd_store_join_open(const char *instance_id, const char *node_id, const char *scope,
					int branches)
{
	Datum		values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = Int32GetDatum(branches);
	store_run(STMT_JOIN_OPEN, values, NULL);
}

/* One branch fewer: the number still running. */
int
pgd_store_join_count(const char *instance_id, const char *node_id, const char *scope)
{
	bool		isnull;

	if (RUN(STMT_JOIN_COUNT, instance_id, node_id, scope) == 0)
		elog(ERROR, "JOIN %s of instance %s has no branch counter", node_id, instance_id);
	return DatumGetInt32(get_datum(0, 1, &isnull));
}

void
pgd_store_join_close(const char *instance_id, const char *node_id, const char *scope)
{
	RUN(STMT_JOIN_CLOSE, instance_id, node_id, scope);
}

void
pgd_store_joins_drop_scope(const char *instance_id, const char *scope)
{
	RUN(STMT_JOINS_DROP_SCOPE, instance_id, scope);
}

void
pgd_store_loop_open(const char *instance_id, const char *node_id, const char *scope)
{
	RUN(STMT_LOOP_OPEN, instance_id, node_id, scope);
}

void
pgd_store_loop_forget(const char *instance_id, const char *node_id, const char *scope)
{
	RUN(STMT_LOOP_FORGET, instance_id, node_id, scope);
}

/* The loop's next generation begins now: returns its number. */
int
pgd_store_loop_next_generation(const char *instance_id, const char *node_id,
							   const char *scope)
{
	bool		isnull;

	if (RUN(STMT_LOOP_NEXT_GENERATION, instance_id, node_id, scope) == 0)
		elog(ERROR, "loop %s of instance %s has no state", node_id, instance_id);
	return DatumGetInt32(get_datum(0, 1, &isnull));
}

void
pgd_store_loop_move_scope(const char *instance_id, const char *node_id,
						  const char *from_scope, const char *to_scope)
{
	RUN(STMT_LOOP_MOVE_SCOPE, instance_id, node_id, to_scope, from_scope);
}

/* Count an iteration: the count so far and when the current one began. */
bool
pgd_store_loop_count_iteration(const char *instance_id, const char *node_id,
							   const char *scope, int64 *iterations, TimestampTz *started)
{
	bool		isnull;

	if (RUN(STMT_LOOP_COUNT_ITERATION, instance_id, node_id, scope) == 0)
		elog(ERROR, "loop %s of instance %s has no state", node_id, instance_id);
	*iterations = DatumGetInt64(get_datum(0, 1, &isnull));
	*started = DatumGetTimestampTz(get_datum(0, 2, &isnull));
	return true;
}

/* ---------------------------------------------------------------------
 * Named results
 * ---------------------------------------------------------------------
 */

void
pgd_store_result_save(const char *instance_id, const char *scope, const char *name,
					  const char *value)
{
	RUN(STMT_RESULT_SAVE, instance_id, scope, name, value);
}

/*
 * A branch scope's named results join to_scope (later wins) when keep,
 * then the branch's (and those below it) are dropped.
 */
void
pgd_store_results_merge(const char *instance_id, const char *from_scope,
						const char *to_scope, bool keep)
{
	if (keep)
		RUN(STMT_RESULTS_COPY, instance_id, from_scope, to_scope);
	RUN(STMT_RESULTS_DROP_SCOPE, instance_id, from_scope);
}

/* A scope's named results move to another scope (a loop's next generation). */
void
pgd_store_results_move(const char *instance_id, const char *from_scope, const char *to_scope)
{
	RUN(STMT_RESULTS_MOVE, instance_id, from_scope, to_scope);
}

/* The named results of the scopes below 'scope' are dropped (its own stay). */
void
pgd_store_results_drop_below(const char *instance_id, const char *scope)
{
	RUN(STMT_RESULTS_DROP_BELOW, instance_id, scope);
}

/* Names and values (JSON text) of the named results of these scopes, outermost first. */
int
pgd_store_results_in(const char *instance_id, const char *const *scopes, int nscopes,
					 char ***names, char ***values)
{
	Datum		args[2];
	int			n,
				i;

	args[0] = pgd_text_datum(instance_id);
	args[1] = text_array(nscopes, scopes);
	n = store_run(STMT_RESULTS_IN, args, NULL);
	*names = palloc(sizeof(char *) * Max(n, 1));
	*values = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		(*names)[i] = get_string(i, 1);
		(*values)[i] = get_string(i, 2);
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Signals and waits
 * ---------------------------------------------------------------------
 */

/* Take the oldest buffered signal of this name; *payload is its JSON text. */
bool
pgd_store_signal_take(const char *instance_id, const char *name, char **payload)
{
	if (RUN(STMT_SIGNAL_TAKE, instance_id, name) == 0)
		return false;
	*payload = get_string(0, 1);
	return true;
}

/*
 * A signal into the instance's mailbox and a deliver task, in the caller's
 * transaction; nothing of the instance is locked (DESIGN.md §5 rule 2).
 */
void
pgd_store_signal_send(const char *instance_id, const char *name, const char *data,
					  bool is_json)
{
	Datum		values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(name);
	values[2] = pgd_text_datum(data);
	values[3] = BoolGetDatum(is_json);
	store_run(STMT_SIGNAL_SEND, values, NULL);
	pgd_store_task_add(instance_id, NULL, instance_id, PGD_TASK_DELIVER);
}

void
pgd_store_wait_add(const char *instance_id, const char *node_id, const char *scope,
				   const char *name)
{
	RUN(STMT_WAIT_ADD, instance_id, node_id, scope, name);
}

/* Remove a wait; false when it was not there (delivered meanwhile). */
bool
pgd_store_wait_remove(const char *instance_id, const char *node_id, const char *scope)
{
	return RUN(STMT_WAIT_REMOVE, instance_id, node_id, scope) > 0;
}

/* The oldest registered wait for which a signal of its name is buffered. */
bool
pgd_store_wait_matched(const char *instance_id, char **node_id, char **scope, char **name)
{
	if (RUN(STMT_WAIT_MATCHED, instance_id) == 0)
		return false;
	*node_id = get_string(0, 1);
	*scope = get_string(0, 2);
	*name = get_string(0, 3);
	return true;
}

/* ---------------------------------------------------------------------
 * Executor 0: readiness, heartbeat, maintenance
 * ---------------------------------------------------------------------
 */

/* Mark the engine ready and begin a new worker epoch; returns its id. */
char *
pgd_store_announce_ready(void)
{
	store_run(STMT_READY_ANNOUNCE, NULL, NULL);
	store_run(STMT_EPOCH_CLEAR, NULL, NULL);
	store_run(STMT_EPOCH_NEW, NULL, NULL);
	return get_string(0, 1);
}

/* Refresh the heartbeat; false when the epoch is gone (the extension was recreated). */
bool
pgd_store_heartbeat(const char *epoch_id)
{
	return RUN(STMT_HEARTBEAT, epoch_id) > 0;
}

/* One batch of retention; returns the number of instances removed. */
int
pgd_store_retention_batch(int days, int keep, int batch)
{
	Datum		values[3];

	values[0] = Int32GetDatum(days);
	values[1] = Int32GetDatum(keep);
	values[2] = Int32GetDatum(batch);
	return store_run(STMT_RETENTION_BATCH, values, NULL);
}

/* What df.check() reports, in CurrentMemoryContext. */
int
pgd_store_problems(PgdProblem **problems)
{
	int			n = store_run(STMT_PROBLEMS, NULL, NULL);
	int			i;

	*problems = palloc(sizeof(PgdProblem) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		PgdProblem *p = &(*problems)[i];
		char	   *v;

		p->instance_id = pstrdup(get_string(i, 1));
		p->problem = pstrdup(get_string(i, 2));
		p->node_id = (v = get_string(i, 3)) ? pstrdup(v) : NULL;
		p->scope = (v = get_string(i, 4)) ? pstrdup(v) : NULL;
		p->detail = pstrdup(get_string(i, 5));
	}
	return n;
}

/* Is the problem still there?  Asked under the instance's runs lock. */
bool
pgd_store_problem_still_there(const char *instance_id, const char *problem,
							  const char *node_id)
{
	return RUN(STMT_PROBLEM_STILL_THERE, instance_id, problem, node_id) > 0;
}

/* Tasks of a finished or missing instance (SKIP LOCKED: a claimed one is left to its holder). */
void
pgd_store_drop_tasks_of_finished(const char *instance_id)
{
	RUN(STMT_DROP_TASKS_OF_FINISHED, instance_id);
}

/* A running SQL/HTTP leaf without a task gets a new one, as if just enqueued. */
bool
pgd_store_restore_step_task(const char *instance_id, const char *node_id, const char *scope)
{
	if (RUN(STMT_RESTORE_STEP_TASK, instance_id, node_id, scope) == 0)
		return false;
	if (strcmp(get_string(0, 1), "http") == 0)
		pgd_http_wake_at_commit();
	pgd_wake_at_commit(1);
	return true;
}

/*
 * A running SLEEP gets its timer back, due when the node started plus its
 * seconds; a WAIT_SCHEDULE the next cron tick after it started.
 */
bool
pgd_store_restore_timer(const char *instance_id, const char *node_id, const char *scope)
{
	if (RUN(STMT_RESTORE_TIMER, instance_id, node_id, scope) == 0)
		return false;
	pgd_wake_at_commit(1);
	return true;
}

/* ---------------------------------------------------------------------
 * The commit hook of the node buffer
 * ---------------------------------------------------------------------
 */

static void
store_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* a transition whose node updates were never written must not commit */
			if (npending > 0)
				elog(ERROR, "node updates were not written before commit");
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			npending = 0;
			flushing = false;
			break;
		default:
			break;
	}
}

void
pgd_store_register_xact_callback(void)
{
	RegisterXactCallback(store_xact_callback, NULL);
}
