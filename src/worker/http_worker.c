/*-------------------------------------------------------------------------
 *
 * http_worker.c
 *	  The HTTP worker: one dynamic background worker (started and restarted
 *	  by the launcher) that makes the calls of HTTP and HTTP_MULTIPART nodes,
 *	  many at a time with libcurl's multi interface, so that no executor is
 *	  held while a call waits and SQL steps keep running.
 *
 * Lease and fencing (docs/design/batches-and-inbox.md §1):
 *	 1. claim: in one transaction, take due 'http' tasks whose lease is
 *		free or expired (FOR UPDATE SKIP LOCKED), prepare each call
 *		(step_http.c: every check that needs no network), and give each a
 *		lease: lease_until = now + timeout + LEASE_MARGIN_S and a new
 *		lease_token; commit.  Tasks no longer wanted are deleted.
 *	 2. call, outside any transaction: the transfer runs in curl's multi
 *		handle with hundreds of others.
 *	 3. complete: lock the task row (SKIP LOCKED) and compare its
 *		lease_token with ours: different or gone means the lease was taken
 *		over (or the instance ended, the RACE was lost...) and the late
 *		result is ignored.  Otherwise lock the instance's runs row and apply
 *		the transition like a SQL step (transition.c), delete the task.  The
 *		calls that finished together complete in one transaction, each in
 *		a subtransaction that gives way rather than wait for a lock; those
 *		that gave way complete alone, waiting (complete_all).
 * A crash of the worker (or of the server) during a call leaves the lease
 * in the table; a worker that starts while no other one runs voids such
 * leases (void_leases: after an exit, a crash or a failover), and the call
 * is claimed and made again with the same Idempotency-Key (at-least-once).  Executors never claim 'http'
 * tasks; the HTTP worker is woken at commit by whoever enqueues one
 * (wake.c), and otherwise sleeps until the next lease expires.
 *
 * Connections are reused between calls to the same host, except across a
 * reload of the settings (see stale_connections).
 *
 * While calls are in flight the worker waits in curl_multi_poll (at most
 * BUSY_POLL_MS) and looks for new work when its latch was set; when idle
 * it sleeps on its latch.  Signals are blocked while curl runs, so the
 * threads of its resolver never receive the backend's signals.  Proxies
 * (http_proxy ...) are never used: the address curl connects to is the one
 * ssrf.c checked in the open-socket callback.
 *
 * Locks: the extension object (share, never waiting: DROP EXTENSION goes
 * first, see unit.c), task rows (SKIP LOCKED), then one runs row per
 * completion.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <sys/resource.h>
#include <curl/curl.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "core/settings.h"
#include "core/shmem.h"
#include "core/unit.h"
#include "orchestration/orchestration.h"
#include "engine/apply.h"
#include "engine/breaker_admission.h"
#include "store/store.h"
#include "core/wake.h"
#include "mb/pg_wchar.h"
#include "common/spi.h"
#include "steps/http.h"
#include "steps/step_sql.h"
#include "worker/executor.h"
#include "worker/worker.h"

#define LEASE_MARGIN_S	 5
#define CLAIM_BATCH		 64
#define COMPLETE_BATCH	 64 /* completions committed together */
#define BUSY_POLL_MS	 10
#define IDLE_POLL_MS	 5000L
#define MAX_HEADER_BYTES (256 * 1024)

PG_FUNCTION_INFO_V1(pgd_http_worker_settings);

typedef struct Transfer
{
	PgdHttpRequest	  *req;
	CURL			  *easy;
	struct curl_slist *hdrs;
	curl_mime		  *mime;
	/* written by curl's callbacks: malloc'd, never palloc'd */
	char  *body;
	size_t body_len;
	size_t body_cap;
	char  *head;
	size_t head_len;
	size_t head_cap;
	bool   too_large;
	bool   blocked;
	char   errbuf[CURL_ERROR_SIZE];
} Transfer;

static CURLM *multi = NULL;
static int	  inflight = 0;

