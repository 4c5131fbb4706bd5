/*-------------------------------------------------------------------------
 *
 * limit_config.c
 *	  The settings of a LIMIT node: parsed once when a graph is loaded
 *	  (engine/graph_cache.c), checked by df.start's validation, and the
 *	  same checks for the builder df.limit (dsl/dsl_limit.c), so that a
 *	  builder cannot write what df.start would refuse.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/json.h"
#include "graph/limit_config.h"

char *
df_limit_check(const char *key, int64 max_concurrent, double rate, int64 burst)
{
	if (key == NULL || key[strspn(key, " \t\r\n")] == '\0')
		return pstrdup("key must not be empty");
	if (strlen(key) > DF_LIMIT_KEY_MAX)
		return psprintf("key must be at most %d bytes", DF_LIMIT_KEY_MAX);
	if (isnan(rate))
		return pstrdup("rate must be a number");
	if (max_concurrent < 0 && rate < 0)
		return pstrdup("give max_concurrent, rate or both");
	if (max_concurrent == 0)
		return pstrdup("max_concurrent must be at least 1");
	if (max_concurrent > PG_INT32_MAX)
		return pstrdup("max_concurrent is out of range");
	if (rate == 0 || (rate > 0 && rate < 1e-6))
		return pstrdup("rate must be greater than zero (admissions per second)");
	if (rate > DF_LIMIT_RATE_MAX)
		return pstrdup("rate must be at most 1000000 per second");
	if (burst >= 0 && rate < 0)
		return pstrdup("burst is only allowed with rate");
	if (burst == 0)
		return pstrdup("burst must be at least 1");
	if (burst > PG_INT32_MAX)
		return pstrdup("burst is out of range");
	return NULL;
}

/* A JSON number of seconds greater than zero, in milliseconds (at least 1). */
static bool
positive_seconds_ms(const DfJson *v, int64 *ms)
{
	double s;
	char  *end;

	if (v == NULL || v->type != DFJ_NUMBER)
		return false;
	s = strtod(v->str, &end);
	if (!(s > 0) || s > 1e9)
		return false;
	*ms = Max((int64) llround(s * 1000.0), 1);
	return true;
}

static bool
whole(const DfJson *v, int64 *out)
{
	return v != NULL && dfjson_get_int64(v, out);
}

char *
df_limit_parse(const char *query, DfLimitConfig *cfg)
{
	static const char *const keys[] = {"key",	"max_concurrent", "rate",
									   "burst", "queue_timeout",  NULL};
	char					*perr;
	DfJson					*obj;
	DfJson					*v;
	int64					 max_concurrent = -1;
	int64					 burst = -1;
	double					 rate = -1;
	char					*err;

	memset(cfg, 0, sizeof(*cfg));
	cfg->queue_timeout_ms = -1;
	if (query == NULL)
		return pstrdup("LIMIT node requires a query with its settings (a JSON object)");
	obj = dfjson_parse(query, strlen(query), &perr);
	if (obj == NULL || obj->type != DFJ_OBJECT)
		return pstrdup("LIMIT query must be a JSON object of settings");
	for (int i = 0; i < obj->count; i++)
	{
		int k;

		for (k = 0; keys[k] != NULL; k++)
			if (strcmp(obj->pairs[i].key, keys[k]) == 0)
				break;
		if (keys[k] == NULL)
			return psprintf("LIMIT settings have an unknown key \"%s\"",
							obj->pairs[i].key);
	}
	v = dfjson_get(obj, "key");
	if (v == NULL || v->type != DFJ_STRING)
		return pstrdup("LIMIT settings require \"key\" (a string)");
	cfg->key = v->str;
	if ((v = dfjson_get(obj, "max_concurrent")) != NULL &&
		!whole(v, &max_concurrent))
		return pstrdup("LIMIT max_concurrent must be a whole number");
	if ((v = dfjson_get(obj, "burst")) != NULL && !whole(v, &burst))
		return pstrdup("LIMIT burst must be a whole number");
	/* a negative value given is refused as too small, not taken as absent */
	max_concurrent =
		dfjson_get(obj, "max_concurrent") ? Max(max_concurrent, 0) : -1;
	burst = dfjson_get(obj, "burst") ? Max(burst, 0) : -1;
	if ((v = dfjson_get(obj, "rate")) != NULL)
	{
		char *end;

		if (v->type != DFJ_NUMBER)
			return pstrdup("LIMIT rate must be a number");
		rate = strtod(v->str, &end);
		if (rate < 0)
			rate = 0; /* refused below as not greater than zero */
	}
	if ((err = df_limit_check(cfg->key, max_concurrent, rate, burst)) != NULL)
		return psprintf("LIMIT settings: %s", err);
	if ((v = dfjson_get(obj, "queue_timeout")) != NULL &&
		!positive_seconds_ms(v, &cfg->queue_timeout_ms))
		return pstrdup("LIMIT queue_timeout must be a number of seconds greater than zero");
	cfg->max_concurrent = max_concurrent > 0 ? (int) max_concurrent : 0;
	cfg->rate = rate > 0 ? rate : 0;
	cfg->burst =
		burst > 0 ? (int) burst : (cfg->rate > 0 ? DF_LIMIT_BURST_DEFAULT : 0);
	return NULL;
}
