/*-------------------------------------------------------------------------
 *
 * external_tasks.c
 *	  The SQL interface of external workers (docs/guides/external-workers.md):
 *	  df.claim_tasks, df.heartbeat_task, df.complete_task and df.fail_task.
 *
 * A worker is any session of a role granted the task's queue
 * (df.grant_worker; superusers may work on every queue).  The functions
 * check the grant, then run the store's fixed statements and the engine
 * with the bootstrap superuser's rights: the worker sees nothing of an
 * instance but the tasks it is handed.  A task the caller may not work on
 * and a task that does not exist get the same error.
 *
 * The answers:
 *	 heartbeat	'ok' (the lease runs on), 'lost' (the lease expired or
 *				another attempt holds the task) or 'cancel_requested' (the
 *				node is no longer wanted: the instance was cancelled, a
 *				TIMEOUT fired, a RACE was lost, the attempt is past the
 *				node's timeout_seconds);
 *	 complete,	'ok', 'stale' (not the current lease: nothing changes) or
 *	 fail		'already' (the task had ended).
 * A complete or fail with the current token after the lease ran out, but
 * before the sweep took the task back, still counts.
 *
 * Locks: a claim locks the external tasks it takes (SKIP LOCKED); a
 * heartbeat, complete or fail locks its one row (waiting: only these
 * functions and the sweep hold it, each briefly), then an end takes the
 * instance's runs row (store/external_tasks.c, orchestration/task_node.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/spi.h"
#include "graph/task_config.h"
#include "orchestration/orchestration.h"
#include "store/external_tasks.h"
#include "store/store.h"

PG_FUNCTION_INFO_V1(pgd_claim_tasks);
PG_FUNCTION_INFO_V1(pgd_heartbeat_task);
PG_FUNCTION_INFO_V1(pgd_complete_task);
PG_FUNCTION_INFO_V1(pgd_fail_task);

#define WORKER_ID_MAX_LEN 200
#define MAX_CLAIM		  1000
#define MAX_LEASE_S		  86400.0
#define MAX_ERROR_LEN	  (64 * 1024)
#define CLAIM_SWEEP		  16 /* expired leases of the queue taken back first */
#define CLAIM_SWEEP_MS	  100 /* ... by a session's claims at most this often */
#define MAX_SWEPT_QUEUES  1000

/*
 * When this session's claims last took back the expired leases of each queue
 * (claim_sweep_due).  Process-local.
 */
typedef struct SweptQueue
{
	char		queue[DF_TASK_QUEUE_MAX_LEN + 1];
	TimestampTz at;
} SweptQueue;

static HTAB *swept_queues = NULL;

/*
 * Should this claim take back the queue's expired leases first?  Not when
 * this session's claims of the queue did less than CLAIM_SWEEP_MS ago.  The
 * sweep reads every index entry of a leased task that no vacuum has removed
 * yet: a worker that claims hundreds of times a second over a queue of
 * thousands of tasks spent most of its claims' time in it.  A lease is a
 * second or more, so an expired one waits at most a tenth of a second more
 * for a claim of its queue (and the engine's maintenance takes it back
 * within a second in any case).
 */
static bool
claim_sweep_due(const char *queue)
{
	TimestampTz now = GetCurrentTimestamp();
	SweptQueue *q;
	bool		found;

	if (swept_queues == NULL ||
		hash_get_num_entries(swept_queues) >= MAX_SWEPT_QUEUES)
	{
		HASHCTL ctl;

		if (swept_queues != NULL)
			hash_destroy(swept_queues);
		ctl.keysize = DF_TASK_QUEUE_MAX_LEN + 1;
		ctl.entrysize = sizeof(SweptQueue);
		ctl.hcxt = TopMemoryContext;
		swept_queues = hash_create("pg_durable swept queues", 16, &ctl,
								   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	q = hash_search(swept_queues, queue, HASH_ENTER, &found);
	if (found && !TimestampDifferenceExceeds(q->at, now, CLAIM_SWEEP_MS))
		return false;
	q->at = now;
	return true;
}

static void
require(FunctionCallInfo fcinfo, int argno, const char *fn, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: %s cannot be NULL", fn, what)));
}

static bool
may_work_on(Oid caller, const char *queue)
{
	return superuser_arg(caller) || pgd_store_worker_may(caller, queue);
}

static void
refuse_queue(const char *fn, const char *queue)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s: permission denied for task queue \"%s\"", fn, queue),
			 errhint("An administrator grants a role the queues it may work on with df.grant_worker(role, queue_pattern).")));
}

