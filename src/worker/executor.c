/*-------------------------------------------------------------------------
 *
 * executor.c
 *	  The executor background workers: claim a ready task, run it in its own
 *	  transaction, repeat; sleep on the latch when there is nothing to do.
 *
 * One task, one transaction (docs/design/batches-and-inbox.md §1):
 *	 1. claim the task row: choose it FOR UPDATE SKIP LOCKED (never waits)
 *		and delete it in the same statement, which also reads the instance's
 *		runs row; a rollback puts the row back;
 *	 2. for a step: check it is still wanted, run the user's statement in a
 *		subtransaction as the submitter (step_sql.c);
 *	 3. lock the instance's runs row, check again that the step is wanted,
 *		apply the transition (transition.c);
 *	 4. commit: the step's effects, its result and the next tasks become
 *		visible together, and idle executors are woken (wake.c).
 * A crash before the commit rolls everything back and the task is claimed
 * again, so a SQL step's effects happen exactly once.  A step that is no
 * longer wanted when it reaches (3) (its RACE was lost, its instance was
 * cancelled) aborts the whole transaction, effects included, and removes
 * its task in a second transaction.
 *
 * Tasks are claimed by the id a commit published when there is one (see
 * wake.c for why), else by a scan of the queue in run_at order.
 *
 * While transactions start read-only (default_transaction_read_only = on,
 * as a failover manager keeps a promoted standby until the old primary is
 * known to be gone) nothing is claimed: a user's step that writes would
 * fail.  The executor looks again every READ_ONLY_POLL_MS.
 *
 * Batches (docs/design/batches-and-inbox.md §2): after the first task, more
 * ready tasks run in the same transaction (run_batch), each in subtransactions
 * of its own (run_follower), until pg_durable.batch_max_steps or
 * pg_durable.batch_max_ms; only the first may wait for a lock, a later one
 * that would wait or runs long is rolled back and leads the next batch.
 * engine/README.md, "Batches", has the whole table.
 *
 * Timer tasks (SLEEP, WAIT_SCHEDULE, signal timeouts) and deliver tasks
 * (signals arrived) are transitions without user SQL: claim, lock, apply,
 * commit.  When nothing is ready the executor sleeps until the earliest
 * timer is due, or until a commit wakes it.
 *
 * Deadlocks and serialization failures of the user's statement re-queue
 * the task with a jittered back-off.  An engine statement that lost a
 * race for a lock (a deadlock, a serialization failure, a key row it may
 * not wait for: store/lock_keys.c) rolls the unit back, which runs
 * again after 1-4 ms, with nothing recorded.  Other errors of the engine
 * itself are logged, the transaction is rolled back and the loop goes on;
 * then, in a transaction of its own, the error is recorded on the task
 * row the rollback put back (a counter and the last message) and its next
 * claim is delayed (1 s doubling up to 60 s), so that df.check() reports
 * a task that keeps failing (repeated_engine_errors) instead of it being
 * retried silently.  A SQL step's task claimed with
 * pg_durable.max_engine_errors such errors behind it is not run again: its
 * node fails with the last error.  Other tasks (start, timer, deliver)
 * are retried, reported by df.check(), until an administrator acts.
 *
 * pg_durable.max_executors_per_role: a SQL step whose role already runs
 * that many steps in other executors is not run; its claim is rolled back
 * and queue scans pass over that role's steps until one of them ends
 * (core/share.c), so other roles' work goes first.
 *
 * A step of an instance started with database => 'x' (another database)
 * runs in x in a background session (remote.c) at least once; the
 * transition still commits here.
 *
 * Executor 0 also runs retention and reconciliation (maintenance.c) every
 * pg_durable.reconcile_interval seconds, between tasks.
 *
 * A restore's rows hold the database (docs/design/restores.md): each unit
 * looks for the hold before its claim and again before its commit; while
 * held the executor claims nothing, runs no sweep and no reconciliation,
 * looks again every second, and executor 0 logs a reminder once a minute.
 *
 * In pg_stat_activity an executor is application_name "pg_durable
 * executor", its query is the step's SQL while a step runs, and while idle
 * it waits on PG_WAIT_EXTENSION (PostgreSQL 15 cannot name its own wait
 * events).  Step failures and retries are logged at LOG, rate-limited, with
 * the error text truncated and never a step's result.
 *
 * DROP EXTENSION: every unit first share-locks the extension object without
 * waiting (unit.c).  While a drop is under way, or after it, the executor
 * stays away from the engine's tables and waits for the extension to come
 * back; a step already running finishes first, and the drop waits for it.
 *
 * Locks: the extension object (share, never waiting), task rows (SKIP
 * LOCKED), then one runs row; see engine/README.md, "Locking rules", and
 * docs/design/architecture.md §5.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
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
#include "core/wake.h"
#include "results/results.h"
#include "steps/remote.h"
#include "steps/step_sql.h"
#include "worker/executor.h"
#include "worker/worker.h"

#define SAFETY_POLL_MS ((long) pgd_safety_poll)
/* held-back statistics: PostgreSQL's minimum flush interval (1 s), and a margin */
#define STATS_RETRY_MS	  1100L
#define EXTENSION_POLL_MS 5000L
#define FULL_SCAN_MS	  50
#define ENGINE_ERROR_LEN  1000 /* bytes of an engine error kept on its task */

