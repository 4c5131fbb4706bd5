/*-------------------------------------------------------------------------
 *
 * dispatch.c
 *	  The engine's wrapper hooks (engine/apply.h): one table of operations
 *	  by node type, which every transition of a wrapper node or an
 *	  orchestration leaf goes through.
 *
 * Each kind of node has its own file (wrappers.c: FAIL, TIMEOUT, RETRY,
 * CATCH; saga.c: COMPENSATED, SAGA; breaker_node.c; limits.c; lock.c;
 * map.c; events.c: PUBLISH and EVENT; task_node.c: TASK), which knows nothing of the others;
 * only this table names them all.  An operation left NULL means: start
 * the left child in the node's scope (start), end the node with the
 * child's outcome (child_done), nothing to do (timer).
 *
 * Locks: none of its own; the operations run inside a transition, under
 * the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/apply.h"
#include "orchestration/orchestration.h"

typedef struct WrapperOps
{
	void (*start)(PgdGraph *g, int n, const char *scope);
	void (*child_done)(PgdGraph *g, int n, int child, const char *scope,
					   PgdOutcome outcome);
	void (*timer)(PgdGraph *g, int n, const char *scope);
	/*
	 * A node whose settings could not be read (wrapper_problem) fails when
	 * it starts; the leaves that read their settings themselves say so at
	 * their own start.
	 */
	bool settings_checked_at_start;
} WrapperOps;

static void
breaker_child_done(PgdGraph *g, int n, int child, const char *scope,
				   PgdOutcome outcome)
{
	pgd_breaker_node_done(g, n, scope, outcome);
}

static void
limit_child_done(PgdGraph *g, int n, int child, const char *scope,
				 PgdOutcome outcome)
{
	pgd_limit_child_done(g, n, scope, outcome);
}

static const WrapperOps ops[DF_NODE_TYPE_COUNT] = {
	[DF_NODE_FAIL] = {pgd_fail_start, NULL, NULL, true},
	[DF_NODE_TIMEOUT] = {pgd_timeout_start, pgd_timeout_child_done,
						 pgd_timeout_fired, true},
	[DF_NODE_RETRY] = {pgd_retry_start, pgd_retry_child_done, pgd_retry_timer,
					   true},
	[DF_NODE_CATCH] = {NULL, pgd_catch_child_done, NULL, true},
	[DF_NODE_COMPENSATED] = {NULL, pgd_compensated_child_done, NULL, true},
	[DF_NODE_SAGA] = {pgd_saga_start, pgd_saga_child_done, NULL, true},
	[DF_NODE_BREAKER] = {pgd_breaker_node_start, breaker_child_done,
						 pgd_breaker_node_start /* a refused call again */,
						 true},
	[DF_NODE_LIMIT] = {pgd_limit_start, limit_child_done, pgd_limit_timer,
					   true},
	[DF_NODE_MAP] = {pgd_map_start, pgd_map_child_done, NULL, false},
	[DF_NODE_PUBLISH] = {pgd_events_start, NULL, NULL, false},
	[DF_NODE_EVENT] = {pgd_events_start, NULL, pgd_events_timer, false},
	[DF_NODE_LOCK] = {pgd_lock_start, pgd_lock_child_done, pgd_lock_timer,
					  false},
	[DF_NODE_TASK] = {pgd_task_node_start, NULL, NULL, false},
};

static const WrapperOps *
ops_of(const PgdNode *node)
{
	const WrapperOps *o = &ops[node->type];

	if (o->start == NULL && o->child_done == NULL && o->timer == NULL &&
		!o->settings_checked_at_start)
		elog(ERROR, "node type %s is not a wrapper",
			 df_node_type_name(node->type));
	return o;
}

static void
wrapper_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode	 *node = &g->nodes[n];
	const WrapperOps *o = ops_of(node);

	if (o->settings_checked_at_start && node->wrapper_problem != NULL)
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("%s", node->wrapper_problem));
	else if (o->start != NULL)
		o->start(g, n, scope);
	else
		pgd_apply_start_node(g, node->left, scope);
}

static void
wrapper_child_done(PgdGraph *g, int n, int child, const char *scope,
				   PgdOutcome outcome)
{
	const WrapperOps *o = &ops[g->nodes[n].type];

	if (o->child_done != NULL)
		o->child_done(g, n, child, scope, outcome);
	else
		pgd_apply_finish_node(g, n, scope, outcome);
}

static void
wrapper_timer(PgdGraph *g, int n, const char *scope)
{
	const WrapperOps *o = &ops[g->nodes[n].type];

	if (o->timer != NULL)
		o->timer(g, n, scope);
}

static const PgdWrapperHooks hooks = {
	.start = wrapper_start,
	.child_done = wrapper_child_done,
	.step_failed = pgd_wrapper_retry_failed,
	.timer = wrapper_timer,
	.instance_failed = pgd_saga_instance_failed,
	.branch_lost = pgd_saga_branch_lost,
	.join_fails_fast = pgd_saga_join_fails_fast,
	.deliver = pgd_events_deliver,
};

void
pgd_orchestration_init(void)
{
	pgd_set_wrapper_hooks(&hooks);
}
