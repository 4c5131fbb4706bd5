/*-------------------------------------------------------------------------
 *
 * loop_config.c
 *	  The settings of a LOOP node (loop_config.h): written by df.loop
 *	  (dsl/dsl.c), checked by df.start's validation, parsed once when a
 *	  graph is loaded (engine/graph_cache.c) and shown by df.explain.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/loop_config.h"

#define KEY_CONTINUE  "continue_on_failure"
#define KEY_CONDITION "condition_node"

char *
df_loop_parse(const char *query, bool persisted, DfLoopConfig *cfg)
{
	DfJson *obj;
	char   *err = NULL;
	int		i;

	cfg->continue_on_failure = false;
	if (query == NULL)
		return NULL;
	/*
	 * Anything but the settings is refused with the message of a LOOP that
	 * has no settings at all.
	 */
	obj = dfjson_parse(query, strlen(query), &err);
	if (obj == NULL || obj->type != DFJ_OBJECT)
		return pstrdup("LOOP node cannot have a query");
	for (i = 0; i < obj->count; i++)
	{
		const char	 *key = obj->pairs[i].key;
		const DfJson *v = obj->pairs[i].value;

		if (strcmp(key, KEY_CONTINUE) == 0)
		{
			if (v->type != DFJ_BOOL)
				return pstrdup("LOOP setting continue_on_failure must be true or false");
			cfg->continue_on_failure = v->boolean;
		}
		else if (!(persisted && strcmp(key, KEY_CONDITION) == 0))
			return pstrdup("LOOP node cannot have a query");
	}
	return NULL;
}

char *
df_loop_query(const DfLoopConfig *cfg)
{
	DfJson *obj;

	if (!cfg->continue_on_failure)
		return NULL;
	obj = dfjson_make_object();
	dfjson_object_add(obj, KEY_CONTINUE, dfjson_make_bool(true));
	return dfjson_to_text(obj);
}