/* how often a held executor looks whether the hold is gone, and reminds */
#define RESTORE_POLL_MS		 1000L
/*
 * How often a read-only server is looked at again: a failover manager can
 * keep a promoted standby read-only (default_transaction_read_only) for a
 * few seconds, until the old primary is known to be gone.
 */
#define READ_ONLY_POLL_MS 200L
#define RESTORE_REMINDER_MS	 60000

static int	 my_slot;
/* the last unit found the database held by a restore (restore_held_now) */
static bool	 restore_held = false;
static void	 wait_for_extension(void);

/*
 * Claim the oldest due task nobody holds; when there is none, tell wake.c
 * and the executor when the next future task is due.  Both questions are
 * asked about one moment, 'now': a task is either due then or found as the
 * next one due.
 */
static bool
scan_queue(PgdClaim *claim, long *sleep_ms)
{
	uint64		gen = pgd_queue_scan_begin();
	Oid			full[PGD_MAX_EXECUTORS];
	int			nfull = pgd_share_full_roles(full);
	int64		id;
	TimestampTz at;
	TimestampTz now = GetCurrentTimestamp();

	/* the steps of roles that hold their share wait (core/share.c) */
	if (pgd_store_oldest_ready_except(full, nfull, now, &id))
	{
		/* after this one, another may be due at once: look again */
		pgd_queue_scanned(gen, now);
		return pgd_store_claim(pgd_task_ref(PGD_TASK_REF_ROW, id), claim);
	}
	if (!pgd_store_next_due(now, &at))
		pgd_queue_scanned(gen, DT_NOEND);
	else
	{
		now = GetCurrentTimestamp();
		pgd_queue_scanned(gen, at);
		*sleep_ms =
			Min(*sleep_ms,
				at > now ? Max(1L, (long) ((at - now) / 1000) + 1) : 1L);
	}
	return false;
}

/*
 * Claim a ready task.  Mostly the oldest one whose id a commit published
 * (wake.c), by its primary key.  The queue itself is scanned when wake.c
 * says something may be ready that the ring does not hold or a timer is
 * due (at most every FULL_SCAN_MS while the ring has work, so that timers
 * are not starved), and at the safety poll.  Returns false when there was
 * none; then *sleep_ms says how long to sleep.
 */
static bool
claim_task(PgdClaim *claim, long *sleep_ms)
{
	static TimestampTz last_scan = 0;
	TimestampTz		   now = GetCurrentTimestamp();
	bool			   due;
	bool			   safety;
	PgdTaskRef		   task;

	*sleep_ms = SAFETY_POLL_MS;
	/* the step the last batch gave back leads this one */
	if (pgd_task_ref_is_task(pgd_unit_state.next_leader))
	{
		task = pgd_unit_state.next_leader;
		pgd_unit_state.next_leader = PGD_NO_TASK;
		if (pgd_store_claim(task, claim))
			return true;
	}
	due = pgd_queue_scan_due(now, sleep_ms);
	safety = TimestampDifferenceExceeds(last_scan, now, SAFETY_POLL_MS);
	if (safety ||
		(due && TimestampDifferenceExceeds(last_scan, now, FULL_SCAN_MS)))
	{
		last_scan = now;
		if (scan_queue(claim, sleep_ms))
			return true;
		due = safety = false;
	}
	while (pgd_ready_pop(&task))
		if (pgd_store_claim(task, claim))
			return true;
	if (due)
	{
		last_scan = now;
		return scan_queue(claim, sleep_ms);
	}
	return false;
}

/*
 * Is this database held by a restore (docs/design/restores.md §3)?  In a
 * unit.  Executor 0 says so in the log once a minute while it lasts.
 */
