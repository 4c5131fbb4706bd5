/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *	  What executor 0 runs between its tasks: the heartbeat (every
 *	  HEARTBEAT_MS), and retention and reconciliation every
 *	  pg_durable.reconcile_interval seconds (0 = never).
 *
 * The heartbeat marks the engine ready (a new df._worker_epoch row, once
 * per start and after the extension was made again) and then updates
 * that row.  It runs outside the executor loop's handler, so it has one
 * of its own (run_guarded): a cancel there (a late one of wake.c's,
 * pg_cancel_backend() while a session holds the row) or a lock_timeout
 * would otherwise end the executor.
 *
 * Retention removes finished instances (df.instances, df.nodes and their
 * events) that finished more than pg_durable.retention_days ago, or that
 * rank beyond the newest PGD_KEEP_FINISHED finished ones (ranked by
 * COALESCE(completed_at, created_at), as the reference does), in batches of
 * PGD_RETENTION_BATCH instances per transaction, so that no lock is held
 * for long.  Live instances are never touched.  Then the df.limit keys
 * that nobody holds or waits for, with a full bucket, are forgotten
 * (store/limit_slots.c; locked with SKIP LOCKED).
 *
 * Reconciliation reads df_internal.check_rows() (the body of df.check(),
 * see the install script) and repairs what is safe to repair, each repair
 * in its own transaction under the instance's runs lock, after checking
 * again under that lock that the problem is still there:
 *	 stranded_step			  a running SQL/HTTP leaf without a task gets a new
 *							  step task (as if its predecessor had just
 *							  enqueued it);
 *	 missing_timer			  a running SLEEP gets its timer back, due when the
 *							  node started plus its seconds; a WAIT_SCHEDULE
 *							  the next cron tick after it started;
 *	 task_of_finished_instance tasks of a finished or missing instance are
 *							  deleted (SKIP LOCKED: a claimed one is left to
 *							  the step that holds it, which discards it);
 *	 orphan_run				  the engine state of a finished or missing
 *							  instance is removed;
 *	 limit_*				  a limit's slot or queue place of a node that
 *							  ended goes and its key's queue moves on, a
 *							  stuck queue is pumped, a lost admission gets
 *							  its timer (store/limit_slots.c).
 * Everything else is logged (LOG, at most PGD_RECONCILE_LOG_MAX lines per
 * pass, no step results: the details name nodes, scopes and counts only,
 * and for repeated_engine_errors the engine's own error, which the
 * executor logged already).
 *
 * The external task sweep (every TASK_SWEEP_MS) takes back the leases of
 * external workers that ran out, and forgets ended external tasks after
 * TASK_KEEP_ENDED_S (orchestration/task_node.c).
 *
 * Locks: the extension object (share, never waiting; see unit.c); retention
 * locks the df.instances rows it deletes (SKIP LOCKED); each repair locks one
 * runs row (docs/design/architecture.md §5 rule 1) and, for deleted tasks,
 * only unclaimed task rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "core/settings.h"
#include "core/unit.h"
#include "common/spi.h"
#include "engine/apply.h"
#include "engine/inbox_record.h"
#include "orchestration/orchestration.h"
#include "store/external_tasks.h"
#include "store/store.h"
#include "core/wake.h"
#include "worker/executor.h"
#include "worker/worker.h"

#define PGD_KEEP_FINISHED	10000
#define PGD_RETENTION_BATCH 500
#define PGD_RETENTION_MAX_BATCHES \
	40 /* per pass: the executor has steps to run */
#define PGD_RECONCILE_LOG_MAX 10
#define HEARTBEAT_MS		  5000L
#define TASK_SWEEP_MS		  1000L
#define TASK_SWEEP_BATCH	  64
#define TASK_KEEP_ENDED_S	  3600.0 /* a second completion is 'already' */

static TimestampTz last_reconcile = 0;
static char *epoch_id = NULL; /* the df._worker_epoch row, once announced */
static TimestampTz last_heartbeat = 0;
static TimestampTz last_task_sweep = 0;

