/*-------------------------------------------------------------------------
 *
 * task_run.c
 *	  The task runner: one claimed task, run inside the unit that claimed
 *	  it.  The executor's loop (executor.c) and the batch (batch.c) both
 *	  call it; it calls neither.
 *
 * A step task (docs/design/batches-and-inbox.md §1):
 * check that the step is still wanted, run the user's statement in a
 * subtransaction as the submitter (step_sql.c), lock the instance's runs
 * row, check again, and apply the transition (apply.c), or hand the
 * completion to the instance's inbox (engine/inbox_apply.c) where the step may
 * not wait for the row.  A step that is no longer wanted when it reaches
 * the lock aborts the whole transaction, effects included, and its task is
 * removed in a second transaction.
 *
 * Timer tasks (SLEEP, WAIT_SCHEDULE, signal timeouts), deliver tasks
 * (signals arrived) and apply tasks (completions in the inbox) are
 * transitions without user SQL: lock, apply.
 *
 * Deadlocks and serialization failures of the user's statement re-queue
 * the task with a jittered back-off.  A SQL step's task claimed with
 * pg_durable.max_engine_errors engine errors behind it is not run again:
 * its node fails with the last error.
 *
 * pg_durable.max_executors_per_role: a SQL step whose role already runs
 * that many steps in other executors is not run; its claim is rolled back
 * (core/share.c).  The share a unit takes is given back when the unit ends
 * (pgd_task_give_share_back).
 *
 * Locks: the runs row of the task's instance, after the claim's task row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "common/spi.h"
#include "core/settings.h"
#include "core/share.h"
#include "core/shmem.h"
#include "core/unit.h"
#include "engine/apply.h"
#include "engine/inbox_apply.h"
#include "store/store.h"
#include "engine/transition.h"
#include "orchestration/orchestration.h"
#include "core/wake.h"
#include "results/results.h"
#include "steps/remote.h"
#include "steps/step_sql.h"
#include "worker/executor.h"
#include "worker/worker.h"

#define MAX_RETRIES 50

static int	 my_slot;			  /* the executor's slot in shared memory */
static bool	 share_taken = false; /* this unit holds a share of its role */
PgdExecState pgd_unit_state = {0};

/* The executor in slot runs tasks (its shares are taken in that slot). */
void
pgd_task_runner_init(int slot)
{
	my_slot = slot;
}

/*
 * Roll back the unit an error ended, in a PG_CATCH, back in old.  A lost
 * lock race or a cancel in the engine's own statements (wake.c's interrupt
 * for a step that ended before it came, pg_cancel_backend()) says nothing
 * about the work: logged at LOG, it returns true and the unit runs again.
 * Any other error is logged as itself.
 */
bool
pgd_end_failed_unit(MemoryContext old, int code)
{
	ErrorData *edata;

	if (!pgd_lost_lock_race(code) && code != ERRCODE_QUERY_CANCELED)
	{
		pgd_unit_recover(old);
		return false;
	}
	edata = pgd_unit_abort(old);
	if (pgd_log_allowed())
		ereport(LOG,
				(errmsg(code == ERRCODE_QUERY_CANCELED ?
							"pg_durable: an engine transaction was interrupted and runs again: %s" :
							"pg_durable: an engine transaction lost a lock race and runs again: %s",
						edata->message)));
	FreeErrorData(edata);
	return true;
}

/*
 * Throw away a task that is no longer wanted, in a transaction of its own;
 * a held task went with the rollback.
 */
static void
discard_task_after_abort(PgdTaskRef task)
{
	if (task.kind != PGD_TASK_REF_ROW)
		return;
	/* when the extension is being dropped, the drop removes the task */
	if (!pgd_begin_engine_unit("pg_durable: discarding a step that is no longer wanted"))
		return;
	pgd_store_task_delete(task.id);
	pgd_end_unit();
}

/*
 * Put a step back in the queue for a later attempt, with a jittered
 * back-off.  The claim deleted its row; this inserts it again.
 */
static void
requeue_backoff(PgdClaim *t, int64 first_us, int max_shift)
{
	int	  shift = Min(t->attempts, max_shift);
	int64 base_us = first_us << shift;
	int64 delay_us = base_us / 2 +
		(int64) (pg_prng_double(&pg_global_prng_state) * base_us);

	pgd_store_task_requeue(t, GetCurrentTimestamp() + delay_us);
}