/*
 * The transfers in flight, so that one whose task is gone (its TIMEOUT
 * fired, its instance was cancelled, its RACE was lost) is aborted: the
 * server sees the connection close, and no late completion is attempted.
 * Checked every ORPHAN_CHECK_MS while calls are in flight.
 */
#define ORPHAN_CHECK_MS 200
static Transfer	 **live = NULL;
static int		   nlive = 0;
static int		   live_cap = 0;
static TimestampTz next_orphan_check = 0;

/*
 * After a reload the address policy may be stricter: connections curl keeps
 * open were checked under the old one, so they are not reused; the cache
 * is dropped as soon as no call is in flight.
 */
static bool			 stale_connections = false;
static MemoryContext http_cxt = NULL;

/* ---------------------------------------------------------------------
 * curl callbacks: no palloc, no ereport
 * ---------------------------------------------------------------------
 */

static bool
append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
	if (*len + n + 1 > *cap)
	{
		size_t ncap = Max(*cap * 2, *len + n + 1);
		char  *nb;

		ncap = Max(ncap, 1024);
		nb = realloc(*buf, ncap);
		if (nb == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Transfer *t = (Transfer *) userdata;
	size_t	  n = size * nmemb;

	if (t->body_len + n > (size_t) pgd_http_max_response_body)
	{
		t->too_large = true;
		return 0;
	}
	if (!append(&t->body, &t->body_len, &t->body_cap, ptr, n))
		return 0;
	return n;
}

static size_t
header_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Transfer *t = (Transfer *) userdata;
	size_t	  n = size * nmemb;

	/* a status line starts a new response (after a 100 Continue ...) */
	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
		t->head_len = 0;
	if (t->head_len + n > MAX_HEADER_BYTES)
	{
		t->too_large = true;
		return 0;
	}
	if (!append(&t->head, &t->head_len, &t->head_cap, ptr, n))
		return 0;
	return n;
}

/* The address curl is about to connect to: refuse what the policy refuses. */
static curl_socket_t
opensocket_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
	Transfer *t = (Transfer *) clientp;

	if (!pgd_ssrf_address_allowed(&addr->addr))
	{
		t->blocked = true;
		return CURL_SOCKET_BAD;
	}
	return socket(addr->family, addr->socktype, addr->protocol);
}

/* ---------------------------------------------------------------------
 * Settings
 * ---------------------------------------------------------------------
 */

static void
publish_settings(void)
{
	char buf[PGD_HTTP_SETTINGS_LEN];

	snprintf(buf, sizeof(buf),
			 "allowed_hosts=%s allow_private=%s max_request_body=%d max_response_body=%d "
			 "max_timeout=%d max_concurrent=%d",
			 pgd_http_allowed_hosts ? pgd_http_allowed_hosts : "",
			 pgd_http_allow_private ? "on" : "off", pgd_http_max_request_body,
			 pgd_http_max_response_body, pgd_http_max_timeout,
			 pgd_http_max_concurrent);
	SpinLockAcquire(&pgd_shared->mutex);
	strlcpy(pgd_shared->http_settings, buf, sizeof(pgd_shared->http_settings));
	SpinLockRelease(&pgd_shared->mutex);
}

Datum
pgd_http_worker_settings(PG_FUNCTION_ARGS)
{
	char buf[PGD_HTTP_SETTINGS_LEN];

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for df_internal.http_worker_settings"),
				 errdetail("Only superusers can see the HTTP worker's settings.")));
	SpinLockAcquire(&pgd_shared->mutex);
	strlcpy(buf, pgd_shared->http_settings, sizeof(buf));
	SpinLockRelease(&pgd_shared->mutex);
	if (buf[0] == '\0')
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}

/* ---------------------------------------------------------------------
 * Completion (step 3)
 * ---------------------------------------------------------------------
 */

/*
 * One completion, in the transaction under way (complete_all): fenced out
 * unless the lease is still ours, else the transition, like a SQL step's.
 */
