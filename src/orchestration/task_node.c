/*-------------------------------------------------------------------------
 *
 * task_node.c
 *	  Node TASK (df.task): a step that a worker outside the server runs,
 *	  claimed over SQL with a lease (docs/guides/external-workers.md).  It
 *	  is an HTTP step whose call an external worker makes: the same
 *	  substitution, idempotency key and trace context, the same retries,
 *	  and its end goes through the engine's completion path.
 *
 *	 start	  the payload template is substituted (like an HTTP body) and
 *			  must be JSON of at most PGD_TASK_MAX_PAYLOAD bytes; the node's
 *			  execution becomes a ready external task of its queue
 *			  (store/external_tasks.c), with the idempotency key
 *			  "<scope>:<node>" (one per node and scope, the same on every
 *			  attempt) and a traceparent that continues the instance's
 *			  trace.  A problem fails the node at once, with no task.
 *	 end	  df.complete_task or df.fail_task (api/external_tasks.c), or
 *			  the sweep below: under the instance's runs row, the node
 *			  completes with the worker's result or fails with its error,
 *			  as a SQL step's transaction completes it (pgd_apply_complete:
 *			  the enclosing df.retry decides about a failure and may keep
 *			  the task for its next attempt).  An end whose node is no
 *			  longer live changes nothing in the graph.
 *	 sweep	  a lease that ran out without a heartbeat fails its attempt
 *			  with code task_lease_expired; with no df.retry around the
 *			  node (nor the default policy of an undo) the task is offered
 *			  again instead, up to PGD_TASK_LEASE_ATTEMPTS attempts in all.
 *			  An attempt past the node's timeout_seconds fails with code
 *			  timeout.
 *
 * Locks: start runs inside a transition (the runs row is held); an end
 * holds the external task's row, then waits for the instance's runs row
 * (pgd_lock_target), as an HTTP completion does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "common/trace.h"
#include "core/identity.h"
#include "engine/apply.h"
#include "graph/task_config.h"
#include "orchestration/orchestration.h"
#include "results/results.h"
#include "store/external_tasks.h"
#include "store/store.h"


void
pgd_task_node_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	DfTaskConfig   cfg;
	PgdRunInfo	   run;
	DfJson		  *vars;
	char		  *payload;
	char		  *error = NULL;
	char		  *perr;

	if ((error = node->config_problem) == NULL)
		error = df_task_parse(node->query, &cfg);
	if (error != NULL)
	{
		pgd_apply_finish_node(g, n, scope, pgd_failure("%s", error));
		return;
	}
	pgd_graph_run(g, &run);
	if ((error = pgd_identity_problem(run.submitted_by)) != NULL)
	{
		pgd_apply_finish_node(g, n, scope, pgd_failure("%s", error));
		return;
	}
	vars = pgd_step_vars(g->instance_id, &run);
	if (strchr(cfg.payload, '{') == NULL && strchr(cfg.payload, '$') == NULL)
		payload = pstrdup(cfg.payload);
	else
		payload = pgd_substitute(cfg.payload, vars,
								 strchr(cfg.payload, '$') ?
									 pgd_visible_results(g->instance_id, scope) :
									 NULL,
								 PGD_SUBST_RAW, &error);
	if (payload != NULL && dfjson_parse(payload, strlen(payload), &perr) == NULL)
		error = psprintf("TASK payload is not JSON once substituted: %s",
						 payload);
	else if (payload != NULL && strlen(payload) > PGD_TASK_MAX_PAYLOAD)
		error = psprintf("TASK payload is %zu bytes once substituted, more than %d",
						 strlen(payload), PGD_TASK_MAX_PAYLOAD);
	if (error != NULL)
	{
		pgd_apply_finish_node(g, n, scope, pgd_failure("%s", error));
		return;
	}
	(void) pgd_store_external_add(g->instance_id, node->id, scope,
								  run.submitted_by, cfg.queue, payload,
								  cfg.timeout_s, cfg.heartbeat_s,
								  psprintf("%s:%s", scope, node->id),
								  pgd_trace_parent_of(vars, g->instance_id, scope,
													  node->id, 1));
}

/*
 * Does a retry policy decide about a failure of node n: a df.retry above
 * it, or, inside an undo, the undo's default policy?
 */
