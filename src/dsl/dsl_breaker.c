/*-------------------------------------------------------------------------
 *
 * dsl_breaker.c
 *	  df.with_breaker(step, name): node BREAKER, whose whole subtree is one
 *	  call of the circuit breaker name (docs/design/breakers.md).
 *
 * The builder checks the name's form only: whether the breaker exists is
 * known when the node runs (a breaker can be created after the graph is
 * built, or dropped before it runs).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "common/json.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_with_breaker);

Datum
pgd_with_breaker(PG_FUNCTION_ARGS)
{
	DfNode *node;
	DfJson *cfg = dfjson_make_object();
	char   *name;
	char   *err;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.with_breaker: %s cannot be NULL",
						PG_ARGISNULL(0) ? "step" : "name")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if ((err = df_breaker_name_check(name)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.with_breaker: %s", err)));
	node = df_node_new(DF_NODE_BREAKER);
	node->left = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	dfjson_object_add(cfg, "name", dfjson_make_string(name));
	node->query = dfjson_to_text(cfg);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
