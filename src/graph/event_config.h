/*-------------------------------------------------------------------------
 *
 * event_config.h
 *	  The settings of the event nodes PUBLISH and EVENT
 *	  (docs/design/events.md), parsed and checked once (event_config.c).
 *
 * PUBLISH keeps {"topic": t, "payload": <template text>, "key": <template
 * text>} in its query ("key" absent: none); EVENT keeps {"topic": t,
 * "filter": <JSON object>, "timeout_seconds": n} ("timeout_seconds"
 * absent: no timeout).  df.publish and df.wait_for_event write them
 * (dsl/dsl_events.c).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_EVENT_CONFIG_H
#define PG_DURABLE_EVENT_CONFIG_H

#include "postgres.h"

#include "graph/graph.h"

#define DF_TOPIC_MAX_LEN 200

typedef struct DfEventConfig
{
	char *topic;
	char *payload;	   /* PUBLISH: a template, JSON once substituted */
	char *key;		   /* PUBLISH: a template; NULL: none */
	char *filter;	   /* EVENT: a JSON object, as text */
	bool  has_timeout; /* EVENT */
	int64 timeout_seconds;
} DfEventConfig;

/*
 * Parse the query of a PUBLISH or EVENT node into *out.  NULL when it is
 * acceptable, else a palloc'd message saying what is wrong.
 */
extern char *df_event_config_parse(DfNodeType type, const char *query,
								   DfEventConfig *out);

/* What is wrong with a topic name, or NULL (df.publish_event, df.subscribe too). */
extern const char *df_topic_problem(const char *topic);

#endif /* PG_DURABLE_EVENT_CONFIG_H */
