/*-------------------------------------------------------------------------
 *
 * new_txn.c
 *	  df.start(..., transaction_mode => 'new'): start the instance in a
 *	  transaction of its own, so that it survives the caller's ROLLBACK.
 *
 * As in the reference (§3.13): refused inside a workflow; the caller's
 * current_user must have LOGIN; the launch takes an admission slot, a
 * session-level advisory lock pg_try_advisory_lock(1346982470, slot) for
 * slot 0 .. pg_durable.max_new_transaction_starts - 1, polled every 100 ms
 * up to pg_durable.new_transaction_start_timeout seconds, else the
 * reference's error.  Holding a slot, the backend runs
 *	   SET df.in_workflow = false; SET lock_timeout / statement_timeout = 30 s;
 *	   SELECT df.start($1, $2, $3)
 * as the same role in the extension's database, in a background session
 * (bgsql.c: a background worker, not a loopback connection, so no
 * password and no trust authentication), which commits and returns the
 * id.  df.start validates everything again there (database included), and
 * captures the variables that are committed: the caller's uncommitted
 * df.setvar is not seen.  The slot is released whatever happens (error,
 * cancel), in PG_FINALLY; a backend that dies releases it with its locks.
 *
 * Locks: one advisory lock (objsubid 2) at session level, for the length
 * of the call; the background session takes df.start's locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timeout.h"

#include "common/messages.h"
#include "api/api.h"
#include "common/spi.h"
#include "core/bgsql.h"
#include "core/identity.h"
#include "core/settings.h"
#include "core/unit.h"
#include "steps/step_sql.h"

#define START_SESSION_ENTRY "pgd_start_session_main"
#define START_SESSION_NAME	"pg_durable start session"
/* df.start in a new transaction waits at most this long for locks and overall */
#define START_SESSION_TIMEOUT_MS 30000

#define PGD_ADMISSION_KEY 1346982470 /* 0x50474446, "PGDF" */
#define ADMISSION_POLL_MS 100L

static void
admission_tag(LOCKTAG *tag, int slot)
{
	/* what pg_try_advisory_lock(int4, int4) locks: objsubid 2 */
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) PGD_ADMISSION_KEY,
						 (uint32) slot, 2);
}

static bool
try_slot(int slot)
{
	LOCKTAG			  tag;
	LockAcquireResult r;

	admission_tag(&tag, slot);
	r = LockAcquire(&tag, ExclusiveLock, true, true);
	if (r == LOCKACQUIRE_ALREADY_HELD || r == LOCKACQUIRE_ALREADY_CLEAR)
	{
		/* this session took it itself (pg_advisory_lock by hand): not ours */
		LockRelease(&tag, ExclusiveLock, true);
		return false;
	}
	return r != LOCKACQUIRE_NOT_AVAIL;
}

static void
release_slot(int slot)
{
	LOCKTAG tag;

	admission_tag(&tag, slot);
	LockRelease(&tag, ExclusiveLock, true);
}

/* An admission slot, or the reference's error after the timeout. */
static pg_noinline int
take_slot(void)
{
	TimestampTz deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									(int64) pgd_new_transaction_start_timeout *
										1000);

	for (;;)
	{
		int slot;

		for (slot = 0; slot < pgd_max_new_transaction_starts; slot++)
			if (try_slot(slot))
				return slot;
		if (GetCurrentTimestamp() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg(PGD_MSG_NEW_TXN_LIMIT,
							pgd_max_new_transaction_starts,
							pgd_new_transaction_start_timeout)));
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ADMISSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Run df.start in a background session, waiting within the admission timeout for a worker slot. */
static PgdBgsqlResult
launch(const char *fut, const char *label, const char *database)
{
	const char	  *args[3] = {fut, label, database};
	PgdBgsqlResult res;
	TimestampTz	   deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									(int64) pgd_new_transaction_start_timeout *
										1000);

	while (!pgd_bgsql_run(START_SESSION_ENTRY, START_SESSION_NAME,
						  MyDatabaseId, GetUserId(), GetUserId(), 3, args,
						  &res))
	{
		if (GetCurrentTimestamp() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start a background session for transaction_mode => 'new'"),
					 errdetail("No background worker slot is free."),
					 errhint("Raise max_worker_processes, or start the workflow in caller mode.")));
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ADMISSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return res;
}

char *
pgd_start_in_new_transaction(const char *fut, const char *label,
							 const char *database)
{
	volatile int   slot;
	PgdBgsqlResult res;

	if (pgd_in_workflow())
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("df.start() with transaction_mode => 'new' cannot be called inside a workflow - "
						"a step's work commits with the step"),
				 errhint("Use transaction_mode => 'caller' (the default): the new instance starts when "
						 "the step commits.")));

	pgd_check_start_identity(GetUserId());
	slot = take_slot();
	PG_TRY();
	{
		res = launch(fut, label, database);
	}
	PG_FINALLY();
	{
		release_slot(slot);
	}
	PG_END_TRY();

	switch (res.status)
	{
		case PGD_BGSQL_OK:
			return res.text;
		case PGD_BGSQL_ERROR:
			ereport(ERROR,
					(errcode(res.sqlstate), errmsg("%s", res.text),
					 res.detail ? errdetail("%s", res.detail) : 0,
					 res.hint ? errhint("%s", res.hint) : 0));
			break;
		default:
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("the background session of transaction_mode => 'new' ended without "
					"starting the workflow"),
			 errdetail("It could not connect to database \"%s\" as role \"%s\" or stopped; "
					   "the server log says why.",
					   get_database_name(MyDatabaseId),
					   GetUserNameFromId(GetUserId(), false))));
	return NULL; /* keep the compiler quiet */
}

/*
 * The session's side: df.start(fut, label, database) as the connected
 * role, in a transaction of its own, committed before the id goes back.
 */
static void
start_session_handler(const PgdBgsqlRequest *req, PgdBgsqlResult *result)
{
	Oid	  types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum values[3];
	char  nulls[3] = "   ";
	int	  i;

	pgd_begin_unit("pg_durable: df.start in a new transaction");
	/* a plain session of the caller's role, outside any workflow */
	pgd_spi_exec("SELECT pg_catalog.set_config('df.in_workflow', 'false', false), "
				 "pg_catalog.set_config('lock_timeout', '30000', false), "
				 "pg_catalog.set_config('statement_timeout', '30000', false)",
				 0, NULL, NULL, NULL, false);
	for (i = 0; i < 3; i++)
	{
		if (req->args[i])
			values[i] = CStringGetTextDatum(req->args[i]);
		else
			nulls[i] = 'n';
	}
	/* SPI does not arm statement_timeout by itself */
	enable_timeout_after(STATEMENT_TIMEOUT, START_SESSION_TIMEOUT_MS);
	pgd_spi_exec("SELECT df.start($1, $2, $3)", 3, types, values, nulls,
				 false);
	disable_timeout(STATEMENT_TIMEOUT, false);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	result->text = MemoryContextStrdup(req->cxt, pgd_spi_getstring(0, 1));
	pgd_end_unit();
	result->status = PGD_BGSQL_OK;
}

void
pgd_start_session_main(Datum main_arg)
{
	pgd_bgsql_serve(main_arg, start_session_handler);
}
