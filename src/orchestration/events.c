/*-------------------------------------------------------------------------
 *
 * events.c
 *	  The event nodes (docs/design/events.md), run through the
 *	  engine's wrapper hooks (wrappers.c dispatches to them):
 *
 *	 PUBLISH  substitutes its payload and key templates and publishes the
 *			  event with df.publish_event as the instance's submitter, in
 *			  the transaction of the transition that starts it: the event
 *			  commits with the step before it, or not at all (exactly
 *			  once).  Without EXECUTE on df.publish_event the node fails.
 *	 EVENT	  takes the first event the instance may still take (the rule
 *			  is in store/event_bus.c) or registers a wait, plus a
 *			  timer for its timeout; a deliver task that the bus sweep
 *			  enqueued hands it its event later, and the timer ends it
 *			  with {"timed_out": true}.  Each EVENT execution takes a
 *			  different event: two waits in a JOIN, or the iterations of a
 *			  loop, take successive matching events.
 *
 * Locks: the caller holds the instance's runs row, as in every transition.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/spi.h"
#include "engine/apply.h"
#include "store/store.h"
#include "core/wake.h"
#include "orchestration/orchestration.h"
#include "results/results.h"

static char *
substituted(const char *text, const DfJson *vars, const DfJson *results,
			char **error)
{
	if (text == NULL || *error != NULL)
		return NULL;
	if (strchr(text, '{') == NULL && strchr(text, '$') == NULL)
		return pstrdup(text);
	/* a reference that does not resolve fails: never published as text */
	return pgd_substitute_strict(text, vars, results, error);
}

static void
start_publish(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	PgdRunInfo	   run;
	DfJson		  *vars;
	DfJson		  *results;
	char		  *error = NULL;
	char		  *perr = NULL;
	char		  *payload;
	char		  *key;
	char		  *id = NULL;

	pgd_graph_run(g, &run);
	vars = pgd_step_vars(g->instance_id, &run);
	results = pgd_visible_results(g->instance_id, scope);
	payload = substituted(node->event->payload, vars, results, &error);
	key = substituted(node->event->key, vars, results, &error);
	if (error == NULL && dfjson_parse(payload, strlen(payload), &perr) == NULL)
		error = psprintf("PUBLISH payload is not JSON once substituted: %s",
						 payload);
	/* as the submitter: no privilege is an error of the node (a subtransaction) */
	if (error == NULL)
	{
		id =
			PGD_EXEC_AS(run.submitted_by,
						SECURITY_LOCAL_USERID_CHANGE |
							SECURITY_RESTRICTED_OPERATION,
						&error,
						"SELECT df.publish_event($1, $2::pg_catalog.jsonb, $3)",
						node->event->topic, payload, key);
		if (error != NULL)
			error = psprintf("df.publish failed: %s", error);
	}
	if (id == NULL)
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("%s",
										  error ? error :
												  "df.publish: no event id"));
		return;
	}
	pgd_store_event_add(g->instance_id, "event_published", node->id, scope, 0,
						pgd_event_detail("event_id", id));
	{
		DfJson	  *r = dfjson_make_object();
		PgdOutcome o = {0};

		dfjson_object_add(r, "event_id", dfjson_make_number(id));
		dfjson_object_add(r, "topic", dfjson_make_string(node->event->topic));
		o.ok = true;
		o.result = dfjson_to_text(r);
		pgd_apply_finish_node(g, n, scope, o);
	}
}

/* Node n took the event result (event_bus.c): it completes with it. */
static void
finish_with_event(PgdGraph *g, int n, const char *scope, char *result)
{
	char	  *err = NULL;
	DfJson	  *r = dfjson_parse(result, strlen(result), &err);
	DfJson	  *id = r ? dfjson_get(r, "event_id") : NULL;
	PgdOutcome o = {0};

	pgd_store_event_add(g->instance_id, "event_received", g->nodes[n].id,
						scope, 0,
						pgd_event_detail("event_id", id ? id->str : "?"));
	o.ok = true;
	o.result = result;
	pgd_apply_finish_node(g, n, scope, o);
}

