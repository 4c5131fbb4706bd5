/*-------------------------------------------------------------------------
 *
 * http.h
 *	  HTTP steps: the HTTP worker (http_worker.c) that makes the calls, the
 *	  preparation of a request and the response envelope (step_http.c), and
 *	  the destination policy (ssrf.c).
 *
 * A request is prepared inside the worker's claim transaction (it reads the
 * node's config, the instance's variables and named results), then lives
 * outside any transaction while the call is in flight, so everything it
 * holds is allocated in its own memory context (PgdHttpRequest.cxt) or, for
 * what libcurl's callbacks write, with malloc: those callbacks must never
 * throw.
 *
 * Locks: none here; see http_worker.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_HTTP_H
#define PG_DURABLE_HTTP_H

#include "postgres.h"

#include <sys/socket.h>

#include "common/json.h"
#include "core/breaker_state.h"
#include "store/types.h"

/* A multipart part, ready to send. */
typedef struct PgdHttpPart
{
	char  *name;
	char  *filename;	 /* NULL if none */
	char  *content_type; /* NULL if none */
	char  *data;
	size_t len;
} PgdHttpPart;

/* One call of an HTTP or HTTP_MULTIPART node. */
typedef struct PgdHttpRequest
{
	MemoryContext cxt; /* owns this struct and everything below */
	int64		  task_id;
	char		 *token; /* the lease token of this claim */
	char		  instance_id[PGD_ID_LEN + 1];
	char		  node_id[PGD_ID_LEN + 1];
	char		 *scope;
	int			  attempt; /* 1 for the first claim of the task */

	/* the outcome, when it is known before any I/O (a policy block ...) */
	bool	   decided;
	PgdOutcome outcome;

	/* the call */
	bool		 multipart;
	char		*method;
	char		*url;  /* after substitution */
	char		*host; /* as parsed, for messages */
	char		*body; /* NULL: no body */
	size_t		 body_len;
	int			 nheaders;
	char	   **headers; /* "Name: value" lines */
	int			 nparts;
	PgdHttpPart *parts;
	int			 timeout_s;
	char		*fail_on;			 /* df.http(fail_on); NULL: 5xx fails */
	bool		 under_retry; /* inside a df.retry: 408 and 429 fail too */
	int64		 attempt_timeout_ms; /* df.retry(attempt_timeout); 0: none */
	char		*idempotency_key;
	char		*traceparent; /* "00-<trace>-<this attempt's span>-<flags>" */
	char		*tracestate;  /* df.start(tracestate), NULL if none */
	PgdBreakerTicket breaker; /* config "breaker": the admitted call */
} PgdHttpRequest;

/* What a finished call gave back (the raw material of the envelope). */
typedef struct PgdHttpResponse
{
	long		status;
	const char *body;
	size_t		body_len;
	const char *content_type; /* NULL if none */
	const char *headers;	  /* raw header block of the final response */
	size_t		headers_len;
	int64		duration_ms;
} PgdHttpResponse;

/* step_http.c */
extern PgdHttpRequest *pgd_http_prepare(MemoryContext parent, int64 task_id,
										const char *instance_id,
										const char *node_id, const char *scope,
										int attempt);
extern PgdOutcome	   pgd_http_envelope(PgdHttpRequest		   *req,
										 const PgdHttpResponse *resp);
extern char *pgd_http_call_error(PgdHttpRequest *req, const char *what);

/* ssrf.c */
extern char *pgd_ssrf_check_url(const char *url, char **host);
extern bool	 pgd_ssrf_address_allowed(const struct sockaddr *sa);
extern char *pgd_ssrf_blocked_address_message(const char *host);

#endif /* PG_DURABLE_HTTP_H */
