/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The pg_durable launcher: a static background worker registered by
 *	  _PG_init that starts and supervises the executors and the HTTP
 *	  worker.
 *
 * The launcher connects to no database (it only needs the shared catalogs
 * pg_database and pg_authid).  Once pg_durable.database exists and
 * pg_durable.worker_role is a superuser that can log in, it starts the
 * HTTP worker (http_worker.c) and pg_durable.workers executors as dynamic
 * background workers — executor 0, then the HTTP worker, then no more
 * executors than free worker slots allow, saying in the log what was left
 * out — and
 * restarts any that stops (after a back-off).  Until then it starts
 * nothing, looks again every 5 s, and says why in the log (a missing
 * database every minute, a refused role once) and in shared memory, which
 * df.check() reads through df_internal.engine_problems().  The executors wait by themselves for
 * CREATE EXTENSION.  SIGHUP re-reads the configuration, SIGTERM ends the
 * launcher, and postmaster death ends it (WL_EXIT_ON_PM_DEATH); the
 * postmaster restarts it 5 seconds after an abnormal exit, and a crash
 * restart of the server starts everything afresh (executors are
 * BGW_NEVER_RESTART, so none survive their launcher).
 *
 * Locks: the pgd_shared spinlock, briefly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "common/spi.h"
#include "core/settings.h"
#include "core/shmem.h"
#include "core/unit.h"
#include "store/store.h"
#include "worker/worker.h"

#define PGD_LAUNCHER_RESTART_SECONDS 5
#define DATABASE_POLL_MS			 5000L
#define EXECUTOR_RESTART_MS			 1000L
/* how often a missing pg_durable.database is logged again */
#define DATABASE_LOG_MS 60000L

void
pgd_register_launcher(void)
{
	BackgroundWorker worker;

	pgd_worker_describe(&worker, "pgd_launcher_main", "pg_durable launcher",
						"pg_durable launcher", (Datum) 0, 0);
	worker.bgw_restart_time = PGD_LAUNCHER_RESTART_SECONDS;
	RegisterBackgroundWorker(&worker);
}

static void
pgd_launcher_detach(int code, Datum arg)
{
	SpinLockAcquire(&pgd_shared->mutex);
	if (pgd_shared->launcher_pid == MyProcPid)
	{
		pgd_shared->launcher_pid = 0;
		pgd_shared->launcher_latch = NULL;
	}
	SpinLockRelease(&pgd_shared->mutex);
}

/* What stops the launcher from starting the workers, if anything. */
typedef enum StartProblem
{
	START_OK,
	START_NO_DATABASE,	 /* pg_durable.database does not exist */
	START_NO_ROLE,		 /* pg_durable.worker_role does not exist */
	START_NOT_SUPERUSER, /* ... is not a superuser */
	START_NO_LOGIN		 /* ... cannot log in: a worker cannot connect */
} StartProblem;

/*
 * Can the workers start: does pg_durable.database exist, and is
 * pg_durable.worker_role a superuser that may log in?  Plain heap scans of
 * the shared catalogs pg_database and pg_authid, as autovacuum's launcher
 * does: without a database the catalog indexes cannot be used.
 */
