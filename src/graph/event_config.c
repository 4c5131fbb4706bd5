/*-------------------------------------------------------------------------
 *
 * event_config.c
 *	  Parse and check the settings of PUBLISH and EVENT nodes (see
 *	  event_config.h): df.start's validation and the graph cache use the
 *	  same parser, so a node that starts has settings that parsed.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/event_config.h"

const char *
df_topic_problem(const char *topic)
{
	const char *p;

	if (topic == NULL || topic[0] == '\0')
		return "event topic cannot be empty";
	if (strlen(topic) > DF_TOPIC_MAX_LEN)
		return "event topic is longer than 200 bytes";
	for (p = topic; *p; p++)
		if ((unsigned char) *p < 0x20)
			return "event topic cannot contain control characters";
	return NULL;
}

static char *
string_of(const DfJson *cfg, const char *key)
{
	DfJson *v = dfjson_get(cfg, key);

	return (v != NULL && v->type == DFJ_STRING) ? v->str : NULL;
}

static char *
parse_publish(const DfJson *cfg, DfEventConfig *out)
{
	DfJson *key = dfjson_get(cfg, "key");
	DfJson *payload = dfjson_get(cfg, "payload");

	if (payload != NULL && payload->type != DFJ_STRING)
		return pstrdup("PUBLISH payload must be a string (a JSON template)");
	if (key != NULL && key->type != DFJ_STRING && key->type != DFJ_NULL)
		return pstrdup("PUBLISH key must be a string or null");
	out->payload = payload ? payload->str : "{}";
	out->key = (key && key->type == DFJ_STRING) ? key->str : NULL;
	return NULL;
}

static char *
parse_event(const DfJson *cfg, DfEventConfig *out)
{
	DfJson *filter = dfjson_get(cfg, "filter");
	DfJson *timeout = dfjson_get(cfg, "timeout_seconds");

	if (filter != NULL && filter->type != DFJ_OBJECT)
		return pstrdup("EVENT filter must be a JSON object (the payload must contain it)");
	out->filter = filter ? dfjson_to_text(filter) : "{}";
	if (timeout != NULL && timeout->type != DFJ_NULL)
	{
		if (!dfjson_get_int64(timeout, &out->timeout_seconds))
			return pstrdup("EVENT timeout_seconds must be a whole number of seconds or null");
		if (out->timeout_seconds <= 0)
			return pstrdup("EVENT timeout_seconds must be positive");
		if (out->timeout_seconds > PG_INT32_MAX)
			return pstrdup("EVENT timeout_seconds is out of range");
		out->has_timeout = true;
	}
	return NULL;
}

char *
df_event_config_parse(DfNodeType type, const char *query, DfEventConfig *out)
{
	const char *tname = df_node_type_name(type);
	char	   *err = NULL;
	DfJson	   *cfg;
	const char *problem;

	memset(out, 0, sizeof(*out));
	cfg = query ? dfjson_parse(query, strlen(query), &err) : NULL;
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return psprintf("%s query must be a JSON object with a \"topic\"",
						tname);
	out->topic = string_of(cfg, "topic");
	problem = df_topic_problem(out->topic);
	if (problem != NULL)
		return psprintf("%s: %s", tname, problem);
	if (type == DF_NODE_PUBLISH)
		return parse_publish(cfg, out);
	return parse_event(cfg, out);
}
