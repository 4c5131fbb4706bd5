/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The pg_durable launcher: a static background worker registered by
 *	  _PG_init that starts and supervises the executors and the HTTP
 *	  worker.
 *
 * The launcher connects to no database (it only needs the shared catalog
 * pg_database).  Once pg_durable.database exists it starts
 * pg_durable.workers executors as dynamic background workers — no more
 * than free worker slots allow, saying so in the log — and the HTTP worker
 * (http_worker.c), and restarts any that stops (after a back-off).  The executors wait by themselves for
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
#include "catalog/pg_database.h"
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
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "core/settings.h"
#include "core/shmem.h"
#include "core/unit.h"
#include "worker/worker.h"

#define PGD_LAUNCHER_RESTART_SECONDS 5
#define DATABASE_POLL_MS			 5000L
#define EXECUTOR_RESTART_MS			 1000L

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

/*
 * Does pg_durable.database exist?  A plain heap scan of the shared catalog
 * pg_database, as autovacuum's launcher does: without a database the
 * catalog indexes cannot be used.
 */
static bool
database_exists(void)
{
	bool		  exists = false;
	Relation	  rel;
	TableScanDesc scan;
	HeapTuple	  tup;

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
			exists = true;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return exists;
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

void
pgd_launcher_main(Datum main_arg)
{
	Supervised http_worker = {NULL, 0};
	Supervised executors[PGD_MAX_EXECUTORS];
	int		   nworkers = Min(pgd_workers, PGD_MAX_EXECUTORS);
	bool	   started = false;
	bool	   warned_slots = false;
	int		   i;

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

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			ereport(LOG,
					(errmsg("pg_durable launcher reloaded its configuration")));
		}

		if (!started)
		{
			if (database_exists())
				started = true;
			else
				timeout = DATABASE_POLL_MS;
		}

		if (started)
		{
			int running = 0;
			int missing = 0;

			for (i = 0; i < nworkers; i++)
			{
				SupervisedState st =
					supervise(&executors[i], start_executor, i, &timeout);

				running += (st == SUPERVISED_RUNNING);
				missing += (st == SUPERVISED_MISSING);
			}
			/* the HTTP worker, supervised like an executor */
			missing += (supervise(&http_worker, start_http_worker, 0,
								  &timeout) == SUPERVISED_MISSING);

			if (missing > 0 && !warned_slots)
			{
				ereport(LOG,
						(errmsg("pg_durable launcher started only %d of %d executors%s: no free background worker slots",
								running, nworkers,
								http_worker.handle == NULL ?
									" and no HTTP worker" :
									""),
						 errhint("Raise max_worker_processes (it also serves parallel query) or lower pg_durable.workers.")));
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
