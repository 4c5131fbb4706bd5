/*-------------------------------------------------------------------------
 *
 * dsl_orch.c
 *	  The builders of the failure-handling nodes
 *	  (docs/design/failure-handling.md): df.retry, df.timeout, df.catch,
 *	  df.fail, and df.sleep with a fraction of a second.
 *
 * Each checks every argument now, so a mistake fails at build time with a
 * message naming the argument, and writes only the settings that differ
 * from the defaults (graph/orch_config.h): df.retry(step) has the query
 * "{}".  The same parser then reads the settings back, so a builder can
 * never write what df.start would refuse.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/messages.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_retry);
PG_FUNCTION_INFO_V1(pgd_timeout);
PG_FUNCTION_INFO_V1(pgd_catch);
PG_FUNCTION_INFO_V1(pgd_fail);
PG_FUNCTION_INFO_V1(pgd_sleep_fraction);

static void
bad_arg(const char *func, const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s: %s", func, msg)));
}

static void
require(FunctionCallInfo fcinfo, int argno, const char *func, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: %s cannot be NULL", func, name)));
}

/* An interval argument in microseconds (a month counts 30 days). */
static int64
interval_us(FunctionCallInfo fcinfo, int argno, const char *func,
			const char *name, bool positive)
{
	Interval *iv = PG_GETARG_INTERVAL_P(argno);
	int64	  us = iv->time + (int64) iv->day * USECS_PER_DAY +
		(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;

	if (us < 0)
		bad_arg(func, psprintf("%s must not be negative", name));
	if (positive && us == 0)
		bad_arg(func, psprintf("%s must be greater than zero", name));
	return us;
}

static DfJson *
seconds_json(int64 us)
{
	return dfjson_make_number(df_seconds_text(us));
}

/* A text[] argument of error patterns as a JSON array, each checked. */
static DfJson *
patterns_arg(FunctionCallInfo fcinfo, int argno, const char *func,
			 const char *name)
{
	ArrayType *arr = PG_GETARG_ARRAYTYPE_P(argno);
	Datum	  *elems;
	bool	  *nulls;
	int		   n;
	DfJson	  *out = dfjson_make_array();

	if (ARR_NDIM(arr) > 1)
		bad_arg(func, psprintf("%s must be a one-dimensional array", name));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls,
					  &n);
	if (n == 0)
		bad_arg(func, psprintf("%s is an empty array, which matches no error: give at least one pattern, or NULL for the default",
							   name));
	for (int i = 0; i < n; i++)
	{
		char *p;
		char *err;

		if (nulls[i])
			bad_arg(func, psprintf("%s cannot contain NULL", name));
		p = TextDatumGetCString(elems[i]);
		if ((err = df_error_pattern_check(p)) != NULL)
			bad_arg(func, err);
		dfjson_array_add(out, dfjson_make_string(p));
	}
	return out;
}

static Datum
wrapper_datum(DfNodeType type, DfNode *left, DfNode *right, DfJson *settings)
{
	DfNode		   *node = df_node_new(type);
	DfWrapperConfig check;
	char		   *err;

	node->left = left;
	node->right = right;
	node->query = dfjson_to_text(settings);
	/*
	 * What df.start will read back: a setting the arguments' own checks let
	 * through (a duration out of range, a retry_on the mode never matches)
	 * is the caller's error, named by the parser.
	 */
	if ((err = df_wrapper_parse(df_node_type_name(type), node->query,
								&check)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err)));
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

/*
 * df.retry(step, max_attempts, initial_interval, backoff_rate,
 * max_interval, jitter, retry_on, non_retryable, max_duration,
 * attempt_timeout, mode)
 */
