/*-------------------------------------------------------------------------
 *
 * step_http.c
 *	  An HTTP or HTTP_MULTIPART node's call: the request prepared from the
 *	  node's config, and the response turned into the reference's envelope.
 *
 * Preparation (pgd_http_prepare) runs in the HTTP worker's claim
 * transaction and makes every decision that needs no network, in the
 * reference's order: the submitter may still run steps and still has
 * EXECUTE on df.http() / df.http_multipart() (a revoked grant fails the
 * node); {variables} then $named results are substituted, raw, into the
 * url, the body and string header values (multipart: url, headers, part
 * name and filename, and data_b64 when it is exactly one reference); the
 * URL passes the destination policy (ssrf.c); header names and values are
 * checked again after substitution (no CR/LF, no framing headers); the
 * request body fits pg_durable.http_max_request_body; the timeout fits
 * pg_durable.http_max_timeout.  A failed check is the node's outcome and no
 * call is made.  Non-string header values are dropped, as the reference
 * does.  Every request carries Idempotency-Key:
 * <instance>:<node>:<generation>, where the generation is the id of the
 * node execution's task: the same for every re-run of the same execution
 * (after a crash), different for each new execution of the node (loops).
 * df.http(idempotency_key => '{order_id}:charge'), a template substituted
 * like a header, is sent instead, so that instances acting on one order
 * deduplicate at the service; an Idempotency-Key header the step sets
 * itself wins over both; an empty one (after substitution) leaves the
 * one before it.
 *
 * The envelope (pgd_http_envelope) is {"status","body","encoding",
 * "headers","ok","duration_ms"}: the body is text when the Content-Type is
 * textual (any text/ type, +json, +xml, +yaml, application/json, xml, javascript,
 * ecmascript, x-www-form-urlencoded, graphql, yaml, x-yaml) or, with no
 * Content-Type, when the bytes are UTF-8 without NUL; otherwise, and when a
 * textual body is not valid UTF-8, it is base64.  Header names are lower
 * case, repeated headers joined with ", ".  A 5xx status fails the node
 * ("HTTP <M> <url> returned <code>: <preview of at most 512 bytes>"),
 * 1xx-4xx complete it.
 *
 * Locks: none (reads df_internal.results and the catalogs through SPI).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "common/messages.h"
#include "common/spi.h"
#include "core/identity.h"
#include "core/settings.h"
#include "engine/apply.h"
#include "engine/breaker_admission.h"
#include "store/store.h"
#include "engine/transition.h"
#include "graph/http_config.h"
#include "results/results.h"
#include "common/trace.h"
#include "steps/http.h"

#define DEFAULT_TIMEOUT_S 30
#define PREVIEW_BYTES	  512

/* The instance's substitution context, loaded the first time a text needs it. */
typedef struct SubstCtx
{
	const char *instance_id;
	const char *scope;
	PgdRunInfo *run;
	DfJson	   *vars;
	DfJson	   *results; /* NULL when the config refers to none */
} SubstCtx;

/* Pure: the variables and results were loaded before (they need SPI). */
static char *
subst(SubstCtx *sc, const char *text, char **err)
{
	if (strchr(text, '{') == NULL && strchr(text, '$') == NULL)
		return pstrdup(text);
	return pgd_substitute(text, sc->vars, sc->results, PGD_SUBST_RAW, err);
}

static void
decide(PgdHttpRequest *req, char *error)
{
	req->decided = true;
	req->outcome.ok = false;
	req->outcome.result = MemoryContextStrdup(req->cxt, error);
}

static bool
has_crlf(const char *s)
{
	return strpbrk(s, "\r\n") != NULL;
}

/* RFC 9110 token characters */
static bool
valid_header_name(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char) *s) ||
			  strchr("!#$%&'*+-.^_`|~", *s) != NULL))
			return false;
	return true;
}

