/*-------------------------------------------------------------------------
 *
 * wrapper_state.c
 *	  The engine store's functions for the failure-handling wrappers of
 *	  orchestration/ (retries, timeouts, error codes): the error object of a
 *	  failed node, the keys they add to a node's status_details, and the
 *	  tasks of a step's next attempt (store.h; the statements are in
 *	  statements.c's table).
 *
 * A failed node keeps its error text as its result (the reference's
 * format); its code goes beside it, into status_details ("error": {kind,
 * code, node}), which df.instance_nodes shows, and into the node_failed
 * event.  A step waiting for its next attempt shows its attempt, the
 * policy's maximum and the time of the next attempt there too.
 *
 * Locks: rows of the instance whose runs row the caller holds; the HTTP
 * task of a retry is the caller's own (it holds its lease and its lock).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

/* A failed node's code goes into its status_details. */
void
pgd_store_node_error(const char *instance_id, const char *node_id,
					 PgdOutcome outcome)
{
	DfJson *o = dfjson_make_object();
	DfJson *e = dfjson_make_object();

	dfjson_object_add(e, "kind",
					  dfjson_make_string(pgd_error_kind(outcome.code)));
	dfjson_object_add(e, "code", dfjson_make_string(outcome.code));
	dfjson_object_add(e, "node", outcome.node ?
						  dfjson_make_string(outcome.node) :
						  dfjson_make_null());
	dfjson_object_add(o, "error", e);
	pgd_store_node_details_merge(instance_id, node_id, dfjson_to_text(o));
}

/* Add the keys of a JSON object to status_details; a null value removes its key. */
void
pgd_store_node_details_merge(const char *instance_id, const char *node_id,
							 const char *json)
{
	RUN(STMT_NODE_DETAILS_MERGE, instance_id, node_id, json);
	store_stamps_forget(); /* it wrote rows stamps.c may keep */
}

/* A node's status_details as JSON text, or NULL. */
char *
pgd_store_node_details(const char *instance_id, const char *node_id)
{
	if (RUN(STMT_NODE_DETAILS, instance_id, node_id) == 0)
		return NULL;
	return store_get_string(0, 1);
}

/*
 * A SQL step's next attempt: a step task due at 'at', whose attempts go on
 * from the attempt that failed (so its node's end records every attempt).
 */
void
pgd_store_step_retry_at(const char *instance_id, const char *node_id,
						const char *scope, TimestampTz at)
{
	Datum values[5];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	values[4] = Int32GetDatum(Max(store_current_attempt_of(node_id), 1));
	store_run(STMT_TASK_STEP_AT, values, NULL);
	pgd_task_due_at_commit(at);
}

/*
 * An HTTP step's next attempt: its task row (the one being completed) is
 * due again at 'at' with its lease released, so the call keeps its
 * Idempotency-Key.  Returns the task's id, or 0 when there is no such row.
 */
int64
pgd_store_http_retry_at(const char *instance_id, const char *node_id,
						const char *scope, TimestampTz at)
{
	Datum values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	if (store_run(STMT_HTTP_RETRY_AT, values, NULL) == 0)
		return 0;
	pgd_http_wake_at_commit();
	return strtoll(store_get_string(0, 1), NULL, 10);
}

/* The unclaimed tasks of one node in one scope (a wrapper's timer). */
void
pgd_store_node_tasks_drop(const char *instance_id, const char *node_id,
						  const char *scope)
{
	RUN(STMT_TASKS_OF_NODE_DROP, instance_id, node_id, scope);
}

/* For each task id: is its row gone (the call in flight is no longer wanted)? */
void
pgd_store_http_tasks_gone(const int64 *ids, int n, bool *gone)
{
	Datum *elems = palloc(sizeof(Datum) * Max(n, 1));
	Datum  values[1];
	int	   rows;

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	values[0] = PointerGetDatum(construct_array(elems, n, INT8OID, 8, true,
												TYPALIGN_DOUBLE));
	rows = store_run(STMT_HTTP_TASKS_GONE, values, NULL);
	for (int r = 0; r < rows; r++)
	{
		int64 id = strtoll(store_get_string(r, 1), NULL, 10);

		for (int i = 0; i < n; i++)
			if (ids[i] == id)
				gone[i] = true;
	}
}

/*
 * The error code and failing node a failed node recorded (status_details),
 * into outcome: a JOIN fails with the code of its first failed branch.
 */
void
pgd_store_node_error_code(const char *instance_id, const char *node_id,
						  PgdOutcome *outcome)
{
	char   *details = pgd_store_node_details(instance_id, node_id);
	char   *err = NULL;
	DfJson *d = details ? dfjson_parse(details, strlen(details), &err) : NULL;
	DfJson *e = d ? dfjson_get(d, "error") : NULL;
	DfJson *v;

	if (e == NULL || e->type != DFJ_OBJECT)
		return;
	if ((v = dfjson_get(e, "code")) != NULL && v->type == DFJ_STRING)
		outcome->code = pstrdup(v->str);
	if ((v = dfjson_get(e, "node")) != NULL && v->type == DFJ_STRING)
		outcome->node = pstrdup(v->str);
}
