/*-------------------------------------------------------------------------
 *
 * dsl_lock.c
 *	  The builder of keyed locks (docs/design/locks-and-limits.md §1):
 *	  df.with_lock(step, keys, mode, wait_timeout), node LOCK (left: the
 *	  step; query: {"keys": [...]} plus "mode": "shared" and
 *	  "wait_timeout": <seconds> only when given, graph/lock_config.h).
 *
 * Every argument is checked now, with a message naming it; the keys are
 * written as given (templates: they are sorted once substituted, when
 * the node starts).  The parser of lock_config.c reads the settings back,
 * so the builder can never write what df.start would refuse.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/lock_config.h"
#include "graph/orch_config.h"

PG_FUNCTION_INFO_V1(pgd_with_lock);

static void
bad_lock_arg(const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("df.with_lock: %s", msg)));
}

/* df.with_lock(step, keys, mode, wait_timeout) */
Datum
pgd_with_lock(PG_FUNCTION_ARGS)
{
	DfJson		*cfg = dfjson_make_object();
	DfJson		*keys = dfjson_make_array();
	DfNode		*node;
	DfLockConfig check;
	ArrayType	*arr;
	Datum		*elems;
	bool		*nulls;
	int			 n;
	char		*err;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.with_lock: %s cannot be NULL",
						PG_ARGISNULL(0)		? "step" :
							PG_ARGISNULL(1) ? "keys" :
											  "mode")));
	arr = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(arr) > 1)
		bad_lock_arg("keys must be a one-dimensional array");
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls,
					  &n);
	if (n == 0)
		bad_lock_arg("keys must name at least one key");
	if (n > DF_LOCK_MAX_KEYS)
		bad_lock_arg(psprintf("keys names %d keys, more than the %d allowed",
							  n, DF_LOCK_MAX_KEYS));
	for (int i = 0; i < n; i++)
	{
		char *k;

		if (nulls[i])
			bad_lock_arg("keys cannot contain NULL");
		k = TextDatumGetCString(elems[i]);
		if ((err = df_lock_check_key(k)) != NULL)
			bad_lock_arg(psprintf("key %d: %s", i + 1, err));
		dfjson_array_add(keys, dfjson_make_string(k));
	}
	dfjson_object_add(cfg, "keys", keys);
	{
		char *mode = text_to_cstring(PG_GETARG_TEXT_PP(2));
		bool  shared;

		if (!df_lock_mode_parse(mode, &shared))
			bad_lock_arg(psprintf("mode must be 'exclusive' or 'shared', got '%s'",
								  mode));
		if (shared)
			dfjson_object_add(cfg, "mode", dfjson_make_string("shared"));
	}
	if (!PG_ARGISNULL(3))
	{
		Interval *iv = PG_GETARG_INTERVAL_P(3);
		int64	  us = iv->time + (int64) iv->day * USECS_PER_DAY +
			(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;

		if (us <= 0)
			bad_lock_arg("wait_timeout must be greater than zero");
		dfjson_object_add(cfg, "wait_timeout",
						  dfjson_make_number(df_seconds_text(us)));
	}

	node = df_node_new(DF_NODE_LOCK);
	node->left = dsl_operand(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	node->query = dfjson_to_text(cfg);
	if ((err = df_lock_parse(node->query, &check)) != NULL)
		elog(ERROR, "a builder wrote settings it cannot read: %s", err);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}