Datum
pgd_retry(PG_FUNCTION_ARGS)
{
	const char *f = "df.retry";
	DfJson	   *cfg = dfjson_make_object();
	DfNode	   *step;
	int32		max_attempts;
	int64		initial_us;
	int64		max_us;
	double		rate;
	char	   *jitter;
	DfJitter	j;
	char	   *mode;

	require(fcinfo, 0, f, "step");
	step = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	require(fcinfo, 1, f, "max_attempts");
	require(fcinfo, 2, f, "initial_interval");
	require(fcinfo, 3, f, "backoff_rate");
	require(fcinfo, 4, f, "max_interval");
	require(fcinfo, 5, f, "jitter");
	require(fcinfo, 10, f, "mode");

	max_attempts = PG_GETARG_INT32(1);
	if (max_attempts < 0)
		bad_arg(f, "max_attempts must be 0 (unlimited) or more");
	if (max_attempts != DF_RETRY_MAX_ATTEMPTS)
		dfjson_object_add(cfg, "max_attempts",
						  dfjson_make_number(psprintf("%d", max_attempts)));

	initial_us = interval_us(fcinfo, 2, f, "initial_interval", false);
	if (initial_us != (int64) DF_RETRY_INITIAL_MS * 1000)
		dfjson_object_add(cfg, "initial_interval", seconds_json(initial_us));

	rate = PG_GETARG_FLOAT8(3);
	if (isnan(rate) || rate < 1.0 || rate > 1000.0)
		bad_arg(f, "backoff_rate must be between 1 and 1000");
	if (rate != DF_RETRY_BACKOFF_RATE)
		dfjson_object_add(cfg, "backoff_rate",
						  dfjson_make_number(psprintf("%.15g", rate)));

	max_us = interval_us(fcinfo, 4, f, "max_interval", false);
	if (max_us < initial_us)
		bad_arg(f, "max_interval must not be shorter than initial_interval");
	if (max_us != (int64) DF_RETRY_MAX_INTERVAL_MS * 1000)
		dfjson_object_add(cfg, "max_interval", seconds_json(max_us));

	jitter = text_to_cstring(PG_GETARG_TEXT_PP(5));
	if (!df_jitter_parse(jitter, &j))
		bad_arg(f,
				psprintf("unknown jitter \"%s\": use 'full', 'equal' or 'none'",
						 jitter));
	if (j != DF_RETRY_JITTER)
		dfjson_object_add(cfg, "jitter", dfjson_make_string(jitter));

	if (!PG_ARGISNULL(6))
		dfjson_object_add(cfg, "retry_on",
						  patterns_arg(fcinfo, 6, f, "retry_on"));
	if (!PG_ARGISNULL(7))
		dfjson_object_add(cfg, "non_retryable",
						  patterns_arg(fcinfo, 7, f, "non_retryable"));
	if (!PG_ARGISNULL(8))
		dfjson_object_add(cfg, "max_duration",
						  seconds_json(interval_us(fcinfo, 8, f,
												   "max_duration", true)));
	if (!PG_ARGISNULL(9))
	{
		int64 us = interval_us(fcinfo, 9, f, "attempt_timeout", true);

		if (us < 1000)
			bad_arg(f, "attempt_timeout must be at least 1 millisecond");
		dfjson_object_add(cfg, "attempt_timeout", seconds_json(us));
	}

	mode = text_to_cstring(PG_GETARG_TEXT_PP(10));
	if (strcmp(mode, "step") != 0 && strcmp(mode, "subtree") != 0)
		bad_arg(f,
				psprintf("unknown mode \"%s\": use 'step' or 'subtree'",
						 mode));
	if (strcmp(mode, "subtree") == 0)
		dfjson_object_add(cfg, "mode", dfjson_make_string("subtree"));

	return wrapper_datum(DF_NODE_RETRY, step, NULL, cfg);
}

/* df.timeout(step, seconds) */
Datum
pgd_timeout(PG_FUNCTION_ARGS)
{
	const char *f = "df.timeout";
	DfJson	   *cfg = dfjson_make_object();
	DfNode	   *step;
	double		seconds;

	require(fcinfo, 0, f, "step");
	require(fcinfo, 1, f, "seconds");
	step = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	seconds = PG_GETARG_FLOAT8(1);
	if (isnan(seconds) || seconds <= 0)
		bad_arg(f, "seconds must be greater than zero");
	if (seconds > 1e9)
		bad_arg(f, "seconds is out of range");
	if (llround(seconds * 1000.0) == 0)
		bad_arg(f, "seconds must be at least 0.001");
	dfjson_object_add(cfg, "seconds",
					  seconds_json(llround(seconds * 1000.0) * 1000));
	return wrapper_datum(DF_NODE_TIMEOUT, step, NULL, cfg);
}

/* df.catch(step, handler, errors) */
Datum
pgd_catch(PG_FUNCTION_ARGS)
{
	const char *f = "df.catch";
	DfJson	   *cfg = dfjson_make_object();
	DfNode	   *step;
	DfNode	   *handler;

	require(fcinfo, 0, f, "step");
	require(fcinfo, 1, f, "handler");
	step = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	handler = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (!PG_ARGISNULL(2))
		dfjson_object_add(cfg, "errors", patterns_arg(fcinfo, 2, f, "errors"));
	return wrapper_datum(DF_NODE_CATCH, step, handler, cfg);
}

/* df.fail(message, retryable) */
Datum
pgd_fail(PG_FUNCTION_ARGS)
{
	const char *f = "df.fail";
	DfJson	   *cfg = dfjson_make_object();

	require(fcinfo, 0, f, "message");
	require(fcinfo, 1, f, "retryable");
	dfjson_object_add(cfg, "message",
					  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	if (PG_GETARG_BOOL(1))
		dfjson_object_add(cfg, "retryable", dfjson_make_bool(true));
	return wrapper_datum(DF_NODE_FAIL, NULL, NULL, cfg);
}

/*
 * df.sleep(seconds float8): a fraction of a second is kept to the
 * millisecond; a whole number writes the reference's "5".
 */
Datum
pgd_sleep_fraction(PG_FUNCTION_ARGS)
{
	double	seconds = PG_GETARG_FLOAT8(0);
	DfNode *node;

	if (isnan(seconds) || seconds < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_SLEEP_NEGATIVE)));
	if (seconds > 1e12)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.sleep: seconds is out of range")));
	node = df_node_new(DF_NODE_SLEEP);
	node->query = df_seconds_text(llround(seconds * 1000.0) * 1000);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
