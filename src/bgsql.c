/*-------------------------------------------------------------------------
 *
 * bgsql.c
 *	  Background sessions: run one piece of work as role R in database D in
 *	  a separate backend and hand back the result.
 *
 * A backend is bound to one database and one transaction at a time.  Two
 * things need another one: df.start(..., transaction_mode => 'new'), whose
 * start must commit whatever the caller's transaction does, and the steps
 * of an instance started with database => 'x', which must run in x while
 * the engine lives in pg_durable.database.  The reference opens a loopback
 * libpq connection for both, which needs a password or trust
 * authentication.  We start a dynamic background worker instead,
 * connected with BackgroundWorkerInitializeConnectionByOid: no password,
 * no pg_hba.conf entry, and PostgreSQL's own checks still apply (the
 * database must exist and accept connections; a role that is not a
 * superuser needs LOGIN and CONNECT).
 *
 * Protocol.  The caller creates a DSM segment holding the request (kind,
 * database, roles, up to three strings) and a shm_mq on which the worker
 * sends exactly one reply: status, SQLSTATE, then text, detail and hint.
 * The worker commits its transaction before it replies, so an OK reply
 * means the work is durable; a worker that dies or cannot connect
 * (FATAL) detaches from the queue without replying, which the caller sees
 * as PGD_BGSQL_NO_ANSWER.
 *
 * The caller waits in shm_mq_receive, which handles latch wake-ups,
 * CHECK_FOR_INTERRUPTS and postmaster death, and notices a worker that
 * stopped before attaching (shm_mq_set_handle).  If the wait is interrupted
 * (query cancel, statement timeout, termination), the worker is terminated
 * before the error propagates: no session outlives its caller's interest,
 * and one terminated before its commit leaves no rows.
 *
 * Workers are BGW_NEVER_RESTART and notify the caller.  When no
 * background worker slot is free, pgd_bgsql_run returns false and the
 * caller decides (df.start waits within its admission timeout; the
 * executor re-queues the step).
 *
 * Locks: none of its own.  The worker takes whatever its work takes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timeout.h"

#include "bgsql.h"
#include "engine.h"
#include "pg_durable.h"

#define BGSQL_QUEUE_SIZE 65536
#define BGSQL_MAX_ARGS 3
/* df.start in a new transaction waits at most this long for locks and overall */
#define BGSQL_START_TIMEOUT_MS 30000

typedef struct BgsqlRequest
{
	int			kind;			/* PgdBgsqlKind */
	Oid			dboid;
	Oid			connect_as;		/* the worker's session user */
	Oid			run_as;			/* PGD_BGSQL_STEP: the submitter */
	int			nargs;
	bool		isnull[BGSQL_MAX_ARGS];
	Size		argoff[BGSQL_MAX_ARGS]; /* offsets of the strings from the start */
	Size		mq_offset;
} BgsqlRequest;

typedef struct BgsqlReplyHeader
{
	int32		status;			/* PgdBgsqlStatus */
	int32		sqlstate;
} BgsqlReplyHeader;

static void
append_opt_string(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, s ? 1 : 0);
	if (s)
		appendBinaryStringInfo(buf, s, strlen(s) + 1);
}

/* Read one optional string of a reply; NULL on a malformed reply. */
static const char *
read_opt_string(const char **p, const char *end, bool *isnull)
{
	const char *s;
	size_t		n;

	if (*p >= end)
		return NULL;
	*isnull = (**p == 0);
	(*p)++;
	if (*isnull)
		return "";
	s = *p;
	n = strnlen(s, end - s);
	if (n == (size_t) (end - s))
		return NULL;
	*p = s + n + 1;
	return s;
}