static bool
restore_held_now(void)
{
	static TimestampTz last_reminder = 0;
	TimestampTz now;

	restore_held = pgd_store_restore_held();
	if (!restore_held || my_slot != 0)
		return restore_held;
	now = GetCurrentTimestamp();
	if (TimestampDifferenceExceeds(last_reminder, now, RESTORE_REMINDER_MS))
	{
		last_reminder = now;
		ereport(WARNING,
				(errmsg("pg_durable holds the workflows of database \"%s\": a restore loaded rows into its tables",
						get_database_name(MyDatabaseId)),
				 errdetail("No step, timer or start runs until the hold is released; df.check() reports restore_held."),
				 errhint("When the restore is complete, run SELECT df.resume_restored().")));
	}
	return true;
}

/*
 * Before the commit of a unit that claimed tasks: a task its claim saw
 * came with its hold, which this later snapshot sees (store/restore_hold.c).
 * The unit is rolled back, effects and all, and the loop finds the hold.
 */
static void
refuse_if_restore_held(void)
{
	if (pgd_store_restore_held())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the workflows of this database are held by a restore"),
				 errdetail("The transaction claimed work a restore loaded and is rolled back.")));
}

/*
 * Claim and run one ready task.  Returns true if there was one; else sets
 * *sleep_ms to the time until the next timer is due (or the safety poll).
 */
static bool
process_one(long *sleep_ms)
{
	PgdClaim	t;
	bool		committed_here = true;
	TimestampTz started;

	pgd_store_set_attempt(NULL, 0);
	pgd_unit_state.claimed = PGD_NO_TASK;
	(void) pgd_ready_took_marker(true);
	if (!pgd_begin_engine_unit("pg_durable: looking for work"))
	{
		*sleep_ms = 1000L; /* the loop below sees whether it was dropped */
		return false;
	}
	if (restore_held_now())
	{
		pgd_end_unit();
		*sleep_ms = RESTORE_POLL_MS;
		return false;
	}
	/*
	 * A read-only transaction (default_transaction_read_only = on) would
	 * fail the user's step that writes: claim nothing until it is lifted.
	 */
	if (XactReadOnly)
	{
		pgd_end_unit();
		*sleep_ms = READ_ONLY_POLL_MS;
		return false;
	}
	if (!claim_task(&t, sleep_ms))
	{
		pgd_end_unit();
		return false;
	}
	pgd_unit_state.claimed = t.task;

	pgd_executor_set_idle(false);
	pgd_unit_state.first_steps = 0;
	started = GetCurrentTimestamp();
	/*
	 * the step tasks a batch makes ready, and its node writes, are held
	 * until it commits (tasks.c, node_writes.c)
	 */
	pgd_store_hold_step_tasks(pgd_batch_max_steps > 1);
	pgd_store_hold_writes(pgd_batch_max_steps > 1);
	committed_here = (pgd_run_claimed(&t) == STEP_RAN);

	if (committed_here)
	{
		int steps = 1 + pgd_unit_state.first_steps;

		if (pgd_batch_max_steps > 1)
			steps = pgd_run_batch(started);
		pgd_store_write_node_writes();
		pgd_store_write_held_tasks();
		refuse_if_restore_held();
		pgd_end_unit();
		pgd_batch_committed(steps);
	}
	pgd_task_give_share_back();
	pgd_unit_state.claimed = PGD_NO_TASK;
	return true;
}

/*
 * The claim of task was rolled back by an unexpected error: record it on
 * the task row, in a transaction of its own.  Failing to (the extension
 * being dropped, the same fault) is logged and forgotten.
 */
static void
record_engine_error(PgdTaskRef task, const char *error)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		pgd_begin_unit("pg_durable: recording an engine error");
		pgd_store_task_engine_error(task, error);
		pgd_end_unit();
	}
	PG_CATCH();
	{
		pgd_unit_recover(cxt);
	}
	PG_END_TRY();
}

/*
 * The message of the error being handled, truncated, in
 * CurrentMemoryContext; NULL for a cancel, which wake.c sends to a step no
 * longer wanted and which says nothing about the task.
 */
static char *
current_error_text(int *sqlerrcode)
{
	ErrorData *edata = CopyErrorData();
	char *msg = edata->message ? edata->message : pstrdup("unknown error");

	*sqlerrcode = edata->sqlerrcode;
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		return NULL;
	if (strlen(msg) > ENGINE_ERROR_LEN)
		msg[pg_mbcliplen(msg, strlen(msg), ENGINE_ERROR_LEN)] = '\0';
	return msg;
}