static void
complete(PgdHttpRequest *req)
{
	PgdOutcome outcome = req->outcome;
	PgdGraph  *g;
	int		   n;

	/*
	 * The call was made: its breaker counts it, even if it is fenced out,
	 * and once, even if this completion gives way and is tried again.
	 */
	pgd_breaker_record_call(&req->breaker, &outcome);
	req->breaker.active = false;
	if (!pgd_store_http_lease_held(req->task_id, req->token))
	{
		/* fenced: the lease was taken over, or the task is gone */
		if (pgd_log_allowed())
			ereport(LOG,
					(errmsg("ignoring a late completion of HTTP step %s of instance %s: its lease is no longer held",
							req->node_id, req->instance_id)));
		return;
	}

	/*
	 * No retry keeps a call that succeeded: its task goes before the
	 * transition, as a completed external task's does (pgd_task_node_end)
	 */
	if (outcome.ok)
		pgd_store_task_delete(req->task_id);
	if (pgd_lock_target(req->instance_id, NULL, PGD_INSTANCE_RUNNING,
						req->node_id, req->scope, &g, &n))
	{
		/* logged once the lock is taken: a completion that gives way is not logged twice */
		if (!outcome.ok && pgd_log_allowed())
		{
			char *msg = pgd_step_error_for_log(outcome.result, outcome.code);

			/* cut at a character boundary, as the executor does */
			if (strlen(msg) > PGD_EVENT_ERROR_LEN)
				msg[pg_mbcliplen(msg, strlen(msg), PGD_EVENT_ERROR_LEN)] = '\0';
			ereport(LOG,
					(errmsg("node %s of instance %s failed: %s", req->node_id,
							req->instance_id, msg)));
		}
		pgd_store_set_attempt(req->node_id, req->attempt);
		pgd_apply_complete(g, n, req->scope, outcome);
		pgd_store_set_attempt(NULL, 0);
	}
	/* a retry keeps the row for its next attempt (the same Idempotency-Key) */
	if (!outcome.ok && !pgd_retry_kept_task(req->task_id))
		pgd_store_task_delete(req->task_id);
}

/*
 * One completion of a transaction of several (complete_all), in a
 * subtransaction of its own, under the rules of a later step of an
 * executor's batch (batch.c): its runs row taken NOWAIT, other locks under
 * PGD_BATCH_LOCK_TIMEOUT.  False when it would have waited: rolled back,
 * it is made again alone.  Any other error rolls it back alone; its lease
 * expires and the call is made again, as when a transaction of one
 * completion fails.
 */
