/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  Node LIMIT's part of a transition (df.limit,
 *	  docs/design/locks-and-limits.md §4), called through the wrapper hooks
 *	  (wrappers.c).
 *
 *	 start		 the key template is substituted and named in the
 *				 submitter's space, or a shared limit's whose settings win
 *				 over the node's (docs/design/tenancy.md); the execution
 *				 enters the key's FIFO queue, which is pumped under the key's row lock
 *				 (store/limit_slots.c): with a slot (and a token) free it
 *				 is admitted at once and its subtree starts in the same
 *				 scope, else it stays queued (running, with
 *				 "waiting_on": "limit", "limit_key" and "queued_at" in its
 *				 status_details, and a limit_queued event) with a timer at
 *				 its queue_timeout, if it has one; admitted later, it
 *				 writes limit_admitted.
 *	 timer		 a transaction that freed a slot gave it to this execution
 *				 (its holder row is there, not started): its subtree starts
 *				 now; or a token is due and it is the head of the queue; or
 *				 its queue_timeout passed: it leaves the queue and fails with
 *				 kind queue_timeout.  The key's row lock orders a release
 *				 and a timeout that meet: the slot goes to the waiter, or the
 *				 waiter is gone and the slot to the next one.
 *	 child_done	 the slot is released (and handed to the head of the
 *				 queue) in the transaction that ends the node; the child's
 *				 outcome is the node's.
 * A LIMIT node inside an enclosing LIMIT of the same key (once
 * substituted) fails at its start with kind limit_nesting: it would wait
 * for a slot its own instance holds.
 * A LIMIT node ended any other way (its scope abandoned, its instance
 * ended) releases its slot or queue place in the store, in the same
 * transaction.
 *
 * Locks: the caller holds the instance's runs row; the store takes the
 * key's row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "engine/apply.h"
#include "store/store.h"
#include "orchestration/orchestration.h"
#include "results/results.h"

/* The key of LIMIT node n in scope: its template, substituted; NULL and *err on a bad one. */
static char *
limit_key(PgdGraph *g, int n, const char *scope, char **err)
{
	const char *key = g->nodes[n].wrapper->limit.key;
	PgdRunInfo	run;

	*err = NULL;
	if (strchr(key, '{') == NULL && strchr(key, '$') == NULL)
		return pstrdup(key);
	pgd_graph_run(g, &run);
	/* the named results are read only when the template names one */
	return pgd_substitute_strict(key, pgd_step_vars(g->instance_id, &run),
								 strchr(key, '$') != NULL ?
									 pgd_visible_results(g->instance_id,
														 scope) :
									 dfjson_make_object(),
								 err);
}

/*
 * The failure of a LIMIT inside an enclosing LIMIT of the same key, or
 * NULL.  The inner node would queue behind the slot its own instance holds
 * and wait for ever (with max_concurrent 1), or two instances holding one
 * outer slot each would wait for each other's; so the same key is taken
 * once on a node path.  The enclosing keys are substituted in this scope,
 * which sees every result theirs saw.
 */
static char *
nested_same_key(PgdGraph *g, int n, const char *scope, const char *key)
{
	for (int a = g->nodes[n].parent; a >= 0; a = g->nodes[a].parent)
	{
		char *err;
		char *outer;

		if (g->nodes[a].type != DF_NODE_LIMIT)
			continue;
		outer = limit_key(g, a, scope, &err);
		if (outer != NULL && strcmp(outer, key) == 0)
			return psprintf("df.limit: key \"%s\" is held already by an enclosing df.limit of this instance (node %s), "
							"so this one would wait for a slot its own instance holds; take a key once on a path",
							key, g->nodes[a].id);
	}
	return NULL;
}

static void
admitted_from_queue(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];

	/* its queue_timeout timer is not wanted any more */
	pgd_store_node_tasks_drop(g->instance_id, node->id, scope);
	pgd_store_node_details_merge(g->instance_id, node->id,
								 psprintf("{\"admitted_at\": \"%s\", \"waiting_on\": null}",
										  timestamptz_to_str(GetCurrentTimestamp())));
	pgd_store_event_add(g->instance_id, "limit_admitted", node->id, scope, 0,
						NULL);
	pgd_apply_start_node(g, node->left, scope);
}

