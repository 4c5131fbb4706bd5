/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  The later tasks of a batch (docs/design/batches-and-inbox.md §2): after
 *	  the first task of a unit (executor.c), more ready tasks run in the same
 *	  transaction, each in subtransactions of its own (run_follower), until
 *	  pg_durable.batch_max_steps or pg_durable.batch_max_ms.  Only the first
 *	  task may wait for a lock: a later one runs with a short lock_timeout,
 *	  takes runs rows with NOWAIT and runs within the batch's budget; one that
 *	  would wait or runs long is rolled back and leads the next batch.
 *	  engine/README.md, "Batches", has the whole table.  A start task runs the
 *	  first step it makes ready with it, as such a later step, in a
 *	  subtransaction of the start's own (pgd_run_start).
 *
 * Locks: task rows (SKIP LOCKED), runs rows (NOWAIT), and whatever the
 * user's statements take, with lock_timeout = PGD_BATCH_LOCK_TIMEOUT.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "core/settings.h"
#include "store/store.h"
#include "core/wake.h"
#include "steps/step_sql.h"
#include "worker/executor.h"

/* How a later step of a batch ended (run_follower). */
typedef enum Follow
{
	FOLLOW_NONE, /* the task was gone or held: nothing ran */
	FOLLOW_DONE, /* it ran (or was not wanted): the batch goes on */
	FOLLOW_END,	 /* it was given back to lead the next batch */
} Follow;

/*
 * The task leads the next batch; a held one (store/tasks.c) is written
 * now, in the batch's own transaction, its claim rolled back.
 */
static void
give_way(PgdTaskRef task)
{
	pgd_unit_state.next_leader = task.kind == PGD_TASK_REF_HELD ?
		pgd_store_write_held_task(task) :
		task;
}

/*
 * The rules of work that must not wait in a transaction that already holds
 * others' rows (a later step of a batch, a later HTTP completion of the
 * HTTP worker's): lock_timeout PGD_BATCH_LOCK_TIMEOUT at a GUC nest level of
 * its own, which it returns, and runs rows NOWAIT.  The caller turns NOWAIT
 * off again (pgd_store_set_run_nowait(false)); the lock_timeout goes with
 * its nest level.
 */