static bool
complete_later(PgdHttpRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool consumed = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int nest = pgd_no_wait_rules_on();

		complete(req);
		pgd_store_set_run_nowait(false);
		AtEOXact_GUC(true, nest);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData *edata;

		pgd_store_set_run_nowait(false);
		pgd_store_set_attempt(NULL, 0);
		edata = pgd_subxact_caught(cxt, owner);
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			consumed = false;
		else if (pgd_log_allowed())
			ereport(LOG,
					(errmsg("could not complete HTTP step %s of instance %s: %s",
							req->node_id, req->instance_id, edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return consumed;
}

/*
 * One completion in a transaction of its own, which may wait for its
 * instance's runs row.  An error rolls it back: the lease expires and the
 * call is made again.  A DROP EXTENSION under way removes the task:
 * nothing to do.
 */
static void
complete_alone(PgdHttpRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		if (pgd_begin_engine_unit("pg_durable: completing an HTTP step"))
		{
			complete(req);
			pgd_end_unit();
		}
	}
	PG_CATCH();
	{
		pgd_store_set_attempt(NULL, 0);
		pgd_unit_recover(cxt);
	}
	PG_END_TRY();
}

/*
 * Complete n calls: one transaction for all those whose runs
 * rows are free (complete_later), then each of the others alone, waiting
 * for its row.  A held instance does not delay the others, and the calls
 * that finished together cost one commit instead of one each.  An error
 * outside a later completion rolls back the whole transaction: the leases
 * of its calls expire and they are made again.
 */
static void
complete_all(PgdHttpRequest **done, int n)
{
	MemoryContext	 cxt = CurrentMemoryContext;
	PgdHttpRequest **waiting = palloc(sizeof(PgdHttpRequest *) * Max(n, 1));
	volatile int  nwaiting = 0;

	if (n == 0)
		return;
	PG_TRY();
	{
		if (pgd_begin_engine_unit("pg_durable: completing HTTP steps"))
		{
			/* node writes held to the end, as an executor's batch holds them */
			pgd_store_hold_writes(true);
			for (int i = 0; i < n; i++)
				if (!complete_later(done[i]))
					waiting[nwaiting++] = done[i];
			pgd_store_write_node_writes();
			pgd_end_unit();
		}
	}
	PG_CATCH();
	{
		pgd_store_set_attempt(NULL, 0);
		pgd_unit_recover(cxt);
		nwaiting = 0;
	}
	PG_END_TRY();
	for (int i = 0; i < nwaiting; i++)
		complete_alone(waiting[i]);
}

/* ---------------------------------------------------------------------
 * Transfers (step 2)
 * ---------------------------------------------------------------------
 */

static void
forget_live(Transfer *t)
{
	for (int i = 0; i < nlive; i++)
		if (live[i] == t)
		{
			live[i] = live[--nlive];
			return;
		}
}

static void
free_transfer(Transfer *t)
{
	forget_live(t);
	if (t->easy)
	{
		curl_multi_remove_handle(multi, t->easy);
		curl_easy_cleanup(t->easy);
	}
	if (t->hdrs)
		curl_slist_free_all(t->hdrs);
	if (t->mime)
		curl_mime_free(t->mime);
	free(t->body);
	free(t->head);
	MemoryContextDelete(t->req->cxt);
	free(t);
}

/* Does the step send this header itself? */
static bool
has_header(const PgdHttpRequest *req, const char *name)
{
	size_t n = strlen(name);

	for (int i = 0; i < req->nheaders; i++)
		if (pg_strncasecmp(req->headers[i], name, n) == 0 &&
			req->headers[i][n] == ':')
			return true;
	return false;
}

static bool
start_transfer(PgdHttpRequest *req)
{
	Transfer *t = calloc(1, sizeof(Transfer));
	CURL	 *e;
	bool	  has_ct = false;

	if (t == NULL || (e = curl_easy_init()) == NULL)
	{
		free(t);
		return false;
	}
	t->req = req;
	t->easy = e;

	curl_easy_setopt(e, CURLOPT_PRIVATE, t);
	curl_easy_setopt(e, CURLOPT_URL, req->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, (long) req->timeout_s);
	/* df.retry(attempt_timeout) bounds each attempt below timeout_seconds */
	if (req->attempt_timeout_ms > 0 &&
		req->attempt_timeout_ms < (int64) req->timeout_s * 1000)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
						 (long) req->attempt_timeout_ms);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "pg_durable/" PG_DURABLE_VERSION);
	curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
					 (curl_off_t) pgd_http_max_response_body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
	if (stale_connections)
	{
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	}

	for (int i = 0; i < req->nheaders; i++)
	{
		if (pg_strncasecmp(req->headers[i], "Content-Type:", 13) == 0)
			has_ct = true;
		t->hdrs = curl_slist_append(t->hdrs, req->headers[i]);
	}
	{
		/* (the step's own key can be long: not a fixed buffer) */
		char *line = psprintf("Idempotency-Key: %s", req->idempotency_key);

		t->hdrs = curl_slist_append(t->hdrs, line);
		pfree(line);
	}
	/* the trace context, unless the step sends its own */
	if (req->traceparent && !has_header(req, "traceparent"))
	{
		char *line = psprintf("traceparent: %s", req->traceparent);

		t->hdrs = curl_slist_append(t->hdrs, line);
		pfree(line);
	}
	if (req->tracestate && !has_header(req, "tracestate"))
	{
		char *line = psprintf("tracestate: %s", req->tracestate);

		t->hdrs = curl_slist_append(t->hdrs, line);
		pfree(line);
	}
	t->hdrs = curl_slist_append(t->hdrs, "Expect:");
	if (!has_ct && !req->multipart)
		t->hdrs =
			curl_slist_append(t->hdrs,
							  "Content-Type:"); /* curl's form default off */

	if (req->multipart)
	{
		t->mime = curl_mime_init(e);
		for (int i = 0; i < req->nparts; i++)
		{
			PgdHttpPart	  *p = &req->parts[i];
			curl_mimepart *mp = curl_mime_addpart(t->mime);

			curl_mime_name(mp, p->name);
			curl_mime_data(mp, p->data, p->len);
			if (p->filename)
				curl_mime_filename(mp, p->filename);
			if (p->content_type)
				curl_mime_type(mp, p->content_type);
		}
		curl_easy_setopt(e, CURLOPT_MIMEPOST, t->mime);
		if (strcmp(req->method, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
	}
	else if (req->body != NULL || strcmp(req->method, "POST") == 0)
	{
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
						 (curl_off_t) req->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		if (strcmp(req->method, "POST") != 0)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
	}
	else if (strcmp(req->method, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdrs);

	if (curl_multi_add_handle(multi, e) != CURLM_OK)
	{
		/* the caller completes the request: free the transfer, not the request */
		curl_easy_cleanup(e);
		if (t->hdrs)
			curl_slist_free_all(t->hdrs);
		if (t->mime)
			curl_mime_free(t->mime);
		free(t);
		return false;
	}
	inflight++;
	if (nlive == live_cap)
	{
		int		   cap = Max(16, live_cap * 2);
		Transfer **nl = realloc(live, sizeof(Transfer *) * cap);

		if (nl == NULL)
			return true; /* not aborted early then; it still completes */
		live = nl;
		live_cap = cap;
	}
	live[nlive++] = t;
	return true;
}

/* The outcome of a finished transfer (in its request's memory context). */
static PgdOutcome
transfer_outcome(Transfer *t, CURLcode rc)
{
	PgdHttpRequest *req = t->req;
	MemoryContext	old = MemoryContextSwitchTo(req->cxt);
	PgdOutcome		o = {0};

	o.ok = false;
	if (rc == CURLE_OK)
	{
		PgdHttpResponse resp;
		char		   *ct = NULL;
		curl_off_t		us = 0;

		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &resp.status);
		curl_easy_getinfo(t->easy, CURLINFO_CONTENT_TYPE, &ct);
		curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME_T, &us);
		resp.body = t->body ? t->body : "";
		resp.body_len = t->body_len;
		resp.content_type = ct;
		resp.headers = t->head ? t->head : "";
		resp.headers_len = t->head_len;
		resp.duration_ms = us / 1000;
		o = pgd_http_envelope(req, &resp);
	}
	else if (t->blocked)
	{
		o.result = pgd_ssrf_blocked_address_message(req->host);
		o.code = pstrdup("connection");
	}
	else if (t->too_large || rc == CURLE_FILESIZE_EXCEEDED)
		o.result =
			pgd_http_call_error(req,
								psprintf("the response is larger than pg_durable.http_max_response_body (%d bytes)",
										 pgd_http_max_response_body));
	else if (rc == CURLE_OPERATION_TIMEDOUT)
	{
		o.result = pgd_http_call_error(req,
									   psprintf("timed out after %d seconds",
												req->timeout_s));
		o.code = pstrdup("timeout");
	}
	else
	{
		o.result = pgd_http_call_error(req,
									   t->errbuf[0] ? t->errbuf :
													  curl_easy_strerror(rc));
		o.code = pstrdup("connection");
	}
	MemoryContextSwitchTo(old);
	return o;
}

/* Run curl with every signal blocked: its resolver threads inherit the mask. */
static void
curl_step(long wait_ms)
{
	sigset_t all, saved;
	int		 running;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &saved);
	curl_multi_perform(multi, &running);
	if (wait_ms > 0)
	{
		curl_multi_poll(multi, NULL, 0, (int) wait_ms, NULL);
		curl_multi_perform(multi, &running);
	}
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/*
 * The outcome of a finished transfer, kept in its request; false, the
 * transfer freed, on an error (its lease expires and the call is made again).
 */
static bool
keep_outcome(Transfer *t, CURLcode rc)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool kept = true;

	PG_TRY();
	{
		t->req->outcome = transfer_outcome(t, rc);
	}
	PG_CATCH();
	{
		pgd_unit_recover(cxt);
		free_transfer(t);
		kept = false;
	}
	PG_END_TRY();
	return kept;
}

