/*-------------------------------------------------------------------------
 *
 * dsl_map.c
 *	  The builder of node MAP (docs/design/map.md):
 *	  df.map(query, step, max_concurrent) -- left: the query as a SQL node,
 *	  right: the step run once per row, query: {"max_concurrent": n} when a
 *	  cap is given (graph/map_config.h).
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

/* df.map(query text, step text, max_concurrent int DEFAULT NULL) */
Datum
pgd_map(PG_FUNCTION_ARGS)
{
	DfNode *node;
	DfNode *query;
	char   *problem;

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
	if ((problem = df_map_check(node)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.map: %s", problem)));
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
