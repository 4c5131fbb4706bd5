/*-------------------------------------------------------------------------
 *
 * dsl_limit.c
 *	  The builder of node LIMIT (docs/design/locks-and-limits.md §4):
 *	  df.limit(step, key, max_concurrent, rate, burst, queue_timeout).
 *
 * Every argument is checked now, with the checks df.start runs on the
 * settings (graph/limit_config.c), and only the arguments given are
 * written: df.limit('q', 'k', 3) has the query
 * {"key":"k","max_concurrent":3}.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/limit_config.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_limit);

static void
limit_error(int code, const char *msg)
{
	ereport(ERROR, (errcode(code), errmsg("df.limit: %s", msg)));
}

/* df.limit(step, key, max_concurrent, rate, burst, queue_timeout) */
Datum
pgd_limit(PG_FUNCTION_ARGS)
{
	DfJson		   *cfg = dfjson_make_object();
	DfNode		   *node = df_node_new(DF_NODE_LIMIT);
	DfWrapperConfig check;
	char		   *key;
	int64  max_concurrent = PG_ARGISNULL(2) ? -1 : Max(PG_GETARG_INT32(2), 0);
	double rate = PG_ARGISNULL(3) ? -1 : PG_GETARG_FLOAT8(3);
	int64  burst = PG_ARGISNULL(4) ? -1 : Max(PG_GETARG_INT32(4), 0);
	char  *err;

	if (PG_ARGISNULL(0))
		limit_error(ERRCODE_NULL_VALUE_NOT_ALLOWED, "step cannot be NULL");
	if (PG_ARGISNULL(1))
		limit_error(ERRCODE_NULL_VALUE_NOT_ALLOWED, "key cannot be NULL");
	node->left = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	key = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (!PG_ARGISNULL(3) && !isnan(rate) && rate <= 0)
		rate = 0; /* refused as not greater than zero */
	if ((err = df_limit_check(key, max_concurrent, rate, burst)) != NULL)
		limit_error(ERRCODE_INVALID_PARAMETER_VALUE, err);

	dfjson_object_add(cfg, "key", dfjson_make_string(key));
	if (max_concurrent > 0)
		dfjson_object_add(cfg, "max_concurrent",
						  dfjson_make_number(psprintf(INT64_FORMAT,
													  max_concurrent)));
	if (rate > 0)
		dfjson_object_add(cfg, "rate",
						  dfjson_make_number(psprintf("%.15g", rate)));
	if (burst > 0)
		dfjson_object_add(cfg, "burst",
						  dfjson_make_number(psprintf(INT64_FORMAT, burst)));
	if (!PG_ARGISNULL(5))
	{
		Interval *iv = PG_GETARG_INTERVAL_P(5);
		int64	  us = iv->time + (int64) iv->day * USECS_PER_DAY +
			(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;

		if (us < 1000)
			limit_error(ERRCODE_INVALID_PARAMETER_VALUE,
						"queue_timeout must be at least 1 millisecond");
		dfjson_object_add(cfg, "queue_timeout",
						  dfjson_make_number(df_seconds_text(us)));
	}
	node->query = dfjson_to_text(cfg);
	/* what df.start will read back */
	if ((err = df_wrapper_parse("LIMIT", node->query, &check)) != NULL)
		elog(ERROR, "a builder wrote settings it cannot read: %s", err);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