/* Headers the transport sets itself: a step may not. */
static bool
framing_header(const char *name)
{
	static const char *const names[] = {
		"host", "content-length", "transfer-encoding", "connection", "expect",
		"te",	"upgrade",		  "trailer",		   "keep-alive"};

	for (int i = 0; i < lengthof(names); i++)
		if (pg_strcasecmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Base64 (already checked by df_http_check_base64) to bytes. */
static char *
decode_base64(const char *s, size_t *len)
{
	StringInfoData clean;
	char		  *out;
	int			   n;

	initStringInfo(&clean);
	for (const char *p = s; *p; p++)
		if (!isspace((unsigned char) *p))
			appendStringInfoChar(&clean, *p);
	out = palloc(pg_b64_dec_len(clean.len) + 1);
	n = pg_b64_decode(clean.data, clean.len, (PgdB64Byte *) out,
					  pg_b64_dec_len(clean.len));
	if (n < 0)
		return NULL;
	*len = n;
	return out;
}

/* The multipart parts, substituted and decoded; false (and the outcome set) on a problem. */
static bool
prepare_parts(PgdHttpRequest *req, SubstCtx *sc, const DfJson *parts,
			  size_t *total)
{
	char *err = NULL;

	req->nparts = parts->count;
	req->parts = palloc0(sizeof(PgdHttpPart) * parts->count);
	for (int i = 0; i < parts->count; i++)
	{
		const DfJson *p = parts->items[i];
		PgdHttpPart	 *out = &req->parts[i];
		const DfJson *v;

		if ((out->name = subst(sc, dfjson_get(p, "name")->str, &err)) == NULL)
			return decide(req, err), false;
		if (has_crlf(out->name))
			return decide(req,
						  psprintf("parts[%d] name contains a CR or LF character",
								   i)),
				   false;
		v = dfjson_get(p, "filename");
		if (v != NULL && v->type == DFJ_STRING)
		{
			if ((out->filename = subst(sc, v->str, &err)) == NULL)
				return decide(req, err), false;
			if (has_crlf(out->filename) || strchr(out->filename, '"') != NULL)
				return decide(req,
							  psprintf("parts[%d] filename contains a CR, LF or '\"' character",
									   i)),
					   false;
		}
		v = dfjson_get(p, "content_type");
		if (v != NULL && v->type == DFJ_STRING)
			out->content_type = pstrdup(v->str);
		v = dfjson_get(p, "data");
		if (v != NULL && v->type == DFJ_STRING)
		{
			out->data = pstrdup(v->str);
			out->len = strlen(v->str);
		}
		else
		{
			const char *b64 = dfjson_get(p, "data_b64")->str;
			char	   *text = (char *) b64;
			char	   *bad;

			if (pgd_is_whole_value_reference(b64))
			{
				if ((text = subst(sc, b64, &err)) == NULL)
					return decide(req, err), false;
			}
			else if (strpbrk(b64, "${") != NULL)
				return decide(req, psprintf(PGD_MSG_PART_DATA_B64, i)), false;
			if ((bad = df_http_check_base64(text)) != NULL ||
				(out->data = decode_base64(text, &out->len)) == NULL)
				return decide(req,
							  psprintf(PGD_MSG_INVALID_BASE64, out->name,
									   bad ? bad : "cannot decode")),
					   false;
		}
		*total += out->len;
	}
	return true;
}

/*
 * (0) who runs it: the submitter, still allowed to run steps and to call
 * out.  NULL when allowed, else why not (inside SPI).
 */
static char *
caller_problem(Oid submitter, bool multipart)
{
	Oid	  types[2] = {OIDOID, TEXTOID};
	Datum values[2];
	char *problem;

	if ((problem = pgd_identity_problem(submitter)) != NULL)
		return problem;
	values[0] = ObjectIdGetDatum(submitter);
	values[1] =
		pgd_text_datum(multipart ?
						   "df.http_multipart(text,text,jsonb,jsonb,integer)" :
						   "df.http(text,text,text,jsonb,integer)");
	pgd_spi_exec("SELECT pg_catalog.has_function_privilege($1, $2::pg_catalog.regprocedure, 'EXECUTE'), "
				 "pg_catalog.pg_get_userbyid($1)",
				 2, types, values, NULL, false);
	if (strcmp(pgd_spi_getstring(0, 1), "t") != 0)
		return psprintf(PGD_MSG_HTTP_NO_EXECUTE, pgd_spi_getstring(0, 2),
						multipart ? "df.http_multipart" : "df.http",
						pgd_spi_getstring(0, 2));
	return NULL;
}

/* Method, timeout, URL and host from the node's config; NULL or the problem. */
static char *
prepare_target(PgdHttpRequest *req, SubstCtx *sc, const DfJson *cfg)
{
	DfJson *v;
	char   *err = NULL;
	char   *problem;

	v = dfjson_get(cfg, "method");
	if (v != NULL && v->type == DFJ_STRING)
		(void) df_http_check_method(v->str, req->multipart, &req->method);
	req->timeout_s = DEFAULT_TIMEOUT_S;
	v = dfjson_get(cfg, "timeout_seconds");
	if (v != NULL && v->type == DFJ_NUMBER)
	{
		int64 t;

		if (dfjson_get_int64(v, &t))
			req->timeout_s = (int) t;
	}
	v = dfjson_get(cfg, "fail_on");
	if (v != NULL && v->type == DFJ_STRING)
		req->fail_on = pstrdup(v->str);
	if (req->timeout_s > pgd_http_max_timeout)
		return psprintf("timeout_seconds %d exceeds pg_durable.http_max_timeout (%d seconds)",
						req->timeout_s, pgd_http_max_timeout);

	/* (1)-(2) the URL and its host */
	if ((req->url = subst(sc, dfjson_get(cfg, "url")->str, &err)) == NULL)
	{
		req->url = "";
		return err;
	}
	if ((problem = df_http_check_url(req->url)) != NULL ||
		(problem = pgd_ssrf_check_url(req->url, &req->host)) != NULL)
		return problem;
	return NULL;
}

/* df.http(idempotency_key), substituted, replaces the engine's key; NULL or the problem. */
static char *
prepare_key(PgdHttpRequest *req, SubstCtx *sc, const DfJson *v)
{
	char *err = NULL;
	char *value;

	if (v == NULL || v->type != DFJ_STRING)
		return NULL;
	/* a reference that does not resolve fails: a key kept as text is shared */
	if ((value = pgd_substitute_strict(v->str, sc->vars, sc->results,
									   &err)) == NULL)
		return psprintf("idempotency_key: %s", err);
	if (has_crlf(value))
		return pstrdup("idempotency_key contains a CR or LF character after substitution");
	if (value[0] != '\0')
		req->idempotency_key = value;
	return NULL;
}

/* The config's headers (an object of strings), substituted; NULL or the problem. */
static char *
prepare_headers(PgdHttpRequest *req, SubstCtx *sc, const DfJson *v)
{
	char *err = NULL;

	if (v == NULL || v->type != DFJ_OBJECT)
		return NULL;
	req->headers = palloc0(sizeof(char *) * (v->count + 1));
	for (int i = 0; i < v->count; i++)
	{
		const char *name = v->pairs[i].key;
		char	   *value;

		if (v->pairs[i].value->type != DFJ_STRING)
			continue; /* the reference drops them */
		if (!valid_header_name(name))
			return psprintf("invalid header name '%s'", name);
		if (framing_header(name))
			return psprintf("header '%s' is set by the HTTP client and cannot be given by a step",
							name);
		if (req->multipart && pg_strcasecmp(name, "Content-Type") == 0)
			continue; /* the multipart boundary's */
		if ((value = subst(sc, v->pairs[i].value->str, &err)) == NULL)
			return err;
		if (has_crlf(value))
			return psprintf("header '%s' value contains a CR or LF character",
							name);
		if (pg_strcasecmp(name, "Idempotency-Key") == 0)
		{
			/* the step's own key replaces the engine's; sent once, by the worker */
			if (value[0] != '\0')
				req->idempotency_key = value;
			continue;
		}
		req->headers[req->nheaders++] = psprintf("%s: %s", name, value);
	}
	return NULL;
}

/*
 * The body or the parts, within pg_durable.http_max_request_body.  NULL or
 * the problem; *decided when prepare_parts decided the outcome itself.
 */
static char *
prepare_body(PgdHttpRequest *req, SubstCtx *sc, const DfJson *cfg,
			 bool *decided)
{
	size_t	body_total = 0;
	char   *err = NULL;
	DfJson *v;

	*decided = false;
	if (req->multipart)
	{
		if (!prepare_parts(req, sc, dfjson_get(cfg, "parts"), &body_total))
		{
			*decided = true;
			return NULL;
		}
	}
	else if ((v = dfjson_get(cfg, "body")) != NULL && v->type == DFJ_STRING)
	{
		if ((req->body = subst(sc, v->str, &err)) == NULL)
			return err;
		req->body_len = strlen(req->body);
		body_total = req->body_len;
	}
	if (body_total > (size_t) pgd_http_max_request_body)
		return psprintf("HTTP request body is %zu bytes, more than pg_durable.http_max_request_body (%d bytes)",
						body_total, pgd_http_max_request_body);
	return NULL;
}

/*
 * The W3C trace context of this attempt: the instance's trace
 * id and, as the parent, the span of this attempt, the one df.instance_spans
 * derives from (scope, node, attempt) (monitor/spans.c).  An instance of an
 * older schema has no trace id among its variables: the fallback id.
 */
static void
trace_context(PgdHttpRequest *req, DfJson *vars)
{
	DfJson	   *ts = dfjson_get(vars, "sys_tracestate");

	req->traceparent = pgd_trace_parent_of(vars, req->instance_id, req->scope,
										   req->node_id, req->attempt);
	if (ts && ts->type == DFJ_STRING && ts->str[0] != '\0' &&
		!has_crlf(ts->str))
		req->tracestate = pstrdup(ts->str);
}

/*
 * A call that would be made goes through the breaker its config names
 * (df.http(breaker => ...)): refused, the step fails with kind
 * circuit_open and no call is made; admitted, req->breaker records the
 * outcome when the call ends (http_worker.c).  Needs SPI (the breaker may
 * be loaded, a transition persisted).
 */
static void
admit_through_breaker(PgdHttpRequest *req, const DfJson *cfg, Oid role)
{
	const DfJson *v = dfjson_get(cfg, "breaker");
	PgdOutcome	  refusal;

	if (v == NULL || v->type != DFJ_STRING)
		return;
	if (pgd_breaker_admit_call(v->str, role, &req->breaker, &refusal))
		return;
	decide(req, refusal.result);
	req->outcome.code =
		refusal.code ? MemoryContextStrdup(req->cxt, refusal.code) : NULL;
	req->outcome.retry_after_ms = refusal.retry_after_ms;
}

/*
 * Prepare the call of HTTP task task_id (inside the claim transaction):
 * NULL when the step is no longer wanted; else a request in its own
 * context under parent; req->decided when the outcome is already known.
 */
PgdHttpRequest *
pgd_http_prepare(MemoryContext parent, int64 task_id, const char *instance_id,
				 const char *node_id, const char *scope, int attempt)
{
	MemoryContext cxt =
		AllocSetContextCreate(parent, "pg_durable http request",
							  ALLOCSET_SMALL_SIZES);
	MemoryContext	old = CurrentMemoryContext;
	PgdHttpRequest *req = MemoryContextAllocZero(cxt, sizeof(PgdHttpRequest));
	PgdRunInfo		run;
	PgdGraph	   *g;
	PgdNode		   *node;
	int				n;
	char		   *problem;
	SubstCtx		sc;
	bool			decided;

	req->cxt = cxt;
	req->task_id = task_id;
	strlcpy(req->instance_id, instance_id, sizeof(req->instance_id));
	strlcpy(req->node_id, node_id, sizeof(req->node_id));
	req->scope = MemoryContextStrdup(cxt, scope);
	req->attempt = attempt;
	req->method = "POST";
	req->url = "";
	req->idempotency_key =
		MemoryContextStrdup(cxt,
							psprintf("%s:%s:" INT64_FORMAT, instance_id,
									 node_id, task_id));

	/*
	 * First what needs SPI, in the caller's (SPI) context: SPI switches back
	 * to its own context after every statement, so nothing that must outlive
	 * the claim transaction is allocated here.
	 */
	if (!pgd_store_load_run(instance_id, &run) ||
		run.status != PGD_INSTANCE_RUNNING ||
		(g = pgd_graph_get(instance_id, run.token)) == NULL ||
		(n = pgd_graph_find(g, node_id)) < 0 || !pgd_node_is_live(g, n, scope))
	{
		MemoryContextDelete(cxt);
		return NULL;
	}
	node = &g->nodes[n];
	req->multipart = node->type == DF_NODE_HTTP_MULTIPART;
	req->attempt_timeout_ms = pgd_attempt_timeout_ms(g, n);
	for (int a = node->parent; a >= 0; a = g->nodes[a].parent)
		if (g->nodes[a].type == DF_NODE_RETRY)
			req->under_retry = true;
	if ((problem = caller_problem(run.submitted_by, req->multipart)) != NULL)
	{
		decide(req, problem);
		return req;
	}
	memset(&sc, 0, sizeof(sc));
	sc.instance_id = instance_id;
	sc.scope = scope;
	sc.run = &run;
	sc.vars = pgd_step_vars(instance_id, &run);
	if (strchr(node->query, '$') != NULL)
		sc.results = pgd_visible_results(instance_id, scope);

	/* from here on no SPI: everything lives in the request's context */
	MemoryContextSwitchTo(cxt);

	trace_context(req, sc.vars);

	/* the config, as validated at df.start and checked again when the graph was loaded */
	if ((problem = node->config_problem) == NULL &&
		(problem = prepare_target(req, &sc, node->config)) == NULL &&
		(problem = prepare_key(req, &sc,
							   dfjson_get(node->config, "idempotency_key"))) ==
			NULL &&
		(problem =
			 prepare_headers(req, &sc, dfjson_get(node->config, "headers"))) ==
			NULL)
		problem = prepare_body(req, &sc, node->config, &decided);
	else
		decided = false;
	if (problem != NULL && !decided)
		decide(req, problem);
	MemoryContextSwitchTo(old);
	if (!req->decided)
		admit_through_breaker(req, node->config, run.submitted_by);
	return req;
}

/* "HTTP <M> <url> failed: <what>" */
char *
pgd_http_call_error(PgdHttpRequest *req, const char *what)
{
	return psprintf("HTTP %s %s failed: %s", req->method, req->url, what);
}

static bool
textual_content_type(const char *ct)
{
	static const char *const app_text[] = {
		"json",	   "xml",  "javascript", "ecmascript", "x-www-form-urlencoded",
		"graphql", "yaml", "x-yaml"};
	char  *t = pstrdup(ct);
	char  *semi = strchr(t, ';');
	size_t len;

	if (semi)
		*semi = '\0';
	while (*t == ' ' || *t == '\t')
		t++;
	len = strlen(t);
	while (len > 0 && (t[len - 1] == ' ' || t[len - 1] == '\t'))
		t[--len] = '\0';
	for (char *p = t; *p; p++)
		*p = pg_ascii_tolower((unsigned char) *p);

	if (strncmp(t, "text/", 5) == 0)
		return true;
	if ((len > 5 && strcmp(t + len - 5, "+json") == 0) ||
		(len > 4 && strcmp(t + len - 4, "+xml") == 0) ||
		(len > 5 && strcmp(t + len - 5, "+yaml") == 0))
		return true;
	if (strncmp(t, "application/", 12) == 0)
		for (int i = 0; i < lengthof(app_text); i++)
			if (strcmp(t + 12, app_text[i]) == 0)
				return true;
	return false;
}

static bool
utf8_text(const char *s, size_t len)
{
	if (memchr(s, '\0', len) != NULL)
		return false;
	return pg_verify_mbstr(PG_UTF8, s, (int) len, true);
}

/* Headers of the final response as an object: lower-case names, repeats joined. */
static DfJson *
parse_headers(const char *raw, size_t len)
{
	DfJson	   *obj = dfjson_make_object();
	const char *p = raw;
	const char *end = raw + len;

	while (p < end)
	{
		const char *eol = memchr(p, '\n', end - p);
		const char *line_end = eol ? eol : end;
		const char *colon;
		char	   *name;
		char	   *value;
		const char *vs;
		const char *ve = line_end;

		if (ve > p && ve[-1] == '\r')
			ve--;
		colon = memchr(p, ':', ve - p);
		if (colon != NULL && colon > p && strncmp(p, "HTTP/", 5) != 0)
		{
			name = pnstrdup(p, colon - p);
			for (char *c = name; *c; c++)
				*c = pg_ascii_tolower((unsigned char) *c);
			vs = colon + 1;
			while (vs < ve && (*vs == ' ' || *vs == '\t'))
				vs++;
			while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			value = pnstrdup(vs, ve - vs);
			if (utf8_text(value, strlen(value)) &&
				utf8_text(name, strlen(name)))
			{
				DfJson *prev = dfjson_get(obj, name);

				if (prev != NULL)
					prev->str = psprintf("%s, %s", prev->str, value);
				else
					dfjson_object_add(obj, name, dfjson_make_string(value));
			}
		}
		p = eol ? eol + 1 : end;
	}
	return obj;
}

static char *
base64_text(const char *data, size_t len)
{
	int	  enc_len = pg_b64_enc_len(len);
	char *out = palloc(enc_len + 1);
	int	  n = pg_b64_encode((const PgdB64Byte *) data, len, out, enc_len);

	if (n < 0)
		elog(ERROR, "base64 encoding failed");
	out[n] = '\0';
	return out;
}

/*
 * The Retry-After of a response in milliseconds (delay-seconds; an
 * HTTP-date is not read), or 0.
 */
static int64
retry_after_ms(const PgdHttpResponse *resp)
{
	DfJson *v = dfjson_get(parse_headers(resp->headers, resp->headers_len),
						   "retry-after");
	int64	s = 0;

	if (v == NULL || v->type != DFJ_STRING || v->str[0] == '\0' ||
		strspn(v->str, "0123456789") != strlen(v->str) || strlen(v->str) > 9)
		return 0;
	s = strtoll(v->str, NULL, 10);
	return s * 1000;
}

PgdOutcome
pgd_http_envelope(PgdHttpRequest *req, const PgdHttpResponse *resp)
{
	DfJson	  *env = dfjson_make_object();
	PgdOutcome o = {0};
	bool	   text;
	char	  *body;

	if (resp->content_type != NULL)
		text = textual_content_type(resp->content_type) &&
			utf8_text(resp->body, resp->body_len);
	else
		text = utf8_text(resp->body, resp->body_len);
	body = text ? pnstrdup(resp->body, resp->body_len) :
				  base64_text(resp->body, resp->body_len);

	/*
	 * 0.2.6's rule: a 5xx fails the step, a 4xx is its result.  Inside a
	 * df.retry, 408 and 429 fail it too (retryable, Retry-After honoured):
	 * whoever wraps a call in a retry expects them to be waited out.
	 * fail_on, when given, decides alone.
	 */
	if (req->fail_on ? df_http_fail_on_matches(req->fail_on, resp->status) :
					   (resp->status >= 500 ||
						(req->under_retry &&
						 (resp->status == 408 || resp->status == 429))))
	{
		size_t blen = strlen(body);

		if (blen > PREVIEW_BYTES)
			body[pg_mbcliplen(body, blen, PREVIEW_BYTES)] = '\0';
		o.ok = false;
		o.result = psprintf(PGD_MSG_HTTP_5XX, req->method, req->url,
							resp->status, body);
		o.code = psprintf("http:%ld", resp->status);
		if (resp->status == 503 || resp->status == 429 || resp->status == 408)
			o.retry_after_ms = retry_after_ms(resp);
		return o;
	}

	dfjson_object_add(env, "status",
					  dfjson_make_number(psprintf("%ld", resp->status)));
	dfjson_object_add(env, "body", dfjson_make_string(body));
	dfjson_object_add(env, "encoding",
					  dfjson_make_string(text ? "text" : "base64"));
	dfjson_object_add(env, "headers",
					  parse_headers(resp->headers, resp->headers_len));
	dfjson_object_add(env, "ok",
					  dfjson_make_bool(resp->status >= 200 &&
									   resp->status < 300));
	dfjson_object_add(env, "duration_ms",
					  dfjson_make_number(psprintf(INT64_FORMAT,
												  resp->duration_ms)));
	o.ok = true;
	o.result = dfjson_to_text(env);
	return o;
}
