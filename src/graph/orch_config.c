/*-------------------------------------------------------------------------
 *
 * orch_config.c
 *	  Parsing and checking the settings of RETRY, TIMEOUT, CATCH and FAIL
 *	  nodes, and the error codes and patterns of
 *	  docs/design/failure-handling.md §2.
 *
 * The same checks serve the builders (a bad argument fails at build
 * time), df.start's validation of a hand-written graph, and the graph
 * cache, which parses each wrapper's settings once when it loads a graph.
 * Unknown keys are refused, so a typo in a hand-written graph is not
 * silently ignored.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "datatype/timestamp.h"

#include "graph/orch_config.h"

static const char *const known_kinds[] = {
	"sql",			 "http",		 "timeout", "connection", "circuit_open",
	"queue_timeout", "lock_timeout", "fail",	"cancelled",  NULL};

/* ---------------------------------------------------------------------
 * Error codes and patterns
 * ---------------------------------------------------------------------
 */

char *
df_error_kind(const char *code)
{
	const char *colon;

	if (code == NULL)
		return NULL;
	colon = strchr(code, ':');
	return colon ? pnstrdup(code, colon - code) : pstrdup(code);
}

static bool
is_known_kind(const char *s)
{
	for (int i = 0; known_kinds[i]; i++)
		if (strcmp(s, known_kinds[i]) == 0)
			return true;
	return false;
}