/* Complete n finished transfers (complete_all), then free them. */
static void
complete_transfers(Transfer **done, int n)
{
	PgdHttpRequest *reqs[COMPLETE_BATCH];

	for (int i = 0; i < n; i++)
		reqs[i] = done[i]->req;
	complete_all(reqs, n);
	for (int i = 0; i < n; i++)
		free_transfer(done[i]);
}

/*
 * Complete every finished transfer, COMPLETE_BATCH at a time; returns how
 * many finished.
 */
static int
reap(void)
{
	CURLMsg	 *msg;
	int		  left;
	Transfer *done[COMPLETE_BATCH];
	int		  ndone = 0;
	int		  finished = 0;

	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		Transfer *t;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &t);
		inflight--;
		finished++;
		if (keep_outcome(t, msg->data.result))
			done[ndone++] = t;
		if (ndone == COMPLETE_BATCH)
		{
			complete_transfers(done, ndone);
			ndone = 0;
		}
	}
	complete_transfers(done, ndone);
	return finished;
}

/*
 * Abort the transfers whose task row is gone: a TIMEOUT fired, the
 * instance was cancelled or ended, the branch lost its RACE.  Their
 * completion would be fenced out anyway (the lease is no longer held);
 * aborting closes the connection now instead of at the call's end.
 */
