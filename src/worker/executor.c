/*-------------------------------------------------------------------------
 *
 * executor.c
 *	  The executor background workers: claim a ready task, run it in its own
 *	  transaction, repeat; sleep on the latch when there is nothing to do.
 *
 * One task, one transaction (DESIGN.md §4):
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
 * Timer tasks (SLEEP, WAIT_SCHEDULE, signal timeouts) and deliver tasks
 * (signals arrived) are transitions without user SQL: claim, lock, apply,
 * commit.  When nothing is ready the executor sleeps until the earliest
 * timer is due, or until a commit wakes it.
 *
 * Deadlocks and serialization failures of the user's statement re-queue
 * the task with a jittered back-off.  Unexpected errors of the engine
 * itself are logged, the transaction is rolled back and the loop goes on.
 *
 * A step of an instance started with database => 'x' (another database)
 * runs in x in a background session (remote.c) at least once; the
 * transition still commits here.
 *
 * Executor 0 also runs retention and reconciliation (check.c) every
 * pg_durable.reconcile_interval seconds, between tasks.
 *
 * In pg_stat_activity an executor is application_name "pg_durable
 * executor", its query is the step's SQL while a step runs, and while idle
 * it waits on PG_WAIT_EXTENSION (PostgreSQL 15 cannot name its own wait
 * events).  Step failures and retries are logged at LOG, rate-limited, with
 * the error text truncated and never a step's result.
 *
 * Locks: task rows (SKIP LOCKED), then one runs row; see engine.h.
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

#include "core/bgsql.h"
#include "engine/engine.h"
#include "core/settings.h"
#include "results/results.h"
#include "core/shmem.h"
#include "steps/step_sql.h"
#include "worker/worker.h"

#define SAFETY_POLL_MS 5000L
#define EXTENSION_POLL_MS 5000L
#define HEARTBEAT_MS 5000L
#define MAX_RETRIES 50
#define FULL_SCAN_MS 50

static int	my_slot;
static void wait_for_extension(void);
static char *epoch_id = NULL;
static TimestampTz last_heartbeat = 0;


typedef struct Task
{
	int64		id;
	char	   *instance_id;
	char	   *node_id;
	char	   *scope;
	char	   *kind;
	int			attempts;
	bool		has_run;		/* the instance's runs row, read with the claim */
	PgdRunInfo	run;
} Task;

/*
 * A unit of work of a background worker: its own transaction, an SPI
 * connection and a snapshot, with the activity shown in pg_stat_activity.
 */
