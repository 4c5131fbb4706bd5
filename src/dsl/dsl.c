/*-------------------------------------------------------------------------
 *
 * dsl.c
 *	  The workflow DSL: builders (df.sql, df.seq, df.as, df.sleep, ...) and
 *	  the operators ~> |=> & | ?> !> @>.  Each returns Durofut JSON text.
 *
 * Operands of composers are coerced by dsl_operand: Durofut JSON is parsed
 * and re-serialized canonically (so identical DSL always gives identical
 * text, and hand-written JSON comes out in canonical form), JSON that was
 * meant to be Durofut but is broken is an error, and anything else is SQL
 * text that becomes a SQL step.  A half-built if (the result of ?> alone)
 * and the results of helper functions (df.setvar, ...) are refused as
 * operands.
 *
 * Builders are pure: no table access, no side effects, IMMUTABLE.  Errors
 * a user can cause are ereport()s, with the reference's texts
 * (common/messages.h) where it pins them.
 *
 * The HTTP builders are in dsl_http.c.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cron.h"
#include "dsl/dsl.h"
#include "fmgr.h"
#include "graph/graph.h"
#include "graph/loop_config.h"
#include "common/json.h"
#include "common/messages.h"
#include "common/overloads.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(pgd_sql);
PG_FUNCTION_INFO_V1(pgd_seq);
PG_FUNCTION_INFO_V1(pgd_as);
PG_FUNCTION_INFO_V1(pgd_sleep);
PG_FUNCTION_INFO_V1(pgd_wait_for_schedule);
PG_FUNCTION_INFO_V1(pgd_loop);
PG_FUNCTION_INFO_V1(pgd_loop_prefix);
PG_FUNCTION_INFO_V1(pgd_break);
PG_FUNCTION_INFO_V1(pgd_if);
PG_FUNCTION_INFO_V1(pgd_if_rows);
PG_FUNCTION_INFO_V1(pgd_if_then_op);
PG_FUNCTION_INFO_V1(pgd_if_else_op);
PG_FUNCTION_INFO_V1(pgd_join);
PG_FUNCTION_INFO_V1(pgd_join3);
PG_FUNCTION_INFO_V1(pgd_race);
PG_FUNCTION_INFO_V1(pgd_wait_for_signal);

#define PARTIAL_IF_KEY "_partial_if"

/*
 * Is this the jsonb object ?> produces?  Checked only for text that is not
 * Durofut, and cheaply rejected unless the key appears at all.
 */
static bool
is_partial_if(const char *text)
{
	DfJson *json;
	char   *err;

	if (strstr(text, "\"" PARTIAL_IF_KEY "\"") == NULL)
		return false;
	json = dfjson_parse(text, strlen(text), &err);
	return json != NULL && dfjson_get(json, PARTIAL_IF_KEY) != NULL;
}

DfNode *
dsl_operand(const char *text)
{
	DfParseResult r;
	DfNode		 *node;

	pgd_check_not_helper_result(text);
	r = df_graph_parse(text);
	switch (r.status)
	{
		case DF_PARSE_OK:
			return r.node;
		case DF_PARSE_NOT_DUROFUT:
			if (is_partial_if(text))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("incomplete if-then-else: ?> must be completed with !> (else branch)"),
						 errhint("Write condition ?> then_step !> else_step, or use df.if(condition, then_step, else_step).")));
			node = df_node_new(DF_NODE_SQL);
			node->query = pstrdup(text);
			return node;
		case DF_PARSE_BAD_JSON:
		case DF_PARSE_UNKNOWN_TYPE:
		case DF_PARSE_MALFORMED:
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg(PGD_MSG_INVALID_DUROFUT_JSON, r.errmsg)));
	return NULL; /* keep compiler quiet */
}

static DfNode *
operand_arg(FunctionCallInfo fcinfo, int argno)
{
	return dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(argno)));
}

static Datum
graph_datum(const DfNode *node)
{
	return PointerGetDatum(cstring_to_text(df_graph_to_text(node)));
}

static DfNode *
binary_node(DfNodeType type, DfNode *left, DfNode *right)
{
	DfNode *node = df_node_new(type);

	node->left = left;
	node->right = right;
	return node;
}

