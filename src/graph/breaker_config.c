/*-------------------------------------------------------------------------
 *
 * breaker_config.c
 *	  The checks of circuit-breaker names and of a BREAKER node's settings
 *	  (docs/design/breakers.md; declared in orch_config.h).
 *	  df.create_circuit_breaker, df.with_breaker, validation of a graph and
 *	  an HTTP node's "breaker" key use the same rule.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/orch_config.h"

char *
df_breaker_name_check(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > DF_BREAKER_NAME_MAX)
		return psprintf("a circuit breaker name must have 1 to %d characters",
						DF_BREAKER_NAME_MAX);
	if (!((name[0] >= 'A' && name[0] <= 'Z') ||
		  (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_') ||
		strspn(name,
			   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			   "0123456789_-.:") != len)
		return psprintf("invalid circuit breaker name \"%s\": it must start with a letter or '_' "
						"and hold only letters, digits, '_', '-', '.' and ':'",
						name);
	return NULL;
}

char *
df_breaker_parse(const char *query, char **name)
{
	char   *err = NULL;
	DfJson *cfg = query ? dfjson_parse(query, strlen(query), &err) : NULL;
	DfJson *v;

	*name = NULL;
	if (cfg == NULL || cfg->type != DFJ_OBJECT || cfg->count != 1 ||
		(v = dfjson_get(cfg, "name")) == NULL || v->type != DFJ_STRING)
		return pstrdup("BREAKER query must be {\"name\": \"<circuit breaker name>\"}");
	if ((err = df_breaker_name_check(v->str)) != NULL)
		return err;
	*name = pstrdup(v->str);
	return NULL;
}