void
pgd_begin_unit(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_durable: SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

void
pgd_end_unit(void)
{
	pgd_flush_node_writes();
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Is pg_durable installed in this database? (a transaction of its own) */
bool
pgd_extension_exists(void)
{
	bool		exists;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	exists = OidIsValid(get_extension_oid("pg_durable", true));
	CommitTransactionCommand();
	return exists;
}

/* Mark the engine ready and (re)write the heartbeat row; executor 0 only. */
static void
announce_ready(void)
{
	pgd_begin_unit("pg_durable: announcing readiness");
	pgd_spi_exec("INSERT INTO df_internal._worker_ready (sentinel, schema_version) VALUES (true, 1) "
				 "ON CONFLICT (sentinel) DO UPDATE SET schema_version = 1, "
				 "initialized_at = pg_catalog.now()",
				 0, NULL, NULL, NULL, false);
	pgd_spi_exec("DELETE FROM df._worker_epoch", 0, NULL, NULL, NULL, false);
	pgd_spi_exec("INSERT INTO df._worker_epoch (epoch_id) VALUES (pg_catalog.gen_random_uuid()) "
				 "RETURNING epoch_id::text", 0, NULL, NULL, NULL, false);
	epoch_id = MemoryContextStrdup(TopMemoryContext, pgd_spi_getstring(0, 1));
	pgd_end_unit();
	last_heartbeat = GetCurrentTimestamp();
}

static void
heartbeat(void)
{
	if (epoch_id == NULL ||
		!TimestampDifferenceExceeds(last_heartbeat, GetCurrentTimestamp(), HEARTBEAT_MS))
		return;
	pgd_begin_unit("pg_durable: heartbeat");
	if (PGD_EXEC("UPDATE df._worker_epoch SET last_seen_at = pg_catalog.now() "
					 "WHERE epoch_id OPERATOR(pg_catalog.=) $1::uuid",
				 epoch_id) == 0)
		epoch_id = NULL;		/* the extension was recreated: announce again below */
	pgd_end_unit();
	last_heartbeat = GetCurrentTimestamp();
	if (epoch_id == NULL)
		announce_ready();
}

/*
 * The runs row in the first SPI result row, from column col on: submitted_by,
 * label, vars::text, status, created_at::text, database.  False when the row
 * had none (submitted_by NULL: an outer join found no runs row).
 */
static bool
read_run(int col, PgdRunInfo *run)
{
	char	   *submitted_by = pgd_spi_getstring(0, col);

	if (submitted_by == NULL)
		return false;
	run->submitted_by = (Oid) strtoul(submitted_by, NULL, 10);
	run->label = pgd_spi_getstring(0, col + 1);
	run->vars = pgd_spi_getstring(0, col + 2);
	run->status = pgd_spi_getstring(0, col + 3);
	run->token = pgd_spi_getstring(0, col + 4);
	run->database = pgd_spi_getstring(0, col + 5);
	/* steps of the engine's own database run here */
	if (run->database != NULL && strcmp(run->database, pgd_database) == 0)
		run->database = NULL;
	return true;
}

/* The instance's runs row; false when there is none (the instance ended). */
bool
pgd_load_run(const char *instance_id, PgdRunInfo *run)
{
	return PGD_EXEC("SELECT submitted_by, label, vars::text, status, created_at::text, database "
					"FROM df_internal.runs WHERE instance_id OPERATOR(pg_catalog.=) $1",
					instance_id) > 0 &&
		read_run(1, run);
}

/* The instance's runs row as the claim read it; false when there is none. */
static bool
load_run(Task *t, PgdRunInfo *run)
{
	*run = t->run;
	return t->has_run;
}

static void
delete_task(int64 id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(id);
	pgd_spi_exec("DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1",
				 1, types, values, NULL, false);
}

/* Throw away a task that is no longer wanted, in a transaction of its own. */
static void
discard_task_after_abort(int64 id)
{
	pgd_begin_unit("pg_durable: discarding a step that is no longer wanted");
	delete_task(id);
	pgd_end_unit();
}

/*
 * Put a step back in the queue for a later attempt, with a jittered
 * back-off.  The claim deleted its row; this inserts it again.
 */
static void
requeue_task(Task *t)
{
	Oid			types[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID};
	Datum		values[6];
	char		nulls[6] = "      ";
	int			shift = Min(t->attempts, 8);
	int64		base_us = 5000L << shift;	/* 5 ms doubling up to 1.3 s */
	int64		delay_us = base_us / 2 + (int64) (pg_prng_double(&pg_global_prng_state) * base_us);

	values[0] = pgd_text_datum(t->instance_id);
	if (t->node_id)
		values[1] = pgd_text_datum(t->node_id);
	else
		nulls[1] = 'n';
	values[2] = pgd_text_datum(t->scope);
	values[3] = pgd_text_datum(t->kind);
	values[4] = Int32GetDatum(t->attempts + 1);
	values[5] = TimestampTzGetDatum(GetCurrentTimestamp() + delay_us);
	pgd_spi_exec("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, attempts, run_at) "
				 "VALUES ($1, $2, $3, $4, $5, $6)",
				 6, types, values, nulls, false);
	pgd_task_due_at_commit(DatumGetTimestampTz(values[5]));
}

/* The variables a step sees: the captured ones plus sys_instance_id and sys_label. */
DfJson *
pgd_step_vars(const char *instance_id, PgdRunInfo *run)
{
	char	   *err = NULL;
	DfJson	   *vars = run->vars ? dfjson_parse(run->vars, strlen(run->vars), &err) : NULL;

	if (vars == NULL || vars->type != DFJ_OBJECT)
		vars = dfjson_make_object();
	dfjson_object_add(vars, "sys_instance_id", dfjson_make_string(instance_id));
	dfjson_object_add(vars, "sys_label", dfjson_make_string(run->label ? run->label : ""));
	return vars;
}

static void
run_start_task(Task *t)
{
	PgdRunInfo	run;
	char	   *status;
	PgdGraph   *g;

	if (!load_run(t, &run) || !pgd_lock_run(t->instance_id, &status) ||
		strcmp(status, "pending") != 0 ||
		!pgd_check_submitter_at_load(t->instance_id, run.submitted_by))
	{
		return;
	}
	g = pgd_graph_get(t->instance_id, run.token);
	if (g == NULL)
		elog(ERROR, "pg_durable: instance %s has no graph", t->instance_id);
	pgd_transition_start_instance(g);
}

/* Returns false when the transaction was aborted (the step was not wanted). */
static bool
run_step_task(Task *t)
{
	PgdRunInfo	run;
	PgdGraph   *g;
	int			n;
	PgdOutcome	outcome;
	char	   *status;
	char	   *query;
	char	   *err = NULL;

	/*
	 * A step that is no longer wanted is found out under the runs lock at
	 * the end.  Checking before running it too only pays for a task that was
	 * put back after an interrupt (its RACE lost, its instance cancelled):
	 * running it again would be wasted.
	 */
	if (!load_run(t, &run) || strcmp(run.status, "running") != 0 ||
		(g = pgd_graph_get(t->instance_id, run.token)) == NULL ||
		(n = pgd_graph_find(g, t->node_id)) < 0 ||
		(t->attempts > 0 && !pgd_node_is_live(g, n, t->scope)))
		return true;

	pgstat_report_activity(STATE_RUNNING, g->nodes[n].query);
	query = g->nodes[n].query;
	/* variables and named results are read only when the text can refer to them */
	if (strchr(query, '{') != NULL || strchr(query, '$') != NULL)
		query = pgd_substitute(query, pgd_step_vars(t->instance_id, &run),
							   pgd_visible_results(t->instance_id, t->scope),
							   PGD_SUBST_SQL, &err);
	if (query == NULL)
	{
		outcome.ok = false;
		outcome.result = err;
	}
	else
	{
		bool		retry;
		int			sqlstate;

		pgd_executor_set_running(t->instance_id, t->scope);
		if (run.database != NULL)
		{
			/* another database: a background session runs it there (remote.c) */
			PgdBgsqlStatus st = pgd_remote_step(run.database, query, run.submitted_by,
												&outcome.result, &sqlstate);

			outcome.ok = (st == PGD_BGSQL_OK);
			retry = (st == PGD_BGSQL_RETRY);
		}
		else
			outcome = pgd_run_user_sql(query, run.submitted_by, &retry, &sqlstate);
		pgd_executor_set_running(NULL, NULL);
		/* waiting for a free worker slot is not a failure, however long it lasts */
		if (retry && (t->attempts < MAX_RETRIES || sqlstate == ERRCODE_CONFIGURATION_LIMIT_EXCEEDED))
		{
			if (pgd_log_allowed())
				ereport(LOG,
						(errmsg("pg_durable: retrying step %s of instance %s after %s (attempt %d)",
								t->node_id, t->instance_id, unpack_sql_state(sqlstate),
								t->attempts + 1)));
			requeue_task(t);
			pgd_event_add(t->instance_id, "step_retried", t->node_id, t->scope, t->attempts + 1,
						  pgd_event_detail("sqlstate", unpack_sql_state(sqlstate)));
			return true;
		}
	}
	if (!outcome.ok && pgd_log_allowed())
	{
		char	   *msg = pstrdup(outcome.result ? outcome.result : "");

		if (strlen(msg) > PGD_EVENT_ERROR_LEN)
			msg[pg_mbcliplen(msg, strlen(msg), PGD_EVENT_ERROR_LEN)] = '\0';
		ereport(LOG,
				(errmsg("pg_durable: node %s of instance %s failed: %s",
						t->node_id, t->instance_id, msg)));
	}

	/* step 3: under the instance lock, the step must still be wanted */
	if (!pgd_lock_run(t->instance_id, &status) || strcmp(status, "running") != 0 ||
		!pgd_node_is_live(g, n, t->scope))
	{
		SPI_finish();
		PopActiveSnapshot();
		AbortCurrentTransaction();
		discard_task_after_abort(t->id);
		return false;
	}

	pgd_event_set_attempt(t->node_id, t->attempts + 1);
	pgd_transition_complete(g, n, t->scope, outcome);
	pgd_event_set_attempt(NULL, 0);
	return true;
}

/* A timer fell due: a SLEEP or WAIT_SCHEDULE ends, or a SIGNAL wait times out. */
static void
run_timer_task(Task *t)
{
	PgdRunInfo	run;
	PgdGraph   *g;
	int			n;
	char	   *status;

	if (load_run(t, &run) && pgd_lock_run(t->instance_id, &status) &&
		strcmp(status, "running") == 0 &&
		(g = pgd_graph_get(t->instance_id, run.token)) != NULL &&
		(n = pgd_graph_find(g, t->node_id)) >= 0 &&
		pgd_node_is_live(g, n, t->scope))
		pgd_timer_fire(g, n, t->scope);
}

/* Signals arrived: hand them to the instance's waits. */
static void
run_deliver_task(Task *t)
{
	PgdRunInfo	run;
	PgdGraph   *g;
	char	   *status;

	if (load_run(t, &run) && pgd_lock_run(t->instance_id, &status) &&
		strcmp(status, "running") == 0 &&
		(g = pgd_graph_get(t->instance_id, run.token)) != NULL)
		pgd_signal_deliver(g);
}

#define CLAIM_RESULT \
	"SELECT t.id, t.instance_id, t.node_id, t.scope, t.kind, t.attempts, " \
	"r.submitted_by, r.label, r.vars::text, r.status, r.created_at::text, r.database " \
	"FROM t LEFT JOIN df_internal.runs r ON r.instance_id OPERATOR(pg_catalog.=) t.instance_id"

/* Claim the task with this id if it is ready and nobody holds it: 0 or 1 rows. */
static int
claim_by_id(int64 id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(id);
	return pgd_spi_exec("WITH t AS (DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) "
						"(SELECT id FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) $1 "
						" AND run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
						" AND kind OPERATOR(pg_catalog.<>) 'http' FOR UPDATE SKIP LOCKED) "
						"RETURNING id, instance_id, node_id, scope, kind, attempts) " CLAIM_RESULT,
						1, types, values, NULL, false);
}

/*
 * Claim the oldest due task nobody holds; when there is none, tell wake.c
 * and the executor when the next future task is due.  That time is read
 * without locks: a scan that skipped rows another executor held (with
 * SKIP LOCKED) would report a later time and hide a timer until the
 * safety poll.
 */
static int
scan_queue(long *sleep_ms)
{
	uint64		gen = pgd_queue_scan_begin();
	bool		isnull;
	Datum		next;

	if (pgd_spi_exec("SELECT id FROM df_internal.tasks "
					 "WHERE run_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
					 "AND kind OPERATOR(pg_catalog.<>) 'http' "
					 "ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
					 0, NULL, NULL, NULL, false) > 0)
	{
		/* after this one, another may be due at once: look again */
		pgd_queue_scanned(gen, GetCurrentTimestamp());
		return claim_by_id(strtoll(pgd_spi_getstring(0, 1), NULL, 10));
	}
	pgd_spi_exec("SELECT min(run_at) FROM df_internal.tasks "
				 "WHERE run_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() "
				 "AND kind OPERATOR(pg_catalog.<>) 'http'",
				 0, NULL, NULL, NULL, false);
	next = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		pgd_queue_scanned(gen, DT_NOEND);
	else
	{
		TimestampTz at = DatumGetTimestampTz(next);
		TimestampTz now = GetCurrentTimestamp();

		pgd_queue_scanned(gen, at);
		*sleep_ms = Min(*sleep_ms, at > now ? Max(1L, (long) ((at - now) / 1000) + 1) : 1L);
	}
	return 0;
}

/*
 * Claim a ready task.  Mostly the oldest one whose id a commit published
 * (wake.c), by its primary key.  The queue itself is scanned when wake.c
 * says something may be ready that the ring does not hold or a timer is
 * due (at most every FULL_SCAN_MS while the ring has work, so that timers
 * are not starved), and at the safety poll.  Returns the number of rows
 * claimed (0 or 1); with 0, *sleep_ms says how long to sleep.
 */
static int
claim_task(long *sleep_ms)
{
	static TimestampTz last_scan = 0;
	TimestampTz now = GetCurrentTimestamp();
	bool		due;
	bool		safety;
	int64		id;

	*sleep_ms = SAFETY_POLL_MS;
	due = pgd_queue_scan_due(now, sleep_ms);
	safety = TimestampDifferenceExceeds(last_scan, now, SAFETY_POLL_MS);
	if (safety || (due && TimestampDifferenceExceeds(last_scan, now, FULL_SCAN_MS)))
	{
		last_scan = now;
		if (scan_queue(sleep_ms) > 0)
			return 1;
		due = safety = false;
	}
	while (pgd_ready_pop(&id))
		if (claim_by_id(id) > 0)
			return 1;
	if (due)
	{
		last_scan = now;
		return scan_queue(sleep_ms);
	}
	return 0;
}

/*
 * Claim and run one ready task.  Returns true if there was one; else sets
 * *sleep_ms to the time until the next timer is due (or the safety poll).
 */
static bool
process_one(long *sleep_ms)
{
	Task		t;
	int			n;
	bool		committed_here = true;

	pgd_event_set_attempt(NULL, 0);
	pgd_begin_unit("pg_durable: looking for work");
	n = claim_task(sleep_ms);
	if (n == 0)
	{
		pgd_end_unit();
		return false;
	}

	pgd_executor_set_idle(false);
	t.id = strtoll(pgd_spi_getstring(0, 1), NULL, 10);
	t.instance_id = pgd_spi_getstring(0, 2);
	t.node_id = pgd_spi_getstring(0, 3);
	t.scope = pgd_spi_getstring(0, 4);
	t.kind = pgd_spi_getstring(0, 5);
	t.attempts = atoi(pgd_spi_getstring(0, 6));
	t.has_run = read_run(7, &t.run);

	if (strcmp(t.kind, "start") == 0)
		run_start_task(&t);
	else if (strcmp(t.kind, "step") == 0)
		committed_here = run_step_task(&t);
	else if (strcmp(t.kind, "timer") == 0)
		run_timer_task(&t);
	else if (strcmp(t.kind, "deliver") == 0)
		run_deliver_task(&t);
	else
		elog(ERROR, "pg_durable: unknown task kind \"%s\"", t.kind);

	if (committed_here)
		pgd_end_unit();
	return true;
}

static void
process_available_work(void)
{
	volatile long sleep_ms = SAFETY_POLL_MS;
	MemoryContext work_cxt = AllocSetContextCreate(TopMemoryContext, "pg_durable executor",
												   ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		did;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
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
			long		ms = SAFETY_POLL_MS;

			did = process_one(&ms);
			sleep_ms = ms;
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(old);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			pgd_queue_rescan();	/* the claimed task is back in the queue */
			SPI_finish();		/* harmless when not connected */
			did = false;
			sleep_ms = 1000L;	/* do not spin on a persistent engine error */
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

		if (my_slot == 0)
		{
			long		ms = sleep_ms;

			heartbeat();
			pgd_reconcile_maybe(&ms);
			sleep_ms = ms;
		}

		if (did)
			continue;

		pgstat_report_stat(false);	/* make our statistics visible */
		pgstat_report_activity(STATE_IDLE, NULL);

		/*
		 * PostgreSQL 15 has no custom wait events (they arrived in 17):
		 * idle executors show wait_event_type "Extension", wait_event
		 * "Extension" in pg_stat_activity.
		 */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
	}
}

void
pgd_executor_main(Datum main_arg)
{
	my_slot = DatumGetInt32(main_arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(pgd_database, pgd_worker_role, 0);
	pgd_executor_attach(my_slot);
	pgstat_report_appname("pg_durable executor");

	/* the engine relies on read committed: each statement sees the latest commits */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);

	ereport(LOG, (errmsg("pg_durable executor %d started in database \"%s\"", my_slot, pgd_database)));

	for (;;)
	{
		wait_for_extension();
		if (my_slot == 0)
			announce_ready();
		process_available_work();
		ereport(LOG, (errmsg("pg_durable executor %d: the extension was dropped; waiting for it", my_slot)));
		epoch_id = NULL;
	}
}

static void
wait_for_extension(void)
{
	while (!pgd_extension_exists())
	{
		pgd_executor_set_idle(true);	/* df.start would wake us */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 EXTENSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
