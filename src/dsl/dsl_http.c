/*-------------------------------------------------------------------------
 *
 * dsl_http.c
 *	  The HTTP steps of the DSL: df.http and df.http_multipart.
 *
 * The builders check the arguments with the checks of graph/http_config.c
 * (the same ones that validate hand-written graphs) and raise their
 * message as an ERROR.  Config keys are written in the order url, method,
 * body|parts, headers, timeout_seconds, then fail_on, idempotency_key and
 * breaker only when given (so graphs that do not use them keep their JSON);
 * headers and parts are written compactly in jsonb's key order.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "common/json.h"
#include "common/messages.h"
#include "common/overloads.h"
#include "dsl/dsl.h"
#include "graph/http_config.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_http);
PG_FUNCTION_INFO_V1(pgd_http_multipart);

/* jsonb argument as our JSON model (jsonb's key order), or NULL for SQL NULL. */
static DfJson *
jsonb_arg(FunctionCallInfo fcinfo, int argno)
{
	char   *text;
	char   *err;
	DfJson *v;

	if (PG_ARGISNULL(argno))
		return NULL;
	text = DatumGetCString(DirectFunctionCall1(jsonb_out,
											   PG_GETARG_DATUM(argno)));
	v = dfjson_parse(text, strlen(text), &err);
	if (v == NULL)
		elog(ERROR, "could not re-read jsonb output: %s", err);
	return v;
}

static void
http_error(const char *msg)
{
	if (msg != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s is required and cannot be NULL", what)));
}

/*
 * Shared by both builders: url, method, the body or parts already in cfg's
 * caller, headers and timeout.  Arguments: 0 url, 1 method, 3 headers,
 * 4 timeout_seconds; argument 2 is the body or the parts.
 */
static Datum
http_build(FunctionCallInfo fcinfo, bool multipart)
{
	char   *url;
	char   *method;
	DfJson *cfg;
	DfJson *headers;
	DfJson *parts = NULL;
	DfNode *node;

	require_arg(fcinfo, 0, "url");
	url = text_to_cstring(PG_GETARG_TEXT_PP(0));
	http_error(df_http_check_url(url));
	require_arg(fcinfo, 1, "method");
	http_error(df_http_check_method(text_to_cstring(PG_GETARG_TEXT_PP(1)),
									multipart, &method));
	if (multipart)
	{
		parts = jsonb_arg(fcinfo, 2);
		http_error(df_http_check_parts(parts));
	}
	headers = jsonb_arg(fcinfo, 3);
	http_error(df_http_check_headers(headers));
	require_arg(fcinfo, 4, "timeout_seconds");
	if (PG_GETARG_INT32(4) <= 0)
		http_error(PGD_MSG_TIMEOUT_NOT_POSITIVE);

	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "url", dfjson_make_string(url));
	dfjson_object_add(cfg, "method", dfjson_make_string(method));
	if (multipart)
		dfjson_object_add(cfg, "parts", parts);
	else
		dfjson_object_add(cfg, "body",
						  PG_ARGISNULL(2) ?
							  dfjson_make_null() :
							  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(2))));
	dfjson_object_add(cfg, "headers", headers ? headers : dfjson_make_null());
	dfjson_object_add(cfg, "timeout_seconds",
					  dfjson_make_number(psprintf("%d", PG_GETARG_INT32(4))));
	/* df.http(fail_on): a key only when given, so other graphs keep their JSON */
	if (!multipart && PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		char *fail_on;

		http_error(df_http_check_fail_on(text_to_cstring(PG_GETARG_TEXT_PP(5)),
										 &fail_on));
		dfjson_object_add(cfg, "fail_on", dfjson_make_string(fail_on));
	}
	/* df.http(idempotency_key, breaker): the same */
	if (!multipart && PG_NARGS() > 6 && !PG_ARGISNULL(6))
	{
		char *key = text_to_cstring(PG_GETARG_TEXT_PP(6));

		http_error(df_http_check_idempotency_key(key));
		dfjson_object_add(cfg, "idempotency_key", dfjson_make_string(key));
	}
	if (!multipart && PG_NARGS() > 7 && !PG_ARGISNULL(7))
	{
		char *breaker = text_to_cstring(PG_GETARG_TEXT_PP(7));

		http_error(df_breaker_name_check(breaker));
		dfjson_object_add(cfg, "breaker", dfjson_make_string(breaker));
	}

	node = df_node_new(multipart ? DF_NODE_HTTP_MULTIPART : DF_NODE_HTTP);
	node->query = dfjson_to_text(cfg);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

Datum
pgd_http(PG_FUNCTION_ARGS)
{
	pgd_require_compat_execute(fcinfo, 5);
	return http_build(fcinfo, false);
}

Datum
pgd_http_multipart(PG_FUNCTION_ARGS)
{
	return http_build(fcinfo, true);
}