static void
check_result_name(const char *func, const char *name)
{
	if (!df_is_valid_result_name(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: " PGD_MSG_INVALID_RESULT_NAME, func, name)));
}

/* df.sql(query): the query is taken literally, never parsed as Durofut. */
Datum
pgd_sql(PG_FUNCTION_ARGS)
{
	DfNode *node = df_node_new(DF_NODE_SQL);

	node->query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	PG_RETURN_DATUM(graph_datum(node));
}

/* df.seq(a, b) and ~> */
Datum
pgd_seq(PG_FUNCTION_ARGS)
{
	DfNode *left = operand_arg(fcinfo, 0);
	DfNode *right = operand_arg(fcinfo, 1);

	PG_RETURN_DATUM(graph_datum(binary_node(DF_NODE_THEN, left, right)));
}

/* df.as(fut, name) and |=>: a later name replaces an earlier one. */
Datum
pgd_as(PG_FUNCTION_ARGS)
{
	char   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	DfNode *node;

	check_result_name("df.as", name);
	node = operand_arg(fcinfo, 0);
	node->result_name = name;
	PG_RETURN_DATUM(graph_datum(node));
}

Datum
pgd_sleep(PG_FUNCTION_ARGS)
{
	int64	seconds = PG_GETARG_INT64(0);
	DfNode *node;

	if (seconds < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_SLEEP_NEGATIVE)));
	node = df_node_new(DF_NODE_SLEEP);
	node->query = psprintf(INT64_FORMAT, seconds);
	PG_RETURN_DATUM(graph_datum(node));
}

/* The expression is checked now so a typo fails at build time, not at run time. */
Datum
pgd_wait_for_schedule(PG_FUNCTION_ARGS)
{
	char   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfCron	cron;
	char   *err;
	DfJson *cfg;
	DfNode *node;

	if (!df_cron_parse(expr, &cron, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_INVALID_CRON, expr, err),
				 errhint("Use five fields: minute hour day-of-month month day-of-week, e.g. '*/5 * * * *'.")));
	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "cron_expr", dfjson_make_string(expr));
	node = df_node_new(DF_NODE_WAIT_SCHEDULE);
	node->query = dfjson_to_text(cfg);
	PG_RETURN_DATUM(graph_datum(node));
}

static DfNode *
loop_node(DfNode *body, DfNode *condition, const DfLoopConfig *cfg)
{
	DfNode *node = df_node_new(DF_NODE_LOOP);

	node->left = body;
	node->condition = condition;
	node->query = df_loop_query(cfg);
	return node;
}

/*
 * df.loop(body, condition, continue_on_failure): not STRICT because
 * condition may be NULL.  A schema older than the library declares the
 * first two arguments only.  Without continue_on_failure the node has no
 * query, so the JSON is the reference's.
 */
Datum
pgd_loop(PG_FUNCTION_ARGS)
{
	DfNode		*body;
	DfNode		*condition = NULL;
	DfLoopConfig cfg = {false};

	pgd_require_compat_execute(fcinfo, 2);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.loop: body cannot be NULL")));
	body = operand_arg(fcinfo, 0);
	if (!PG_ARGISNULL(1))
		condition = operand_arg(fcinfo, 1);
	if (PG_NARGS() > 2)
	{
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("df.loop: continue_on_failure cannot be NULL"),
					 errhint("Pass true or false, or leave it out (false).")));
		cfg.continue_on_failure = PG_GETARG_BOOL(2);
	}
	PG_RETURN_DATUM(graph_datum(loop_node(body, condition, &cfg)));
}

/* prefix @> */
Datum
pgd_loop_prefix(PG_FUNCTION_ARGS)
{
	DfLoopConfig cfg = {false};

	PG_RETURN_DATUM(graph_datum(loop_node(operand_arg(fcinfo, 0), NULL,
										  &cfg)));
}

/* df.break(value): the value is a literal, never auto-wrapped. */
Datum
pgd_break(PG_FUNCTION_ARGS)
{
	DfJson *cfg = dfjson_make_object();
	DfNode *node = df_node_new(DF_NODE_BREAK);

	dfjson_object_add(cfg, "break_value",
					  PG_ARGISNULL(0) ?
						  dfjson_make_null() :
						  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	node->query = dfjson_to_text(cfg);
	PG_RETURN_DATUM(graph_datum(node));
}

static DfNode *
if_node(DfNode *condition, DfNode *then_branch, DfNode *else_branch)
{
	DfNode *node = binary_node(DF_NODE_IF, then_branch, else_branch);

	node->condition = condition;
	return node;
}

Datum
pgd_if(PG_FUNCTION_ARGS)
{
	DfNode *condition = operand_arg(fcinfo, 0);
	DfNode *then_branch = operand_arg(fcinfo, 1);
	DfNode *else_branch = operand_arg(fcinfo, 2);

	PG_RETURN_DATUM(graph_datum(if_node(condition, then_branch, else_branch)));
}

Datum
pgd_if_rows(PG_FUNCTION_ARGS)
{
	char   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfJson *cfg;
	DfNode *then_branch;
	DfNode *else_branch;
	DfNode *node;

	check_result_name("df.if_rows", name);
	then_branch = operand_arg(fcinfo, 1);
	else_branch = operand_arg(fcinfo, 2);
	node = binary_node(DF_NODE_IF, then_branch, else_branch);
	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "condition_type",
					  dfjson_make_string("result_has_rows"));
	dfjson_object_add(cfg, "result_name", dfjson_make_string(name));
	node->query = dfjson_to_text(cfg);
	PG_RETURN_DATUM(graph_datum(node));
}