void
pgd_limit_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode		*node = &g->nodes[n];
	const DfLimitConfig *cfg = &node->wrapper->limit;
	TimestampTz			 now = GetCurrentTimestamp();
	TimestampTz			 deadline = 0;
	char				*err;
	char				*key = limit_key(g, n, scope, &err);
	char				*display;
	PgdRunInfo			 run;
	PgdSharedLimit		 shared;
	int					 max_concurrent = cfg->max_concurrent;
	double				 rate = cfg->rate;
	int					 burst = cfg->burst;

	if (key == NULL)
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("df.limit: the key cannot be substituted: %s",
										  err));
		return;
	}
	if (key[0] == '\0')
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("df.limit: the key \"%s\" is empty once substituted",
										  cfg->key));
		return;
	}
	if (strlen(key) > DF_LIMIT_KEY_MAX)
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("df.limit: the key is %zu bytes once substituted, more than %d",
										  strlen(key), DF_LIMIT_KEY_MAX));
		return;
	}
	if ((err = nested_same_key(g, n, scope, key)) != NULL)
	{
		PgdOutcome o = {0};

		o.ok = false;
		o.code = pstrdup("limit_nesting");
		o.result = err;
		pgd_apply_finish_node(g, n, scope, o);
		return;
	}
	if (cfg->queue_timeout_ms > 0)
		deadline = TimestampTzPlusMilliseconds(now, cfg->queue_timeout_ms);
	/* the key in the submitter's own space, or a shared one with its settings */
	pgd_graph_run(g, &run);
	display = key;
	key = pgd_store_limit_space(key, run.submitted_by, &shared);
	if (shared.found)
	{
		max_concurrent = shared.max_concurrent;
		rate = shared.rate;
		burst = shared.burst;
	}
	switch (pgd_store_limit_enter(g->instance_id, node->id, scope, key,
								  max_concurrent, rate, burst, deadline))
	{
		case PGD_LIMIT_START:
			pgd_apply_start_node(g, node->left, scope);
			return;
		case PGD_LIMIT_TIMEOUT:
		case PGD_LIMIT_WAIT:
			break;
	}
	{
		DfJson *d = dfjson_make_object();

		dfjson_object_add(d, "waiting_on", dfjson_make_string("limit"));
		dfjson_object_add(d, "limit_key", dfjson_make_string(display));
		dfjson_object_add(d, "queued_at",
						  dfjson_make_string(timestamptz_to_str(now)));
		if (deadline != 0)
			dfjson_object_add(d, "queue_deadline",
							  dfjson_make_string(timestamptz_to_str(deadline)));
		pgd_store_node_details_merge(g->instance_id, node->id,
									 dfjson_to_text(d));
		pgd_store_event_add(g->instance_id, "limit_queued", node->id, scope, 0,
							pgd_event_detail("key", display));
	}
	if (deadline != 0)
		pgd_store_timer_add(g->instance_id, node->id, scope, deadline);
}

void
pgd_limit_timer(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	char		  *details;
	char		  *err = NULL;
	DfJson		  *d;
	DfJson		  *k;
	PgdOutcome	   o = {0};

	switch (pgd_store_limit_timer(g->instance_id, node->id, scope))
	{
		case PGD_LIMIT_WAIT:
			return;
		case PGD_LIMIT_START:
			admitted_from_queue(g, n, scope);
			return;
		case PGD_LIMIT_TIMEOUT:
			break;
	}
	pgd_store_node_tasks_drop(g->instance_id, node->id, scope);
	details = pgd_store_node_details(g->instance_id, node->id);
	d = details ? dfjson_parse(details, strlen(details), &err) : NULL;
	k = d ? dfjson_get(d, "limit_key") : NULL;
	o.ok = false;
	o.code = pstrdup("queue_timeout");
	o.result = psprintf("df.limit: not admitted to \"%s\" within %s s",
						k && k->type == DFJ_STRING ? k->str :
													 node->wrapper->limit.key,
						df_seconds_text(node->wrapper->limit.queue_timeout_ms *
										1000));
	pgd_apply_finish_node(g, n, scope, o);
}

void
pgd_limit_child_done(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	pgd_store_limit_release(g->instance_id, g->nodes[n].id, scope);
	pgd_apply_finish_node(g, n, scope, outcome);
}