static void
requeue_task(PgdClaim *t)
{
	requeue_backoff(t, 5000L, 8); /* 5 ms doubling up to 1.3 s */
}

/* An instance starts (the caller holds nothing of it yet). */
void
pgd_task_start_instance(PgdClaim *t)
{
	PgdInstanceStatus status;
	PgdGraph		 *g;

	if (!t->has_run || !pgd_store_lock_run(t->instance_id, &status) ||
		status != PGD_INSTANCE_PENDING ||
		!pgd_submitter_still_allowed(t->instance_id, t->run.submitted_by))
		return;
	g = pgd_graph_get(t->instance_id, t->run.token);
	if (g == NULL)
		elog(ERROR, "instance %s has no graph", t->instance_id);
	pgd_apply_start(g);
}

/* Log a failed step (rate-limited, the error truncated, never a result). */
static void
log_step_failure(const char *node_id, const char *instance_id,
				 const char *error, const char *code)
{
	char *msg;

	if (!pgd_log_allowed())
		return;
	msg = pgd_step_error_for_log(error, code);
	if (strlen(msg) > PGD_EVENT_ERROR_LEN)
		msg[pg_mbcliplen(msg, strlen(msg), PGD_EVENT_ERROR_LEN)] = '\0';
	ereport(LOG,
			(errmsg("node %s of instance %s failed: %s", node_id, instance_id,
					msg)));
}

static Oid share_role = InvalidOid; /* the role whose share this unit holds */

/* A deadlock or serialization failure raised by the user's statement. */
static bool
user_lost_race(int sqlstate)
{
	return sqlstate == ERRCODE_T_R_DEADLOCK_DETECTED ||
		sqlstate == ERRCODE_T_R_SERIALIZATION_FAILURE;
}

/*
 * Run the step's statement (here, or in its instance's database).  A step
 * that would be retried (a deadlock, an interrupt) is retried only if it is
 * still wanted under the runs lock: the interrupt of a cancelled instance's
 * step, or of a lost RACE's, is not a retry, and no step_retried event
 * follows instance_cancelled.
 */
static StepRun
run_statement(PgdClaim *t, PgdGraph *g, int n, PgdOutcome *outcome)
{
	char *query = g->nodes[n].query;
	char *err = NULL;
	bool  retry;
	int	  sqlstate;

	/* variables and named results are read only when the text can refer to them */
	if (strchr(query, '{') != NULL || strchr(query, '$') != NULL)
		query = pgd_substitute(query, pgd_step_vars(t->instance_id, &t->run),
							   pgd_visible_results(t->instance_id, t->scope),
							   PGD_SUBST_SQL, &err);
	if (query == NULL)
	{
		outcome->ok = false;
		outcome->result = err;
		return STEP_RAN;
	}

	if (pgd_log_workflow_sql)
		ereport(DEBUG1,
				(errmsg_internal("step %s of instance %s runs: %s", t->node_id,
								 t->instance_id, query)));
	pgd_executor_set_running(t->instance_id, t->scope);
	if (t->run.database != NULL)
	{
		/* another database: a background session runs it there (remote.c) */
		PgdBgsqlStatus st =
			pgd_remote_step(t->run.database, query, t->run.submitted_by,
							&outcome->result, &sqlstate);

		outcome->ok = (st == PGD_BGSQL_OK);
		retry = (st == PGD_BGSQL_RETRY);
		if (!outcome->ok && sqlstate != 0)
			outcome->code = psprintf("sql:%s", unpack_sql_state(sqlstate));
	}
	else
	{
		int64 attempt_ms = pgd_attempt_timeout_ms(g, n);
		bool  budgeted = pgd_unit_state.in_follower &&
			(attempt_ms <= 0 || pgd_unit_state.budget_ms < attempt_ms);

		/* a later step of a batch runs within the batch's budget */
		PgdRowSink sink;

		pgd_set_attempt_timeout(budgeted ? pgd_unit_state.budget_ms :
										   attempt_ms);
		/* the query of a df.map in lanes mode writes its rows to a table */
		if (pgd_map_row_sink(g, n, t->scope, &sink))
			pgd_set_row_sink(&sink);
		*outcome =
			pgd_run_user_sql(query, t->run.submitted_by, &retry, &sqlstate);
		pgd_set_attempt_timeout(0);
		if (budgeted && !outcome->ok && outcome->code != NULL &&
			strcmp(outcome->code, "timeout") == 0)
			retry = true; /* its budget, not its node's attempt_timeout */
	}
	pgd_executor_set_running(NULL, NULL);

	/*
	 * A later step of a batch that would wait or ran long leads the next,
	 * and that is not an attempt.  A deadlock or a serialization failure of
	 * its statement is one (its lock_timeout ends any real wait long before
	 * deadlock detection, so the statement itself raised it): it is retried
	 * and recorded here, as the first step's would be.
	 */
	if (retry && pgd_unit_state.in_follower && !user_lost_race(sqlstate))
		return STEP_DEFER;

	/* waiting for a free worker slot is not a failure, however long it lasts */
	if (retry &&
		(t->attempts < MAX_RETRIES ||
		 sqlstate == ERRCODE_CONFIGURATION_LIMIT_EXCEEDED))
	{
		if (!pgd_lock_target(t->instance_id, &t->run, PGD_INSTANCE_RUNNING,
							 t->node_id, t->scope, &g, &n))
			return STEP_UNWANTED;
		if (pgd_log_allowed())
			ereport(LOG,
					(errmsg("retrying step %s of instance %s after %s (attempt %d)",
							t->node_id, t->instance_id,
							unpack_sql_state(sqlstate), t->attempts + 1)));
		requeue_task(t);
		pgd_store_event_add(t->instance_id, "step_retried", t->node_id,
							t->scope, t->attempts + 1,
							pgd_event_detail("sqlstate",
											 unpack_sql_state(sqlstate)));
		return STEP_REQUEUED;
	}
	return STEP_RAN;
}