/*
 * ?> : a partial if, completed by !>.  As in the reference, the operands
 * are kept as the text they were given and the result is jsonb text, so it
 * goes through jsonb to get exactly jsonb's key order and spacing.  The
 * operands are still checked now, so that a mistake is reported at the
 * operator that has it.
 */
Datum
pgd_if_then_op(PG_FUNCTION_ARGS)
{
	char		  *condition = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char		  *then_branch = text_to_cstring(PG_GETARG_TEXT_PP(1));
	StringInfoData buf;
	Datum		   jb;

	(void) dsl_operand(condition);
	(void) dsl_operand(then_branch);

	initStringInfo(&buf);
	appendStringInfoString(&buf,
						   "{\"" PARTIAL_IF_KEY "\":true,\"condition\":");
	dfjson_write_string(&buf, condition);
	appendStringInfoString(&buf, ",\"then_branch\":");
	dfjson_write_string(&buf, then_branch);
	appendStringInfoChar(&buf, '}');
	jb = DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
	PG_RETURN_TEXT_P(cstring_to_text(DatumGetCString(DirectFunctionCall1(jsonb_out,
																		 jb))));
}

static void
not_a_partial_if(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg(PGD_MSG_IF_ELSE_WITHOUT_IF),
			 errhint("Write condition ?> then_step !> else_step.")));
}

/* A branch stored in a partial if: Durofut text as a string, or an object. */
static DfNode *
partial_branch(const DfJson *v)
{
	if (v != NULL && v->type == DFJ_STRING)
		return dsl_operand(v->str);
	if (v != NULL && v->type == DFJ_OBJECT)
		return dsl_operand(dfjson_to_text(v));
	not_a_partial_if();
	return NULL; /* keep compiler quiet */
}

/* !> : completes a partial if into df.if(condition, then, else). */
Datum
pgd_if_else_op(PG_FUNCTION_ARGS)
{
	char   *partial = text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfJson *json;
	DfJson *flag;
	char   *err;
	DfNode *condition;
	DfNode *then_branch;
	DfNode *else_branch;

	json = dfjson_parse(partial, strlen(partial), &err);
	flag = dfjson_get(json, PARTIAL_IF_KEY);
	if (flag == NULL || flag->type != DFJ_BOOL || !flag->boolean)
		not_a_partial_if();
	condition = partial_branch(dfjson_get(json, "condition"));
	then_branch = partial_branch(dfjson_get(json, "then_branch"));
	else_branch = operand_arg(fcinfo, 1);
	PG_RETURN_DATUM(graph_datum(if_node(condition, then_branch, else_branch)));
}

/* df.join(a, b) and &: nested joins are kept nested (nested result arrays). */
Datum
pgd_join(PG_FUNCTION_ARGS)
{
	DfNode *left = operand_arg(fcinfo, 0);
	DfNode *right = operand_arg(fcinfo, 1);

	PG_RETURN_DATUM(graph_datum(binary_node(DF_NODE_JOIN, left, right)));
}

Datum
pgd_join3(PG_FUNCTION_ARGS)
{
	DfNode *left = operand_arg(fcinfo, 0);
	DfNode *right = operand_arg(fcinfo, 1);
	DfNode *third = operand_arg(fcinfo, 2);
	DfNode *node = binary_node(DF_NODE_JOIN, left, right);

	node->nextras = 1;
	node->extras = palloc(sizeof(DfNode *));
	node->extras[0] = third;
	PG_RETURN_DATUM(graph_datum(node));
}

Datum
pgd_race(PG_FUNCTION_ARGS)
{
	DfNode *left = operand_arg(fcinfo, 0);
	DfNode *right = operand_arg(fcinfo, 1);

	PG_RETURN_DATUM(graph_datum(binary_node(DF_NODE_RACE, left, right)));
}

/* df.wait_for_signal(name, timeout_seconds): not STRICT, the timeout may be NULL. */
Datum
pgd_wait_for_signal(PG_FUNCTION_ARGS)
{
	char *name = PG_ARGISNULL(0) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfJson *cfg;
	DfNode *node;

	if (name[strspn(name, " \t\r\n")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_SIGNAL_NAME_EMPTY)));
	if (!PG_ARGISNULL(1) && PG_GETARG_INT32(1) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_TIMEOUT_NOT_POSITIVE)));

	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "signal_name", dfjson_make_string(name));
	dfjson_object_add(cfg, "timeout_seconds",
					  PG_ARGISNULL(1) ?
						  dfjson_make_null() :
						  dfjson_make_number(psprintf("%d",
													  PG_GETARG_INT32(1))));
	node = df_node_new(DF_NODE_SIGNAL);
	node->query = dfjson_to_text(cfg);
	PG_RETURN_DATUM(graph_datum(node));
}