bool
pgd_bgsql_run(PgdBgsqlKind kind, Oid dboid, Oid connect_as, Oid run_as,
			  int nargs, const char *const *args, PgdBgsqlResult *result)
{
	Size		size = sizeof(BgsqlRequest);
	Size		mq_offset;
	dsm_segment *seg;
	BgsqlRequest *req;
	shm_mq	   *mq;
	shm_mq_handle *mqh;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	shm_mq_result res;
	Size		nbytes = 0;
	void	   *data = NULL;
	int			i;

	Assert(nargs <= BGSQL_MAX_ARGS);
	for (i = 0; i < nargs; i++)
		if (args[i] != NULL)
			size += strlen(args[i]) + 1;
	mq_offset = MAXALIGN(size);

	seg = dsm_create(mq_offset + BGSQL_QUEUE_SIZE, 0);
	req = dsm_segment_address(seg);
	memset(req, 0, sizeof(BgsqlRequest));
	req->kind = kind;
	req->dboid = dboid;
	req->connect_as = connect_as;
	req->run_as = run_as;
	req->nargs = nargs;
	req->mq_offset = mq_offset;
	size = sizeof(BgsqlRequest);
	for (i = 0; i < nargs; i++)
	{
		req->isnull[i] = (args[i] == NULL);
		if (args[i] != NULL)
		{
			req->argoff[i] = size;
			memcpy((char *) req + size, args[i], strlen(args[i]) + 1);
			size += strlen(args[i]) + 1;
		}
	}
	mq = shm_mq_create((char *) req + mq_offset, BGSQL_QUEUE_SIZE);
	shm_mq_set_receiver(mq, MyProc);
	mqh = shm_mq_attach(mq, seg, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_durable");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "pgd_bgsql_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_durable %s for PID %d",
			 kind == PGD_BGSQL_STEP ? "step session" : "start session", MyProcPid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_durable session");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		dsm_detach(seg);
		return false;
	}
	shm_mq_set_handle(mqh, handle);

	PG_TRY();
	{
		res = shm_mq_receive(mqh, &nbytes, &data, false);
	}
	PG_CATCH();
	{
		/* cancelled, timed out or terminated: the session must not go on */
		TerminateBackgroundWorker(handle);
		PG_RE_THROW();
	}
	PG_END_TRY();

	memset(result, 0, sizeof(PgdBgsqlResult));
	result->status = PGD_BGSQL_NO_ANSWER;
	if (res == SHM_MQ_SUCCESS && nbytes >= sizeof(BgsqlReplyHeader))
	{
		BgsqlReplyHeader hdr;
		const char *p = (const char *) data + sizeof(BgsqlReplyHeader);
		const char *end = (const char *) data + nbytes;
		const char *text,
				   *detail = NULL,
				   *hint = NULL;
		bool		tnull,
					dnull = true,
					hnull = true;

		memcpy(&hdr, data, sizeof(hdr));
		text = read_opt_string(&p, end, &tnull);
		if (text != NULL)
			detail = read_opt_string(&p, end, &dnull);
		if (detail != NULL)
			hint = read_opt_string(&p, end, &hnull);
		if (hint != NULL)
		{
			result->status = (PgdBgsqlStatus) hdr.status;
			result->sqlstate = hdr.sqlstate;
			result->text = tnull ? NULL : pstrdup(text);
			result->detail = dnull ? NULL : pstrdup(detail);
			result->hint = hnull ? NULL : pstrdup(hint);
		}
	}
	dsm_detach(seg);
	if (result->status == PGD_BGSQL_NO_ANSWER)
	{
		/* make sure it is gone before the caller goes on (it may still be exiting) */
		TerminateBackgroundWorker(handle);
		(void) WaitForBackgroundWorkerShutdown(handle);
	}
	pfree(handle);
	return true;
}

/* --- the worker ---------------------------------------------------------- */

/* the worker's memory, which outlives its transaction */
static MemoryContext session_cxt = NULL;

static char *
request_arg(BgsqlRequest *req, int i)
{
	if (i >= req->nargs || req->isnull[i])
		return NULL;
	return pstrdup((char *) req + req->argoff[i]);
}

