/*-------------------------------------------------------------------------
 *
 * task_config.c
 *	  Parse and check the settings of TASK nodes (task_config.h): the
 *	  builder df.task, df.start's validation and the graph cache use the
 *	  same parser, so a node that starts has settings that parsed.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/task_config.h"

const char *
df_task_queue_problem(const char *queue)
{
	if (queue == NULL || queue[0] == '\0')
		return "task queue cannot be empty";
	if (strlen(queue) > DF_TASK_QUEUE_MAX_LEN)
		return "task queue is longer than 200 bytes";
	for (const char *p = queue; *p; p++)
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
			return "task queue cannot contain control characters";
	if (strpbrk(queue, "{}$*") != NULL)
		return "task queue cannot contain '{', '}', '$' or '*'";
	return NULL;
}

char *
df_task_seconds_problem(const char *what, int64 seconds)
{
	if (seconds <= 0)
		return psprintf("%s must be positive", what);
	if (seconds > DF_TASK_MAX_SECONDS)
		return psprintf("%s must be at most %d (7 days)", what,
						DF_TASK_MAX_SECONDS);
	return NULL;
}

/* An optional positive number of seconds; NULL or the problem. */
static char *
seconds_of(const DfJson *cfg, const char *key, int *out)
{
	DfJson *v = dfjson_get(cfg, key);
	int64	s;

	*out = 0;
	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (v->type != DFJ_NUMBER || !dfjson_get_int64(v, &s))
		return psprintf("TASK config \"%s\" must be an integer", key);
	if (df_task_seconds_problem(key, s) != NULL)
		return df_task_seconds_problem(key, s);
	*out = (int) s;
	return NULL;
}

char *
df_task_parse(const char *query, DfTaskConfig *cfg)
{
	DfJson	   *obj;
	DfJson	   *v;
	char	   *err;
	const char *problem;

	memset(cfg, 0, sizeof(*cfg));
	obj = query ? dfjson_parse(query, strlen(query), &err) : NULL;
	if (obj == NULL || obj->type != DFJ_OBJECT)
		return pstrdup("TASK query must be a JSON config object {\"queue\": ..., \"payload\": ...}");
	v = dfjson_get(obj, "queue");
	if (v == NULL || v->type != DFJ_STRING)
		return pstrdup("TASK config requires a string \"queue\"");
	if ((problem = df_task_queue_problem(v->str)) != NULL)
		return pstrdup(problem);
	cfg->queue = v->str;
	v = dfjson_get(obj, "payload");
	if (v != NULL && v->type != DFJ_STRING && v->type != DFJ_NULL)
		return pstrdup("TASK config \"payload\" must be a string (a JSON template)");
	cfg->payload = (v && v->type == DFJ_STRING) ? v->str : "{}";
	if ((err = seconds_of(obj, "timeout_seconds", &cfg->timeout_s)) != NULL ||
		(err = seconds_of(obj, "heartbeat_seconds", &cfg->heartbeat_s)) != NULL)
		return err;
	return NULL;
}
