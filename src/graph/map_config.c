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
df_map_parse(const char *query, int *max_concurrent)
{
	char   *err = NULL;
	DfJson *cfg;
	DfJson *v;
	int64	n;

	*max_concurrent = 0;
	if (query == NULL)
		return NULL;
	cfg = dfjson_parse(query, strlen(query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return pstrdup("MAP query must be a JSON object {\"max_concurrent\": <n>}");
	for (int i = 0; i < cfg->count; i++)
		if (strcmp(cfg->pairs[i].key, "max_concurrent") != 0)
			return psprintf("MAP query has an unknown key \"%s\" (the only one is max_concurrent)",
							cfg->pairs[i].key);
	v = dfjson_get(cfg, "max_concurrent");
	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (!dfjson_get_int64(v, &n))
		return pstrdup("MAP max_concurrent must be a whole number");
	if (n < 1 || n > DF_MAP_MAX_CONCURRENT)
		return psprintf("MAP max_concurrent must be between 1 and %d, not " INT64_FORMAT,
						DF_MAP_MAX_CONCURRENT, n);
	*max_concurrent = (int) n;
	return NULL;
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