/*
 * A step whose runs failed in the engine pg_durable.max_engine_errors times
 * (each rolled back, so none of its effects remain): fail its node with
 * the last error instead of running it again.
 */
static bool
engine_gave_up(const PgdClaim *t, PgdOutcome *outcome)
{
	if (pgd_max_engine_errors == 0 || t->engine_errors < pgd_max_engine_errors)
		return false;
	outcome->ok = false;
	outcome->result =
		psprintf("step abandoned after %d engine errors (pg_durable.max_engine_errors): %s",
				 t->engine_errors,
				 t->last_engine_error ? t->last_engine_error :
										"unknown error");
	return true;
}

/*
 * Under a RACE or a TIMEOUT the first to finish decides: a step that ends
 * as its branch loses, or as its timeout fires, must roll its effects back
 * (docs/design/batches-and-inbox.md §5), so it waits for its runs row
 * instead of committing them into the inbox.  So does the forward action
 * of a df.with_undo (COMPENSATED): its undo is registered only when its
 * completion is applied, and a completion dropped because a failing
 * sibling abandoned its branch would leave effects that no compensation
 * undoes.
 */
static bool
decided_by_first_to_finish(const PgdGraph *g, int n)
{
	for (int a = g->nodes[n].parent; a >= 0; a = g->nodes[a].parent)
		if (g->nodes[a].type == DF_NODE_RACE ||
			g->nodes[a].type == DF_NODE_TIMEOUT ||
			g->nodes[a].type == DF_NODE_COMPENSATED)
			return true;
	return false;
}

/* May the completion of step n go to the inbox? */
static bool
inbox_usable(const PgdGraph *g, int n)
{
	return pgd_inbox && !decided_by_first_to_finish(g, n) &&
		pgd_internal_relation_exists("inbox");
}

/*
 * Step 3: take the instance's runs row.  A step does not wait for it
 * (docs/design/batches-and-inbox.md §4): held by another transaction,
 * the completion is committed into the inbox with an apply task (*inboxed)
 * if the node is still live as far as the committed state shows; the
 * apply task checks again under the lock.  False when the step is not
 * wanted.  A later step of a batch whose completion may not go to the
 * inbox took its row (NOWAIT) before its statement.  skip: the completion
 * may go to the inbox (inbox_usable, asked once per step).
 */
