/*-------------------------------------------------------------------------
 *
 * statements.c
 *	  The statement table of the store: the engine's statements, named
 *	  in one table at the top, each with the held writes it needs written
 *	  first and the instances it reaches, prepared once per process and
 *	  run one way (store_run).  The typed functions around them are in the
 *	  store's files by table family (src/store/README.md).
 *
 * Statements use $n parameters, schema-qualified names and
 * OPERATOR(pg_catalog.x), so neither search_path nor user data can change
 * what they do.  Each is prepared on first use with a generic plan and
 * kept (SPI_keepplan); the plan cache re-plans it after DDL.  Every
 * statement takes a fresh snapshot (read committed), which the engine
 * relies on: a read on the transaction's first snapshot could miss the
 * commit that made a task ready.
 *
 * Node writes (the buffer of node starts and ends, written at the end of
 * a transition) and the reads of node rows through it are in
 * node_writes.c.
 *
 * Locks: see store.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/compat.h"
#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

#define T  TEXTOID
#define TA TEXTARRAYOID

/* A task of this scope or of a scope below it. */
#define IN_SCOPE(col, arg) \
	"(" col " OPERATOR(pg_catalog.=) " arg " OR pg_catalog.starts_with(" col \
	", " arg " OPERATOR(pg_catalog.||) '::'))"

/*
 * A task (alias k) that may be claimed: its instance has a runs row, or has
 * finished (then the claim only consumes it).  A task with neither is left
 * alone: while a restore loads the engine's tables one transaction at a
 * time, its runs row may still be on its way.  Reconciliation removes the
 * tasks of instances that are really gone (task_of_finished_instance).
 *
 * The queue scans check it; the claim by id does not need to.  An id
 * reaches the claim either from the scan, which checked it, or from the
 * ring of ids that commits published, and the commit that made such a task
 * also wrote or held its instance's runs row (df.start, a transition); a
 * restore publishes nothing.  The check there made every claim several
 * times slower under load (its two subplans on the hot path: one-step
 * workflows 488/s with it, 1,017/s without, in one bench run each).
 *
 * Both lookups are by key, one candidate task at a time (OFFSET 0 keeps
 * the planner from turning them into hashes of the whole tables), and
 * planned without sequential scans (pgd_spi_run_kept).  Planned while
 * df_internal.runs was empty, the EXISTS read every row of it for each
 * candidate, dead ones included, whose xmax is a multixact when a later
 * step of a batch ended the instance in a subtransaction:
 * GetMultiXactIdMembers for each, a fifth of an executor's CPU in a chain
 * of df.catch steps (perf).
 */
#define CLAIMABLE_K \
	"(EXISTS (SELECT FROM df_internal.runs r " \
	"WHERE r.instance_id OPERATOR(pg_catalog.=) k.instance_id OFFSET 0) " \
	"OR EXISTS (SELECT FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) k.instance_id " \
	"AND i.status IN " PGD_SQL_TERMINAL_STATUSES " OFFSET 0))"