static void
abort_orphans(void)
{
	int64		 *ids;
	bool		 *gone;
	int			  n = nlive;
	MemoryContext cxt = CurrentMemoryContext;

	if (n == 0 || GetCurrentTimestamp() < next_orphan_check)
		return;
	next_orphan_check =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ORPHAN_CHECK_MS);
	ids = palloc(sizeof(int64) * n);
	gone = palloc0(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
		ids[i] = live[i]->req->task_id;
	PG_TRY();
	{
		if (pgd_begin_engine_unit("pg_durable: checking HTTP calls in flight"))
		{
			pgd_store_http_tasks_gone(ids, n, gone);
			pgd_end_unit();
		}
	}
	PG_CATCH();
	{
		pgd_unit_recover(cxt);
		memset(gone, 0, sizeof(bool) * n);
	}
	PG_END_TRY();

	for (int i = 0; i < n; i++)
	{
		Transfer *t = NULL;

		if (!gone[i])
			continue;
		for (int j = 0; j < nlive; j++)
			if (live[j]->req->task_id == ids[i])
				t = live[j];
		if (t == NULL)
			continue;
		if (pgd_log_allowed())
			ereport(LOG,
					(errmsg("aborting HTTP step %s of instance %s: it is no longer wanted",
							t->req->node_id, t->req->instance_id)));
		inflight--;
		free_transfer(t);
	}
}

/* ---------------------------------------------------------------------
 * Claim (step 1)
 * ---------------------------------------------------------------------
 */

/*
 * Claim up to max due tasks and start their calls; returns how many were
 * claimed.  *next_ms: when the next task becomes due (or the idle poll).
 */