static bool
retried(const PgdGraph *g, int n)
{
	int c = n;

	for (int a = g->nodes[n].parent; a >= 0; c = a, a = g->nodes[a].parent)
	{
		if (g->nodes[a].type == DF_NODE_COMPENSATED && g->nodes[a].right == c)
			return true;
		if (g->nodes[a].type == DF_NODE_RETRY &&
			g->nodes[a].wrapper_problem == NULL)
			return true;
	}
	return false;
}

PgdTaskEnd
pgd_task_node_end(const PgdExternalTask *t, PgdOutcome outcome)
{
	PgdGraph *g;
	int		  n;

	if (!pgd_lock_target(t->instance_id, NULL, PGD_INSTANCE_RUNNING,
						 t->node_id, t->scope, &g, &n))
	{
		/* its instance ended, its scope was abandoned: nothing to apply */
		pgd_store_task_delete(t->task_id);
		pgd_store_external_end(t->task_id, PGD_EXT_CANCELLED);
		return PGD_TASK_END_NOT_LIVE;
	}
	if (outcome.ok)
	{
		/*
		 * No retry keeps a completed task: it goes before the transition,
		 * so that an instance this completes has no engine state left but
		 * its runs row, which its end deletes by the key
		 * (pgd_store_end_instance)
		 */
		pgd_store_task_delete(t->task_id);
		pgd_store_external_end(t->task_id, PGD_EXT_COMPLETED);
	}
	pgd_store_set_attempt(t->node_id, t->attempt);
	pgd_apply_complete(g, n, t->scope, outcome);
	pgd_store_set_attempt(NULL, 0);
	if (!outcome.ok)
	{
		if (pgd_retry_kept_task(t->task_id))
		{
			pgd_store_flush();
			return PGD_TASK_END_RETRY;
		}
		pgd_store_task_delete(t->task_id);
		pgd_store_external_end(t->task_id, PGD_EXT_FAILED);
	}
	pgd_store_flush();
	return PGD_TASK_END_DONE;
}

static PgdOutcome
task_failure(const char *code, char *message)
{
	PgdOutcome o = {0};

	o.ok = false;
	o.result = message;
	o.code = pstrdup(code);
	return o;
}

/* A leased task whose lease or deadline passed (its row locked). */
static void
expired(PgdExternalTask *t)
{
	PgdRunInfo run;
	PgdGraph  *g;
	int		   n;

	if (!t->anchored)
	{
		pgd_store_external_end(t->task_id, PGD_EXT_CANCELLED);
		return;
	}
	if (t->past_deadline)
	{
		(void) pgd_task_node_end(t,
								 task_failure("timeout",
											  psprintf("task %lld of queue \"%s\" did not end within %d seconds (attempt %d)",
													   (long long) t->task_id,
													   t->queue, t->timeout_s,
													   t->attempt)));
		return;
	}
	/* offered again, without the engine, when no retry policy decides */
	if (t->attempt < PGD_TASK_LEASE_ATTEMPTS &&
		pgd_store_load_run(t->instance_id, &run) &&
		(g = pgd_graph_get(t->instance_id, run.token)) != NULL &&
		(n = pgd_graph_find(g, t->node_id)) >= 0 && !retried(g, n))
	{
		ereport(LOG,
				(errmsg("the lease of task %lld of queue \"%s\" expired (attempt %d): it is offered again",
						(long long) t->task_id, t->queue, t->attempt)));
		pgd_store_external_reoffer(t->task_id);
		return;
	}
	(void) pgd_task_node_end(t,
							 task_failure("task_lease_expired",
										  psprintf("the lease of task %lld of queue \"%s\" expired without a heartbeat (attempt %d)",
												   (long long) t->task_id,
												   t->queue, t->attempt)));
}

int
pgd_task_sweep(const char *queue, int max)
{
	int64 *ids;
	int	   n = pgd_store_external_expired(queue, max, &ids);

	for (int i = 0; i < n; i++)
	{
		PgdExternalTask t;

		if (pgd_store_external_lock(ids[i], &t) && t.state == PGD_EXT_LEASED &&
			(!t.lease_live || t.past_deadline))
			expired(&t);
	}
	return n;
}