static const PgdStmtDef stmts[STMT_COUNT] = {
	[STMT_RUN_LOCK] =
		{"lock the runs row",
		 0, REACH_INSTANCE,
		 "SELECT status FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		 1,
		 {T}},
	[STMT_RUN_STARTED] =
		{"the runs row of a started instance",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.runs SET status = 'running' "
						  "WHERE instance_id OPERATOR(pg_catalog.=) $1",
						  1,
						  {T}},

	/*
	 * The engine's own state (the runs row, which the caller holds) says
	 * where an instance is; df.instances.status only shows it.  Its owner
	 * may UPDATE it (the reference's grants), so these two overwrite it
	 * whatever it says (a forged 'completed' would keep a failing
	 * instance 'completed', without its instance_failed event).
	 */
	[STMT_INSTANCE_STARTED] =
		{"an instance starts, or runs again (df.compensate)",
		 0, REACH_INSTANCE,
		 "UPDATE df.instances SET status = 'running', updated_at = pg_catalog.now(), "
		 "completed_at = NULL "
		 "WHERE id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[STMT_INSTANCE_FINISHED] =
		{"an instance ends",
		 0, REACH_INSTANCE,
		 "UPDATE df.instances SET status = $2, updated_at = pg_catalog.now(), "
		 "completed_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'completed' THEN pg_catalog.now() END "
		 "WHERE id OPERATOR(pg_catalog.=) $1",
		 2,
		 {T, T}},
	[STMT_INSTANCE_SUBMITTER] =
		{"the submitter df.instances records",
		 0, REACH_INSTANCE,
		 "SELECT submitted_by::pg_catalog.oid FROM df.instances "
		 "WHERE id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	/*
	 * One statement: an instance ends at every workflow's last step.  Here
	 * and in every statement that deletes or updates the tasks it locks
	 * with SKIP LOCKED, their ids are an array, which the primary key is
	 * searched for: with "id IN (subquery)", a plan made while the queue
	 * was empty read all of df_internal.tasks for each one (a semi join
	 * driven by a full scan of tasks_pkey: 160 ms an end with 19,000
	 * starts queued, test/t/047_bulk_starts.pl).
	 */
	[STMT_END_INSTANCE] =
		{"remove an ended instance's engine state",
		 FLUSH_TASKS | FLUSH_JOIN_COUNTS, REACH_INSTANCE,
		 "WITH t AS (DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " FOR UPDATE SKIP LOCKED))), "
		 "r AS (DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		 "j AS (DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		 "l AS (DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		 "s AS (DELETE FROM df_internal.signals WHERE instance_id OPERATOR(pg_catalog.=) $1), "
		 "w AS (DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1) "
		 "DELETE FROM df_internal.runs WHERE instance_id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[STMT_CANCEL_RUNNING_NODES] =
		{"the nodes an ending instance stops",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "UPDATE df.nodes SET status = 'cancelled', updated_at = pg_catalog.now() "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND status OPERATOR(pg_catalog.=) 'running'",
		 1,
		 {T}},
	[STMT_RESUME_CANCELLED_NODES] =
		{"the nodes a resumed instance's end had stopped (df.compensate)",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "UPDATE df.nodes SET status = 'running', updated_at = pg_catalog.now() "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND status OPERATOR(pg_catalog.=) 'cancelled'",
		 1,
		 {T}},
	[STMT_TASK_START] =
		{"the task that starts an instance",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) VALUES ($1, $1, 'start') "
		 "RETURNING id",
		 1,
		 {T}},
	[STMT_TASK_STEP] =
		{"a SQL step's task",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		 "VALUES ($1, $2, $3, 'step') RETURNING id",
		 3,
		 {T, T, T}},
	[STMT_TASK_HTTP] =
		{"an HTTP step's task (the HTTP worker's)",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		 "VALUES ($1, $2, $3, 'http')",
		 3,
		 {T, T, T}},
	[STMT_TASK_DELIVER] =
		{"a task that delivers signals",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) VALUES ($1, $1, 'deliver')",
		 1,
		 {T}},
	[STMT_TASK_TIMER] =
		{"a timer",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
		 "VALUES ($1, $2, $3, 'timer', $4)",
		 4,
		 {T, T, T, TIMESTAMPTZOID}},
	[STMT_TASK_REQUEUE] =
		{"a task put back for a later attempt",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, attempts, run_at) "
		 "VALUES ($1, $2, $3, $4, $5, $6)",
		 6,
		 {T, T, T, T, INT4OID, TIMESTAMPTZOID}},
	[STMT_TASK_DELETE] =
		{"a consumed task",
		 FLUSH_TASKS, REACH_TASK,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1",
		 1,
		 {INT8OID}},
	[STMT_TASKS_DROP_SCOPE] =
		{"the unclaimed tasks of an abandoned scope",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND " IN_SCOPE("scope", "$2") " "
										 " FOR UPDATE SKIP LOCKED))",
		 2,
		 {T, T}},
	[STMT_WAITS_DROP_SCOPE] =
		{"the signal waits of an abandoned scope",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.waits "
							   "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
							   "AND " IN_SCOPE("scope", "$2"),
							   2,
							   {T, T}},
	[STMT_TASK_DROP_WAIT_TIMER] =
		{"the timeout of a wait that got its signal",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		 " AND kind OPERATOR(pg_catalog.=) 'timer' FOR UPDATE SKIP LOCKED))",
		 3,
		 {T, T, T}},
	[STMT_TASK_DELIVER_DROP] =
		{"the deliver tasks a delivery makes redundant",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND kind OPERATOR(pg_catalog.=) 'deliver' FOR UPDATE SKIP LOCKED))",
		 1,
		 {T}},
	/*
	 * choose FOR UPDATE SKIP LOCKED (never waits), delete, read the runs row.
	 * The kind is tested by a function call, which the planner cannot match
	 * with tasks_run_at_idx's predicate: planned while df_internal.tasks was
	 * empty (after a VACUUM), the lookup by id otherwise chose that index,
	 * whose second column is the id, and read all of it for each claim.
	 */
	[STMT_TASK_OLDEST_READY] =
		{"the oldest due task nobody holds",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT id FROM df_internal.tasks k "
		 "WHERE run_at OPERATOR(pg_catalog.<=) $1 "
		 "AND kind OPERATOR(pg_catalog.<>) 'http' AND kind OPERATOR(pg_catalog.<>) 'external' "
		 "AND " CLAIMABLE_K " "
		 "ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
		 1,
		 {TIMESTAMPTZOID},
		 true},
	/*
	 * The same, passing over the steps of the roles in $1, which hold their
	 * share of the executors (core/share.c); their other tasks still count.
	 */
	[STMT_TASK_OLDEST_READY_SHARE] =
		{"the oldest due task nobody holds, but no step of a full role (0: of any role)",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT id FROM df_internal.tasks k "
		 "WHERE run_at OPERATOR(pg_catalog.<=) $2 "
		 "AND kind OPERATOR(pg_catalog.<>) 'http' AND kind OPERATOR(pg_catalog.<>) 'external' "
		 "AND " CLAIMABLE_K " "
		 "AND NOT (kind OPERATOR(pg_catalog.=) 'step' AND (0::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1) "
		 " OR EXISTS (SELECT FROM df_internal.runs r "
		 " WHERE r.instance_id OPERATOR(pg_catalog.=) k.instance_id "
		 " AND r.submitted_by::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)))) "
		 "ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
		 2,
		 {OIDARRAYOID, TIMESTAMPTZOID},
		 true},
	[STMT_TASK_NEXT_DUE] =
		{"when the next future task is due (read without locks)",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT min(run_at) FROM df_internal.tasks "
		 "WHERE run_at OPERATOR(pg_catalog.>) $1 "
		 "AND kind OPERATOR(pg_catalog.<>) 'http' AND kind OPERATOR(pg_catalog.<>) 'external'",
		 1,
		 {TIMESTAMPTZOID}},
	/*
	 * After the rollback of a claim that failed in the engine, in a
	 * transaction of its own: count it, keep the error, and back off (1 s
	 * doubling up to 60 s).  SKIP LOCKED: another executor that claimed the
	 * task meanwhile records its own outcome.
	 */
	[STMT_TASK_ENGINE_ERROR] =
		{"an engine error on a task",
		 FLUSH_TASKS, REACH_TASK,
		 "UPDATE df_internal.tasks SET engine_errors = engine_errors OPERATOR(pg_catalog.+) 1, "
		 "last_engine_error = $2, "
		 "run_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval("
		 " secs => LEAST(60, pg_catalog.power(2, engine_errors))) "
		 "WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1 "
		 " FOR UPDATE SKIP LOCKED)) "
		 "RETURNING run_at",
		 2,
		 {INT8OID, T}},

	/*
	 * A start's marker (wake.c) as a start task, while its instance is
	 * still pending and has none: the start of a transaction that is
	 * prepared (PREPARE TRANSACTION), or one whose claim failed in the
	 * engine (counted, and backed off as above).
	 */
	[STMT_START_TASK_OF_MARKER] =
		{"a start's marker made a start task",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) "
		 "SELECT $1, $1, 'start' WHERE EXISTS (SELECT 1 FROM df_internal.runs r "
		 " WHERE r.instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND r.status OPERATOR(pg_catalog.=) 'pending') "
		 "AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t "
		 " WHERE t.instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND t.kind OPERATOR(pg_catalog.=) 'start')",
		 1,
		 {T},
		 true},
	[STMT_START_MARKER_ERROR] =
		{"an engine error on a start's marker",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks "
		 "(instance_id, scope, kind, engine_errors, last_engine_error, run_at) "
		 "SELECT $1, $1, 'start', 1, $2, "
		 "pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '1 s'::pg_catalog.interval "
		 "WHERE EXISTS (SELECT 1 FROM df_internal.runs r "
		 " WHERE r.instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND r.status OPERATOR(pg_catalog.=) 'pending') "
		 "AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t "
		 " WHERE t.instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND t.kind OPERATOR(pg_catalog.=) 'start') "
		 "RETURNING run_at",
		 2,
		 {T, T},
		 true},

	[STMT_HTTP_DUE] =
		{"due HTTP tasks whose lease is free",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT id, instance_id, node_id, scope, attempts FROM df_internal.tasks k "
		 "WHERE kind OPERATOR(pg_catalog.=) 'http' AND " CLAIMABLE_K " "
		 "AND run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		 "AND (lease_until IS NULL OR lease_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()) "
		 "ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED",
		 1,
		 {INT8OID},
		 true},
	[STMT_HTTP_LEASE] =
		{"lease an HTTP task",
		 FLUSH_TASKS, REACH_TASK,
		 "UPDATE df_internal.tasks SET attempts = attempts OPERATOR(pg_catalog.+) 1, "
		 "lease_token = pg_catalog.gen_random_uuid(), "
		 "lease_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
		 "pg_catalog.make_interval(secs => $2) "
		 "WHERE id OPERATOR(pg_catalog.=) $1 RETURNING lease_token::text",
		 2,
		 {INT8OID, INT4OID}},
	[STMT_HTTP_LEASE_TOKEN] =
		{"the lease token of an HTTP task",
		 FLUSH_TASKS, REACH_TASK,
		 "SELECT lease_token::text FROM df_internal.tasks "
		 "WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED",
		 1,
		 {INT8OID}},
	[STMT_HTTP_LEASES_VOID] =
		{"void the leases of the HTTP calls of an HTTP worker that is gone",
		 FLUSH_TASKS, REACH_ALL,
		 "UPDATE df_internal.tasks SET lease_until = pg_catalog.clock_timestamp() "
		 "WHERE kind OPERATOR(pg_catalog.=) 'http' "
		 "AND lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()",
		 0,
		 {InvalidOid}},
	[STMT_HTTP_NEXT_DUE] =
		{"milliseconds until an HTTP task or lease falls due",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT (EXTRACT(epoch FROM min(GREATEST(run_at, COALESCE(lease_until, run_at))) "
		 "OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint "
		 "FROM df_internal.tasks WHERE kind OPERATOR(pg_catalog.=) 'http'",
		 0,
		 {0}},

	/*
	 * Nodes found by their whole primary key: the ids are unnested and each
	 * row is looked up in a subquery of its own (OFFSET 0), so that its plan
	 * has both columns as index conditions.  With id = ANY of the array, the
	 * generic plan weighed the array's assumed ten elements against the few
	 * rows it expects per instance, and chose to read every node of the
	 * instance and filter: O(width) per node, quadratic fan-outs.
	 */
	[STMT_EVENT_ADD] =
		{"an event of the history",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "INSERT INTO df_internal.events "
		 "(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
		 "SELECT $1, $2, $3, $4, NULLIF($5::pg_catalog.int4, 0), "
		 "CASE WHEN $2 OPERATOR(pg_catalog.~) '^instance_(completed|failed|cancelled|compensated)$' THEN "
		 "(SELECT GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
		 "OPERATOR(pg_catalog.-) i.created_at) OPERATOR(pg_catalog.*) 1000)::bigint) "
		 "FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $1) END, "
		 "$6::pg_catalog.jsonb",
		 6,
		 {T, T, T, T, T, T}},

	[STMT_JOIN_OPEN] =
		{"a JOIN's branch counter, made by its first branch's end (a table with columns task_rows.c does not know)",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.joins (instance_id, node_id, scope, remaining) "
		 "VALUES ($1, $2, $3, $4)",
		 4,
		 {T, T, T, INT4OID}},
	[STMT_JOINS_DROP_SCOPE] =
		{"the JOIN counters of an abandoned scope",
		 FLUSH_JOIN_COUNTS, REACH_INSTANCE,
		 "DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND " IN_SCOPE("scope", "$2"),
		 2,
		 {T, T}},
	[STMT_LOOP_OPEN] =
		{"a loop's state",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.loops (instance_id, node_id, scope) VALUES ($1, $2, $3) "
		 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE "
		 "SET generation = 1, iterations = 1, iteration_started_at = pg_catalog.clock_timestamp()",
		 3,
		 {T, T, T}},
	[STMT_LOOP_FORGET] =
		{"an ended loop's state",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[STMT_LOOP_NEXT_GENERATION] =
		{"a loop's next generation begins",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.loops SET generation = generation OPERATOR(pg_catalog.+) 1, "
		 "iteration_started_at = pg_catalog.clock_timestamp() "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 RETURNING generation",
		 3,
		 {T, T, T}},
	[STMT_LOOP_MOVE_SCOPE] =
		{"a root loop moves to its next root scope",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.loops SET scope = $3 "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $4",
		 4,
		 {T, T, T, T}},
	[STMT_LOOP_COUNT_ITERATION] =
		{"count a loop iteration",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.loops SET iterations = iterations OPERATOR(pg_catalog.+) 1 "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 "
		 "RETURNING iterations, iteration_started_at",
		 3,
		 {T, T, T}},

	[STMT_RESULT_SAVE] =
		{"a named result",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.results AS r (instance_id, scope, name, value) "
		 "VALUES ($1, $2, $3, $4::pg_catalog.json) "
		 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
		 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
		 4,
		 {T, T, T, T}},
	[STMT_RESULTS_COPY] =
		{"a branch's named results join the enclosing scope",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.results (instance_id, scope, name, value) "
		 "SELECT instance_id, $3, name, value FROM df_internal.results "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2 "
		 "ORDER BY seq "
		 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
		 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
		 3,
		 {T, T, T}},
	[STMT_RESULTS_DROP_SCOPE] =
		{"the named results of a scope and below",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.results "
								 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
								 "AND " IN_SCOPE("scope", "$2"),
								 2,
								 {T, T}},
	[STMT_RESULTS_MOVE] =
		{"a loop body's named results carried to its next generation",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.results SET scope = $3 "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2",
		 3,
		 {T, T, T}},
	[STMT_RESULTS_DROP_BELOW] =
		{"the named results of the scopes below one",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::')",
		 2,
		 {T, T}},
	/*
	 * outermost first, so that inner scopes overwrite.  One probe of the
	 * primary key per scope: with "scope = ANY ($2)" a plan made while the
	 * table had no statistics kept the scopes as a filter over every entry
	 * of the instance, dead ones included (a df.map in lanes mode leaves one
	 * per row until vacuum); OFFSET 0 keeps the planner from turning the
	 * probes back into one scan joined to the scopes
	 */
	[STMT_RESULTS_IN] =
		{"the named results of some scopes",
		 0, REACH_INSTANCE,
		 "SELECT r.name, r.value::text "
		 "FROM (SELECT DISTINCT u FROM pg_catalog.unnest($2) AS u) AS s(scope) "
		 "JOIN LATERAL (SELECT name, value, seq FROM df_internal.results x "
		 "WHERE x.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND x.scope OPERATOR(pg_catalog.=) s.scope OFFSET 0) AS r ON true "
		 "ORDER BY pg_catalog.length(s.scope), r.seq",
		 2,
		 {T, TA}},

	[STMT_SIGNAL_TAKE] =
		{"take the oldest buffered signal of a name",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.signals WHERE id = ("
		 " SELECT id FROM df_internal.signals "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 "
		 " ORDER BY id LIMIT 1) RETURNING payload::text",
		 2,
		 {T, T}},
	[STMT_SIGNAL_SEND] =
		{"a signal into the mailbox",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.signals (instance_id, name, payload) "
		 "VALUES ($1, $2, CASE WHEN $4 THEN $3::pg_catalog.jsonb ELSE pg_catalog.to_jsonb($3) END)",
		 4,
		 {T, T, T, BOOLOID}},
	[STMT_SIGNALS_AND_CANCELS_XMIN] =
		{"who wrote the buffered signals, the cancel and the run of an instance (1, 2, 3)",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT 1, xmin FROM df_internal.signals "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "UNION ALL SELECT 2, xmin FROM df_internal.events "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND kind OPERATOR(pg_catalog.=) 'instance_cancelled' "
		 "UNION ALL SELECT 3, xmin FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[STMT_WAIT_ADD] =
		{"a SIGNAL node waits",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.waits (instance_id, node_id, scope, name) "
		 "VALUES ($1, $2, $3, $4) "
		 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE SET name = EXCLUDED.name",
		 4,
		 {T, T, T, T}},
	[STMT_WAIT_REMOVE] =
		{"a wait ends",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[STMT_WAIT_MATCHED] =
		{"the oldest wait that has a signal",
		 0, REACH_INSTANCE,
		 "SELECT w.node_id, w.scope, w.name FROM df_internal.waits w "
		 "WHERE w.instance_id OPERATOR(pg_catalog.=) $1 AND EXISTS ("
		 " SELECT 1 FROM df_internal.signals s "
		 " WHERE s.instance_id OPERATOR(pg_catalog.=) w.instance_id "
		 " AND s.name OPERATOR(pg_catalog.=) w.name) "
		 "ORDER BY w.seq LIMIT 1",
		 1,
		 {T}},

	[STMT_READY_ANNOUNCE] =
		{"the engine is ready",
		 0, REACH_ALL,
		 "INSERT INTO df_internal._worker_ready (sentinel, schema_version) VALUES (true, $1) "
		 "ON CONFLICT (sentinel) DO UPDATE SET schema_version = $1, "
		 "initialized_at = pg_catalog.now()",
		 1,
		 {INT4OID}},
	[STMT_READY_VERSION] =
		{"the engine version the readiness row says",
		 0, REACH_ALL,
		 "SELECT schema_version FROM df_internal._worker_ready",
		 0,
		 {0}},
	[STMT_EPOCH_CLEAR] =
		{"forget the previous worker epoch",
		 0, REACH_ALL,
		 "DELETE FROM df._worker_epoch",
						  0,
						  {0}},
	[STMT_EPOCH_NEW] =
		{"a new worker epoch",
		 0, REACH_ALL,
		 "INSERT INTO df._worker_epoch (epoch_id) VALUES (pg_catalog.gen_random_uuid()) "
		 "RETURNING epoch_id::text",
		 0,
		 {0}},
	[STMT_HEARTBEAT] =
		{"the heartbeat",
		 0, REACH_ALL,
		 "UPDATE df._worker_epoch SET last_seen_at = pg_catalog.now() "
		 "WHERE epoch_id OPERATOR(pg_catalog.=) $1::uuid",
		 1,
		 {T}},
	/*
	 * Finished by the engine's state (no runs row), not by df.instances.status,
	 * which the owner may UPDATE: a forged 'completed' must not have a live
	 * instance deleted under the engine.
	 */
	[STMT_RETENTION_BATCH] =
		{"remove a batch of old finished instances",
		 FLUSH_NODE_WRITES, REACH_ALL,
		 "WITH ranked AS ("
		 " SELECT id, COALESCE(completed_at, created_at) AS t, "
		 " pg_catalog.row_number() OVER (ORDER BY COALESCE(completed_at, created_at) DESC, id) AS rn "
		 " FROM df.instances f WHERE NOT EXISTS (SELECT 1 FROM df_internal.runs r "
		 "  WHERE r.instance_id OPERATOR(pg_catalog.=) f.id)), "
		 "victims AS ("
		 " SELECT i.id FROM df.instances i JOIN ranked r ON r.id OPERATOR(pg_catalog.=) i.id "
		 " WHERE (r.rn OPERATOR(pg_catalog.>) $2 OR r.t OPERATOR(pg_catalog.<) "
		 "  (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(days => $1))) "
		 " AND NOT EXISTS (SELECT 1 FROM df_internal.runs r "
		 "  WHERE r.instance_id OPERATOR(pg_catalog.=) i.id) "
		 " LIMIT $3 FOR UPDATE OF i SKIP LOCKED), "
		 "ev AS (DELETE FROM df_internal.events e USING victims v "
		 " WHERE e.instance_id OPERATOR(pg_catalog.=) v.id), "
		 "cp AS (DELETE FROM df_internal.compensations c USING victims v "
		 " WHERE c.instance_id OPERATOR(pg_catalog.=) v.id), "
		 "nd AS (DELETE FROM df.nodes d USING victims v "
		 " WHERE d.instance_id OPERATOR(pg_catalog.=) v.id) "
		 "DELETE FROM df.instances i USING victims v "
		 "WHERE i.id OPERATOR(pg_catalog.=) v.id",
		 3,
		 {INT4OID, INT4OID, INT4OID}},
	[STMT_PROBLEMS] =
		{"what df.check() reports",
		 FLUSH_NODE_WRITES | FLUSH_TASKS | FLUSH_JOIN_COUNTS | FLUSH_MAP_COUNTS, REACH_ALL,
		 "SELECT instance_id, problem, node_id, scope, detail "
					   "FROM df_internal.check_rows() ORDER BY 1, 2, 3",
					   0,
					   {0}},
	[STMT_PROBLEM_STILL_THERE] =
		{"is a reported problem still there",
		 FLUSH_NODE_WRITES | FLUSH_TASKS | FLUSH_JOIN_COUNTS | FLUSH_MAP_COUNTS,
		 REACH_INSTANCE,
		 "SELECT 1 FROM df_internal.check_rows() c "
		 "WHERE c.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND c.problem OPERATOR(pg_catalog.=) $2 "
		 "AND c.node_id IS NOT DISTINCT FROM $3",
		 3,
		 {T, T, T}},
	[STMT_DROP_TASKS_OF_FINISHED] =
		{"the unclaimed tasks of a finished instance",
		 FLUSH_NODE_WRITES | FLUSH_TASKS, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT t.id FROM df_internal.tasks t "
		 " WHERE t.instance_id OPERATOR(pg_catalog.=) $1 AND (NOT EXISTS ("
		 "  SELECT 1 FROM df_internal.runs r "
		 "  WHERE r.instance_id OPERATOR(pg_catalog.=) t.instance_id) OR EXISTS ("
		 "  SELECT 1 FROM df_internal.events e "
		 "  WHERE e.instance_id OPERATOR(pg_catalog.=) t.instance_id "
		 "  AND e.kind IN ('instance_completed', 'instance_failed', 'instance_cancelled', "
		 "  'instance_compensated') AND NOT EXISTS ("
		 "   SELECT 1 FROM df_internal.events r "
		 "   WHERE r.instance_id OPERATOR(pg_catalog.=) e.instance_id "
		 "   AND r.kind OPERATOR(pg_catalog.=) 'instance_resumed' "
		 "   AND r.id OPERATOR(pg_catalog.>) e.id))) "
		 " FOR UPDATE SKIP LOCKED))",
		 1,
		 {T},
		 true},
	[STMT_RESTORE_STEP_TASK] =
		{"a stranded step gets its task back",
		 FLUSH_NODE_WRITES | FLUSH_TASKS, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		 "SELECT n.instance_id, n.id, $3, "
		 "CASE WHEN n.node_type IN ('HTTP', 'HTTP_MULTIPART') THEN 'http' ELSE 'step' END "
		 "FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND n.id OPERATOR(pg_catalog.=) $2 RETURNING kind",
		 3,
		 {T, T, T}},
	[STMT_RESTORE_TIMER] =
		{"a running SLEEP or WAIT_SCHEDULE gets its timer back",
		 FLUSH_NODE_WRITES | FLUSH_TASKS, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
		 "SELECT n.instance_id, n.id, $3, 'timer', "
		 "CASE n.node_type WHEN 'SLEEP' THEN n.updated_at OPERATOR(pg_catalog.+) "
		 " pg_catalog.make_interval(secs => n.query::pg_catalog.float8) "
		 "ELSE df_internal.cron_next(n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'cron_expr', "
		 " n.updated_at) END "
		 "FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND n.id OPERATOR(pg_catalog.=) $2",
		 3,
		 {T, T, T}},

	/* the wrapper nodes of orchestration/ (wrapper_state.c) */
	[STMT_NODE_DETAILS_MERGE] =
		{"keys added to a node's status_details (error, attempts)",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "UPDATE df.nodes SET status_details = pg_catalog.jsonb_strip_nulls("
		 "COALESCE(status_details, '{}') OPERATOR(pg_catalog.||) $3::pg_catalog.jsonb) "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
		 3,
		 {T, T, T}},
	[STMT_NODE_DETAILS] =
		{"a node's status_details",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT status_details::text FROM df.nodes "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
		 2,
		 {T, T}},
	[STMT_TASK_STEP_AT] =
		{"a SQL step's next attempt, due later",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at, attempts) "
		 "VALUES ($1, $2, $3, 'step', $4, $5)",
		 5,
		 {T, T, T, TIMESTAMPTZOID, INT4OID}},
	/* the same row, so the next attempt sends the same Idempotency-Key */
	[STMT_HTTP_RETRY_AT] =
		{"an HTTP step's next attempt, due later",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "UPDATE df_internal.tasks SET run_at = $4, lease_until = NULL, lease_token = NULL "
		 "WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id FROM df_internal.tasks "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 " AND scope OPERATOR(pg_catalog.=) $3 AND kind OPERATOR(pg_catalog.=) 'http' "
		 " FOR UPDATE SKIP LOCKED)) RETURNING id",
		 4,
		 {T, T, T, TIMESTAMPTZOID}},
	[STMT_TASKS_OF_NODE_DROP] =
		{"the unclaimed tasks of one node in one scope",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		 " FOR UPDATE SKIP LOCKED))",
		 3,
		 {T, T, T}},
	/* plain reads: a task being completed is locked, and is not gone */
	[STMT_HTTP_TASKS_GONE] =
		{"which HTTP tasks of calls in flight are gone",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT x FROM pg_catalog.unnest($1::pg_catalog.int8[]) AS x "
		 "WHERE NOT EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.id OPERATOR(pg_catalog.=) x)",
		 1,
		 {INT8ARRAYOID}},
	[STMT_UNDO_REGISTER] =
		{"an undo registered by a completed forward step",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.compensations (instance_id, node_id, scope, results) "
		 "VALUES ($1, $2, $3, $4::pg_catalog.json) RETURNING seq",
		 4,
		 {T, T, T, T}},
	[STMT_UNDO_NEXT] =
		{"the next undos of a compensation: the latest registered ones within a scope",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.compensations c SET state = 'running', "
		 "attempts = c.attempts OPERATOR(pg_catalog.+) 1, compensated_by = $3 "
		 "WHERE c.instance_id OPERATOR(pg_catalog.=) $1 AND c.seq IN ("
		 " SELECT x.seq FROM df_internal.compensations x "
		 " WHERE x.instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND x.state OPERATOR(pg_catalog.=) 'registered' AND (x.scope OPERATOR(pg_catalog.=) $2 OR pg_catalog.starts_with(x.scope, $2 OPERATOR(pg_catalog.||) '::')) "
		 " ORDER BY x.seq DESC LIMIT $4::pg_catalog.int8) "
		 "RETURNING c.seq, c.node_id, c.scope, c.results::text, c.attempts",
		 4,
		 {T, T, T, T}},
	[STMT_UNDO_FINISH] =
		{"an undo ended",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.compensations SET state = $3, error = $4 "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND seq OPERATOR(pg_catalog.=) $2::pg_catalog.int8 RETURNING node_id, compensated_by",
		 4,
		 {T, T, T, T}},
	[STMT_UNDOS_DONE] =
		{"the undos a compensation ran, latest registered first",
		 0, REACH_INSTANCE,
		 "SELECT node_id, state, error FROM df_internal.compensations "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND ($2 IS NULL OR compensated_by OPERATOR(pg_catalog.=) $2) "
		 "AND state IN ('done', 'failed') ORDER BY seq DESC",
		 2,
		 {T, T}},
	[STMT_UNDO_PENDING] =
		{"is an undo registered within a scope and not run?",
		 0, REACH_INSTANCE,
		 "SELECT 1 FROM df_internal.compensations x "
		 "WHERE x.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND x.state OPERATOR(pg_catalog.=) 'registered' AND (x.scope OPERATOR(pg_catalog.=) $2 OR pg_catalog.starts_with(x.scope, $2 OPERATOR(pg_catalog.||) '::')) LIMIT 1",
		 2,
		 {T, T}},
	[STMT_UNDO_TALLY] =
		{"how many undos of a compensation still run, and how many failed",
		 0, REACH_INSTANCE,
		 "SELECT pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'running'), "
		 "pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'failed') "
		 "FROM df_internal.compensations "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND compensated_by OPERATOR(pg_catalog.=) $2",
		 2,
		 {T, T}},
	[STMT_UNDO_REQUEUE] =
		{"undos within a scope to run again: abandoned ones (and failed ones when $3)",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.compensations x SET state = 'registered' "
		 "WHERE x.instance_id OPERATOR(pg_catalog.=) $1 AND (x.scope OPERATOR(pg_catalog.=) $2 OR pg_catalog.starts_with(x.scope, $2 OPERATOR(pg_catalog.||) '::')) "
		 "AND (x.state OPERATOR(pg_catalog.=) 'running' OR ($3::pg_catalog.bool "
		 "AND x.state OPERATOR(pg_catalog.=) 'failed')) RETURNING x.compensated_by",
		 3,
		 {T, T, T}},
	[STMT_RUN_LOCK_NOWAIT] =
		{"lock the runs row without waiting (a later step of a batch)",
		 0, REACH_INSTANCE,
		 "SELECT status FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 FOR UPDATE NOWAIT",
		 1,
		 {T}},	/* maintenance (maintenance.c) */
	/*
	 * The start sweep reads a range of runs_pkey here and looks for each
	 * pending instance's start task through tasks_instance_idx itself
	 * (maintenance.c): as a NOT EXISTS, planned while the queue was
	 * empty, the probe was a scan of all of tasks_run_at_idx per row
	 * (batches of 7 s with 80,000 starts queued, test/t/047).
	 */
	[STMT_START_SWEEP] =
		{"a range of runs rows after $1",
		 0, REACH_ALL,
		 "SELECT r.instance_id, r.status FROM df_internal.runs r "
		 "WHERE r.instance_id OPERATOR(pg_catalog.>) $1::varchar "
		 "ORDER BY r.instance_id LIMIT $2",
		 2,
		 {T, INT4OID},
		 true},
	[STMT_START_TASKS] =
		{"a start task for each of the instances in $1",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) "
		 "SELECT x, x, 'start' FROM pg_catalog.unnest($1::pg_catalog.text[]) x "
		 "RETURNING id",
		 1,
		 {TA}},
	[STMT_STALE_READY] =
		{"how many tasks (not HTTP calls nor external ones) and pending starts have been ready longer than $1 seconds",
		 FLUSH_TASKS, REACH_ALL,
		 "SELECT (SELECT count(*) FROM df_internal.tasks "
		 "  WHERE kind OPERATOR(pg_catalog.<>) 'http' "
		 "  AND kind OPERATOR(pg_catalog.<>) 'external' "
		 "  AND run_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) "
		 "   pg_catalog.make_interval(secs => $1::int))), "
		 " (SELECT count(*) FROM df_internal.runs "
		 "  WHERE status OPERATOR(pg_catalog.=) 'pending' "
		 "  AND created_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) "
		 "   pg_catalog.make_interval(secs => $1::int)))",
		 1,
		 {T},
		 true},
	/* the hold of a restore (restore_hold.c) */
	[STMT_RESTORE_HELD] =
		{"whether a restore holds the workers off",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.restore_hold LIMIT 1",
		 0,
		 {0}},
	[STMT_RESTORE_HOLD_ADD] =
		{"the hold row of a restore's table",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.restore_hold (table_name) VALUES ($1) "
		 "ON CONFLICT (table_name) DO NOTHING",
		 1,
		 {T}},
};

#undef T
#undef TA

static PgdStmtPlan plans[STMT_COUNT];

/*
 * The one way the store runs a statement: the held writes its entry names
 * first, in the transaction buffer's order (txn_buffer.c), then its kept
 * plan, prepared at its first run.  Returns SPI_processed; the rows are in
 * SPI_tuptable.
 */
int
store_exec(const PgdStmtDef *def, PgdStmtPlan *p, const Datum *values,
		   const char *nulls)
{
	int rc;

	if (def->flush_first != 0)
		store_txn_write(def->flush_first);
	if (def->runs_first)
	{
		/* the OID looked up once per transaction (an update may replace it) */
		static Oid				  runs_relid = InvalidOid;
		static LocalTransactionId runs_lxid = InvalidLocalTransactionId;

		if (runs_lxid != PGD_MY_LXID)
		{
			runs_relid = pgd_internal_relid("runs");
			runs_lxid = PGD_MY_LXID;
		}
		table_close(table_open(runs_relid, AccessShareLock), NoLock);
	}
	if (p->plan == NULL)
	{
		SPIPlanPtr plan =
			SPI_prepare_cursor(def->sql, def->nargs, (Oid *) def->types,
							   CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "could not prepare the engine statement \"%s\": %s",
				 def->name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR,
				 "could not keep the plan of the engine statement \"%s\"",
				 def->name);
		p->plan = plan;
	}
	/*
	 * Every engine statement finds its rows by a key (docs/design/store.md
	 * §1); its plan is made without sequential scans, so that one made
	 * while the tables are empty stays right as they fill
	 * (pgd_spi_run_kept).
	 */
	rc = pgd_spi_run_kept(p->plan, &p->planned, values, nulls);
	if (rc < 0)
		elog(ERROR, "engine statement \"%s\" failed: %s", def->name,
			 SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/* store_exec with text arguments only (a NULL pointer is SQL NULL). */
int
store_exec_text(const PgdStmtDef *def, PgdStmtPlan *p, int nargs,
				const char *const *args)
{
	Datum values[PGD_STMT_MAX_ARGS];
	char  nulls[PGD_STMT_MAX_ARGS];

	Assert(nargs == def->nargs && nargs <= PGD_STMT_MAX_ARGS);
	for (int i = 0; i < nargs; i++)
	{
		values[i] = args[i] ? pgd_text_datum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	return store_exec(def, p, values, nulls);
}

/* Statement s of the table above. */
int
store_run(PgdStmt s, const Datum *values, const char *nulls)
{
	return store_exec(&stmts[s], &plans[s], values, nulls);
}

int
store_run_text(PgdStmt s, int nargs, const char *const *args)
{
	return store_exec_text(&stmts[s], &plans[s], nargs, args);
}

char *
store_get_string(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

Datum
store_get_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col,
						 isnull);
}

Datum
store_text_array(int n, const char *const *items)
{
	Datum *elems = palloc(sizeof(Datum) * Max(n, 1));
	bool  *nulls = palloc(sizeof(bool) * Max(n, 1));
	int	   dims[1] = {n};
	int	   lbs[1] = {1};
	int	   i;

	for (i = 0; i < n; i++)
	{
		nulls[i] = items[i] == NULL;
		elems[i] = nulls[i] ? (Datum) 0 : pgd_text_datum(items[i]);
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false,
											  TYPALIGN_INT));
}