int
pgd_no_wait_rules_on(void)
{
	int nest = NewGUCNestLevel();

	(void) set_config_option("lock_timeout", PGD_BATCH_LOCK_TIMEOUT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	pgd_store_set_run_nowait(true);
	return nest;
}

/*
 * The rules of a later step of a batch (run_follower, and a start's first
 * step, start_and_first_step): those above, as a follower.
 */
static int
later_step_rules_on(void)
{
	int nest = pgd_no_wait_rules_on();

	pgd_unit_state.in_follower = true;
	return nest;
}

/*
 * The unit's state back as it was before those rules (a later task's or
 * not: in_follower), and no attempt under way; the lock_timeout goes with
 * its nest level.
 */
static void
later_step_rules_off(bool in_follower)
{
	pgd_unit_state.in_follower = in_follower;
	pgd_store_set_run_nowait(in_follower);
	pgd_store_set_attempt(NULL, 0);
}

/*
 * An error in the subtransactions of a later task of a batch (run_follower)
 * or of a start with its first step (pgd_run_start): the unit's state as it
 * was before them (a later task's or not: in_follower), every
 * subtransaction above level rolled back, the caller's memory context and
 * resource owner back, and the error logged at DEBUG1 (it gave way) and
 * dropped.  instance_id: the started instance, or NULL for a later task.
 */
static void
recover_giving_way(int level, MemoryContext cxt, ResourceOwner owner,
				   bool in_follower, const char *instance_id)
{
	ErrorData *edata;

	later_step_rules_off(in_follower);
	pgd_set_attempt_timeout(0);
	pgd_executor_set_running(NULL, NULL);
	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	while (GetCurrentTransactionNestLevel() > level)
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (instance_id != NULL)
		ereport(DEBUG1,
				(errmsg_internal("the first step of instance %s gives way: %s",
								 instance_id, edata->message)));
	else
		ereport(DEBUG1,
				(errmsg_internal("a later task of a batch gives way: %s",
								 edata->message)));
	FreeErrorData(edata);
}

/*
 * Claim task id and run it as a later step of the batch under way
 * (docs/design/batches-and-inbox.md §2).  Two subtransactions: the outer one
 * holds the claim, the inner one the step (its statement in a third,
 * step_sql.c) and its transition.  The step runs with a short lock_timeout,
 * takes runs rows with NOWAIT and runs its statement within the batch's
 * budget: a step that would wait or runs long, or any error, rolls both back,
 * which puts the task back as it was, and the task leads the next batch.  A
 * step not wanted any more (its instance cancelled, its RACE lost) rolls back
 * the inner one only, and its claim commits with the batch.
 */
static Follow
run_follower(PgdTaskRef task)
{
	volatile PgdTaskRef id = task;
	MemoryContext	cxt = CurrentMemoryContext;
	ResourceOwner	owner = CurrentResourceOwner;
	int				level = GetCurrentTransactionNestLevel();
	volatile Follow result = FOLLOW_DONE;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		PgdClaim t;
		StepRun	 ran;
		int		 nest;

		if (!pgd_store_claim(id, &t))
			result = FOLLOW_NONE;
		/* a step in another database cannot be rolled back there */
		else if (t.kind == PGD_TASK_STEP && t.has_run &&
				 t.run.database != NULL)
			result = FOLLOW_END;
		if (result != FOLLOW_DONE)
		{
			if (result == FOLLOW_END)
			{
				RollbackAndReleaseCurrentSubTransaction();
				give_way(id);
			}
			else
				ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			return result;
		}

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		nest = later_step_rules_on();
		ran = pgd_run_claimed(&t);
		later_step_rules_off(false);

		if (ran == STEP_RAN)
		{
			AtEOXact_GUC(true, nest);
			ReleaseCurrentSubTransaction(); /* the step */
			ReleaseCurrentSubTransaction(); /* its claim */
		}
		else if (ran == STEP_UNWANTED)
		{
			RollbackAndReleaseCurrentSubTransaction(); /* the step */
			ReleaseCurrentSubTransaction(); /* its claim: consumed */
		}
		else
		{
			RollbackAndReleaseCurrentSubTransaction();
			RollbackAndReleaseCurrentSubTransaction();
			give_way(id);
			result = FOLLOW_END;
		}
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		recover_giving_way(level, cxt, owner, false, NULL);
		give_way(id);
		result = FOLLOW_END;
	}
	PG_END_TRY();
	if (result == FOLLOW_DONE)
		pgd_ready_consumed(id);
	return result;
}

/*
 * The start and its instance's first step, in a subtransaction
 * (pgd_run_start): false when the step gave way or was not wanted, which
 * rolls both back.  The step runs as a later step of a batch does
 * (run_follower): a short lock_timeout, runs rows NOWAIT, within the
 * batch's budget.
 */
static bool
start_and_first_step(PgdClaim *t, bool was_follower)
{
	PgdTaskRef held;
	PgdClaim s;
	StepRun	 ran;
	int		 nest;

	pgd_task_start_instance(t);
	if (!pgd_task_ref_is_task(held = pgd_store_held_task_made_here(t->instance_id)))
		return true;
	if (!pgd_task_take_share(t->run.submitted_by))
		return true; /* the step stays held, as any other */
	if (!pgd_store_claim(held, &s))
		return true;
	nest = later_step_rules_on();
	pgd_unit_state.budget_ms = pgd_batch_max_ms;
	ran = pgd_task_run_step(&s);
	later_step_rules_off(was_follower);
	if (ran != STEP_RAN)
		return false;
	AtEOXact_GUC(true, nest);
	pgd_unit_state.first_steps++;
	return true;
}

/*
 * A start task: the instance starts, and the step that its start makes
 * ready (held, tasks.c) runs at once, with the start, in a
 * subtransaction of the start's own (start_and_first_step): a one-step
 * workflow's runs row is then locked and deleted by one subtransaction.
 * Locked by the start task and deleted by a later step's subtransaction,
 * the row needed a multixact for the two xids (54 bytes of WAL an
 * instance, and an entry of pg_multixact).  A step that gives
 * way (it would wait for a lock, ran past the batch's budget), is not
 * wanted any more, or fails in the engine takes its start back with it:
 * the instance starts again, without it, and its step is written as a
 * task that leads the next batch (as give_way writes it).  Started alone: an
 * instance whose start had an engine error (so that its step gets a task
 * of its own, which counts its own errors), and a later start whose steps
 * run in another database (no later step runs there, run_follower).
 */