/* Mark the engine ready and (re)write the heartbeat row. */
static void
announce_ready(void)
{
	if (!pgd_begin_engine_unit("pg_durable: announcing readiness"))
		return; /* DROP or ALTER EXTENSION under way: the heartbeat retries */
	epoch_id =
		MemoryContextStrdup(TopMemoryContext, pgd_store_announce_ready());
	pgd_end_unit();
	last_heartbeat = GetCurrentTimestamp();
}

static void
heartbeat(void)
{
	if (!TimestampDifferenceExceeds(last_heartbeat, GetCurrentTimestamp(),
									HEARTBEAT_MS))
		return;
	if (epoch_id == NULL)
	{
		announce_ready();
		return;
	}
	if (!pgd_begin_engine_unit("pg_durable: heartbeat"))
		return;
	if (!pgd_store_heartbeat(epoch_id))
		epoch_id =
			NULL; /* the extension was recreated: announce again below */
	pgd_end_unit();
	last_heartbeat = GetCurrentTimestamp();
	if (epoch_id == NULL)
		announce_ready();
}

/*
 * Run fn, the heartbeat or the announcement: an error rolls its unit back
 * (at LOG for a cancel or a lost lock race, pgd_end_failed_unit)
 * and the heartbeat tries again after HEARTBEAT_MS.
 */
