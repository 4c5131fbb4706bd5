/*-------------------------------------------------------------------------
 *
 * dsl_saga.c
 *	  The builders of the saga nodes (docs/design/sagas.md):
 *	  df.with_undo(forward, undo) and its operator <~>, node COMPENSATED
 *	  (left: the forward step, right: its undo, no query), and
 *	  df.saga(body, on_compensated, parallel, on_undo_failure), node SAGA
 *	  (left: the body, right: on_compensated when given, the settings in
 *	  query).
 *
 * Precedence: PostgreSQL gives a user-defined operator the precedence of
 * "any other operator", left-associative, the same as ~>, |=>, & and |.
 * So a <~> a2 ~> b <~> b2 parses as ((a <~> a2) ~> b) <~> b2, an undo of
 * the whole sequence, which is never what the writer meant: the operator
 * refuses a left operand that is a sequence (THEN) and says how to write
 * it, a <~> a2 ~> (b <~> b2).  df.with_undo takes any forward step, a
 * sequence included, for an undo that compensates the whole of it.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "common/json.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_with_undo);
PG_FUNCTION_INFO_V1(pgd_with_undo_op);
PG_FUNCTION_INFO_V1(pgd_saga);

/* Does the tree hold a COMPENSATED node? */
static bool
has_compensated(const DfNode *n)
{
	check_stack_depth();
	if (n == NULL)
		return false;
	if (n->type == DF_NODE_COMPENSATED)
		return true;
	if (has_compensated(n->left) || has_compensated(n->right) ||
		has_compensated(n->condition))
		return true;
	for (int i = 0; i < n->nextras; i++)
		if (has_compensated(n->extras[i]))
			return true;
	return false;
}

static Datum
compensated_datum(FunctionCallInfo fcinfo, const char *func, bool op)
{
	DfNode *node;
	DfNode *forward;
	DfNode *undo;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: %s cannot be NULL", func,
						PG_ARGISNULL(0) ? "forward" : "undo")));
	forward = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	undo = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (op && forward->type == DF_NODE_THEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("<~>: the left operand is a sequence (~>), and <~> would give its undo to the whole sequence"),
				 errdetail("<~> and ~> have the same precedence and group left to right: a <~> a2 ~> b <~> b2 reads as ((a <~> a2) ~> b) <~> b2."),
				 errhint("Parenthesise each step with its undo: a <~> a2 ~> (b <~> b2); for one undo of a whole sequence use df.with_undo(a ~> b, undo).")));
	if (has_compensated(undo))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: an undo cannot have an undo of its own (the undo holds a COMPENSATED node)",
						func)));
	node = df_node_new(DF_NODE_COMPENSATED);
	node->left = forward;
	node->right = undo;
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

/* df.with_undo(forward, undo) */
Datum
pgd_with_undo(PG_FUNCTION_ARGS)
{
	return compensated_datum(fcinfo, "df.with_undo", false);
}

/* forward <~> undo */
Datum
pgd_with_undo_op(PG_FUNCTION_ARGS)
{
	return compensated_datum(fcinfo, "<~>", true);
}

/*
 * df.saga(body, on_compensated, parallel, on_undo_failure): node SAGA,
 * the body in left, on_compensated in right; the settings that differ from
 * the defaults in query ({} when none do).
 */
Datum
pgd_saga(PG_FUNCTION_ARGS)
{
	DfNode		   *node = df_node_new(DF_NODE_SAGA);
	DfJson		   *cfg = dfjson_make_object();
	DfWrapperConfig check;
	char		   *err;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.saga: %s cannot be NULL",
						PG_ARGISNULL(0)		? "body" :
							PG_ARGISNULL(2) ? "parallel" :
											  "on_undo_failure")));
	node->left = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (!PG_ARGISNULL(1))
		node->right = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (PG_GETARG_BOOL(2))
		dfjson_object_add(cfg, "parallel", dfjson_make_bool(true));
	{
		char *mode = text_to_cstring(PG_GETARG_TEXT_PP(3));

		if (strcmp(mode, "stop") != 0 && strcmp(mode, "continue") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("df.saga: on_undo_failure must be 'stop' or 'continue', not '%s'",
							mode)));
		if (strcmp(mode, "continue") == 0)
			dfjson_object_add(cfg, "on_undo_failure",
							  dfjson_make_string("continue"));
	}
	node->query = dfjson_to_text(cfg);
	if ((err = df_wrapper_parse("SAGA", node->query, &check)) != NULL)
		elog(ERROR, "df.saga wrote settings it cannot read: %s", err);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
