/*-------------------------------------------------------------------------
 *
 * dsl_map.c
 *	  The builder of node MAP (docs/design/map.md):
 *	  df.map(query, step, max_concurrent) -- left: the query as a SQL node,
 *	  right: the step run once per row, query: {"max_concurrent": n} when a
 *	  cap is given (graph/map_config.h); df.map(query, step, max_concurrent,
 *	  collect, tolerated_failures), lanes mode -- query: {"lanes": n,
 *	  "collect": b, "tolerated_failures": k}.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/map_config.h"

PG_FUNCTION_INFO_V1(pgd_map);
PG_FUNCTION_INFO_V1(pgd_map_lanes);

/* The MAP node of query and step, without its settings. */
static DfNode *
map_node(FunctionCallInfo fcinfo)
{
	DfNode *node;
	DfNode *query;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.map: %s cannot be NULL",
						PG_ARGISNULL(0) ? "query" : "step")));
	query = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (query->type != DF_NODE_SQL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: query must be SQL text, not a %s node",
						df_node_type_name(query->type)),
				 errdetail("The rows of the query are what df.map maps over; it runs once, as a SQL step.")));
	if (query->query == NULL || strspn(query->query, " \t\r\n") == strlen(query->query))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: query is empty"),
				 errhint("Give the SQL query whose rows the step runs for.")));
	node = df_node_new(DF_NODE_MAP);
	node->left = query;
	node->right = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	return node;
}

static Datum
map_done(DfNode *node)
{
	char *problem;

	if ((problem = df_map_check(node)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: %s", problem)));
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

/* df.map(query text, step text, max_concurrent int DEFAULT NULL) */
Datum
pgd_map(PG_FUNCTION_ARGS)
{
	DfNode *node = map_node(fcinfo);

	if (!PG_ARGISNULL(2))
	{
		int32 max = PG_GETARG_INT32(2);

		if (max < 1 || max > DF_MAP_MAX_CONCURRENT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("df.map: max_concurrent must be between 1 and %d, not %d",
							DF_MAP_MAX_CONCURRENT, max),
					 errhint("Leave it NULL to run every row's step at once.")));
		node->query = psprintf("{\"max_concurrent\":%d}", max);
	}
	return map_done(node);
}

/*
 * df.map(query text, step text, max_concurrent int, collect boolean,
 *		  tolerated_failures int DEFAULT 0): lanes mode
 */
Datum
pgd_map_lanes(PG_FUNCTION_ARGS)
{
	DfNode *node = map_node(fcinfo);
	int32	lanes = PG_ARGISNULL(2) ? DF_MAP_DEFAULT_LANES : PG_GETARG_INT32(2);
	int32	tolerated = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);

	if (lanes < 1 || lanes > DF_MAP_MAX_CONCURRENT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: max_concurrent must be between 1 and %d, not %d",
						DF_MAP_MAX_CONCURRENT, lanes),
				 errhint("Leave it NULL for %d at a time.", DF_MAP_DEFAULT_LANES)));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.map: collect cannot be NULL"),
				 errhint("true: the result is the array of the steps' results; "
						 "false: the steps write their results themselves and the result counts the rows.")));
	if (tolerated < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: tolerated_failures cannot be negative, not %d",
						tolerated)));
	node->query = psprintf("{\"lanes\":%d,\"collect\":%s,\"tolerated_failures\":%d}",
						   lanes, PG_GETARG_BOOL(3) ? "true" : "false",
						   tolerated);
	return map_done(node);
}