void
pgd_run_start(PgdClaim *t)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	int			  level = GetCurrentTransactionNestLevel();
	bool		  was_follower = pgd_unit_state.in_follower;
	volatile bool started = false;
	PgdTaskRef	  held;

	if (t->engine_errors > 0 || !t->has_run || pgd_batch_max_steps <= 1 ||
		(was_follower && t->run.database != NULL))
	{
		pgd_task_start_instance(t);
		return;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		started = start_and_first_step(t, was_follower);
		if (started)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		recover_giving_way(level, cxt, owner, was_follower, t->instance_id);
		started = false;
	}
	PG_END_TRY();
	if (started)
		return;
	pgd_task_start_instance(t);
	held = pgd_store_held_task_made_here(t->instance_id);
	if (pgd_task_ref_is_task(held) &&
		!pgd_task_ref_is_task(pgd_unit_state.next_leader))
		pgd_unit_state.next_leader = pgd_store_write_held_task(held);
}

/*
 * The next task for the batch under way: first a successor this
 * transaction made ready (a chain goes on in the batch that made its next
 * step ready), then one a commit published.  tried holds the tasks already
 * offered; returns PGD_NO_TASK when there is none.
 */
static PgdTaskRef
next_follower(PgdTaskRef *tried, int *ntried, int max_tried, bool held_only)
{
	PgdTaskRef own[64];
	int		   nown;
	int		   i;
	int		   j;
	PgdTaskRef task;

	/* past the budget, only a branch or step of an instance under way */
	if (held_only)
		return pgd_store_held_branch_next();
	/* a step task held, not written yet (store/tasks.c), comes first */
	if (pgd_task_ref_is_task(task = pgd_store_held_task_next()))
		return task;
	nown = pgd_ready_made_here(own, lengthof(own));
	for (i = nown - 1; i >= 0; i--)
	{
		for (j = 0; j < *ntried; j++)
			if (pgd_task_ref_equal(tried[j], own[i]))
				break;
		if (j == *ntried)
		{
			if (*ntried < max_tried)
				tried[(*ntried)++] = own[i];
			return own[i];
		}
	}
	if (pgd_ready_pop(&task))
		return task;
	return PGD_NO_TASK;
}

/*
 * After the batch's first task: run more ready tasks in its transaction
 * until pg_durable.batch_max_steps, pg_durable.batch_max_ms, nothing
 * ready, or a step that gives way.  Returns how many ran, a start's first
 * step run with it (executor.c) counted as a step of its own.
 */
int
pgd_run_batch(TimestampTz started)
{
	int	   steps = 1;
	int	   max_tried = Max(pgd_batch_max_steps * 2, 4);
	PgdTaskRef *tried = palloc(sizeof(PgdTaskRef) * max_tried);
	int	   ntried = 0;
	int	   misses = 0;

	/*
	 * Past pg_durable.batch_max_steps, a batch takes no new work but runs
	 * on the branches it holds of fan-outs under way (a sibling held too,
	 * or a JOIN of theirs counted in memory) and the steps of instances
	 * holding a keyed lock or a limit slot in memory, up to twice as many
	 * steps: they finish in it, so that their nodes' starts and ends are
	 * one write each and their JOIN counts, locks and slots stay in
	 * memory, instead of going out as task rows to other batches and as
	 * rows released by statements.  A plain chain stops at
	 * the budget.
	 */
	while (steps + pgd_unit_state.first_steps < 2 * pgd_batch_max_steps &&
		   misses < 4)
	{
		PgdTaskRef task;
		Follow	   f;
		long   elapsed_ms = (long) ((GetCurrentTimestamp() - started) / 1000);

		if (elapsed_ms >= pgd_batch_max_ms)
			break;
		pgd_unit_state.budget_ms = pgd_batch_max_ms;
		task = next_follower(tried, &ntried, max_tried,
							 steps + pgd_unit_state.first_steps >=
								 pgd_batch_max_steps);
		if (!pgd_task_ref_is_task(task))
			break;
		/* an error below is the follower's own */
		pgd_unit_state.claimed = PGD_NO_TASK;
		f = run_follower(task);
		if (f == FOLLOW_END)
			break;
		if (f == FOLLOW_NONE)
			misses++;
		else
			steps++;
	}
	pfree(tried);
	return steps + pgd_unit_state.first_steps;
}

StepRun
pgd_run_claimed(PgdClaim *t)
{
	if (t->kind != PGD_TASK_START)
		return pgd_task_run(t);
	pgd_run_start(t);
	return STEP_RAN;
}