char *
df_error_pattern_check(const char *pattern)
{
	const char *rest;
	size_t		len;

	if (pattern == NULL)
		return pstrdup("an error pattern cannot be NULL");
	if (is_known_kind(pattern))
		return NULL;
	if (strncmp(pattern, "sql:", 4) == 0)
	{
		rest = pattern + 4;
		len = strlen(rest);
		if (len >= 1 && len <= 5 &&
			strspn(rest, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") == len)
			return NULL;
	}
	else if (strncmp(pattern, "http:", 5) == 0)
	{
		rest = pattern + 5;
		len = strlen(rest);
		if (len >= 1 && len <= 3 && rest[0] >= '1' && rest[0] <= '5' &&
			strspn(rest, "0123456789x") == len)
			return NULL;
	}
	return psprintf("unknown error pattern \"%s\": use a kind (sql, http, timeout, connection, "
					"circuit_open, queue_timeout, lock_timeout, fail, cancelled), "
					"a SQLSTATE or its prefix (sql:23505, sql:08) or an HTTP status or class "
					"(http:503, http:5xx)",
					pattern);
}

bool
df_error_matches(const char *pattern, const char *code)
{
	size_t plen;

	if (pattern == NULL || code == NULL)
		return false;
	if (strchr(pattern, ':') == NULL)
	{
		char *kind = df_error_kind(code);

		return strcmp(kind, pattern) == 0;
	}
	plen = strlen(pattern);
	if (strlen(code) < plen)
		return false;
	for (size_t i = 0; i < plen; i++)
		if (!(pattern[i] == code[i] ||
			  (pattern[i] == 'x' && code[i] >= '0' && code[i] <= '9' &&
			   strncmp(pattern, "http:", 5) == 0)))
			return false;
	return true;
}

bool
df_error_matches_any(char *const *patterns, int n, const char *code)
{
	for (int i = 0; i < n; i++)
		if (df_error_matches(patterns[i], code))
			return true;
	return false;
}

bool
df_error_retryable_by_default(const char *code)
{
	static const char *const never[] = {"sql:22", "sql:23",		  "sql:28",
										"sql:3D", "sql:3F",		  "sql:42",
										"fail",	  "circuit_open", "limit_nesting",
										NULL};

	if (code == NULL)
		return false;
	for (int i = 0; never[i]; i++)
		if (df_error_matches(never[i], code))
			return false;
	if (df_error_matches("http:4xx", code))
		return strcmp(code, "http:408") == 0 || strcmp(code, "http:429") == 0;
	return true;
}

/* ---------------------------------------------------------------------
 * Numbers
 * ---------------------------------------------------------------------
 */

char *
df_seconds_text(int64 us)
{
	char *s;
	int	  len;

	if (us % USECS_PER_SEC == 0)
		return psprintf(INT64_FORMAT, us / USECS_PER_SEC);
	s = psprintf(INT64_FORMAT ".%06d", us / USECS_PER_SEC,
				 (int) (us % USECS_PER_SEC));
	len = strlen(s);
	while (len > 0 && s[len - 1] == '0')
		s[--len] = '\0';
	return s;
}

bool
df_seconds_ms(const DfJson *v, int64 *ms)
{
	char  *end;
	double d;

	if (v == NULL || v->type != DFJ_NUMBER)
		return false;
	d = strtod(v->str, &end);
	if (*end != '\0' || isnan(d) || d < 0 || d > 1e10)
		return false;
	*ms = (int64) llround(d * 1000.0);
	return true;
}

/* ---------------------------------------------------------------------
 * Settings
 * ---------------------------------------------------------------------
 */

bool
df_jitter_parse(const char *name, DfJitter *j)
{
	if (strcmp(name, "full") == 0)
		*j = DF_JITTER_FULL;
	else if (strcmp(name, "equal") == 0)
		*j = DF_JITTER_EQUAL;
	else if (strcmp(name, "none") == 0)
		*j = DF_JITTER_NONE;
	else
		return false;
	return true;
}

const char *
df_jitter_name(DfJitter j)
{
	switch (j)
	{
		case DF_JITTER_FULL:
			return "full";
		case DF_JITTER_EQUAL:
			return "equal";
		case DF_JITTER_NONE:
			return "none";
	}
	return "full";
}

void
df_retry_defaults(DfRetryPolicy *p)
{
	memset(p, 0, sizeof(*p));
	p->max_attempts = DF_RETRY_MAX_ATTEMPTS;
	p->initial_ms = DF_RETRY_INITIAL_MS;
	p->backoff_rate = DF_RETRY_BACKOFF_RATE;
	p->max_interval_ms = DF_RETRY_MAX_INTERVAL_MS;
	p->jitter = DF_RETRY_JITTER;
	p->nretry_on = -1;
	p->nnon_retryable = 0;
	p->max_duration_ms = -1;
	p->attempt_timeout_ms = -1;
	p->subtree = false;
}

static DfJson *
settings_object(const char *type_name, const char *query, char **err)
{
	DfJson *cfg;
	char   *perr;

	*err = NULL;
	if (query == NULL)
	{
		*err =
			psprintf("%s node requires a query with its settings (a JSON object)",
					 type_name);
		return NULL;
	}
	cfg = dfjson_parse(query, strlen(query), &perr);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
	{
		*err =
			psprintf("%s query must be a JSON object of settings", type_name);
		return NULL;
	}
	return cfg;
}

/* An array of error patterns; -1 in *n for JSON null. */
static char *
pattern_list(const char *what, const DfJson *v, int *n, char ***out)
{
	char *err;

	if (v == NULL || v->type == DFJ_NULL)
	{
		*n = -1;
		*out = NULL;
		return NULL;
	}
	if (v->type != DFJ_ARRAY)
		return psprintf("%s must be an array of error patterns", what);
	if (v->count == 0)
		return psprintf("%s is an empty array, which matches no error: give at least one pattern, or NULL for the default",
						what);
	*n = v->count;
	*out = palloc(sizeof(char *) * Max(v->count, 1));
	for (int i = 0; i < v->count; i++)
	{
		if (v->items[i]->type != DFJ_STRING)
			return psprintf("%s must be an array of error patterns", what);
		if ((err = df_error_pattern_check(v->items[i]->str)) != NULL)
			return psprintf("%s: %s", what, err);
		(*out)[i] = pstrdup(v->items[i]->str);
	}
	return NULL;
}

static char *
duration_key(const DfJson *cfg, const char *key, bool positive, int64 *ms)
{
	DfJson *v = dfjson_get(cfg, key);

	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (!df_seconds_ms(v, ms))
	{
		if (v->type == DFJ_NUMBER && strtod(v->str, NULL) > 1e10)
			return psprintf("RETRY %s of %s seconds is out of range: at most 10000000000 seconds (about 316 years)",
							key, v->str);
		return psprintf("RETRY %s must be a non-negative number of seconds",
						key);
	}
	if (positive && *ms <= 0)
		return psprintf("RETRY %s must be greater than zero", key);
	return NULL;
}

char *
df_retry_parse(const char *query, DfRetryPolicy *p)
{
	static const char *const keys[] = {"max_attempts",
									   "initial_interval",
									   "backoff_rate",
									   "max_interval",
									   "jitter",
									   "retry_on",
									   "non_retryable",
									   "max_duration",
									   "attempt_timeout",
									   "mode",
									   "instance_policy",
									   "on_failure",
									   NULL};
	char					*err;
	DfJson					*cfg = settings_object("RETRY", query, &err);
	DfJson					*v;
	int64					 i64;
	int						 nnon;

	df_retry_defaults(p);
	if (cfg == NULL)
		return err;
	for (int i = 0; i < cfg->count; i++)
	{
		bool known = false;

		for (int k = 0; keys[k]; k++)
			known |= strcmp(cfg->pairs[i].key, keys[k]) == 0;
		if (!known)
			return psprintf("RETRY settings have an unknown key \"%s\"",
							cfg->pairs[i].key);
	}
	if ((v = dfjson_get(cfg, "max_attempts")) != NULL)
	{
		if (!dfjson_get_int64(v, &i64) || i64 < 0 || i64 > PG_INT32_MAX)
			return pstrdup("RETRY max_attempts must be a whole number >= 0 (0 = unlimited)");
		p->max_attempts = (int) i64;
	}
	if ((err = duration_key(cfg, "initial_interval", false, &p->initial_ms)))
		return err;
	if ((v = dfjson_get(cfg, "backoff_rate")) != NULL)
	{
		char *end;

		p->backoff_rate = v->type == DFJ_NUMBER ? strtod(v->str, &end) : 0;
		if (v->type != DFJ_NUMBER || *end != '\0' || isnan(p->backoff_rate) ||
			p->backoff_rate < 1.0 || p->backoff_rate > 1000.0)
			return pstrdup("RETRY backoff_rate must be a number between 1 and 1000");
	}
	if ((err = duration_key(cfg, "max_interval", false, &p->max_interval_ms)))
		return err;
	if ((v = dfjson_get(cfg, "jitter")) != NULL &&
		(v->type != DFJ_STRING || !df_jitter_parse(v->str, &p->jitter)))
		return pstrdup("RETRY jitter must be \"full\", \"equal\" or \"none\"");
	if ((err = pattern_list("RETRY retry_on", dfjson_get(cfg, "retry_on"),
							&p->nretry_on, &p->retry_on)))
		return err;
	if ((err = pattern_list("RETRY non_retryable",
							dfjson_get(cfg, "non_retryable"), &nnon,
							&p->non_retryable)))
		return err;
	p->nnon_retryable = Max(nnon, 0);
	if ((err = duration_key(cfg, "max_duration", true, &p->max_duration_ms)))
		return err;
	if ((err = duration_key(cfg, "attempt_timeout", true,
							&p->attempt_timeout_ms)))
		return err;
	if ((v = dfjson_get(cfg, "mode")) != NULL)
	{
		if (v->type != DFJ_STRING ||
			(strcmp(v->str, "step") != 0 && strcmp(v->str, "subtree") != 0))
			return pstrdup("RETRY mode must be \"step\" or \"subtree\"");
		p->subtree = strcmp(v->str, "subtree") == 0;
	}
	/*
	 * Mode 'step' retries a step's own failures (and a breaker's refusal):
	 * a lock or limit wrapper that gives up is never a step's failure.
	 */
	for (int i = 0; !p->subtree && i < p->nretry_on; i++)
		if (strcmp(p->retry_on[i], "lock_timeout") == 0 ||
			strcmp(p->retry_on[i], "queue_timeout") == 0)
			return psprintf("RETRY retry_on \"%s\" never matches in mode 'step', which retries a step's own failures; "
							"use mode 'subtree' to run the df.with_lock or df.limit again",
							p->retry_on[i]);
	if ((v = dfjson_get(cfg, "instance_policy")) != NULL)
	{
		if (v->type != DFJ_BOOL)
			return pstrdup("RETRY instance_policy must be true or false");
		p->instance_policy = v->boolean;
	}
	if ((v = dfjson_get(cfg, "on_failure")) != NULL)
	{
		if (v->type != DFJ_STRING ||
			(strcmp(v->str, "fail") != 0 && strcmp(v->str, "continue") != 0))
			return pstrdup("RETRY on_failure must be \"fail\" or \"continue\"");
		p->on_failure_continue = strcmp(v->str, "continue") == 0;
	}
	return NULL;
}

char *
df_timeout_parse(const char *query, int64 *ms)
{
	char   *err;
	DfJson *cfg = settings_object("TIMEOUT", query, &err);

	if (cfg == NULL)
		return err;
	if (cfg->count != 1 || !df_seconds_ms(dfjson_get(cfg, "seconds"), ms) ||
		*ms <= 0)
		return pstrdup("TIMEOUT query must be {\"seconds\": <a number of seconds greater than zero>}");
	return NULL;
}

char *
df_catch_parse(const char *query, int *nerrors, char ***errors)
{
	char   *err;
	DfJson *cfg = settings_object("CATCH", query, &err);

	*nerrors = -1;
	if (cfg == NULL)
		return err;
	for (int i = 0; i < cfg->count; i++)
		if (strcmp(cfg->pairs[i].key, "errors") != 0)
			return psprintf("CATCH settings have an unknown key \"%s\"",
							cfg->pairs[i].key);
	return pattern_list("CATCH errors", dfjson_get(cfg, "errors"), nerrors,
						errors);
}

char *
df_fail_parse(const char *query, char **message, bool *retryable)
{
	char   *err;
	DfJson *cfg = settings_object("FAIL", query, &err);
	DfJson *v;

	*message = NULL;
	*retryable = false;
	if (cfg == NULL)
		return err;
	for (int i = 0; i < cfg->count; i++)
		if (strcmp(cfg->pairs[i].key, "message") != 0 &&
			strcmp(cfg->pairs[i].key, "retryable") != 0)
			return psprintf("FAIL settings have an unknown key \"%s\"",
							cfg->pairs[i].key);
	v = dfjson_get(cfg, "message");
	if (v == NULL || v->type != DFJ_STRING)
		return pstrdup("FAIL query must be {\"message\": \"<text>\"} (with \"retryable\": true optionally)");
	*message = pstrdup(v->str);
	v = dfjson_get(cfg, "retryable");
	if (v != NULL)
	{
		if (v->type != DFJ_BOOL)
			return pstrdup("FAIL retryable must be true or false");
		*retryable = v->boolean;
	}
	return NULL;
}

char *
df_saga_parse(const char *query, bool *parallel, bool *continue_on_failure)
{
	char   *err;
	DfJson *cfg = settings_object("SAGA", query, &err);
	DfJson *v;

	*parallel = false;
	*continue_on_failure = false;
	if (cfg == NULL)
		return err;
	for (int i = 0; i < cfg->count; i++)
		if (strcmp(cfg->pairs[i].key, "parallel") != 0 &&
			strcmp(cfg->pairs[i].key, "on_undo_failure") != 0)
			return psprintf("SAGA settings have an unknown key \"%s\"",
							cfg->pairs[i].key);
	v = dfjson_get(cfg, "parallel");
	if (v != NULL)
	{
		if (v->type != DFJ_BOOL)
			return pstrdup("SAGA parallel must be true or false");
		*parallel = v->boolean;
	}
	v = dfjson_get(cfg, "on_undo_failure");
	if (v != NULL)
	{
		if (v->type != DFJ_STRING ||
			(strcmp(v->str, "stop") != 0 && strcmp(v->str, "continue") != 0))
			return pstrdup("SAGA on_undo_failure must be 'stop' or 'continue'");
		*continue_on_failure = strcmp(v->str, "continue") == 0;
	}
	return NULL;
}

char *
df_wrapper_parse(const char *type_name, const char *query,
				 DfWrapperConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->nerrors = -1;
	if (strcmp(type_name, "RETRY") == 0)
		return df_retry_parse(query, &cfg->retry);
	if (strcmp(type_name, "TIMEOUT") == 0)
		return df_timeout_parse(query, &cfg->timeout_ms);
	if (strcmp(type_name, "CATCH") == 0)
		return df_catch_parse(query, &cfg->nerrors, &cfg->errors);
	if (strcmp(type_name, "FAIL") == 0)
		return df_fail_parse(query, &cfg->fail_message, &cfg->fail_retryable);
	if (strcmp(type_name, "SAGA") == 0)
		return df_saga_parse(query, &cfg->saga_parallel, &cfg->saga_continue);
	if (strcmp(type_name, "BREAKER") == 0)
		return df_breaker_parse(query, &cfg->breaker_name);
	if (strcmp(type_name, "LIMIT") == 0)
		return df_limit_parse(query, &cfg->limit);
	return psprintf("%s is not a wrapper node", type_name);
}
