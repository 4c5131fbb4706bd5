/*-------------------------------------------------------------------------
 *
 * dsl_events.c
 *	  The builders of the event nodes (docs/design/events.md):
 *	  df.publish(topic, payload, key), node PUBLISH, and
 *	  df.wait_for_event(topic, filter, timeout_seconds), node EVENT.  Both
 *	  are leaves with their settings as one JSON object in the query
 *	  (graph/event_config.h).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "common/json.h"
#include "graph/event_config.h"
#include "graph/graph.h"

PG_FUNCTION_INFO_V1(pgd_publish);
PG_FUNCTION_INFO_V1(pgd_wait_for_event);

static char *
checked_topic(FunctionCallInfo fcinfo, const char *func)
{
	char *topic =
		PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *problem = df_topic_problem(topic);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s", func, problem)));
	return topic;
}

static Datum
leaf_datum(DfNodeType type, DfJson *cfg)
{
	DfNode *node = df_node_new(type);

	node->query = dfjson_to_text(cfg);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

/* df.publish(topic, payload DEFAULT '{}', key DEFAULT NULL) */
Datum
pgd_publish(PG_FUNCTION_ARGS)
{
	char   *topic = checked_topic(fcinfo, "df.publish");
	DfJson *cfg = dfjson_make_object();

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.publish: payload cannot be NULL"),
				 errhint("Leave it out for an empty payload '{}'.")));
	dfjson_object_add(cfg, "topic", dfjson_make_string(topic));
	dfjson_object_add(cfg, "payload",
					  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(1))));
	if (!PG_ARGISNULL(2))
		dfjson_object_add(cfg, "key",
						  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(2))));
	return leaf_datum(DF_NODE_PUBLISH, cfg);
}

/* df.wait_for_event(topic, filter DEFAULT '{}', timeout_seconds DEFAULT NULL) */
Datum
pgd_wait_for_event(PG_FUNCTION_ARGS)
{
	char   *topic = checked_topic(fcinfo, "df.wait_for_event");
	DfJson *cfg = dfjson_make_object();
	DfJson *filter;
	char   *err = NULL;
	char   *text;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.wait_for_event: filter cannot be NULL"),
				 errhint("Use '{}' to take any event of the topic.")));
	text = JsonbToCString(NULL, &PG_GETARG_JSONB_P(1)->root, 64);
	filter = dfjson_parse(text, strlen(text), &err);
	if (filter == NULL || filter->type != DFJ_OBJECT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.wait_for_event: filter must be a JSON object"),
				 errdetail("An event matches when its payload contains the filter (payload @> filter).")));
	if (!PG_ARGISNULL(2) && PG_GETARG_INT32(2) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.wait_for_event: timeout_seconds must be positive"),
				 errhint("Leave it NULL to wait without a timeout.")));
	dfjson_object_add(cfg, "topic", dfjson_make_string(topic));
	dfjson_object_add(cfg, "filter", filter);
	if (!PG_ARGISNULL(2))
		dfjson_object_add(cfg, "timeout_seconds",
						  dfjson_make_number(psprintf("%d",
													  PG_GETARG_INT32(2))));
	return leaf_datum(DF_NODE_EVENT, cfg);
}