static void
run_guarded(void (*fn)(void))
{
	MemoryContext old = CurrentMemoryContext;

	PG_TRY();
	{
		fn();
	}
	PG_CATCH();
	{
		ErrorData *edata;
		int		   code;

		MemoryContextSwitchTo(old);
		edata = CopyErrorData();
		code = edata->sqlerrcode;
		FreeErrorData(edata);
		(void) pgd_end_failed_unit(old, code);
		last_heartbeat = GetCurrentTimestamp();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
}

void
pgd_announce_ready(void)
{
	epoch_id = NULL; /* an earlier one belongs to a dropped extension */
	run_guarded(announce_ready);
}

void
pgd_heartbeat_maybe(void)
{
	run_guarded(heartbeat);
}

/*
 * External tasks (orchestration/task_node.c): leases and deadlines that ran
 * out are taken back, and ended tasks nobody asks about any more are
 * forgotten, every TASK_SWEEP_MS.  A worker's claim takes back its own
 * queue's first; this covers a queue whose workers are all gone.
 */
static void
task_sweep(void)
{
	if (!TimestampDifferenceExceeds(last_task_sweep, GetCurrentTimestamp(),
									TASK_SWEEP_MS))
		return;
	last_task_sweep = GetCurrentTimestamp();
	if (!pgd_begin_engine_unit("pg_durable: external task sweep"))
		return;
	/* an older schema has no external tasks */
	if (pgd_internal_relation_exists("external_tasks"))
	{
		(void) pgd_task_sweep(NULL, TASK_SWEEP_BATCH);
		(void) pgd_store_external_forget(TASK_KEEP_ENDED_S, TASK_SWEEP_BATCH);
	}
	pgd_end_unit();
}

void
pgd_task_sweep_maybe(long *sleep_ms)
{
	run_guarded(task_sweep);
	*sleep_ms = Min(*sleep_ms, TASK_SWEEP_MS);
}

/* One batch of retention, in a transaction of its own; returns the number of instances removed. */
static int
retention_batch(void)
{
	int n;

	if (!pgd_begin_engine_unit("pg_durable: retention"))
		return 0;
	n = pgd_store_retention_batch(pgd_retention_days, PGD_KEEP_FINISHED,
								  PGD_RETENTION_BATCH);
	pgd_end_unit();
	return n;
}

/*
 * The events of the bus older than the retention: a
 * subscription consumed each of them in its publisher's transaction
 * (api/publish.c), so age is the only rule; their takes go with them.
 */
static void
event_retention(void)
{
	int n;

	if (!pgd_begin_engine_unit("pg_durable: event retention"))
		return;
	n = pgd_store_event_retention(pgd_retention_days);
	pgd_end_unit();
	if (n > 0)
		ereport(LOG, (errmsg("retention removed %d published events", n)));
}

/*
 * Run sweep in a unit of its own (named unit) when wake.c asked for it
 * (take) or an earlier run did not commit (*owed: an error leaves it owed,
 * and the next loop tries again).  True when it ran; *n is what it returned.
 */
static bool
sweep_when_asked(bool *owed, bool (*take)(void), const char *unit,
				 int (*sweep)(void), int *n)
{
	if (!*owed && !take())
		return false;
	*owed = true;
	if (!pgd_begin_engine_unit(unit))
		return false;
	*n = sweep();
	pgd_end_unit();
	*owed = false;
	return true;
}

/* the sweep a commit asked for, until one committed */
static bool sweep_owed = false;

bool
pgd_bus_sweep_maybe(void)
{
	int n;

	return sweep_when_asked(&sweep_owed, pgd_bus_sweep_take,
							"pg_durable: event sweep", pgd_store_event_sweep,
							&n);
}

/*
 * The start sweep wake.c asked for: a pass over df_internal.runs in id
 * order, one batch per call, until a batch reaches the end.  A request that
 * comes during a pass starts it again from the first id (a marker lost now
 * may be of an instance already passed).  An error leaves the batch owed
 * from where it was.
 */
static bool start_sweep_owed = false;
static char start_sweep_after[PGD_ID_LEN + 1] = "";

/*
 * Starts whose markers may be lost get start tasks
 * (pgd_store_start_sweep).  True when a batch ran.
 */
bool
pgd_start_sweep_maybe(void)
{
	char next[PGD_ID_LEN + 1];
	int	 n;
	bool asked = pgd_start_sweep_take();

	if (!asked && !start_sweep_owed)
		return false;
	if (asked)
		start_sweep_after[0] = '\0'; /* from the first id again */
	start_sweep_owed = true;
	if (!pgd_begin_engine_unit("pg_durable: start sweep"))
		return false;
	n = pgd_store_start_sweep(start_sweep_after, PGD_START_SWEEP_BATCH, next);
	pgd_end_unit();
	strlcpy(start_sweep_after, next, sizeof(start_sweep_after));
	start_sweep_owed = (next[0] != '\0');
	if (n > 0)
		ereport(DEBUG1,
				(errmsg_internal("the start sweep gave %d pending instances a start task",
								 n)));
	return true;
}

static void
run_retention(void)
{
	int total = 0;
	int b;

	for (b = 0; b < PGD_RETENTION_MAX_BATCHES; b++)
	{
		int n;

		CHECK_FOR_INTERRUPTS();
		n = retention_batch();
		total += n;
		if (n < PGD_RETENTION_BATCH)
			break;
	}
	if (total > 0)
		ereport(LOG,
				(errmsg("retention removed %d finished instances", total)));
	/* the df.limit keys nobody uses any more */
	if (pgd_begin_engine_unit("pg_durable: retention of limit keys"))
	{
		(void) pgd_store_limit_forget_idle(PGD_RETENTION_BATCH);
		pgd_end_unit();
	}
	event_retention();
}

/* Repair one problem; returns true if it was repaired. */
static bool
repair(const PgdProblem *p)
{
	if (strcmp(p->problem, "task_of_finished_instance") == 0)
	{
		pgd_store_drop_tasks_of_finished(p->instance_id);
		return true;
	}
	if (strcmp(p->problem, "orphan_run") == 0)
	{
		if (!pgd_store_lock_run(p->instance_id, NULL) ||
			!pgd_store_problem_still_there(p->instance_id, p->problem, NULL))
			return false;
		pgd_apply_end_instance(p->instance_id);
		return true;
	}
	if (strcmp(p->problem, "running_node_of_ended_instance") == 0)
	{
		/* gone with its runs row: nothing else writes its nodes */
		if (pgd_store_lock_run(p->instance_id, NULL))
			return false;
		pgd_store_cancel_running_nodes(p->instance_id);
		return true;
	}
	if (strcmp(p->problem, "inbox_of_ended_instance") == 0 ||
		(strcmp(p->problem, "inbox_without_apply") == 0 &&
		 !pgd_store_lock_run(p->instance_id, NULL)))
	{
		/* the instance ended: its nodes record the completions, which go */
		int recorded = pgd_inbox_record_ended(p->instance_id);

		return pgd_store_inbox_drop(p->instance_id) > 0 || recorded > 0;
	}
	if (strcmp(p->problem, "inbox_without_apply") == 0)
	{
		/* a new apply task */
		if (!pgd_store_problem_still_there(p->instance_id, p->problem, NULL))
			return false;
		pgd_store_inbox_restore_task(p->instance_id);
		return true;
	}
	if (strncmp(p->problem, "limit_", 6) == 0)
	{
		/* a live instance's nodes change only under its runs lock */
		if (p->node_id == NULL || p->scope == NULL)
			return false;
		(void) pgd_store_lock_run(p->instance_id, NULL);
		if (!pgd_store_problem_still_there(p->instance_id, p->problem,
										   p->node_id))
			return false;
		return pgd_store_limit_repair(p->instance_id, p->node_id, p->scope,
									  p->problem);
	}
	if (strcmp(p->problem, "stranded_step") == 0 ||
		strcmp(p->problem, "missing_timer") == 0)
	{
		if (p->node_id == NULL || p->scope == NULL ||
			!pgd_store_lock_run(p->instance_id, NULL) ||
			!pgd_store_problem_still_there(p->instance_id, p->problem,
										   p->node_id))
			return false;
		if (strcmp(p->problem, "stranded_step") == 0)
			return pgd_store_restore_step_task(p->instance_id, p->node_id,
											   p->scope);
		return pgd_store_restore_timer(p->instance_id, p->node_id, p->scope);
	}
	return false;
}

static void
run_reconcile(void)
{
	MemoryContext cxt =
		AllocSetContextCreate(CurrentMemoryContext, "pg_durable reconcile",
							  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PgdProblem	 *problems = NULL;
	int			  n, i;
	int			  repaired = 0;
	int			  logged = 0;

	if (!pgd_begin_engine_unit("pg_durable: reconciliation"))
		n = 0;
	else
	{
		int64 tasks;
		int64 starts;

		n = pgd_store_problems(cxt, &problems);
		pgd_store_stale_ready(PGD_READY_STALE_S, &tasks, &starts);
		pgd_end_unit();
		if (tasks > 0 || starts > 0)
			ereport(WARNING,
					(errmsg("%lld tasks have been due and %lld starts pending for over %d s with no executor taking them",
							(long long) tasks, (long long) starts, PGD_READY_STALE_S),
					 errhint("See what the executors do in pg_stat_activity; df.check() reports ready_not_taken.")));
	}

	for (i = 0; i < n; i++)
	{
		PgdProblem *p = &problems[i];
		bool		done;

		CHECK_FOR_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		if (!pgd_begin_engine_unit("pg_durable: reconciliation repair"))
			break;
		done = repair(p);
		pgd_end_unit();
		MemoryContextSwitchTo(cxt);
		if (done)
		{
			repaired++;
			ereport(LOG,
					(errmsg("reconciliation repaired instance %s: %s (%s)",
							p->instance_id, p->problem, p->detail)));
		}
		else if (logged++ < PGD_RECONCILE_LOG_MAX)
			ereport(LOG,
					(errmsg("reconciliation found instance %s: %s (%s)",
							p->instance_id, p->problem, p->detail)));
	}
	if (n > repaired + PGD_RECONCILE_LOG_MAX)
		ereport(LOG,
				(errmsg("reconciliation found %d problems, repaired %d, logged %d",
						n, repaired, PGD_RECONCILE_LOG_MAX)));
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * Executor 0, between tasks: run a pass when one is due, and shorten the
 * coming sleep to the next pass.  An error is logged and the pass
 * abandoned; the next one tries again.
 */
void
pgd_reconcile_maybe(long *sleep_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	long		interval_ms = (long) pgd_reconcile_interval * 1000L;
	long		left;

	if (pgd_reconcile_interval <= 0)
		return;
	if (last_reconcile == 0)
		last_reconcile = now; /* the first pass one interval after start-up */
	else if (TimestampDifferenceExceeds(last_reconcile, now, interval_ms))
	{
		MemoryContext old = CurrentMemoryContext;

		last_reconcile = now;
		PG_TRY();
		{
			run_retention();
			run_reconcile();
		}
		PG_CATCH();
		{
			/* log it and go on: the next pass tries again */
			pgd_unit_recover(old);
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		now = GetCurrentTimestamp();
	}
	left = interval_ms - (long) ((now - last_reconcile) / 1000);
	if (sleep_ms && left < *sleep_ms)
		*sleep_ms = Max(1L, left);
}
