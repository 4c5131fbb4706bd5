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
 * This file is the transport only.  What a session does is its handler's:
 * each kind of session is an entry point of its own that calls
 * pgd_bgsql_serve with its handler (api/new_txn.c starts an instance,
 * steps/remote.c runs a step), and the caller names that entry point.
 *
 * Protocol.  The caller creates a DSM segment saying where to connect,
 * with two shm_mqs: requests (the role to run as, up to three strings) go
 * to the worker, replies (status, SQLSTATE, then text, detail
 * and hint) come back, one per request.  The worker commits each
 * request's transaction before it replies, so an OK reply means the work
 * is durable; a worker that dies or cannot connect (FATAL) detaches
 * without replying, which the caller sees as PGD_BGSQL_NO_ANSWER.
 *
 * Two lifetimes.  A one-shot session (df.start in a new transaction)
 * serves one request and exits.  A step session belongs to one executor
 * and one database (pgd_bgsql_call_kept): it serves that executor's steps in
 * that database one after the other while they keep coming, and exits
 * after BGSQL_IDLE_EXIT_MS without work, or when its executor goes away
 * (its queue is detached).  It runs steps of different submitters in
 * turn, which the step's handler contains exactly as in the executor.
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
#include "core/unit.h"

#define BGSQL_QUEUE_SIZE 65536

/* The segment: where the session connects, then the two queues. */
typedef struct BgsqlShared
{
	Oid	 dboid;
	Oid	 connect_as;	   /* the worker's session user */
	char name[BGW_MAXLEN]; /* the session's application_name */
	bool persistent;	   /* serve requests until idle, else one */
	Size req_offset;	   /* caller -> session */
	Size rep_offset;	   /* session -> caller */
} BgsqlShared;

/* A request: this header, then nargs optional strings. */
typedef struct BgsqlRequestHeader
{
	Oid	  run_as; /* the role the work runs as */
	int32 nargs;
} BgsqlRequestHeader;

/* A reply: this header, then text, detail and hint (optional strings). */
typedef struct BgsqlReplyHeader
{
	int32 status; /* PgdBgsqlStatus */
	int32 sqlstate;
} BgsqlReplyHeader;