/* df.start(fut, label, database) as the connected role, in a transaction of its own. */
static void
do_start_new(BgsqlRequest *req, StringInfo reply)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = "   ";
	char	   *id;
	int			i;
	BgsqlReplyHeader hdr = {PGD_BGSQL_OK, 0};

	pgd_begin_unit("pg_durable: df.start in a new transaction");
	/* a plain session of the caller's role, outside any workflow */
	pgd_spi_exec("SELECT pg_catalog.set_config('df.in_workflow', 'false', false), "
				 "pg_catalog.set_config('lock_timeout', '30000', false), "
				 "pg_catalog.set_config('statement_timeout', '30000', false)",
				 0, NULL, NULL, NULL, false);
	for (i = 0; i < 3; i++)
	{
		char	   *a = request_arg(req, i);

		if (a)
			values[i] = CStringGetTextDatum(a);
		else
			nulls[i] = 'n';
	}
	/* SPI does not arm statement_timeout by itself */
	enable_timeout_after(STATEMENT_TIMEOUT, BGSQL_START_TIMEOUT_MS);
	pgd_spi_exec("SELECT df.start($1, $2, $3)", 3, types, values, nulls, false);
	disable_timeout(STATEMENT_TIMEOUT, false);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	id = MemoryContextStrdup(session_cxt, pgd_spi_getstring(0, 1));
	pgd_end_unit();

	appendBinaryStringInfo(reply, (char *) &hdr, sizeof(hdr));
	append_opt_string(reply, id);
	append_opt_string(reply, NULL);
	append_opt_string(reply, NULL);
}

/* A step's SQL as the submitter, contained as in the executor (step_sql.c). */
static void
do_step(BgsqlRequest *req, StringInfo reply)
{
	char	   *query = request_arg(req, 0);
	PgdOutcome	outcome;
	bool		retry;
	int			sqlstate;
	BgsqlReplyHeader hdr;

	pgd_begin_unit("pg_durable: workflow step");
	pgstat_report_activity(STATE_RUNNING, query);
	outcome = pgd_run_user_sql(query, req->run_as, &retry, &sqlstate);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	if (outcome.result != NULL)
		outcome.result = MemoryContextStrdup(session_cxt, outcome.result);
	pgd_end_unit();

	hdr.status = retry ? PGD_BGSQL_RETRY : outcome.ok ? PGD_BGSQL_OK : PGD_BGSQL_FAILED;
	hdr.sqlstate = sqlstate;
	appendBinaryStringInfo(reply, (char *) &hdr, sizeof(hdr));
	append_opt_string(reply, outcome.result);
	append_opt_string(reply, NULL);
	append_opt_string(reply, NULL);
}

void
pgd_bgsql_main(Datum main_arg)
{
	dsm_segment *seg;
	BgsqlRequest *req;
	shm_mq_handle *mqh;
	StringInfoData reply;
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pg_durable session");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the caller gave up before we started */
	dsm_pin_mapping(seg);
	req = dsm_segment_address(seg);
	shm_mq_set_sender((shm_mq *) ((char *) req + req->mq_offset), MyProc);
	mqh = shm_mq_attach((shm_mq *) ((char *) req + req->mq_offset), seg, NULL);

	/* FATAL here (no such database, no LOGIN, no CONNECT...) detaches the queue */
	BackgroundWorkerInitializeConnectionByOid(req->dboid, req->connect_as, 0);
	pgstat_report_appname(req->kind == PGD_BGSQL_STEP ? "pg_durable step session"
						  : "pg_durable start session");
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);

	session_cxt = AllocSetContextCreate(TopMemoryContext, "pg_durable session", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(session_cxt);
	initStringInfo(&reply);

	PG_TRY();
	{
		if (req->kind == PGD_BGSQL_START_NEW)
			do_start_new(req, &reply);
		else if (req->kind == PGD_BGSQL_STEP)
			do_step(req, &reply);
		else
			elog(ERROR, "pg_durable: unknown background session kind %d", req->kind);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		BgsqlReplyHeader hdr;

		MemoryContextSwitchTo(session_cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		SPI_finish();			/* harmless when not connected */
		MemoryContextSwitchTo(session_cxt);

		resetStringInfo(&reply);
		hdr.status = PGD_BGSQL_ERROR;
		hdr.sqlstate = edata->sqlerrcode;
		appendBinaryStringInfo(&reply, (char *) &hdr, sizeof(hdr));
		append_opt_string(&reply, edata->message ? edata->message : "unknown error");
		append_opt_string(&reply, edata->detail);
		append_opt_string(&reply, edata->hint);
	}
	PG_END_TRY();

	/* the caller may be gone (SHM_MQ_DETACHED): nothing more to do then */
	(void) shm_mq_send(mqh, reply.len, reply.data, false, true);
	proc_exit(0);
}