static int
claim(int max, long *next_ms)
{
	PgdHttpRequest **reqs;
	PgdHttpDue		*due;
	int				 nreqs = 0;
	int				 ndecided = 0;
	int				 n;
	long			 ms;

	*next_ms = IDLE_POLL_MS;
	reqs =
		palloc(sizeof(PgdHttpRequest *) * Max(max, 1)); /* outlives the unit */
	if (!pgd_begin_engine_unit("pg_durable: claiming HTTP steps"))
	{
		*next_ms = 1000L;
		if (!pgd_extension_exists())
			proc_exit(0); /* DROP EXTENSION: the launcher starts us again */
		return 0;
	}
	/* a read-only server (see executor.c) completes no call: make none */
	if (XactReadOnly)
	{
		pgd_end_unit();
		*next_ms = 200L;
		return 0;
	}
	n = pgd_store_http_due(max, &due);
	/* calls a restore loaded wait for its end (docs/design/restores.md §3) */
	if (n > 0 && pgd_store_restore_held())
	{
		n = 0;
		*next_ms = 1000L;
	}
	for (int i = 0; i < n; i++)
	{
		PgdHttpRequest *req;

		req = due[i].node_id ?
			pgd_http_prepare(http_cxt, due[i].id, due[i].instance_id,
							 due[i].node_id, due[i].scope,
							 due[i].attempts + 1) :
			NULL;
		if (req == NULL)
		{
			pgd_store_task_delete(due[i].id);
			continue;
		}
		req->token =
			MemoryContextStrdup(req->cxt,
								pgd_store_http_lease(due[i].id,
													 (req->decided ?
														  0 :
														  req->timeout_s) +
														 LEASE_MARGIN_S));
		reqs[nreqs++] = req;
	}
	if (n < max && pgd_store_http_next_due(&ms))
		*next_ms = Max(1L, Min(IDLE_POLL_MS, ms + 1));
	pgd_end_unit();

	/* the leases are committed: now the calls (or the decided outcomes) */
	for (int i = 0; i < nreqs; i++)
	{
		PgdHttpRequest *req = reqs[i];

		if (!req->decided && start_transfer(req))
			continue;
		if (!req->decided)
		{
			req->outcome.ok = false;
			req->outcome.result =
				pgd_http_call_error(req, "could not start the transfer");
		}
		reqs[ndecided++] = req;
	}
	complete_all(reqs, ndecided);
	for (int i = 0; i < ndecided; i++)
		MemoryContextDelete(reqs[i]->cxt);
	return n;
}

/* ---------------------------------------------------------------------
 * Main loop
 * ---------------------------------------------------------------------
 */