static bool
lock_or_inbox(PgdClaim *t, PgdGraph **g, int *n, const PgdOutcome *outcome,
			  bool skip, bool *inboxed)
{
	pgd_store_set_run_skip(skip);
	if (pgd_lock_target(t->instance_id, &t->run, PGD_INSTANCE_RUNNING,
						t->node_id, t->scope, g, n))
	{
		pgd_store_set_run_skip(false);
		return true;
	}
	pgd_store_set_run_skip(false);
	if (!skip || !pgd_store_run_held() || !pgd_node_is_live(*g, *n, t->scope))
		return false;
	pgd_store_inbox_add(t->instance_id, t->node_id, t->scope, t->attempts + 1,
						outcome);
	*inboxed = true;
	return true;
}

/*
 * Returns STEP_RAN when the transaction goes on (the step ran, was
 * re-queued or had nothing to do), STEP_UNWANTED when the step was not
 * wanted, STEP_DEFER when a later step of a batch must lead the next one.
 * The first step of a batch aborts the transaction itself when it returns
 * STEP_UNWANTED or STEP_DEFER; a later one leaves that to its
 * subtransaction (run_follower).
 */
StepRun
pgd_task_run_step(PgdClaim *t)
{
	PgdGraph  *g;
	int		   n;
	PgdOutcome outcome = {0};
	StepRun	   ran;
	bool	   inboxed = false;
	bool	   may_inbox;

	/*
	 * A step that is no longer wanted is found out under the runs lock at
	 * the end.  Checking before running it too only pays for a task that was
	 * put back after an interrupt (its RACE lost, its instance cancelled):
	 * running it again would be wasted.
	 */
	if (!t->has_run || t->run.status != PGD_INSTANCE_RUNNING ||
		(g = pgd_graph_get(t->instance_id, t->run.token)) == NULL ||
		(n = pgd_graph_find(g, t->node_id)) < 0 ||
		(t->attempts > 0 && !pgd_node_is_live(g, n, t->scope)))
		return STEP_RAN;
	/* may its completion go to the inbox (step 3)?  Asked once per step */
	may_inbox = inbox_usable(g, n);

	if (engine_gave_up(t, &outcome))
		ran = STEP_RAN;
	else if (pgd_unit_state.in_follower && share_taken &&
			 share_role != t->run.submitted_by)
		return STEP_DEFER; /* one role's share per unit */
	else if (!share_taken && !pgd_share_take(my_slot, t->run.submitted_by))
	{
		if (pgd_unit_state.in_follower)
			return STEP_DEFER;
		/*
		 * Its role runs its share of the executors already: roll the claim
		 * back, which leaves the task as it was, for when the role has a
		 * share free (core/share.c).  Nothing ran and nothing is recorded.
		 */
		ereport(DEBUG1,
				(errmsg_internal("step %s of instance %s waits for its role's share of the executors",
								 t->node_id, t->instance_id)));
		SPI_finish();
		PopActiveSnapshot();
		AbortCurrentTransaction();
		return STEP_DEFER;
	}
	else
	{
		/*
		 * A later step of a batch whose runs row another executor holds
		 * would give way after its statement unless its completion can go
		 * to the inbox: find that out before it (NOWAIT).  The batch holds
		 * the row until its commit anyway.
		 */
		if (pgd_unit_state.in_follower && !may_inbox &&
			!pgd_store_lock_run(t->instance_id, NULL))
			return STEP_RAN; /* the instance ended: nothing to do */
		if (!share_taken)
		{
			share_taken = true;
			share_role = t->run.submitted_by;
		}
		pgd_report_step_activity(g->nodes[n].query,
								 psprintf("pg_durable: step %s of instance %s",
										  t->node_id, t->instance_id));
		ran = run_statement(t, g, n, &outcome);
	}
	if (ran == STEP_REQUEUED)
		return STEP_RAN;
	if (ran == STEP_DEFER)
		return STEP_DEFER;
	if (ran == STEP_RAN && !outcome.ok)
		log_step_failure(t->node_id, t->instance_id, outcome.result,
						 outcome.code);

	/* step 3: under the instance lock, the step must still be wanted */
	if (ran == STEP_UNWANTED ||
		!lock_or_inbox(t, &g, &n, &outcome, may_inbox, &inboxed))
	{
		if (pgd_unit_state.in_follower)
			return STEP_UNWANTED;
		SPI_finish();
		PopActiveSnapshot();
		AbortCurrentTransaction();
		discard_task_after_abort(t->task);
		return STEP_UNWANTED;
	}

	if (inboxed)
		return STEP_RAN; /* its apply task applies it */
	pgd_store_set_attempt(t->node_id, t->attempts + 1);
	pgd_apply_complete(g, n, t->scope, outcome);
	pgd_store_set_attempt(NULL, 0);
	return STEP_RAN;
}

