/*-------------------------------------------------------------------------
 *
 * map_config.c
 *	  Checks and parsing of node MAP's settings (map_config.h).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/map_config.h"

char *
df_map_settings(const char *query, DfMapSettings *s)
{
	char   *err = NULL;
	DfJson *cfg;
	DfJson *v;
	int64	n;

	memset(s, 0, sizeof(*s));
	s->collect = true;
	if (query == NULL)
		return NULL;
	cfg = dfjson_parse(query, strlen(query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return pstrdup("MAP query must be a JSON object {\"max_concurrent\": <n>} or {\"lanes\": <n>, \"collect\": <bool>, \"tolerated_failures\": <n>}");
	s->lanes = dfjson_get(cfg, "lanes") != NULL;
	for (int i = 0; i < cfg->count; i++)
	{
		const char *k = cfg->pairs[i].key;

		if (s->lanes ?
				(strcmp(k, "lanes") != 0 && strcmp(k, "collect") != 0 &&
				 strcmp(k, "tolerated_failures") != 0) :
				strcmp(k, "max_concurrent") != 0)
			return psprintf(s->lanes ?
								"MAP query has an unknown key \"%s\" (with lanes: collect, tolerated_failures)" :
								"MAP query has an unknown key \"%s\" (the only one is max_concurrent)",
							k);
	}
	if (s->lanes)
	{
		if (!dfjson_get_int64(dfjson_get(cfg, "lanes"), &n))
			return pstrdup("MAP lanes must be a whole number");
		if (n < 1 || n > DF_MAP_MAX_CONCURRENT)
			return psprintf("MAP lanes must be between 1 and %d, not " INT64_FORMAT,
							DF_MAP_MAX_CONCURRENT, n);
		s->max_concurrent = (int) n;
		v = dfjson_get(cfg, "collect");
		if (v != NULL)
		{
			if (v->type != DFJ_BOOL)
				return pstrdup("MAP collect must be true or false");
			s->collect = v->boolean;
		}
		v = dfjson_get(cfg, "tolerated_failures");
		if (v != NULL)
		{
			if (!dfjson_get_int64(v, &n))
				return pstrdup("MAP tolerated_failures must be a whole number");
			if (n < 0 || n > PG_INT32_MAX)
				return psprintf("MAP tolerated_failures must be between 0 and %d, not " INT64_FORMAT,
								PG_INT32_MAX, n);
			s->tolerated_failures = (int) n;
		}
		return NULL;
	}
	v = dfjson_get(cfg, "max_concurrent");
	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (!dfjson_get_int64(v, &n))
		return pstrdup("MAP max_concurrent must be a whole number");
	if (n < 1 || n > DF_MAP_MAX_CONCURRENT)
		return psprintf("MAP max_concurrent must be between 1 and %d, not " INT64_FORMAT,
						DF_MAP_MAX_CONCURRENT, n);
	s->max_concurrent = (int) n;
	return NULL;
}

char *
df_map_parse(const char *query, int *max_concurrent)
{
	DfMapSettings s;
	char		 *problem = df_map_settings(query, &s);

	*max_concurrent = s.max_concurrent;
	return problem;
}

char *
df_map_check(const DfNode *n)
{
	int max;

	if (n->left == NULL || n->right == NULL)
		return pstrdup("MAP node requires left_node (the SQL query whose rows it maps over) and right_node (the step run for each row)");
	if (n->left->type != DF_NODE_SQL)
		return psprintf("MAP left_node must be a SQL node (the query whose rows it maps over), not %s",
						df_node_type_name(n->left->type));
	return df_map_parse(n->query, &max);
}