/* The caller's side of a session. */
typedef struct BgsqlSession
{
	Oid						dboid;
	dsm_segment			   *seg;
	shm_mq_handle		   *req;
	shm_mq_handle		   *rep;
	BackgroundWorkerHandle *handle;
	TimestampTz				last_used;
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
session_open(const char *entry, const char *name, Oid dboid, Oid connect_as,
			 bool persistent)
{
	MemoryContext old =
		MemoryContextSwitchTo(persistent ? TopMemoryContext :
										   CurrentMemoryContext);
	Size			 req_offset = MAXALIGN(sizeof(BgsqlShared));
	Size			 rep_offset = req_offset + BGSQL_QUEUE_SIZE;
	BgsqlSession	*s = palloc0(sizeof(BgsqlSession));
	BgsqlShared		*shared;
	shm_mq			*req, *rep;
	BackgroundWorker worker;

	s->dboid = dboid;
	s->seg = dsm_create(rep_offset + BGSQL_QUEUE_SIZE, 0);
	if (persistent)
		dsm_pin_mapping(s->seg); /* not tied to the current transaction */
	shared = dsm_segment_address(s->seg);
	shared->dboid = dboid;
	shared->connect_as = connect_as;
	strlcpy(shared->name, name, sizeof(shared->name));
	shared->persistent = persistent;
	shared->req_offset = req_offset;
	shared->rep_offset = rep_offset;
	req = shm_mq_create((char *) shared + req_offset, BGSQL_QUEUE_SIZE);
	shm_mq_set_sender(req, MyProc);
	rep = shm_mq_create((char *) shared + rep_offset, BGSQL_QUEUE_SIZE);
	shm_mq_set_receiver(rep, MyProc);
	s->req = shm_mq_attach(req, s->seg, NULL);
	s->rep = shm_mq_attach(rep, s->seg, NULL);

	{
		char bgw_name[BGW_MAXLEN];

		snprintf(bgw_name, sizeof(bgw_name), "%s for PID %d", name, MyProcPid);
		pgd_worker_describe(&worker, entry, bgw_name, "pg_durable session",
							UInt32GetDatum(dsm_segment_handle(s->seg)),
							MyProcPid);
	}

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
 * Wait, with interrupts held (this runs on an error path), until a session
 * asked to terminate has exited, for at most BGSQL_GONE_WAIT_MS.  A session
 * dies at its next interrupt check, which a lock wait makes at once.
 */
#define BGSQL_GONE_WAIT_MS 10000

static void
wait_session_gone(BackgroundWorkerHandle *handle)
{
	TimestampTz deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), BGSQL_GONE_WAIT_MS);
	pid_t pid;

	HOLD_INTERRUPTS();
	for (;;)
	{
		BgwHandleStatus st = GetBackgroundWorkerPid(handle, &pid);

		if (st == BGWH_STOPPED || st == BGWH_POSTMASTER_DIED)
			break;
		if (GetCurrentTimestamp() >= deadline)
		{
			elog(WARNING,
				 "pg_durable: a background session did not exit within %d ms "
				 "of its caller's error",
				 BGSQL_GONE_WAIT_MS);
			break;
		}
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	RESUME_INTERRUPTS();
}

/*
 * Send one request and wait for its reply.  An interrupt while waiting
 * terminates the session (its work must not go on) and propagates; the
 * caller forgets the session.
 */
static void
session_call(BgsqlSession *s, Oid run_as, int nargs, const char *const *args,
			 PgdBgsqlResult *result)
{
	StringInfoData	   msg;
	BgsqlRequestHeader hdr;
	shm_mq_result	   res;
	Size			   nbytes = 0;
	void			  *data = NULL;
	int				   i;

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
		/*
		 * Cancelled, timed out or terminated: the session must not go on,
		 * and must be gone before this error releases the caller's locks.
		 * TerminateBackgroundWorker only asks the postmaster to signal it;
		 * a session waiting for a lock the caller holds would otherwise get
		 * it at the caller's ROLLBACK and could commit its work (a workflow
		 * the caller was told was not started) before the signal arrives.
		 */
		TerminateBackgroundWorker(s->handle);
		wait_session_gone(s->handle);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(msg.data);

	if (res == SHM_MQ_SUCCESS && nbytes >= sizeof(BgsqlReplyHeader))
	{
		BgsqlReplyHeader rh;
		const char		*p = (const char *) data + sizeof(BgsqlReplyHeader);
		const char		*end = (const char *) data + nbytes;
		const char		*text, *detail = NULL, *hint = NULL;
		bool			 tnull, dnull = true, hnull = true;

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
pgd_bgsql_run(const char *entry, const char *name, Oid dboid, Oid connect_as,
			  Oid run_as, int nargs, const char *const *args,
			  PgdBgsqlResult *result)
{
	BgsqlSession *s;

	Assert(nargs <= PGD_BGSQL_MAX_ARGS);
	s = session_open(entry, name, dboid, connect_as, false);
	if (s == NULL)
		return false;
	session_call(s, run_as, nargs, args, result);
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
#define BGSQL_MAX_CACHED   4
#define BGSQL_REUSE_MS	   1000
#define BGSQL_IDLE_EXIT_MS 2000

static BgsqlSession *step_sessions[BGSQL_MAX_CACHED];

/*
 * One request to the kept session s of step_sessions[slot], which is
 * forgotten and closed if the request fails or gets no answer.  (A function
 * of its own so that its PG_TRY sees no variable change: in the caller, gcc
 * 14 reports the lookup loop's as clobbered.)
 */
static void
kept_call(BgsqlSession *s, int slot, Oid run_as, int nargs,
		  const char *const *args, PgdBgsqlResult *result)
{
	PG_TRY();
	{
		session_call(s, run_as, nargs, args, result);
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
}

bool
pgd_bgsql_call_kept(const char *entry, const char *name, Oid dboid,
					Oid connect_as, Oid run_as, int nargs,
					const char *const *args, PgdBgsqlResult *result)
{
	TimestampTz	  now = GetCurrentTimestamp();
	BgsqlSession *s = NULL;
	int			  slot = -1;
	int			  i;

	for (i = 0; i < BGSQL_MAX_CACHED; i++)
	{
		BgsqlSession *c = step_sessions[i];

		if (c != NULL &&
			TimestampDifferenceExceeds(c->last_used, now, BGSQL_REUSE_MS))
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
		s = session_open(entry, name, dboid, connect_as, true);
		if (s == NULL)
			return false;
		step_sessions[slot] = s;
	}

	kept_call(s, slot, run_as, nargs, args, result);
	return true;
}

/* --- the worker ---------------------------------------------------------- */

/* the worker's memory for one request; it outlives the request's transaction */
static MemoryContext request_cxt = NULL;

static bool
parse_request(const char *data, Size nbytes, PgdBgsqlRequest *req)
{
	BgsqlRequestHeader hdr;
	const char		  *p = data + sizeof(BgsqlRequestHeader);
	const char		  *end = data + nbytes;
	int				   i;

	if (nbytes < sizeof(BgsqlRequestHeader))
		return false;
	memcpy(&hdr, data, sizeof(BgsqlRequestHeader));
	if (hdr.nargs < 0 || hdr.nargs > PGD_BGSQL_MAX_ARGS)
		return false;
	req->run_as = hdr.run_as;
	req->nargs = hdr.nargs;
	req->cxt = request_cxt;
	for (i = 0; i < PGD_BGSQL_MAX_ARGS; i++)
	{
		const char *a = NULL;
		bool		isnull = true;

		if (i < hdr.nargs && (a = read_opt_string(&p, end, &isnull)) == NULL)
			return false;
		req->args[i] = (a == NULL || isnull) ? NULL : pstrdup(a);
	}
	return true;
}

static void
append_reply(StringInfo reply, PgdBgsqlStatus status, int sqlstate,
			 const char *text, const char *detail, const char *hint)
{
	BgsqlReplyHeader hdr;

	hdr.status = status;
	hdr.sqlstate = sqlstate;
	appendBinaryStringInfo(reply, (char *) &hdr, sizeof(hdr));
	append_opt_string(reply, text);
	append_opt_string(reply, detail);
	append_opt_string(reply, hint);
}

/* Do one request with the handler; errors become an ERROR reply. */
static void
serve(PgdBgsqlHandler handler, const char *data, Size nbytes, StringInfo reply)
{
	PG_TRY();
	{
		PgdBgsqlRequest req;
		PgdBgsqlResult	result;

		if (!parse_request(data, nbytes, &req))
			elog(ERROR, "malformed background session request");
		memset(&result, 0, sizeof(result));
		handler(&req, &result);
		append_reply(reply, result.status, result.sqlstate, result.text, NULL,
					 NULL);
	}
	PG_CATCH();
	{
		ErrorData *edata = pgd_unit_abort(request_cxt);

		resetStringInfo(reply);
		append_reply(reply, PGD_BGSQL_ERROR, edata->sqlerrcode,
					 edata->message ? edata->message : "unknown error",
					 edata->detail, edata->hint);
	}
	PG_END_TRY();
}

void
pgd_bgsql_serve(Datum main_arg, PgdBgsqlHandler handler)
{
	dsm_segment	  *seg;
	BgsqlShared	  *shared;
	shm_mq_handle *req;
	shm_mq_handle *rep;
	TimestampTz	   idle_since;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pg_durable session");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0); /* the caller gave up before we started */
	dsm_pin_mapping(seg);
	shared = dsm_segment_address(seg);
	shm_mq_set_receiver((shm_mq *) ((char *) shared + shared->req_offset),
						MyProc);
	shm_mq_set_sender((shm_mq *) ((char *) shared + shared->rep_offset),
					  MyProc);
	req = shm_mq_attach((shm_mq *) ((char *) shared + shared->req_offset), seg,
						NULL);
	rep = shm_mq_attach((shm_mq *) ((char *) shared + shared->rep_offset), seg,
						NULL);

	/* FATAL here (no such database, no LOGIN, no CONNECT...) detaches the queues */
	BackgroundWorkerInitializeConnectionByOid(shared->dboid,
											  shared->connect_as, 0);
	pgstat_report_appname(shared->name);
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	request_cxt =
		AllocSetContextCreate(TopMemoryContext, "pg_durable session request",
							  ALLOCSET_DEFAULT_SIZES);
	idle_since = GetCurrentTimestamp();
	for (;;)
	{
		Size		   nbytes;
		void		  *data;
		shm_mq_result  res;
		StringInfoData reply;

		/* between requests a cancel has nothing to cancel (core/unit.c) */
		pgd_idle_check_for_interrupts();
		res = shm_mq_receive(req, &nbytes, &data, true);
		if (res == SHM_MQ_DETACHED)
			break; /* the caller went away */
		if (res == SHM_MQ_WOULD_BLOCK)
		{
			if (TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(),
										   BGSQL_IDLE_EXIT_MS))
				break;
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 BGSQL_IDLE_EXIT_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		MemoryContextSwitchTo(request_cxt);
		initStringInfo(&reply);
		serve(handler, data, nbytes, &reply);
		MemoryContextSwitchTo(request_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		if (shm_mq_send(rep, reply.len, reply.data, false, true) !=
			SHM_MQ_SUCCESS)
			break;
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(request_cxt);
		if (!shared->persistent)
			break;
		idle_since = GetCurrentTimestamp();
	}
	proc_exit(0);
}