/* Seconds of an interval argument, within (0, MAX_LEASE_S]. */
static double
interval_seconds(Interval *iv, const char *fn, const char *what)
{
	double s = (double) iv->time / USECS_PER_SEC +
		(double) iv->day * SECS_PER_DAY +
		(double) iv->month * DAYS_PER_MONTH * SECS_PER_DAY;

	if (s <= 0 || s > MAX_LEASE_S)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s must be more than 0 and at most 1 day", fn,
						what)));
	return s;
}

/*
 * df.claim_tasks(queue, worker_id, max_tasks DEFAULT 1, lease DEFAULT
 * '30 seconds'): the ready tasks of queue, oldest first, each leased to
 * the caller.
 */
Datum
pgd_claim_tasks(PG_FUNCTION_ARGS)
{
	const char	   *fn = "df.claim_tasks";
	ReturnSetInfo  *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char		   *queue;
	char		   *worker;
	const char	   *problem;
	int				max;
	double			lease_s;
	PgdCaller		save;
	PgdClaimedTask *tasks;
	int				n;
	AttInMetadata  *meta;

	require(fcinfo, 0, fn, "queue");
	require(fcinfo, 1, fn, "worker_id");
	require(fcinfo, 2, fn, "max_tasks");
	require(fcinfo, 3, fn, "lease");
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if ((problem = df_task_queue_problem(queue)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s", fn, problem)));
	worker = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (worker[0] == '\0' || strlen(worker) > WORKER_ID_MAX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: worker_id must be 1 to %d bytes long", fn,
						WORKER_ID_MAX_LEN)));
	max = PG_GETARG_INT32(2);
	if (max < 1 || max > MAX_CLAIM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: max_tasks must be between 1 and %d", fn,
						MAX_CLAIM)));
	lease_s = interval_seconds(PG_GETARG_INTERVAL_P(3), fn, "lease");

	InitMaterializedSRF(fcinfo, 0);
	meta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	pgd_engine_rights(&save);
	if (!may_work_on(save.userid, queue))
		refuse_queue(fn, queue);
	/* a lease of this queue that ran out is taken back first */
	if (claim_sweep_due(queue))
		(void) pgd_task_sweep(queue, CLAIM_SWEEP);
	n = pgd_store_external_claim(queue, worker, max, lease_s, &tasks);
	for (int i = 0; i < n; i++)
	{
		char *values[8];

		values[0] = tasks[i].task_id;
		values[1] = tasks[i].lease_token;
		values[2] = tasks[i].attempt;
		values[3] = tasks[i].instance_id;
		values[4] = tasks[i].payload;
		values[5] = tasks[i].deadline;
		values[6] = tasks[i].idempotency_key;
		values[7] = tasks[i].traceparent;
		tuplestore_puttuple(rsinfo->setResult,
							BuildTupleFromCStrings(meta, values));
	}
	pgd_caller_again(&save);
	return (Datum) 0;
}

/* The task's row locked, once the caller may work on its queue. */
static void
lock_task(const char *fn, int64 task_id, PgdCaller *save, PgdExternalTask *t)
{
	if (!pgd_store_external_lock(task_id, t) ||
		!may_work_on(save->userid, t->queue))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s: there is no task %lld in a queue you may work on",
						fn, (long long) task_id),
				 errhint("An administrator grants a role the queues it may work on with df.grant_worker(role, queue_pattern).")));
}

static bool
is_ended(const PgdExternalTask *t)
{
	return t->state == PGD_EXT_COMPLETED || t->state == PGD_EXT_FAILED ||
		t->state == PGD_EXT_CANCELLED;
}

static bool
holds_lease(const PgdExternalTask *t, const char *token)
{
	return t->state == PGD_EXT_LEASED && t->lease_token != NULL &&
		strcmp(t->lease_token, token) == 0;
}

