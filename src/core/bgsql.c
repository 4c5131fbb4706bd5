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
 * Protocol.  The caller creates a DSM segment saying where to connect,
 * with two shm_mqs: requests (kind, the role to run as, up to three
 * strings) go to the worker, replies (status, SQLSTATE, then text, detail
 * and hint) come back, one per request.  The worker commits each
 * request's transaction before it replies, so an OK reply means the work
 * is durable; a worker that dies or cannot connect (FATAL) detaches
 * without replying, which the caller sees as PGD_BGSQL_NO_ANSWER.
 *
 * Two lifetimes.  A one-shot session (df.start in a new transaction)
 * serves one request and exits.  A step session belongs to one executor
 * and one database (pgd_bgsql_step): it serves that executor's steps in
 * that database one after the other while they keep coming, and exits
 * after BGSQL_IDLE_EXIT_MS without work, or when its executor goes away
 * (its queue is detached).  It runs steps of different submitters in
 * turn, which pgd_run_user_sql contains exactly as in the executor.
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

#include "core/bgsql.h"
#include "engine/engine.h"
#include "core/settings.h"
#include "steps/step_sql.h"

#define BGSQL_QUEUE_SIZE 65536
#define BGSQL_MAX_ARGS 3
/* df.start in a new transaction waits at most this long for locks and overall */
#define BGSQL_START_TIMEOUT_MS 30000

/* The segment: where the session connects, then the two queues. */
typedef struct BgsqlShared
{
	Oid			dboid;
	Oid			connect_as;		/* the worker's session user */
	bool		persistent;		/* serve requests until idle, else one */
	Size		req_offset;		/* caller -> session */
	Size		rep_offset;		/* session -> caller */
} BgsqlShared;

/* A request: this header, then nargs optional strings. */
typedef struct BgsqlRequestHeader
{
	int32		kind;			/* PgdBgsqlKind */
	Oid			run_as;			/* PGD_BGSQL_STEP: the submitter */
	int32		nargs;
} BgsqlRequestHeader;

/* A reply: this header, then text, detail and hint (optional strings). */
typedef struct BgsqlReplyHeader
{
	int32		status;			/* PgdBgsqlStatus */
	int32		sqlstate;
} BgsqlReplyHeader;

/* The caller's side of a session. */
typedef struct BgsqlSession
{
	Oid			dboid;
	dsm_segment *seg;
	shm_mq_handle *req;
	shm_mq_handle *rep;
	BackgroundWorkerHandle *handle;
	TimestampTz last_used;
} BgsqlSession;

static void
append_opt_string(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, s ? 1 : 0);
	if (s)
		appendBinaryStringInfo(buf, s, strlen(s) + 1);
}

/* Read one optional string of a message; NULL on a malformed message. */
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

/*
 * Start a session connected to dboid as connect_as; NULL when no
 * background worker slot is free.  A persistent session lives in
 * TopMemoryContext and its segment outlives transactions.
 */
