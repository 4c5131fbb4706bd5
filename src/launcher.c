/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The pg_durable launcher: a static background worker registered by
 *	  _PG_init.
 *
 * The launcher will start and supervise the executors of pg_durable.database
 * and drive timers, lease expiry, heartbeat and retention.  For now it
 * publishes itself in shared memory and waits on its latch: SIGHUP re-reads
 * the configuration, SIGTERM ends it, and postmaster death ends it
 * (WL_EXIT_ON_PM_DEATH).  The postmaster restarts it 5 seconds after it
 * exits abnormally.
 *
 * Locks: the pgd_shared spinlock, briefly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "pg_durable.h"
#include "shmem.h"

#define PGD_LAUNCHER_RESTART_SECONDS 5

void
pgd_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = PGD_LAUNCHER_RESTART_SECONDS;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_durable");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "pgd_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_durable launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_durable launcher");
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

void
pgd_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: this only makes the launcher visible in pg_stat_activity. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	SpinLockAcquire(&pgd_shared->mutex);
	pgd_shared->launcher_pid = MyProcPid;
	pgd_shared->launcher_latch = MyLatch;
	SpinLockRelease(&pgd_shared->mutex);
	before_shmem_exit(pgd_launcher_detach, (Datum) 0);

	ereport(LOG,
			(errmsg("pg_durable launcher started"),
			 errdetail("pg_durable.database is \"%s\", pg_durable.workers is %d.",
					   pgd_database, pgd_workers)));

	for (;;)
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH,
						 -1L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);

		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			ereport(LOG, (errmsg("pg_durable launcher reloaded its configuration")));
		}
	}
}