/* A timer fell due: a SLEEP or WAIT_SCHEDULE ends, a SIGNAL wait times out, a loop goes on. */
static void
run_timer_task(PgdClaim *t)
{
	PgdGraph *g;
	int		  n;

	if (t->has_run &&
		pgd_lock_target(t->instance_id, &t->run, PGD_INSTANCE_RUNNING,
						t->node_id, t->scope, &g, &n))
		pgd_apply_timer(g, n, t->scope);
}

/*
 * Signals arrived: hand them to the instance's waits.  This delivery covers
 * every signal committed before it, and one of a pending or finished
 * instance has nothing to do, so the instance's other deliver tasks go
 * first: a burst of signals (of a name nobody waits for, say) costs one
 * transaction, not one per signal, each queued ahead of the instance's
 * timers and under its runs lock.
 */
static void
run_deliver_task(PgdClaim *t)
{
	PgdGraph *g;
	int		  n;

	pgd_store_deliver_tasks_drop(t->instance_id);
	if (t->has_run &&
		pgd_lock_target(t->instance_id, &t->run, PGD_INSTANCE_RUNNING, NULL,
						NULL, &g, &n))
		pgd_apply_deliver(g);
}

/*
 * Completions wait in the inbox (docs/design/batches-and-inbox.md §4):
 * apply them.
 * When another transaction holds the runs row this task does not wait: it
 * leaves the work to another apply task of the instance nobody claimed, or
 * puts itself back with a short, growing, jittered delay (an engine
 * transaction holds the row for one batch at most).
 */
static void
run_apply_task(PgdClaim *t)
{
	bool held;

	(void) pgd_apply_inbox(t->instance_id, &held);
	/* an engine holder commits within a batch: 1 ms doubling up to 32 ms */
	if (held && !pgd_store_inbox_other_apply(t->instance_id, t->task.id))
		requeue_backoff(t, 1000L, 5);
}

/*
 * The unit's step is over (committed, rolled back or failed): give its
 * role's share back, and when a step waits for such a share, have the
 * queue scanned (core/share.c).
 */
void
pgd_task_give_share_back(void)
{
	if (!share_taken)
		return;
	share_taken = false;
	share_role = InvalidOid;
	if (pgd_share_release(my_slot))
		pgd_queue_rescan_wake();
}

/*
 * The unit takes (or holds) a share of the executors for role: false when
 * it holds another role's, or none is free (core/share.c).  For a start's
 * first step (batch.c), which runs only with one.
 */
bool
pgd_task_take_share(Oid role)
{
	if (share_taken)
		return share_role == role;
	if (!pgd_share_take(my_slot, role))
		return false;
	share_taken = true;
	share_role = role;
	return true;
}

/*
 * Run a claimed task other than a start (which runs with its first step,
 * batch.c); see pgd_task_run_step for what it returns.
 */
StepRun
pgd_task_run(PgdClaim *t)
{
	switch (t->kind)
	{
		case PGD_TASK_START:
			elog(ERROR, "%s, a start, reached the task runner",
				 pgd_task_ref_text(t->task));
			break;
		case PGD_TASK_STEP:
			return pgd_task_run_step(t);
		case PGD_TASK_TIMER:
			run_timer_task(t);
			break;
		case PGD_TASK_DELIVER:
			run_deliver_task(t);
			break;
		case PGD_TASK_APPLY:
			run_apply_task(t);
			break;
		case PGD_TASK_HTTP:
			elog(ERROR, "an executor claimed HTTP %s",
				 pgd_task_ref_text(t->task));
			break;
	}
	return STEP_RAN;
}
