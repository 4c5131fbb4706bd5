/*-------------------------------------------------------------------------
 *
 * timers.c
 *	  Nodes that wait: SLEEP, WAIT_SCHEDULE and SIGNAL.
 *
 * A wait is a task with a future run_at ("timer"): it survives restarts
 * like any row, and executors sleep until the earliest one is due (see
 * executor.c), so a timer fires within milliseconds of its time.
 *
 * Signals are buffered (a deliberate divergence from the reference, which
 * drops a signal sent before the wait exists).  df.signal (api/signal.c)
 * appends to the instance's mailbox (df_internal.signals) and enqueues a
 * "deliver" task in the caller's transaction; it locks nothing of the instance
 * (docs/design/architecture.md §5 rule 2).  Waits and signals meet under the
 * instance's runs lock: a SIGNAL node takes the oldest matching signal when it
 * starts, else registers a wait (df_internal.waits, plus a timer for its
 * timeout); a deliver task hands each registered wait, oldest first, the
 * oldest signal of its name (apply.c).  Whatever the commit order, one of the
 * two sides sees the other (rule 4).
 *
 * These functions register waits and say how a node ends; the driver
 * (apply.c) completes it.  A node that waits says in its status_details
 * what for and until when (record_wait).
 *
 * Locks: the caller holds the instance's runs row; timer tasks claimed by
 * others are skipped, never waited for.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/timestamp.h"

#include "common/messages.h"
#include "common/json.h"
#include "store/store.h"
#include "engine/timers.h"

static PgdOutcome
outcome_ok(char *json)
{
	PgdOutcome o = {true, json};

	return o;
}

/* now + seconds, saturating at 'infinity' instead of overflowing */
static TimestampTz
after_seconds(TimestampTz now, int64 seconds)
{
	if (seconds <= 0)
		return now;
	if (seconds > (PG_INT64_MAX - now) / USECS_PER_SEC)
		return DT_NOEND;
	return now + seconds * USECS_PER_SEC;
}

char *
pgd_signal_result(const char *name, bool timed_out, const char *payload)
{
	DfJson *r = dfjson_make_object();
	DfJson *data = NULL;
	char   *err = NULL;

	if (payload)
		data = dfjson_parse(payload, strlen(payload), &err);
	dfjson_object_add(r, "signal_name", dfjson_make_string(name));
	dfjson_object_add(r, "timed_out", dfjson_make_bool(timed_out));
	dfjson_object_add(r, "data", data ? data : dfjson_make_null());
	return dfjson_to_text(r);
}

/*
 * What a waiting node waits for, and until when, into its status_details
 * (waiting_on: timer, schedule, signal), so that monitoring can say why the
 * instance waits; the node's end writes its status_details anew.  until:
 * the due time or deadline, 0 for none.
 */
static void
record_wait(const PgdGraph *g, int n, const char *scope,
			const char *waiting_on, const char *key, const char *value,
			TimestampTz until)
{
	DfJson *d = dfjson_make_object();

	dfjson_object_add(d, "waiting_on", dfjson_make_string(waiting_on));
	if (key != NULL)
		dfjson_object_add(d, key, dfjson_make_string(value));
	if (until != 0)
		dfjson_object_add(d,
						  strcmp(waiting_on, "signal") == 0 ? "deadline" :
															  "due_at",
						  dfjson_make_string(timestamptz_to_str(until)));
	if (!pgd_store_node_waiting(g->instance_id, g->nodes[n].id, scope,
								dfjson_to_text(d)))
		pgd_store_node_details_merge(g->instance_id, g->nodes[n].id,
									 dfjson_to_text(d));
}

bool
pgd_timer_start(const PgdGraph *g, int n, const char *scope,
				PgdOutcome *outcome)
{
	const PgdNode *node = &g->nodes[n];
	TimestampTz	   now = GetCurrentTimestamp();
	TimestampTz	   next;
	char		  *payload;

	switch (node->type)
	{
		case DF_NODE_SLEEP:
			next = TimestampTzPlusMilliseconds(now, node->sleep_ms);
			pgd_store_timer_add(g->instance_id, node->id, scope, next);
			record_wait(g, n, scope, "timer", NULL, NULL, next);
			return false;

		case DF_NODE_WAIT_SCHEDULE:
			if (node->cron_error != NULL)
			{
				*outcome = pgd_failure(PGD_MSG_INVALID_CRON, node->cron_expr,
									   node->cron_error);
				return true;
			}
			if (!df_cron_next(&node->cron, now, &next))
			{
				*outcome =
					pgd_failure("Cron expression '%s' has no upcoming time",
								node->cron_expr);
				return true;
			}
			pgd_store_timer_add(g->instance_id, node->id, scope, next);
			record_wait(g, n, scope, "schedule", "cron_expr", node->cron_expr,
						next);
			return false;

		case DF_NODE_SIGNAL:
			if (node->signal_name == NULL)
			{
				*outcome = pgd_failure(PGD_MSG_SIGNAL_NAME_EMPTY);
				return true;
			}
			if (pgd_store_signal_take(g->instance_id, node->signal_name,
									  &payload))
			{
				pgd_store_event_add(g->instance_id, "signal_received",
									node->id, scope, 0,
									pgd_event_detail("name",
													 node->signal_name));
				*outcome = outcome_ok(pgd_signal_result(node->signal_name,
														false, payload));
				return true;
			}
			pgd_store_wait_add(g->instance_id, node->id, scope,
							   node->signal_name);
			next = 0;
			if (node->has_timeout)
			{
				next = after_seconds(now, node->timeout_seconds);
				pgd_store_timer_add(g->instance_id, node->id, scope, next);
			}
			record_wait(g, n, scope, "signal", "signal_name",
						node->signal_name, next);
			return false;

		default:
			elog(ERROR, "node type %s is not a timer",
				 df_node_type_name(node->type));
	}
	return false; /* keep compiler quiet */
}

bool
pgd_timer_fired(const PgdGraph *g, int n, const char *scope,
				PgdOutcome *outcome)
{
	const PgdNode *node = &g->nodes[n];
	DfJson		  *r;

	switch (node->type)
	{
		case DF_NODE_SLEEP:
			r = dfjson_make_object();
			dfjson_object_add(r, "slept", dfjson_make_bool(true));
			dfjson_object_add(r, "seconds",
							  dfjson_make_number(node->query ? node->query :
															   "0"));
			*outcome = outcome_ok(dfjson_to_text(r));
			return true;

		case DF_NODE_WAIT_SCHEDULE:
			*outcome = outcome_ok(pstrdup("{\"scheduled\":true}"));
			return true;

		case DF_NODE_SIGNAL:
			if (!pgd_store_wait_remove(g->instance_id, node->id, scope))
				return false; /* delivered meanwhile */
			*outcome = outcome_ok(pgd_signal_result(node->signal_name ?
														node->signal_name :
														"",
													true, NULL));
			return true;

		default:
			elog(ERROR, "node type %s has no timer",
				 df_node_type_name(node->type));
	}
	return false; /* keep compiler quiet */
}
