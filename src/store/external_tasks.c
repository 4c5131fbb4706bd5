/*-------------------------------------------------------------------------
 *
 * external_tasks.c
 *	  The engine store's functions for external tasks: the executions of
 *	  TASK nodes that workers outside the server claim, heartbeat and end
 *	  over SQL (docs/guides/external-workers.md; external_tasks.h).
 *
 * An execution of a TASK node is two rows.  Its df_internal.tasks row
 * (kind 'external') is the engine's: the queue scans pass over it, a
 * df.retry keeps it for the next attempt with run_at at the back-off's
 * end (as for an HTTP step), and whatever abandons the node (df.cancel, a
 * TIMEOUT, a lost RACE, the end of the instance) deletes it, as it deletes
 * any task.  Its df_internal.external_tasks row, with the same id, is the
 * workers': the queue, the payload, the lease (token, owner, until), the
 * attempt, the deadline.  A task is offered while its row is 'ready' and
 * its tasks row is due; a worker's heartbeat that finds the tasks row gone
 * answers 'cancel_requested'.  Ended rows stay a while, so that a second
 * completion is answered 'already', and are forgotten by maintenance.
 *
 * Each commit that makes tasks of a queue ready sends NOTIFY df_tasks with
 * the queue's name (transactional: a rollback sends nothing).
 *
 * Locks: claims and the maintenance sweeps lock external_tasks rows with
 * SKIP LOCKED; a heartbeat or an end locks its one row, waiting (only these
 * functions lock these rows, each briefly, and none of them then waits for
 * a lock the engine holds while it waits for one of them: the engine's own
 * deletes of tasks rows skip locked rows, docs/design/architecture.md §5
 * rule 1).  The caller of an end holds the row before the instance's runs
 * row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "store/external_tasks.h"
#include "store/store.h"
#include "store/store_internal.h"

#define T TEXTOID

enum
{
	EXT_ADD,
	EXT_RETRY_AT,
	EXT_CLAIM,
	EXT_LOCK,
	EXT_EXTEND,
	EXT_END,
	EXT_REOFFER,
	EXT_EXPIRED,
	EXT_EXPIRED_OF_QUEUE,
	EXT_FORGET,
	EXT_WORKER_MAY,
	EXT_STMTS
};

static const PgdStmtDef ext_stmts[EXT_STMTS] = {
	[EXT_ADD] =
		{"a TASK node's execution: its task and its external task",
		 0, REACH_INSTANCE,
		 "WITH t AS (INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
		 " VALUES ($1, $2, $3, 'external') RETURNING id) "
		 "INSERT INTO df_internal.external_tasks (task_id, instance_id, node_id, scope, "
		 "submitted_by, queue, payload, timeout_seconds, heartbeat_seconds, idempotency_key, "
		 "traceparent) "
		 "SELECT t.id, $1, $2, $3, $4::pg_catalog.oid, $5, $6::pg_catalog.jsonb, "
		 "NULLIF($7::pg_catalog.int4, 0), NULLIF($8::pg_catalog.int4, 0), $9, $10 FROM t "
		 "RETURNING task_id",
		 10,
		 {T, T, T, T, T, T, T, T, T, T}},
	/* the same rows, so the next attempt keeps the idempotency key */
	[EXT_RETRY_AT] =
		{"a TASK's next attempt, due later",
		 FLUSH_TASKS, REACH_INSTANCE,
		 "WITH t AS (UPDATE df_internal.tasks SET run_at = $4 "
		 " WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id FROM df_internal.tasks "
		 "  WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "  AND scope OPERATOR(pg_catalog.=) $3 AND kind OPERATOR(pg_catalog.=) 'external' "
		 "  FOR UPDATE SKIP LOCKED)) RETURNING id) "
		 "UPDATE df_internal.external_tasks x SET state = 'ready', lease_token = NULL, "
		 "lease_until = NULL, deadline = NULL, ready_at = $4 "
		 "FROM t WHERE x.task_id OPERATOR(pg_catalog.=) t.id "
		 "RETURNING x.task_id, x.queue",
		 4,
		 {T, T, T, TIMESTAMPTZOID}},
	/* oldest first; a retry's task is offered once its tasks row is due */
	[EXT_CLAIM] =
		{"lease ready tasks of a queue",
		 FLUSH_TASKS, REACH_ALL,
		 "WITH c AS (SELECT x.task_id FROM df_internal.external_tasks x "
		 " WHERE x.queue OPERATOR(pg_catalog.=) $1 AND x.state OPERATOR(pg_catalog.=) 'ready' "
		 " AND x.ready_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		 " AND EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.id OPERATOR(pg_catalog.=) x.task_id "
		 "  AND t.run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()) "
		 " ORDER BY x.ready_at, x.task_id LIMIT $3::pg_catalog.int4 FOR UPDATE OF x SKIP LOCKED) "
		 "UPDATE df_internal.external_tasks x SET state = 'leased', "
		 "attempt = x.attempt OPERATOR(pg_catalog.+) 1, worker = $2, "
		 "lease_token = pg_catalog.gen_random_uuid(), "
		 "lease_seconds = LEAST($4::pg_catalog.float8, COALESCE(x.heartbeat_seconds, $4::pg_catalog.float8)), "
		 "lease_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval("
		 " secs => LEAST($4::pg_catalog.float8, COALESCE(x.heartbeat_seconds, $4::pg_catalog.float8))), "
		 "deadline = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
		 " pg_catalog.make_interval(secs => x.timeout_seconds) "
		 "FROM c WHERE x.task_id OPERATOR(pg_catalog.=) c.task_id "
		 "RETURNING x.task_id, x.lease_token::text, x.attempt, x.instance_id::text, "
		 "x.payload::text, x.deadline::text, x.idempotency_key, x.traceparent",
		 4,
		 {T, T, T, T}},
	[EXT_LOCK] =
		{"an external task, locked",
		 FLUSH_TASKS, REACH_TASK,
		 "SELECT x.queue, x.instance_id::text, x.node_id::text, x.scope, x.state, x.attempt, "
		 "x.lease_token::text, x.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp(), "
		 "COALESCE(x.deadline OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp(), false), "
		 "EXISTS (SELECT 1 FROM df_internal.tasks t WHERE t.id OPERATOR(pg_catalog.=) x.task_id), "
		 "COALESCE(x.heartbeat_seconds, 0), COALESCE(x.timeout_seconds, 0) "
		 "FROM df_internal.external_tasks x WHERE x.task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
		 "FOR UPDATE OF x",
		 1,
		 {T}},
	[EXT_EXTEND] =
		{"a lease extended by a heartbeat",
		 0, REACH_TASK,
		 "UPDATE df_internal.external_tasks SET lease_until = pg_catalog.clock_timestamp() "
		 "OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => COALESCE($2::pg_catalog.float8, "
		 "lease_seconds)), lease_seconds = COALESCE($2::pg_catalog.float8, lease_seconds) "
		 "WHERE task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8",
		 2,
		 {T, T}},
	[EXT_END] =
		{"an external task ended",
		 0, REACH_TASK,
		 "UPDATE df_internal.external_tasks SET state = $2, ended_at = pg_catalog.clock_timestamp(), "
		 "lease_until = NULL WHERE task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8",
		 2,
		 {T, T}},
	[EXT_REOFFER] =
		{"an external task offered again after its lease expired",
		 0, REACH_TASK,
		 "UPDATE df_internal.external_tasks SET state = 'ready', lease_token = NULL, "
		 "lease_until = NULL, deadline = NULL, ready_at = pg_catalog.clock_timestamp(), "
		 "lease_expiries = lease_expiries OPERATOR(pg_catalog.+) 1 "
		 "WHERE task_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 RETURNING queue",
		 1,
		 {T}},
	[EXT_EXPIRED] =
		{"leased external tasks past their lease or deadline",
		 0, REACH_ALL,
		 "SELECT task_id FROM df_internal.external_tasks "
		 "WHERE state OPERATOR(pg_catalog.=) 'leased' "
		 "AND (lease_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		 " OR deadline OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()) "
		 "ORDER BY task_id LIMIT $1::pg_catalog.int4 FOR UPDATE SKIP LOCKED",
		 1,
		 {T}},
	[EXT_EXPIRED_OF_QUEUE] =
		{"leased external tasks of a queue past their lease or deadline",
		 0, REACH_ALL,
		 "SELECT task_id FROM df_internal.external_tasks "
		 "WHERE state OPERATOR(pg_catalog.=) 'leased' AND queue OPERATOR(pg_catalog.=) $2 "
		 "AND (lease_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
		 " OR deadline OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()) "
		 "ORDER BY task_id LIMIT $1::pg_catalog.int4 FOR UPDATE SKIP LOCKED",
		 2,
		 {T, T}},
	/*
	 * Ended rows after keep seconds; a row whose tasks row is gone (its
	 * node abandoned) once no lease on it runs any more.
	 */
	[EXT_FORGET] =
		{"external tasks nobody asks about any more",
		 FLUSH_TASKS, REACH_ALL,
		 "DELETE FROM df_internal.external_tasks WHERE task_id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT x.task_id FROM df_internal.external_tasks x "
		 " WHERE (x.ended_at OPERATOR(pg_catalog.<) (pg_catalog.clock_timestamp() "
		 "  OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $1::pg_catalog.float8))) "
		 " OR (x.ended_at IS NULL AND (x.lease_until IS NULL "
		 "  OR x.lease_until OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp()) "
		 "  AND x.created_at OPERATOR(pg_catalog.<) (pg_catalog.clock_timestamp() "
		 "   OPERATOR(pg_catalog.-) '10 s'::pg_catalog.interval) "
		 "  AND NOT EXISTS (SELECT 1 FROM df_internal.tasks t "
		 "   WHERE t.id OPERATOR(pg_catalog.=) x.task_id)) "
		 " LIMIT $2::pg_catalog.int4 FOR UPDATE SKIP LOCKED))",
		 2,
		 {T, T}},
	[EXT_WORKER_MAY] =
		{"a role's grant on a queue",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.worker_grants g "
		 "WHERE $2 OPERATOR(pg_catalog.~~) g.like_pattern "
		 "AND pg_catalog.pg_has_role($1::pg_catalog.oid, g.role, 'MEMBER') LIMIT 1",
		 2,
		 {T, T}},
};