static void
process_available_work(void)
{
	volatile long sleep_ms = SAFETY_POLL_MS;
	MemoryContext work_cxt =
		AllocSetContextCreate(TopMemoryContext, "pg_durable executor",
							  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		  did;
		MemoryContext old;

		pgd_idle_check_for_interrupts();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* idle before the last look for work: see wake.c */
		pgd_executor_set_idle(true);
		ResetLatch(MyLatch);

		old = MemoryContextSwitchTo(work_cxt);
		PG_TRY();
		{
			long ms = SAFETY_POLL_MS;

			did = process_one(&ms);
			if (!restore_held)
			{
				did = pgd_bus_sweep_maybe() || did; /* after the task */
				did = pgd_start_sweep_maybe() || did;
			}
			sleep_ms = ms;
		}
		PG_CATCH();
		{
			PgdTaskRef task = pgd_unit_state.claimed;
			char	  *error;
			int		   code;
			bool	   runs_again;

			MemoryContextSwitchTo(work_cxt);
			error = current_error_text(&code);
			/*
			 * A cancel outside a step's statement (wake.c's interrupt for
			 * a step that ended before it arrived, pg_cancel_backend())
			 * says nothing about the task either: the unit runs again.
			 */
			runs_again = pgd_end_failed_unit(old, code);
			pgd_task_give_share_back();
			pgd_unit_state.claimed = PGD_NO_TASK;
			if (pgd_task_ref_is_task(task) && error != NULL && !runs_again)
			{
				MemoryContextSwitchTo(work_cxt);
				record_engine_error(task, error);
				MemoryContextSwitchTo(old);
			}
			pgd_queue_rescan(); /* the claimed task is back in the queue */
			/* a start's marker it took is not: the sweep makes it a task */
			if (task.kind == PGD_TASK_REF_START || pgd_ready_took_marker(true))
				pgd_start_sweep_request();
			did = false;
			/*
			 * Do not spin on a persistent engine error; a lost lock race
			 * (docs/design/architecture.md §5 rule 5) or a cancel runs again
			 * after 1-4 ms.
			 */
			sleep_ms = runs_again ?
				1 + (long) (pg_prng_double(&pg_global_prng_state) * 4) :
				1000L;
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		MemoryContextReset(work_cxt);

		/* DROP EXTENSION: go back to waiting for it */
		if (!did && sleep_ms == 1000L && !pgd_extension_exists())
		{
			MemoryContextDelete(work_cxt);
			return;
		}

		if (my_slot == 0 && !restore_held)
		{
			long ms = sleep_ms;

			pgd_heartbeat_maybe();
			pgd_reconcile_maybe(&ms);
			pgd_task_sweep_maybe(&ms);
			sleep_ms = ms;
		}

		if (did)
			continue;

		/*
		 * Make our statistics visible.  PostgreSQL holds them back when the
		 * last flush was less than a second ago (or an entry's lock was
		 * busy) and asks to be called again; an idle executor may sleep
		 * for the whole safety poll, so it wakes once more for them.
		 */
		if (pgstat_report_stat(false) > 0)
			sleep_ms = Min(sleep_ms, STATS_RETRY_MS);
		pgstat_report_activity(STATE_IDLE, NULL);

		/*
		 * PostgreSQL 15 has no custom wait events (they arrived in 17):
		 * idle executors show wait_event_type "Extension", wait_event
		 * "Extension" in pg_stat_activity.
		 */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
	}
}

void
pgd_executor_main(Datum main_arg)
{
	my_slot = DatumGetInt32(main_arg);
	pgd_task_runner_init(my_slot);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(pgd_database, pgd_worker_role, 0);
	pgd_executor_attach(my_slot);
	pgstat_report_appname("pg_durable executor");

	/* the engine relies on read committed: each statement sees the latest commits */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	ereport(LOG,
			(errmsg("pg_durable executor %d started in database \"%s\"",
					my_slot, pgd_database)));

	for (;;)
	{
		wait_for_extension();
		if (my_slot == 0)
			pgd_announce_ready();
		process_available_work();
		ereport(LOG,
				(errmsg("pg_durable executor %d: the extension was dropped; waiting for it",
						my_slot)));
	}
}

static void
wait_for_extension(void)
{
	while (!pgd_extension_exists())
	{
		pgd_executor_set_idle(true); /* df.start would wake us */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 EXTENSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		pgd_idle_check_for_interrupts();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