static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
	{
		rl.rlim_cur = rl.rlim_max;
		(void) setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void
reload_if_asked(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		stale_connections = true;
		publish_settings();
	}
	if (stale_connections && inflight == 0)
	{
		curl_multi_cleanup(multi);
		if ((multi = curl_multi_init()) == NULL)
			ereport(FATAL,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not initialize libcurl in the pg_durable HTTP worker")));
		stale_connections = false;
	}
}

/*
 * The leases in the table belong to no running HTTP worker when this one
 * is alone: the previous one exited or crashed, or this server was a
 * standby and the leases are the lost primary's.  Their calls are made
 * again now, with the same Idempotency-Key, instead of when each lease
 * would have expired (its call's timeout later).  An error leaves the
 * leases to expire.
 */
static void
void_leases(MemoryContext loop_cxt)
{
	MemoryContext old = MemoryContextSwitchTo(loop_cxt);

	PG_TRY();
	{
		if (pgd_begin_engine_unit("pg_durable: voiding the leases of a previous HTTP worker"))
		{
			int			n = pgd_store_http_leases_void();

			pgd_end_unit();
			if (n > 0)
				ereport(LOG,
						(errmsg("pg_durable http worker makes %d HTTP calls of a previous worker again", n),
						 errdetail("Their leases belonged to an HTTP worker that is gone (an exit, a crash or "
								   "a failover): the calls are made again with the same Idempotency-Key.")));
		}
	}
	PG_CATCH();
	{
		pgd_unit_recover(loop_cxt);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextReset(loop_cxt);
}

/* claim() in loop_cxt; an error is logged and retried after a second. */
static int
claim_guarded(int max, MemoryContext loop_cxt, long *next_ms)
{
	MemoryContext old = MemoryContextSwitchTo(loop_cxt);
	volatile int  claimed = 0;

	PG_TRY();
	{
		long ms = IDLE_POLL_MS;

		claimed = claim(max, &ms);
		*next_ms = ms;
	}
	PG_CATCH();
	{
		pgd_unit_recover(loop_cxt);
		*next_ms = 1000L; /* do not spin on a persistent error */
		if (!pgd_extension_exists())
			proc_exit(0); /* DROP EXTENSION: the launcher starts us again */
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextReset(loop_cxt);
	return claimed;
}

void
pgd_http_worker_main(Datum main_arg)
{
	bool		  look = true;
	long		  next_ms = 0;
	TimestampTz	  next_look = 0;
	MemoryContext loop_cxt;
	MemoryContext otel_cxt;
	long		  otel_ms;
	bool		  alone;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(pgd_database, pgd_worker_role, 0);
	alone = pgd_http_worker_attach();
	pgstat_report_appname("pg_durable http worker");
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);
	raise_fd_limit();

	if (curl_global_init(CURL_GLOBAL_ALL) != 0 ||
		(multi = curl_multi_init()) == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not initialize libcurl in the pg_durable HTTP worker")));
	http_cxt = AllocSetContextCreate(TopMemoryContext, "pg_durable http calls",
									 ALLOCSET_DEFAULT_SIZES);
	loop_cxt =
		AllocSetContextCreate(TopMemoryContext, "pg_durable http worker",
							  ALLOCSET_DEFAULT_SIZES);
	otel_cxt =
		AllocSetContextCreate(TopMemoryContext, "pg_durable OTLP export",
							  ALLOCSET_DEFAULT_SIZES);
	publish_settings();
	ereport(LOG,
			(errmsg("pg_durable http worker started in database \"%s\"",
					pgd_database)));

	while (!pgd_extension_exists())
	{
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 IDLE_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		pgd_idle_check_for_interrupts();
		reload_if_asked();
	}
	if (alone)
		void_leases(loop_cxt);

	for (;;)
	{
		pgd_idle_check_for_interrupts();
		if (!PostmasterIsAlive())
			proc_exit(1);
		reload_if_asked();

		/* the latch says a task was enqueued; a lease may have expired */
		if (MyLatch->is_set || GetCurrentTimestamp() >= next_look)
		{
			ResetLatch(MyLatch);
			look = true;
		}
		if (look && inflight < pgd_http_max_concurrent)
		{
			int batch = Min(CLAIM_BATCH, pgd_http_max_concurrent - inflight);
			int claimed = claim_guarded(batch, loop_cxt, &next_ms);

			/* a full batch: there may be more */
			look = claimed > 0 && claimed >= batch;
			next_look =
				TimestampTzPlusMilliseconds(GetCurrentTimestamp(), next_ms);
		}

		/* the OTLP export, between the calls (otel.c) */
		otel_ms = pgd_otel_step(otel_cxt);

		if (inflight > 0)
		{
			MemoryContext old;

			curl_step(look && inflight < pgd_http_max_concurrent ?
						  0 :
						  BUSY_POLL_MS);
			old = MemoryContextSwitchTo(loop_cxt);
			(void) reap();
			abort_orphans();
			MemoryContextSwitchTo(old);
			MemoryContextReset(loop_cxt);
			continue;
		}
		if (look)
			continue;

		pgstat_report_activity(STATE_IDLE, NULL);
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(1L,
							 otel_ms >= 0 ? Min(next_ms, otel_ms) : next_ms),
						 PG_WAIT_EXTENSION);
	}
}
