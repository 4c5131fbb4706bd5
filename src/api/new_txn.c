/*-------------------------------------------------------------------------
 *
 * new_txn.c
 *	  df.start(..., transaction_mode => 'new'): start the instance in a
 *	  transaction of its own, so that it survives the caller's ROLLBACK;
 *	  and df.signal(..., transaction_mode => 'new'): send the signal at
 *	  once, in a transaction of its own, as the reference does.
 *
 * As in the reference (§3.13): refused inside a workflow; the caller's
 * current_user must have LOGIN; the launch takes an admission slot, one of
 * pg_durable.max_new_transaction_starts slots in shared memory (the whole
 * server's, not a database's), polled every 100 ms up to
 * pg_durable.new_transaction_start_timeout seconds, else the reference's
 * error.  The reference's slots are advisory locks
 * pg_try_advisory_lock(1346982470, slot), which any role can take and so block
 * every launch: ours only this file can take.  Holding a slot, the backend
 * runs
 *	   SET df.in_workflow = false; SET lock_timeout / statement_timeout = 30 s;
 *	   SELECT df.start($1, $2, $3)
 * as the same role in the extension's database, in a background session
 * (bgsql.c: a background worker, not a loopback connection, so no
 * password and no trust authentication), which commits and returns the
 * id.  df.start validates everything again there (database included), and
 * captures the variables that are committed: the caller's uncommitted
 * df.setvar is not seen.  A signal goes the same way: the session runs
 *	   SELECT df.signal($1, $2, $3)
 * (caller mode there), commits, and the signal is delivered while the
 * caller's transaction goes on; it does not see an instance the caller
 * started and has not committed.  The slot is released whatever happens (error,
 * cancel), in PG_FINALLY, and by a before_shmem_exit callback when the
 * backend exits holding it; a backend that crashes makes the postmaster
 * reinitialize shared memory, slots included.
 *
 * Locks: pgd_shared->admission_mutex (a spinlock), for a scan of the slots;
 * the background session takes df.start's locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/ipc.h"
#include "fmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

#include "common/messages.h"
#include "api/api.h"
#include "common/spi.h"
#include "core/bgsql.h"
#include "core/identity.h"
#include "core/settings.h"
#include "core/shmem.h"
#include "core/unit.h"
#include "steps/step_sql.h"

#define START_SESSION_ENTRY	 "pgd_start_session_main"
#define START_SESSION_NAME	 "pg_durable start session"
#define SIGNAL_SESSION_ENTRY "pgd_signal_session_main"
#define SIGNAL_SESSION_NAME	 "pg_durable signal session"
/* the work in a new transaction waits at most this long for locks and overall */
#define START_SESSION_TIMEOUT_MS 30000

/* What runs in a new transaction: the session's entry point and the words for errors. */
typedef struct NewTxnWork
{
	const char *entry;
	const char *session_name;
	const char *what;	  /* "starting the workflow" */
	const char *fallback; /* the hint when no worker slot is free */
} NewTxnWork;

static const NewTxnWork start_work = {
	START_SESSION_ENTRY, START_SESSION_NAME, "starting the workflow",
	"Raise max_worker_processes, or start the workflow in caller mode."};
static const NewTxnWork signal_work = {
	SIGNAL_SESSION_ENTRY, SIGNAL_SESSION_NAME, "sending the signal",
	"Raise max_worker_processes, or send the signal in caller mode."};

#define ADMISSION_POLL_MS 100L

/* the slot this backend holds, or -1; released at exit if still held */
static int	held_slot = -1;
static bool exit_hook_armed = false;

static int
admission_slots(void)
{
	return Min(pgd_max_new_transaction_starts, PGD_MAX_NEW_STARTS);
}

static void
release_slot(void)
{
	if (held_slot < 0)
		return;
	SpinLockAcquire(&pgd_shared->admission_mutex);
	if (pgd_shared->admission[held_slot] == MyProcPid)
		pgd_shared->admission[held_slot] = 0;
	SpinLockRelease(&pgd_shared->admission_mutex);
	held_slot = -1;
}

/* A backend that exits (FATAL, terminate) while launching frees its slot. */
static void
release_slot_at_exit(int code, Datum arg)
{
	release_slot();
}

/*
 * A free slot of shared memory, marked with this backend's PID.  Nothing
 * but this file takes them: no role can hold them from SQL.
 */
static bool
try_slot(void)
{
	int n = admission_slots();
	int slot;

	if (!exit_hook_armed)
	{
		before_shmem_exit(release_slot_at_exit, (Datum) 0);
		exit_hook_armed = true;
	}
	SpinLockAcquire(&pgd_shared->admission_mutex);
	for (slot = 0; slot < n; slot++)
	{
		if (pgd_shared->admission[slot] == 0)
		{
			pgd_shared->admission[slot] = MyProcPid;
			held_slot = slot;
			break;
		}
	}
	SpinLockRelease(&pgd_shared->admission_mutex);
	return held_slot >= 0;
}

/* df_internal.admission_slots_held(): how many slots are taken now, server-wide. */
PG_FUNCTION_INFO_V1(pgd_admission_slots_held);
Datum
pgd_admission_slots_held(PG_FUNCTION_ARGS)
{
	int held = 0;
	int slot;

	SpinLockAcquire(&pgd_shared->admission_mutex);
	for (slot = 0; slot < PGD_MAX_NEW_STARTS; slot++)
		held += (pgd_shared->admission[slot] != 0);
	SpinLockRelease(&pgd_shared->admission_mutex);
	PG_RETURN_INT32(held);
}