/* df.heartbeat_task(task_id, lease_token, extend DEFAULT NULL) */
Datum
pgd_heartbeat_task(PG_FUNCTION_ARGS)
{
	const char	   *fn = "df.heartbeat_task";
	int64			task_id;
	char		   *token;
	double			extend_s = 0;
	const char	   *answer;
	PgdCaller		save;
	PgdExternalTask t;

	require(fcinfo, 0, fn, "task_id");
	require(fcinfo, 1, fn, "lease_token");
	task_id = PG_GETARG_INT64(0);
	token = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (!PG_ARGISNULL(2))
		extend_s = interval_seconds(PG_GETARG_INTERVAL_P(2), fn, "extend");

	pgd_engine_rights(&save);
	lock_task(fn, task_id, &save, &t);
	if (t.state == PGD_EXT_CANCELLED ||
		(holds_lease(&t, token) && (!t.anchored || t.past_deadline)))
		answer = "cancel_requested";
	else if (!holds_lease(&t, token) || !t.lease_live)
		answer = "lost";
	else
	{
		pgd_store_external_extend(task_id, extend_s);
		answer = "ok";
	}
	pgd_caller_again(&save);
	PG_RETURN_TEXT_P(cstring_to_text(answer));
}

/* The end of a task with outcome: 'ok', 'stale' or 'already'. */
static const char *
end_task(const char *fn, int64 task_id, const char *token, PgdOutcome outcome)
{
	PgdCaller		save;
	PgdExternalTask t;
	const char	   *answer = "ok";

	pgd_engine_rights(&save);
	lock_task(fn, task_id, &save, &t);
	if (is_ended(&t))
		answer = "already";
	else if (!holds_lease(&t, token))
		answer = "stale";
	else if (!t.anchored)
	{
		/* its node was abandoned while the worker ran it */
		pgd_store_external_end(task_id, PGD_EXT_CANCELLED);
		answer = "already";
	}
	else if (pgd_task_node_end(&t, outcome) == PGD_TASK_END_NOT_LIVE)
		answer = "already";
	pgd_caller_again(&save);
	return answer;
}

/* df.complete_task(task_id, lease_token, result DEFAULT '{}') */
Datum
pgd_complete_task(PG_FUNCTION_ARGS)
{
	const char *fn = "df.complete_task";
	PgdOutcome	o = {0};
	char	   *result;

	require(fcinfo, 0, fn, "task_id");
	require(fcinfo, 1, fn, "lease_token");
	require(fcinfo, 2, fn, "result");
	result = DatumGetCString(DirectFunctionCall1(jsonb_out,
												 PG_GETARG_DATUM(2)));
	if (strlen(result) > PGD_TASK_MAX_RESULT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s: the result is %zu bytes, more than %d", fn,
						strlen(result), PGD_TASK_MAX_RESULT),
				 errhint("Store large results elsewhere and complete the task with a reference to them.")));
	o.ok = true;
	o.result = result;
	PG_RETURN_TEXT_P(cstring_to_text(end_task(fn, PG_GETARG_INT64(0),
											  text_to_cstring(PG_GETARG_TEXT_PP(1)),
											  o)));
}

/* df.fail_task(task_id, lease_token, error, retryable DEFAULT true, code DEFAULT NULL) */
Datum
pgd_fail_task(PG_FUNCTION_ARGS)
{
	const char *fn = "df.fail_task";
	PgdOutcome	o = {0};
	char	   *error;

	require(fcinfo, 0, fn, "task_id");
	require(fcinfo, 1, fn, "lease_token");
	require(fcinfo, 2, fn, "error");
	require(fcinfo, 3, fn, "retryable");
	error = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strlen(error) > MAX_ERROR_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s: the error is %zu bytes, more than %d", fn,
						strlen(error), MAX_ERROR_LEN)));
	o.ok = false;
	o.result = error;
	o.code = PG_ARGISNULL(4) ? pstrdup("task_failed") :
							   text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (o.code[0] == '\0' || strlen(o.code) > 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: code must be 1 to 200 bytes long", fn)));
	o.final = !PG_GETARG_BOOL(3);
	PG_RETURN_TEXT_P(cstring_to_text(end_task(fn, PG_GETARG_INT64(0),
											  text_to_cstring(PG_GETARG_TEXT_PP(1)),
											  o)));
}