static PgdStmtPlan ext_plans[EXT_STMTS];

#define EXT_RUN(s, ...) STORE_EXEC(ext_stmts, ext_plans, s, __VA_ARGS__)

static const char *const state_names[] = {
	[PGD_EXT_READY] = "ready",
	[PGD_EXT_LEASED] = "leased",
	[PGD_EXT_COMPLETED] = "completed",
	[PGD_EXT_FAILED] = "failed",
	[PGD_EXT_CANCELLED] = "cancelled",
};

const char *
pgd_external_state_name(PgdExternalState s)
{
	return state_names[s];
}

static PgdExternalState
state_of(const char *name)
{
	for (int i = 0; i < lengthof(state_names); i++)
		if (strcmp(state_names[i], name) == 0)
			return (PgdExternalState) i;
	elog(ERROR, "unknown external task state \"%s\"", name);
	return PGD_EXT_READY; /* keep the compiler quiet */
}

static char *
num(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

static char *
secs(double s)
{
	return psprintf("%.6f", s);
}

/* The workers of queue learn at commit that it has ready tasks. */
static void
notify_queue(const char *queue)
{
	Async_Notify("df_tasks", queue);
}

int64
pgd_store_external_add(const char *instance_id, const char *node_id,
					   const char *scope, Oid submitted_by, const char *queue,
					   const char *payload, int timeout_s, int heartbeat_s,
					   const char *idempotency_key, const char *traceparent)
{
	int64 id;

	EXT_RUN(EXT_ADD, instance_id, node_id, scope,
			psprintf("%u", submitted_by), queue, payload,
			psprintf("%d", timeout_s), psprintf("%d", heartbeat_s),
			idempotency_key, traceparent);
	id = strtoll(store_get_string(0, 1), NULL, 10);
	notify_queue(queue);
	return id;
}

int64
pgd_store_external_retry_at(const char *instance_id, const char *node_id,
							const char *scope, TimestampTz at)
{
	Datum values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	if (store_exec(&ext_stmts[EXT_RETRY_AT], &ext_plans[EXT_RETRY_AT], values,
				   NULL) == 0)
		return 0;
	notify_queue(store_get_string(0, 2));
	return strtoll(store_get_string(0, 1), NULL, 10);
}

int
pgd_store_external_claim(const char *queue, const char *worker, int max,
						 double lease_s, PgdClaimedTask **out)
{
	int n = EXT_RUN(EXT_CLAIM, queue, worker, psprintf("%d", max),
					secs(lease_s));

	*out = palloc0(sizeof(PgdClaimedTask) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		PgdClaimedTask *c = &(*out)[i];

		c->task_id = store_get_string(i, 1);
		c->lease_token = store_get_string(i, 2);
		c->attempt = store_get_string(i, 3);
		c->instance_id = store_get_string(i, 4);
		c->payload = store_get_string(i, 5);
		c->deadline = store_get_string(i, 6);
		c->idempotency_key = store_get_string(i, 7);
		c->traceparent = store_get_string(i, 8);
	}
	return n;
}

bool
pgd_store_external_lock(int64 task_id, PgdExternalTask *t)
{
	memset(t, 0, sizeof(*t));
	if (EXT_RUN(EXT_LOCK, num(task_id)) == 0)
		return false;
	t->task_id = task_id;
	t->queue = store_get_string(0, 1);
	t->instance_id = store_get_string(0, 2);
	t->node_id = store_get_string(0, 3);
	t->scope = store_get_string(0, 4);
	t->state = state_of(store_get_string(0, 5));
	t->attempt = atoi(store_get_string(0, 6));
	t->lease_token = store_get_string(0, 7);
	t->lease_live = store_get_string(0, 8) != NULL &&
		strcmp(store_get_string(0, 8), "t") == 0;
	t->past_deadline = strcmp(store_get_string(0, 9), "t") == 0;
	t->anchored = strcmp(store_get_string(0, 10), "t") == 0;
	t->heartbeat_s = atoi(store_get_string(0, 11));
	t->timeout_s = atoi(store_get_string(0, 12));
	return true;
}

void
pgd_store_external_extend(int64 task_id, double extend_s)
{
	EXT_RUN(EXT_EXTEND, num(task_id), extend_s > 0 ? secs(extend_s) : NULL);
}

void
pgd_store_external_end(int64 task_id, PgdExternalState s)
{
	EXT_RUN(EXT_END, num(task_id), pgd_external_state_name(s));
}

void
pgd_store_external_reoffer(int64 task_id)
{
	if (EXT_RUN(EXT_REOFFER, num(task_id)) > 0)
		notify_queue(store_get_string(0, 1));
}

int
pgd_store_external_expired(const char *queue, int max, int64 **ids)
{
	int n = queue ? EXT_RUN(EXT_EXPIRED_OF_QUEUE, psprintf("%d", max), queue) :
					EXT_RUN(EXT_EXPIRED, psprintf("%d", max));

	*ids = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
		(*ids)[i] = strtoll(store_get_string(i, 1), NULL, 10);
	return n;
}

int
pgd_store_external_forget(double keep_s, int max)
{
	return EXT_RUN(EXT_FORGET, secs(keep_s), psprintf("%d", max));
}

bool
pgd_store_worker_may(Oid role, const char *queue)
{
	return EXT_RUN(EXT_WORKER_MAY, psprintf("%u", role), queue) > 0;
}