/* An admission slot, or the reference's error after the timeout. */
static pg_noinline void
take_slot(void)
{
	TimestampTz deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									(int64) pgd_new_transaction_start_timeout *
										1000);

	for (;;)
	{
		if (try_slot())
			return;
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

/* Run the work in a background session, waiting within the admission timeout for a worker slot. */
static PgdBgsqlResult
launch(const NewTxnWork *work, const char *const *args)
{
	PgdBgsqlResult res;
	TimestampTz	   deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									(int64) pgd_new_transaction_start_timeout *
										1000);

	while (!pgd_bgsql_run(work->entry, work->session_name, MyDatabaseId,
						  GetUserId(), GetUserId(), 4, args, &res))
	{
		if (GetCurrentTimestamp() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start a background session for transaction_mode => 'new'"),
					 errdetail("No background worker slot is free."),
					 errhint("%s", work->fallback)));
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ADMISSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return res;
}

/* Take a slot, run the work in a background session, give the slot back; its answer or its error. */
static char *
run_in_new_transaction(const NewTxnWork *work, const char *const *args)
{
	PgdBgsqlResult res;

	take_slot();
	PG_TRY();
	{
		res = launch(work, args);
	}
	PG_FINALLY();
	{
		release_slot();
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
					"%s",
					work->what),
			 errdetail("It could not connect to database \"%s\" as role \"%s\" or stopped; "
					   "the server log says why.",
					   get_database_name(MyDatabaseId),
					   GetUserNameFromId(GetUserId(), false))));
	return NULL; /* keep the compiler quiet */
}

char *
pgd_start_in_new_transaction(const char *fut, const char *label,
							 const char *database, const char *key)
{
	const char *args[4] = {fut, label, database, key};

	if (pgd_in_workflow())
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("df.start() with transaction_mode => 'new' cannot be called inside a workflow - "
						"a step's work commits with the step"),
				 errhint("Use transaction_mode => 'caller' (the default): the new instance starts when "
						 "the step commits.")));

	pgd_check_start_identity(GetUserId());
	return run_in_new_transaction(&start_work, args);
}

void
pgd_signal_in_new_transaction(const char *instance_id, const char *name,
							  const char *data)
{
	const char *args[4] = {instance_id, name, data, NULL};
	HeapTuple	tup;
	bool		canlogin;

	if (pgd_in_workflow())
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("df.signal() with transaction_mode => 'new' cannot be called inside a workflow - "
						"a step's work commits with the step"),
				 errhint("Use transaction_mode => 'caller': the signal is sent when the step commits.")));

	/* the session logs in as the caller */
	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", GetUserId());
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);
	if (!canlogin)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("df.signal() with transaction_mode => 'new' needs a role that can log in"),
				 errdetail("current_user \"%s\" does not have LOGIN privilege; the signal is sent by "
						   "a background session connected as that role.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("Send the signal in caller mode, or as a role with LOGIN.")));
	(void) run_in_new_transaction(&signal_work, args);
}

/*
 * The session's side: one statement of three text arguments as the
 * connected role, in a transaction of its own, committed before its first
 * column goes back.
 */
static void
session_run(const PgdBgsqlRequest *req, PgdBgsqlResult *result,
			const char *unit, const char *sql)
{
	Oid	  types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum values[4];
	char  nulls[4] = "    ";
	int	  i;

	pgd_begin_unit(unit);
	/* a plain session of the caller's role, outside any workflow */
	pgd_spi_exec("SELECT pg_catalog.set_config('df.in_workflow', 'false', false), "
				 "pg_catalog.set_config('lock_timeout', '30000', false), "
				 "pg_catalog.set_config('statement_timeout', '30000', false)",
				 0, NULL, NULL, NULL, false);
	for (i = 0; i < 4; i++)
	{
		if (i < req->nargs && req->args[i])
			values[i] = CStringGetTextDatum(req->args[i]);
		else
			nulls[i] = 'n';
	}
	/* SPI does not arm statement_timeout by itself */
	enable_timeout_after(STATEMENT_TIMEOUT, START_SESSION_TIMEOUT_MS);
	pgd_spi_exec(sql, 4, types, values, nulls, false);
	disable_timeout(STATEMENT_TIMEOUT, false);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	result->text = MemoryContextStrdup(req->cxt, pgd_spi_getstring(0, 1));
	pgd_end_unit();
	result->status = PGD_BGSQL_OK;
}

/* df.start(fut, label, database); the id goes back */
static void
start_session_handler(const PgdBgsqlRequest *req, PgdBgsqlResult *result)
{
	/* (without a key, the call the 0.3.0 schema's df.start takes too) */
	bool keyed = req->nargs > 3 && req->args[3] != NULL;

	session_run(req, result, "pg_durable: df.start in a new transaction",
				keyed ? "SELECT df.start($1, $2, $3, idempotency_key => $4)" :
						"SELECT df.start($1, $2, $3)");
}

/* df.signal(instance_id, signal_name, signal_data), in caller mode there */
static void
signal_session_handler(const PgdBgsqlRequest *req, PgdBgsqlResult *result)
{
	session_run(req, result, "pg_durable: df.signal in a new transaction",
				"SELECT df.signal($1, $2, $3)");
}

void
pgd_start_session_main(Datum main_arg)
{
	pgd_bgsql_serve(main_arg, start_session_handler);
}

void
pgd_signal_session_main(Datum main_arg)
{
	pgd_bgsql_serve(main_arg, signal_session_handler);
}
