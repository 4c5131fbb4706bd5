/*-------------------------------------------------------------------------
 *
 * unit.c
 *	  Units of work of the background workers, their recovery from errors,
 *	  the rate limit of their log lines, and their registration.
 *
 * A worker loop runs one unit of work per transaction (STYLE.md: the
 * background-worker skeleton of PostgreSQL's own modules).  An error in a
 * unit is logged, its transaction rolled back, and the loop goes on:
 * whatever the unit claimed is back in the queue.
 *
 * A unit that touches the engine's tables begins with
 * pgd_begin_engine_unit: it holds a share lock on the extension object for
 * the transaction, taken without waiting.  DROP EXTENSION locks that object
 * exclusively before any of the extension's tables, so a worker either
 * holds the lock first (the drop waits for the unit to end, and the unit
 * never waits on the drop) or finds it taken and stays away from the tables
 * (it would otherwise wait on a table the drop holds, while the drop waits
 * on a table the unit holds: a deadlock).
 *
 * Locks: AccessShareLock on the pg_durable extension object, without
 * waiting, for the transaction of an engine unit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/lmgr.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "core/unit.h"

/* Log rate limit: at most LOG_BURST lines per LOG_WINDOW_MS, per process. */
#define LOG_BURST	  10
#define LOG_WINDOW_MS 60000L

static TimestampTz log_window_start = 0;
static int		   log_count = 0;
static int		   log_suppressed = 0;

void
pgd_begin_unit(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

/*
 * The extension's OID, kept between units: looking it up by name is a
 * catalog scan per unit.  A kept OID is checked after the lock, by the
 * lookup by OID that is needed anyway (and its name compared, as the
 * OID of a dropped extension may come back as another object's); a drop
 * and re-create makes it stale, and then it is looked up again by name.
 */
static Oid ext_oid = InvalidOid;

bool
pgd_begin_engine_unit(const char *activity)
{
	int attempt;

	pgd_begin_unit(activity);
	for (attempt = 0; attempt < 2; attempt++)
	{
		bool  kept = OidIsValid(ext_oid);
		Oid	  ext = kept ? ext_oid : get_extension_oid("pg_durable", true);
		char *name;

		if (!OidIsValid(ext) ||
			!ConditionalLockDatabaseObject(ExtensionRelationId, ext, 0,
										   AccessShareLock))
			break;
		/* locked: unless a drop committed just before, it stays */
		name = get_extension_name(ext);
		if (name != NULL && strcmp(name, "pg_durable") == 0)
		{
			ext_oid = ext;
			return true;
		}
		ext_oid = InvalidOid;
		if (!kept)
			break;
	}
	pgd_end_unit();
	return false;
}

void
pgd_end_unit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
pgd_unit_recover(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	AbortCurrentTransaction();
	SPI_finish(); /* harmless when not connected */
	MemoryContextSwitchTo(cxt);
}

ErrorData *
pgd_unit_abort(MemoryContext cxt)
{
	ErrorData *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	SPI_finish(); /* harmless when not connected */
	MemoryContextSwitchTo(cxt);
	return edata;
}

/*
 * Is the extension there?  Asked between units, outside every error
 * handler: a cancel that arrives meanwhile waits for
 * pgd_idle_check_for_interrupts, which forgets it.
 */
bool
pgd_extension_exists(void)
{
	bool exists;

	HOLD_CANCEL_INTERRUPTS();
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	exists = OidIsValid(get_extension_oid("pg_durable", true));
	CommitTransactionCommand();
	RESUME_CANCEL_INTERRUPTS();
	return exists;
}

/*
 * CHECK_FOR_INTERRUPTS() for a worker between its units.  A query cancel
 * that arrived since (pg_cancel_backend(), or wake.c's interrupt for a
 * step that had ended before it came) has no statement to cancel; raised
 * here, outside every unit's error handler, it ended the process.  It is
 * forgotten, with a LOG line naming the worker (its bgw_name); a shutdown
 * request is obeyed.
 */
void
pgd_idle_check_for_interrupts(void)
{
	if (QueryCancelPending)
	{
		QueryCancelPending = false;
		if (pgd_log_allowed())
			ereport(LOG,
					(errmsg("%s: a cancel request arrived between units of work and was ignored",
							MyBgworkerEntry ? MyBgworkerEntry->bgw_name :
											  "pg_durable")));
	}
	CHECK_FOR_INTERRUPTS();
}

bool
pgd_log_allowed(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (log_window_start == 0 ||
		TimestampDifferenceExceeds(log_window_start, now, LOG_WINDOW_MS))
	{
		if (log_suppressed > 0)
			ereport(LOG,
					(errmsg("%d log lines of pg_durable suppressed in the last minute",
							log_suppressed)));
		log_window_start = now;
		log_count = 0;
		log_suppressed = 0;
	}
	if (log_count < LOG_BURST)
	{
		log_count++;
		return true;
	}
	log_suppressed++;
	return false;
}

void
pgd_worker_describe(BackgroundWorker *worker, const char *function,
					const char *name, const char *type, Datum arg,
					pid_t notify_pid)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags =
		BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "pg_durable");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
	worker->bgw_main_arg = arg;
	worker->bgw_notify_pid = notify_pid;
}