static BgsqlSession *
session_open(Oid dboid, Oid connect_as, bool persistent)
{
	MemoryContext old = MemoryContextSwitchTo(persistent ? TopMemoryContext : CurrentMemoryContext);
	Size		req_offset = MAXALIGN(sizeof(BgsqlShared));
	Size		rep_offset = req_offset + BGSQL_QUEUE_SIZE;
	BgsqlSession *s = palloc0(sizeof(BgsqlSession));
	BgsqlShared *shared;
	shm_mq	   *req,
			   *rep;
	BackgroundWorker worker;

	s->dboid = dboid;
	s->seg = dsm_create(rep_offset + BGSQL_QUEUE_SIZE, 0);
	if (persistent)
		dsm_pin_mapping(s->seg);	/* not tied to the current transaction */
	shared = dsm_segment_address(s->seg);
	shared->dboid = dboid;
	shared->connect_as = connect_as;
	shared->persistent = persistent;
	shared->req_offset = req_offset;
	shared->rep_offset = rep_offset;
	req = shm_mq_create((char *) shared + req_offset, BGSQL_QUEUE_SIZE);
	shm_mq_set_sender(req, MyProc);
	rep = shm_mq_create((char *) shared + rep_offset, BGSQL_QUEUE_SIZE);
	shm_mq_set_receiver(rep, MyProc);
	s->req = shm_mq_attach(req, s->seg, NULL);
	s->rep = shm_mq_attach(rep, s->seg, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_durable");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "pgd_bgsql_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_durable %s for PID %d",
			 persistent ? "step session" : "start session", MyProcPid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_durable session");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(s->seg));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &s->handle))
	{
		dsm_detach(s->seg);
		pfree(s);
		MemoryContextSwitchTo(old);
		return NULL;
	}
	shm_mq_set_handle(s->req, s->handle);
	shm_mq_set_handle(s->rep, s->handle);
	MemoryContextSwitchTo(old);
	return s;
}

/*
 * Detach (a session then exits by itself).  One that may still be working
 * is terminated, and when not on an error path, waited for.
 */
static void
session_close(BgsqlSession *s, bool terminate, bool wait)
{
	dsm_detach(s->seg);
	if (terminate)
	{
		TerminateBackgroundWorker(s->handle);
		if (wait)
			(void) WaitForBackgroundWorkerShutdown(s->handle);
	}
	pfree(s->handle);
	pfree(s);
}

/*
 * Send one request and wait for its reply.  An interrupt while waiting
 * terminates the session (its work must not go on) and propagates; the
 * caller forgets the session.
 */
static void
session_call(BgsqlSession *s, PgdBgsqlKind kind, Oid run_as, int nargs,
			 const char *const *args, PgdBgsqlResult *result)
{
	StringInfoData msg;
	BgsqlRequestHeader hdr;
	shm_mq_result res;
	Size		nbytes = 0;
	void	   *data = NULL;
	int			i;

	hdr.kind = kind;
	hdr.run_as = run_as;
	hdr.nargs = nargs;
	initStringInfo(&msg);
	appendBinaryStringInfo(&msg, (char *) &hdr, sizeof(hdr));
	for (i = 0; i < nargs; i++)
		append_opt_string(&msg, args[i]);

	memset(result, 0, sizeof(PgdBgsqlResult));
	result->status = PGD_BGSQL_NO_ANSWER;

	PG_TRY();
	{
		res = shm_mq_send(s->req, msg.len, msg.data, false, true);
		if (res == SHM_MQ_SUCCESS)
			res = shm_mq_receive(s->rep, &nbytes, &data, false);
	}
	PG_CATCH();
	{
		/* cancelled, timed out or terminated: the session must not go on */
		TerminateBackgroundWorker(s->handle);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(msg.data);

	if (res == SHM_MQ_SUCCESS && nbytes >= sizeof(BgsqlReplyHeader))
	{
		BgsqlReplyHeader rh;
		const char *p = (const char *) data + sizeof(BgsqlReplyHeader);
		const char *end = (const char *) data + nbytes;
		const char *text,
				   *detail = NULL,
				   *hint = NULL;
		bool		tnull,
					dnull = true,
					hnull = true;

		memcpy(&rh, data, sizeof(rh));
		text = read_opt_string(&p, end, &tnull);
		if (text != NULL)
			detail = read_opt_string(&p, end, &dnull);
		if (detail != NULL)
			hint = read_opt_string(&p, end, &hnull);
		if (hint != NULL)
		{
			result->status = (PgdBgsqlStatus) rh.status;
			result->sqlstate = rh.sqlstate;
			result->text = tnull ? NULL : pstrdup(text);
			result->detail = dnull ? NULL : pstrdup(detail);
			result->hint = hnull ? NULL : pstrdup(hint);
		}
	}
	s->last_used = GetCurrentTimestamp();
}

bool
pgd_bgsql_run(PgdBgsqlKind kind, Oid dboid, Oid connect_as, Oid run_as,
			  int nargs, const char *const *args, PgdBgsqlResult *result)
{
	BgsqlSession *s = session_open(dboid, connect_as, false);

	Assert(nargs <= BGSQL_MAX_ARGS);
	if (s == NULL)
		return false;
	session_call(s, kind, run_as, nargs, args, result);
	/* it exits after one request; make sure it is gone if it did not answer */
	session_close(s, result->status == PGD_BGSQL_NO_ANSWER, true);
	return true;
}

/*
 * The persistent step sessions of this process (an executor), one per
 * database.  A session serves steps one after the other while it is busy
 * and exits when it has been idle for BGSQL_IDLE_EXIT_MS; this side stops
 * using it earlier (BGSQL_REUSE_MS), so that a request never meets a
 * session that is just exiting (if it did, the step would find no answer
 * and be re-queued).  Idle sessions must not linger: DROP DATABASE waits
 * only 5 seconds for other sessions to leave.
 */
#define BGSQL_MAX_CACHED 4
#define BGSQL_REUSE_MS 1000
#define BGSQL_IDLE_EXIT_MS 2000

static BgsqlSession *step_sessions[BGSQL_MAX_CACHED];

bool
pgd_bgsql_step(Oid dboid, Oid connect_as, Oid run_as, const char *query,
			   PgdBgsqlResult *result)
{
	TimestampTz now = GetCurrentTimestamp();
	BgsqlSession *s = NULL;
	int			slot = -1;
	int			i;

	for (i = 0; i < BGSQL_MAX_CACHED; i++)
	{
		BgsqlSession *c = step_sessions[i];

		if (c != NULL && TimestampDifferenceExceeds(c->last_used, now, BGSQL_REUSE_MS))
		{
			session_close(c, false, false);
			step_sessions[i] = c = NULL;
		}
		if (c != NULL && c->dboid == dboid)
		{
			s = c;
			slot = i;
		}
		else if (c == NULL && slot < 0)
			slot = i;
	}
	if (s == NULL)
	{
		if (slot < 0)
		{
			/* all in use for other databases: replace the first */
			session_close(step_sessions[0], false, false);
			step_sessions[0] = NULL;
			slot = 0;
		}
		s = session_open(dboid, connect_as, true);
		if (s == NULL)
			return false;
		step_sessions[slot] = s;
	}

	PG_TRY();
	{
		session_call(s, PGD_BGSQL_STEP, run_as, 1, &query, result);
	}
	PG_CATCH();
	{
		step_sessions[slot] = NULL;
		session_close(s, true, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (result->status == PGD_BGSQL_NO_ANSWER)
	{
		step_sessions[slot] = NULL;
		session_close(s, true, true);
	}
	return true;
}

/* --- the worker ---------------------------------------------------------- */

/* the worker's memory for one request; it outlives the request's transaction */
static MemoryContext request_cxt = NULL;

/* A request as received: its header and arguments. */
typedef struct BgsqlRequest
{
	BgsqlRequestHeader hdr;
	char	   *args[BGSQL_MAX_ARGS];
} BgsqlRequest;

static bool
parse_request(const char *data, Size nbytes, BgsqlRequest *req)
{
	const char *p = data + sizeof(BgsqlRequestHeader);
	const char *end = data + nbytes;
	int			i;

	if (nbytes < sizeof(BgsqlRequestHeader))
		return false;
	memcpy(&req->hdr, data, sizeof(BgsqlRequestHeader));
	if (req->hdr.nargs < 0 || req->hdr.nargs > BGSQL_MAX_ARGS)
		return false;
	for (i = 0; i < BGSQL_MAX_ARGS; i++)
	{
		const char *a = NULL;
		bool		isnull = true;

		if (i < req->hdr.nargs && (a = read_opt_string(&p, end, &isnull)) == NULL)
			return false;
		req->args[i] = (a == NULL || isnull) ? NULL : pstrdup(a);
	}
	return true;
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
		if (req->args[i])
			values[i] = CStringGetTextDatum(req->args[i]);
		else
			nulls[i] = 'n';
	}
	/* SPI does not arm statement_timeout by itself */
	enable_timeout_after(STATEMENT_TIMEOUT, BGSQL_START_TIMEOUT_MS);
	pgd_spi_exec("SELECT df.start($1, $2, $3)", 3, types, values, nulls, false);
	disable_timeout(STATEMENT_TIMEOUT, false);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	id = MemoryContextStrdup(request_cxt, pgd_spi_getstring(0, 1));
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
	const char *query = req->args[0] ? req->args[0] : "";
	PgdOutcome	outcome;
	bool		retry;
	int			sqlstate;
	BgsqlReplyHeader hdr;

	pgd_begin_unit("pg_durable: workflow step");
	pgstat_report_activity(STATE_RUNNING, query);
	outcome = pgd_run_user_sql(query, req->hdr.run_as, &retry, &sqlstate);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	if (outcome.result != NULL)
		outcome.result = MemoryContextStrdup(request_cxt, outcome.result);
	pgd_end_unit();

	hdr.status = retry ? PGD_BGSQL_RETRY : outcome.ok ? PGD_BGSQL_OK : PGD_BGSQL_FAILED;
	hdr.sqlstate = sqlstate;
	appendBinaryStringInfo(reply, (char *) &hdr, sizeof(hdr));
	append_opt_string(reply, outcome.result);
	append_opt_string(reply, NULL);
	append_opt_string(reply, NULL);
}

/* Do one request; errors become an ERROR reply. */
static void
serve(const char *data, Size nbytes, StringInfo reply)
{
	PG_TRY();
	{
		BgsqlRequest req;

		if (!parse_request(data, nbytes, &req))
			elog(ERROR, "pg_durable: malformed background session request");
		if (req.hdr.kind == PGD_BGSQL_START_NEW)
			do_start_new(&req, reply);
		else if (req.hdr.kind == PGD_BGSQL_STEP)
			do_step(&req, reply);
		else
			elog(ERROR, "pg_durable: unknown background session request %d", req.hdr.kind);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		BgsqlReplyHeader hdr;

		MemoryContextSwitchTo(request_cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		SPI_finish();			/* harmless when not connected */
		MemoryContextSwitchTo(request_cxt);

		resetStringInfo(reply);
		hdr.status = PGD_BGSQL_ERROR;
		hdr.sqlstate = edata->sqlerrcode;
		appendBinaryStringInfo(reply, (char *) &hdr, sizeof(hdr));
		append_opt_string(reply, edata->message ? edata->message : "unknown error");
		append_opt_string(reply, edata->detail);
		append_opt_string(reply, edata->hint);
	}
	PG_END_TRY();
}

void
pgd_bgsql_main(Datum main_arg)
{
	dsm_segment *seg;
	BgsqlShared *shared;
	shm_mq_handle *req;
	shm_mq_handle *rep;
	TimestampTz idle_since;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pg_durable session");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the caller gave up before we started */
	dsm_pin_mapping(seg);
	shared = dsm_segment_address(seg);
	shm_mq_set_receiver((shm_mq *) ((char *) shared + shared->req_offset), MyProc);
	shm_mq_set_sender((shm_mq *) ((char *) shared + shared->rep_offset), MyProc);
	req = shm_mq_attach((shm_mq *) ((char *) shared + shared->req_offset), seg, NULL);
	rep = shm_mq_attach((shm_mq *) ((char *) shared + shared->rep_offset), seg, NULL);

	/* FATAL here (no such database, no LOGIN, no CONNECT...) detaches the queues */
	BackgroundWorkerInitializeConnectionByOid(shared->dboid, shared->connect_as, 0);
	pgstat_report_appname(shared->persistent ? "pg_durable step session"
						  : "pg_durable start session");
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);

	request_cxt = AllocSetContextCreate(TopMemoryContext, "pg_durable session request",
										ALLOCSET_DEFAULT_SIZES);
	idle_since = GetCurrentTimestamp();
	for (;;)
	{
		Size		nbytes;
		void	   *data;
		shm_mq_result res;
		StringInfoData reply;

		CHECK_FOR_INTERRUPTS();
		res = shm_mq_receive(req, &nbytes, &data, true);
		if (res == SHM_MQ_DETACHED)
			break;				/* the caller went away */
		if (res == SHM_MQ_WOULD_BLOCK)
		{
			if (TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), BGSQL_IDLE_EXIT_MS))
				break;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 BGSQL_IDLE_EXIT_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		MemoryContextSwitchTo(request_cxt);
		initStringInfo(&reply);
		serve(data, nbytes, &reply);
		MemoryContextSwitchTo(request_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		if (shm_mq_send(rep, reply.len, reply.data, false, true) != SHM_MQ_SUCCESS)
			break;
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(request_cxt);
		if (!shared->persistent)
			break;
		idle_since = GetCurrentTimestamp();
	}
	proc_exit(0);
}
