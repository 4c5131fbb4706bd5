/*-------------------------------------------------------------------------
 *
 * task_config.h
 *	  The settings of a TASK node (df.task: a step run by an external
 *	  worker, docs/guides/external-workers.md), parsed and checked
 *	  (task_config.c).
 *
 * The node keeps them as one JSON object in its query:
 * {"queue": "payments", "payload": "<template>"} plus "timeout_seconds"
 * and "heartbeat_seconds" only when given.  The queue is a name, never a
 * template; the payload is substituted when the node starts and must then
 * be JSON.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_TASK_CONFIG_H
#define PG_DURABLE_TASK_CONFIG_H

#include "postgres.h"

#define DF_TASK_QUEUE_MAX_LEN 200
#define DF_TASK_MAX_SECONDS	  (7 * 24 * 3600)

typedef struct DfTaskConfig
{
	const char *queue;
	const char *payload;   /* the template, as written */
	int			timeout_s; /* 0: none */
	int			heartbeat_s; /* 0: none */
} DfTaskConfig;

/* NULL when queue is an acceptable queue name, else the problem. */
extern const char *df_task_queue_problem(const char *queue);

/* NULL when seconds (named what) is acceptable, else the problem. */
extern char *df_task_seconds_problem(const char *what, int64 seconds);

/* NULL when query is a TASK node's acceptable settings (then in *cfg). */
extern char *df_task_parse(const char *query, DfTaskConfig *cfg);

#endif
