/*-------------------------------------------------------------------------
 *
 * persisted.c
 *	  The links a persisted node keeps in its query config (persisted.h).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/persisted.h"

void
df_config_links(DfNodeType type, const char *query, DfConfigLinks *links)
{
	DfJson *cfg;
	DfJson *v;
	char   *err = NULL;

	links->condition_id = NULL;
	links->nextras = 0;
	links->extra_ids = NULL;
	if (query == NULL ||
		(type != DF_NODE_IF && type != DF_NODE_LOOP && type != DF_NODE_JOIN))
		return;
	cfg = dfjson_parse(query, strlen(query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return;
	v = dfjson_get(cfg, "condition_node");
	if (v != NULL && v->type == DFJ_STRING && type != DF_NODE_JOIN)
		links->condition_id = v->str;
	v = dfjson_get(cfg, "extra_nodes");
	if (v != NULL && v->type == DFJ_ARRAY && type == DF_NODE_JOIN)
	{
		int i;

		links->extra_ids = palloc(sizeof(char *) * Max(v->count, 1));
		for (i = 0; i < v->count; i++)
			if (v->items[i]->type == DFJ_STRING)
				links->extra_ids[links->nextras++] = v->items[i]->str;
	}
}