static bool
take(const PgdGraph *g, int n, const char *after_xid, char **result,
	 char **horizon)
{
	return pgd_store_event_take(g->instance_id, g->nodes[n].event->topic,
								g->nodes[n].event->filter, after_xid, result,
								horizon);
}

static void
start_event(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	char		  *result;
	char		  *horizon;
	DfJson		  *details;

	if (take(g, n, NULL, &result, &horizon))
	{
		finish_with_event(g, n, scope, result);
		return;
	}
	pgd_store_event_wait_add(g->instance_id, node->id, scope, horizon);
	details = dfjson_make_object();
	dfjson_object_add(details, "waiting_on", dfjson_make_string("event"));
	dfjson_object_add(details, "topic",
					  dfjson_make_string(node->event->topic));
	if (node->event->filter != NULL)
	{
		char   *err = NULL;
		DfJson *filter = dfjson_parse(node->event->filter,
									  strlen(node->event->filter), &err);

		/* an empty filter takes any event of the topic: nothing to say */
		if (filter != NULL && filter->type == DFJ_OBJECT && filter->count > 0)
			dfjson_object_add(details, "filter", filter);
	}
	if (node->event->has_timeout)
	{
		TimestampTz deadline =
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										node->event->timeout_seconds * 1000);

		pgd_store_timer_add(g->instance_id, node->id, scope, deadline);
		dfjson_object_add(details, "deadline",
						  dfjson_make_string(timestamptz_to_str(deadline)));
	}
	/* what it waits for, until when: monitoring says why the instance waits */
	if (!pgd_store_node_waiting(g->instance_id, node->id, scope,
								dfjson_to_text(details)))
		pgd_store_node_details_merge(g->instance_id, node->id,
									 dfjson_to_text(details));
	pgd_bus_sweep_at_commit(); /* an event this read did not see: event_bus.c */
}

void
pgd_events_start(PgdGraph *g, int n, const char *scope)
{
	if (g->nodes[n].event_problem != NULL)
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("%s", g->nodes[n].event_problem));
	else if (g->nodes[n].type == DF_NODE_PUBLISH)
		start_publish(g, n, scope);
	else
		start_event(g, n, scope);
}

void
pgd_events_timer(PgdGraph *g, int n, const char *scope)
{
	PgdOutcome o = {0};

	if (!pgd_store_wait_remove(g->instance_id, g->nodes[n].id, scope))
		return; /* delivered meanwhile */
	o.ok = true;
	o.result = pstrdup("{\"timed_out\": true}");
	pgd_apply_finish_node(g, n, scope, o);
}

void
pgd_events_deliver(PgdGraph *g)
{
	char **node_ids;
	char **scopes;
	char **horizons;
	char  *result;
	char  *horizon;
	int	   nwaits =
		pgd_store_event_waits(g->instance_id, &node_ids, &scopes, &horizons);

	for (int i = 0; i < nwaits; i++)
	{
		int n = pgd_graph_find(g, node_ids[i]);

		if (n < 0 || g->nodes[n].type != DF_NODE_EVENT ||
			!pgd_node_is_live(g, n, scopes[i]))
		{
			pgd_store_wait_remove(g->instance_id, node_ids[i], scopes[i]);
			continue; /* a stale wait */
		}
		if (g->nodes[n].event_problem != NULL ||
			!take(g, n, horizons[i], &result, &horizon))
			continue;
		/* the wait and its timeout go before the node ends */
		pgd_store_wait_remove(g->instance_id, node_ids[i], scopes[i]);
		pgd_store_drop_wait_timer(g->instance_id, node_ids[i], scopes[i]);
		finish_with_event(g, n, scopes[i], result);
	}
}