static StartProblem
start_problem(void)
{
	StartProblem  problem = START_NO_DATABASE;
	Relation	  rel;
	TableScanDesc scan;
	HeapTuple	  tup;

	/* a cancel now waits for the loop, which forgets it */
	HOLD_CANCEL_INTERRUPTS();
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (strcmp(NameStr(db->datname), pgd_database) == 0)
		{
			problem = START_NO_ROLE;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	if (problem == START_NO_ROLE)
	{
		rel = table_open(AuthIdRelationId, AccessShareLock);
		scan = table_beginscan_catalog(rel, 0, NULL);
		while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			Form_pg_authid role = (Form_pg_authid) GETSTRUCT(tup);

			if (strcmp(NameStr(role->rolname), pgd_worker_role) != 0)
				continue;
			problem = !role->rolsuper ? START_NOT_SUPERUSER :
				!role->rolcanlogin	  ? START_NO_LOGIN :
										START_OK;
			break;
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	CommitTransactionCommand();
	RESUME_CANCEL_INTERRUPTS();
	return problem;
}

static void
set_state(PgdLauncherState state)
{
	SpinLockAcquire(&pgd_shared->mutex);
	pgd_shared->launcher_state = state;
	SpinLockRelease(&pgd_shared->mutex);
}

/* Say once why no worker is started (the missing database every minute). */
static void
log_start_problem(StartProblem problem)
{
	const char *why = NULL;

	if (problem == START_NO_DATABASE)
	{
		ereport(LOG,
				(errmsg("pg_durable.database \"%s\" does not exist",
						pgd_database),
				 errdetail("The pg_durable launcher starts no executor until it exists: "
						   "instances started meanwhile stay pending."),
				 errhint("Create the database and the extension in it, or set pg_durable.database "
						 "to the database that holds the extension and restart the server.")));
		return;
	}
	switch (problem)
	{
		case START_NO_ROLE:
			why = "does not exist";
			break;
		case START_NOT_SUPERUSER:
			why = "is not a superuser";
			break;
		case START_NO_LOGIN:
			why = "cannot log in";
			break;
		default:
			return;
	}
	ereport(LOG,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("pg_durable.worker_role \"%s\" %s: no pg_durable worker is started",
					pgd_worker_role, why),
			 errdetail("The executors and the HTTP worker connect as this role and run the engine "
					   "with its privileges, which needs a superuser with LOGIN."),
			 errhint("Set pg_durable.worker_role to a superuser and restart the server, "
					 "or make role \"%s\" a superuser with LOGIN.",
					 pgd_worker_role)));
}

/* A dynamic worker of the engine in pg_durable.database, reporting to the launcher. */
static BackgroundWorkerHandle *
start_worker(const char *function, const char *name, const char *type,
			 Datum arg)
{
	BackgroundWorker		worker;
	BackgroundWorkerHandle *handle;

	pgd_worker_describe(&worker, function, name, type, arg, MyProcPid);
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

static BackgroundWorkerHandle *
start_executor(int slot)
{
	char name[BGW_MAXLEN];

	snprintf(name, sizeof(name), "pg_durable executor %d", slot);
	return start_worker("pgd_executor_main", name, "pg_durable executor",
						Int32GetDatum(slot));
}

/* The HTTP worker (http_worker.c): one per server, in pg_durable.database. */
static BackgroundWorkerHandle *
start_http_worker(int unused)
{
	return start_worker("pgd_http_worker_main", "pg_durable http worker",
						"pg_durable http worker", (Datum) 0);
}

/* A worker the launcher keeps running: its handle, and when it last stopped. */
typedef struct Supervised
{
	BackgroundWorkerHandle *handle;
	TimestampTz				stopped_at;
} Supervised;

typedef enum SupervisedState
{
	SUPERVISED_RUNNING,
	SUPERVISED_WAITING, /* stopped a moment ago: restarted soon */
	SUPERVISED_MISSING	/* no free background worker slot */
} SupervisedState;

/*
 * Keep one worker running: notice that it stopped, and start it again,
 * after EXECUTOR_RESTART_MS.  *timeout: when the launcher must look again.
 */
static SupervisedState
supervise(Supervised *w, BackgroundWorkerHandle *(*start)(int), int arg,
		  long *timeout)
{
	pid_t pid;

	if (w->handle != NULL &&
		GetBackgroundWorkerPid(w->handle, &pid) == BGWH_STOPPED)
	{
		pfree(w->handle);
		w->handle = NULL;
		w->stopped_at = GetCurrentTimestamp();
	}
	if (w->handle != NULL)
		return SUPERVISED_RUNNING;
	/* back off a little after it stopped */
	if (w->stopped_at != 0 &&
		!TimestampDifferenceExceeds(w->stopped_at, GetCurrentTimestamp(),
									EXECUTOR_RESTART_MS))
	{
		*timeout = EXECUTOR_RESTART_MS;
		return SUPERVISED_WAITING;
	}
	if ((w->handle = start(arg)) == NULL)
	{
		*timeout = DATABASE_POLL_MS;
		return SUPERVISED_MISSING;
	}
	return SUPERVISED_RUNNING;
}

/* Say which workers found no free background worker slot. */
static void
log_left_out(int running, int nworkers, int missing, bool http_missing)
{
	if (missing == 0)
		ereport(LOG,
				(errmsg("pg_durable launcher started no HTTP worker: no free background worker slot"),
				 errdetail("HTTP steps wait until the launcher can start it, when a slot frees up."),
				 errhint("Raise max_worker_processes (it also serves parallel query).")));
	else
		ereport(LOG,
				(errmsg("pg_durable launcher started only %d of %d executors%s: no free background worker slots",
						running, nworkers,
						http_missing ? " and no HTTP worker" : ""),
				 http_missing ?
					 errdetail("%d executors and the HTTP worker were not started; HTTP steps wait for it. "
							   "The launcher starts them when slots free up.",
							   missing) :
					 errdetail("%d executors were not started, the HTTP worker was; the launcher starts "
							   "them when slots free up.",
							   missing),
				 errhint("Raise max_worker_processes (it also serves parallel query) or lower pg_durable.workers.")));
}

void
pgd_launcher_main(Datum main_arg)
{
	Supervised	 http_worker = {NULL, 0};
	Supervised	 executors[PGD_MAX_EXECUTORS];
	int			 nworkers = Min(pgd_workers, PGD_MAX_EXECUTORS);
	bool		 started = false;
	bool		 warned_slots = false;
	StartProblem logged = START_OK;
	TimestampTz	 logged_at = 0;
	int			 i;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: shared catalogs only, and visibility in pg_stat_activity. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	SpinLockAcquire(&pgd_shared->mutex);
	pgd_shared->launcher_pid = MyProcPid;
	pgd_shared->launcher_latch = MyLatch;
	SpinLockRelease(&pgd_shared->mutex);
	before_shmem_exit(pgd_launcher_detach, (Datum) 0);

	memset(executors, 0, sizeof(executors));

	ereport(LOG,
			(errmsg("pg_durable launcher started"),
			 errdetail("pg_durable.database is \"%s\", pg_durable.workers is %d.",
					   pgd_database, pgd_workers)));

	for (;;)
	{
		long timeout = -1L;

		pgd_idle_check_for_interrupts();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			ereport(LOG,
					(errmsg("pg_durable launcher reloaded its configuration")));
		}

		if (!started)
		{
			StartProblem problem = start_problem();

			if (problem == START_OK)
			{
				started = true;
				set_state(PGD_LAUNCHER_RUNNING);
				if (logged != START_OK)
					ereport(LOG,
							(errmsg("pg_durable launcher is starting the workers in database \"%s\" as role \"%s\"",
									pgd_database, pgd_worker_role)));
			}
			else
			{
				set_state(problem == START_NO_DATABASE ?
							  PGD_LAUNCHER_WAITING_DATABASE :
							  PGD_LAUNCHER_ROLE_REFUSED);
				/* a role problem once; a missing database every minute */
				if (problem != logged ||
					(problem == START_NO_DATABASE &&
					 TimestampDifferenceExceeds(logged_at,
												GetCurrentTimestamp(),
												DATABASE_LOG_MS)))
				{
					log_start_problem(problem);
					logged = problem;
					logged_at = GetCurrentTimestamp();
				}
				timeout = DATABASE_POLL_MS;
			}
		}

		if (started)
		{
			int running = 0;
			int missing = 0;

			bool			http_missing = false;
			SupervisedState st;

			/*
			 * Executor 0 first (without an executor nothing runs, not even
			 * the start of an instance), then the HTTP worker, then the other
			 * executors: the HTTP worker is the only one that runs HTTP
			 * steps, while any executor runs SQL steps, so when worker slots
			 * are short an executor is left out, not the HTTP worker.
			 */
			for (i = 0; i < nworkers; i++)
			{
				st = supervise(&executors[i], start_executor, i, &timeout);
				running += (st == SUPERVISED_RUNNING);
				missing += (st == SUPERVISED_MISSING);
				if (i == 0)
					http_missing =
						(supervise(&http_worker, start_http_worker, 0,
								   &timeout) == SUPERVISED_MISSING);
			}
			SpinLockAcquire(&pgd_shared->mutex);
			pgd_shared->http_left_out = http_missing;
			SpinLockRelease(&pgd_shared->mutex);

			if ((missing > 0 || http_missing) && !warned_slots)
			{
				log_left_out(running, nworkers, missing, http_missing);
				warned_slots = true;
			}
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
							 (timeout >= 0 ? WL_TIMEOUT : 0),
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

static void
add_problem(ReturnSetInfo *rsinfo, const char *problem, const char *detail)
{
	Datum values[2];
	bool  nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(problem);
	values[1] = CStringGetTextDatum(detail);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The tables a restore loaded, as one list in *tables, when this database
 * is held by a restore (docs/design/restores.md §3).
 */
static bool
restore_hold_tables(char **tables)
{
	bool		held = false;

	SPI_connect();
	if (pgd_store_restore_held() &&
		pgd_exec("SELECT string_agg(table_name, ', ' ORDER BY table_name) "
				 "FROM df_internal.restore_hold", 0, NULL) > 0)
	{
		char	   *list = pgd_spi_getstring(0, 1);

		if (list != NULL)
		{
			*tables = MemoryContextStrdup(TopTransactionContext, list);
			held = true;
		}
	}
	SPI_finish();
	return held;
}

/* Has ready work waited too long for an executor (store/tasks.c)? */
static bool
stale_ready_work(int64 *tasks, int64 *starts)
{
	SPI_connect();
	pgd_store_stale_ready(PGD_READY_STALE_S, tasks, starts);
	SPI_finish();
	return *tasks > 0 || *starts > 0;
}

/*
 * df_internal.engine_problems(): what keeps the engine from running this
 * database's instances, for df.check().  It runs in whatever database it is
 * called in, so it compares that database with pg_durable.database and
 * reads what the launcher published in shared memory.
 */
PG_FUNCTION_INFO_V1(pgd_engine_problems);
Datum
pgd_engine_problems(PG_FUNCTION_ARGS)
{
	ReturnSetInfo	*rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char			*here = get_database_name(MyDatabaseId);
	PgdLauncherState state;
	int				 attached = 0;
	bool			 http_left_out;
	char			*held = NULL;
	int64			 tasks;
	int64			 starts;

	InitMaterializedSRF(fcinfo, 0);

	SpinLockAcquire(&pgd_shared->mutex);
	state = pgd_shared->launcher_state;
	http_left_out = pgd_shared->http_left_out;
	for (int i = 0; i < PGD_MAX_EXECUTORS; i++)
		attached += (pgd_shared->executors[i].pid != 0);
	SpinLockRelease(&pgd_shared->mutex);

	if (here != NULL && strcmp(here, pgd_database) != 0)
		add_problem(rsinfo, "not_engine_database",
					psprintf("pg_durable.database is \"%s\"%s: no executor runs the instances "
							 "of database \"%s\" (%d executors attached in \"%s\").",
							 pgd_database,
							 state == PGD_LAUNCHER_WAITING_DATABASE ?
								 ", which does not exist" :
								 "",
							 here, attached, pgd_database));
	if (state == PGD_LAUNCHER_ROLE_REFUSED)
		add_problem(rsinfo, "worker_role_refused",
					psprintf("pg_durable.worker_role \"%s\" is not a superuser that can log in: "
							 "the launcher started no worker (the server log says why).",
							 pgd_worker_role));
	if (RecoveryInProgress())
		add_problem(rsinfo, "standby",
					"this server is a standby in recovery: no executor runs here until it is "
					"promoted, and the instances run on the primary.");
	else if (stale_ready_work(&tasks, &starts))
		add_problem(rsinfo, "ready_not_taken",
					psprintf("%lld tasks have been due and %lld starts pending for over %d s "
							 "with no executor taking them: see what the executors do in "
							 "pg_stat_activity (application_name \"pg_durable executor\").",
							 (long long) tasks, (long long) starts, PGD_READY_STALE_S));
	if (restore_hold_tables(&held))
		add_problem(rsinfo, "restore_held",
					psprintf("a restore loaded rows into %s: no step, timer or start runs in "
							 "this database until SELECT df.resume_restored() once the restore is complete.",
							 held));
	if (state == PGD_LAUNCHER_RUNNING && http_left_out)
		add_problem(rsinfo, "http_worker_missing",
					"the launcher found no free background worker slot for the HTTP worker: "
					"HTTP steps wait until one frees up (raise max_worker_processes).");
	return (Datum) 0;
}
