/*-------------------------------------------------------------------------
 *
 * dsl_task.c
 *	  df.task: a step that an external worker runs (node TASK,
 *	  docs/guides/external-workers.md).
 *
 * The builder checks its arguments with the checks of graph/task_config.c
 * (the ones that validate hand-written graphs) and writes the config keys
 * in the order queue, payload, then timeout_seconds and heartbeat_seconds
 * only when given.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "common/json.h"
#include "dsl/dsl.h"
#include "graph/task_config.h"

PG_FUNCTION_INFO_V1(pgd_task);

static void
task_error(const char *problem)
{
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.task: %s", problem)));
}

static void
add_seconds(FunctionCallInfo fcinfo, DfJson *cfg, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		return;
	task_error(df_task_seconds_problem(what, PG_GETARG_INT32(argno)));
	dfjson_object_add(cfg, what,
					  dfjson_make_number(psprintf("%d", PG_GETARG_INT32(argno))));
}

/* df.task(queue, payload DEFAULT '{}', timeout_seconds, heartbeat_seconds) */
Datum
pgd_task(PG_FUNCTION_ARGS)
{
	char   *queue = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfJson *cfg = dfjson_make_object();
	DfNode *node;

	task_error(df_task_queue_problem(queue));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.task: payload cannot be NULL"),
				 errhint("Leave it out for an empty payload '{}'.")));
	dfjson_object_add(cfg, "queue", dfjson_make_string(queue));
	dfjson_object_add(cfg, "payload",
					  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(1))));
	add_seconds(fcinfo, cfg, 2, "timeout_seconds");
	add_seconds(fcinfo, cfg, 3, "heartbeat_seconds");

	node = df_node_new(DF_NODE_TASK);
	node->query = dfjson_to_text(cfg);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
