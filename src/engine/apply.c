/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  The driver of the state machine: starting nodes, completing them and
 *	  letting their parents react, loops and breaks, the end of an
 *	  instance, signal delivery and cancellation.
 *
 * The decisions are transition.c's and the writes are the store's; this
 * file connects them.  Compound nodes have no tasks.  Starting a THEN
 * starts its left child, starting a JOIN starts every branch, and so on
 * down to the leaves, which get a task (a step, an HTTP call, a timer).
 * Completing a node hands its outcome to its parent (pgd_react).
 * Reaching the root finishes the instance and removes its engine state.
 *
 * Loops and breaks.  A loop's state is a df_internal.loops row keyed by
 * the loop node and the scope the loop node runs in: its generation, its
 * iteration count and when the current iteration began.  A root loop
 * restarts the whole instance each iteration: the root scope
 * "<instance>::<gen>" moves to the next generation and the named results
 * start empty.  A loop that is the root of a JOIN/RACE branch runs, with
 * its body, in the branch's scope, which moves the same way to
 * "<parent scope>::<loop id>::<gen>" (one execution, as in the reference),
 * its named results carried along; the JOIN or RACE then finds
 * the branch where its root was last stamped (branch_scope_now).  Any other
 * loop runs its body in a scope of its own, "<scope>::<loop id>::<gen>",
 * whose named results are carried to the next generation and merged back
 * into the loop's scope when the loop ends.
 *
 * Every node start and end writes an event with the same statement that
 * updates the node (statements.c); instance starts and ends write one too.
 *
 * Locks: see apply.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "common/messages.h"
#include "common/spi.h"
#include "common/trace.h"
#include "core/identity.h"
#include "core/settings.h"
#include "engine/apply.h"
#include "engine/inbox_record.h"
#include "engine/scope.h"
#include "engine/timers.h"
#include "engine/transition.h"
#include "core/wake.h"

static void start_node(PgdGraph *g, int n, const char *scope);
static void complete(PgdGraph *g, int n, const char *scope,
					 PgdOutcome outcome);

static const PgdWrapperHooks *wrapper_hooks = NULL;

void
pgd_set_wrapper_hooks(const PgdWrapperHooks *hooks)
{
	wrapper_hooks = hooks;
}

void
pgd_apply_start_node(PgdGraph *g, int n, const char *scope)
{
	start_node(g, n, scope);
}

void
pgd_apply_finish_node(PgdGraph *g, int n, const char *scope,
					  PgdOutcome outcome)
{
	complete(g, n, scope, outcome);
}

/* ---------------------------------------------------------------------
 * Node writes and named results
 * ---------------------------------------------------------------------
 */

static void
node_running(PgdGraph *g, int n, const char *scope)
{
	pgd_store_node_running(g->instance_id, g->nodes[n].id, scope);
}

static void
node_done(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	pgd_store_node_done(g->instance_id, g->nodes[n].id, scope, outcome);
	if (!outcome.ok && outcome.code != NULL)
		pgd_store_node_error(g->instance_id, g->nodes[n].id, outcome);
}

static void
node_state(PgdGraph *g, int n, PgdNodeStatus *status, char **result)
{
	pgd_store_node_state(g->instance_id, g->nodes[n].id, status, result);
}

/* Is node n running in scope (and not ended, nor in another scope)? */
static bool
node_running_in(PgdGraph *g, int n, const char *scope)
{
	const char	  *id = g->nodes[n].id;
	char		 **ids;
	PgdNodeStatus *statuses;
	char		 **stamps;

	return pgd_store_node_stamps(g->instance_id, &id, 1, &ids, &statuses,
								 &stamps) == 1 &&
		statuses[0] == PGD_NODE_RUNNING && stamps[0] != NULL &&
		strcmp(stamps[0], scope) == 0;
}

static void
merge_results(PgdGraph *g, const char *from_scope, const char *to_scope,
			  bool keep)
{
	pgd_store_results_merge(g->instance_id, from_scope, to_scope, keep);
}

/*
 * The scope JOIN/RACE branch b (of the JOIN/RACE running in pscope) runs in
 * now: where it started, unless its root is a loop, which moves the
 * branch's scope on with each iteration; its root's stamp says where.
 */
static char *
branch_scope_now(PgdGraph *g, int b, const char *pscope)
{
	char	   *first = pgd_branch_scope(g, b, pscope);
	const char	  *id = g->nodes[b].id;
	char		 **ids;
	PgdNodeStatus *statuses;
	char		 **stamps;

	if (g->nodes[b].type != DF_NODE_LOOP)
		return first;
	if (pgd_store_node_stamps(g->instance_id, &id, 1, &ids, &statuses,
							  &stamps) == 1 &&
		stamps[0] != NULL && strcmp(pgd_strip_scope(stamps[0]), pscope) == 0)
		return stamps[0];
	return first;
}

/* A scope is abandoned: its pending tasks and waits go, its running steps are interrupted. */
static void
abandon_scope(PgdGraph *g, const char *scope)
{
	pgd_store_drop_scope(g->instance_id, scope);
	pgd_interrupt_at_commit(g->instance_id, scope);
}

void
pgd_apply_abandon_scope(PgdGraph *g, const char *scope)
{
	abandon_scope(g, scope);
}

DfJson *
pgd_visible_results(const char *instance_id, const char *scope)
{
	const char **scopes;
	int			 nscopes = 0;
	int			 cap = 4;
	char		*s = pstrdup(scope);
	DfJson		*map = dfjson_make_object();
	char	   **names;
	char	   **values;
	int			 n, i;

	scopes = palloc(sizeof(char *) * cap);
	for (;;)
	{
		if (nscopes == cap)
			scopes = repalloc(scopes, sizeof(char *) * (cap *= 2));
		scopes[nscopes++] = s;
		if (pgd_scope_depth(s) <= 1)
			break;
		s = pgd_strip_scope(s);
	}

	/* outermost first, so that inner scopes overwrite */
	n = pgd_store_results_in(instance_id, scopes, nscopes, &names, &values);
	for (i = 0; i < n; i++)
	{
		char   *err = NULL;
		DfJson *v = values[i] ?
			dfjson_parse(values[i], strlen(values[i]), &err) :
			dfjson_make_null();
		int		j;
		bool	replaced = false;

		if (v == NULL)
			v = dfjson_make_string(values[i]);
		for (j = 0; j < map->count; j++)
			if (strcmp(map->pairs[j].key, names[i]) == 0)
			{
				map->pairs[j].value = v;
				replaced = true;
				break;
			}
		if (!replaced)
			dfjson_object_add(map, names[i], v);
	}
	return map;
}

/*
 * {sys_trace_id}, {sys_trace_flags} and {sys_tracestate}: the trace context
 * of the instance, which the HTTP worker sends as traceparent
 * and tracestate.  df.instances keeps it, the same columns df.instance_spans
 * reads; it wins over a variable of the same name.  (They are not kept
 * in the runs row's variables, 74 bytes more of every instance's row; an
 * instance started by an earlier version may have them there too, the
 * same values.)
 */
static void
add_trace_vars(const char *instance_id, DfJson *vars)
{
	char		  *trace_id;
	char		  *traceparent;
	char		  *tracestate;
	PgdTraceParent tp;
	const char *flags = PGD_TRACE_FLAGS_SAMPLED; /* a trace df.start began */

	if (!pgd_store_instance_trace(instance_id, &trace_id, &traceparent,
								  &tracestate) ||
		strlen(trace_id) != PGD_TRACE_ID_LEN ||
		!pgd_is_lower_hex(trace_id, PGD_TRACE_ID_LEN))
		return;
	/* the caller's flags, when df.start continued its trace */
	if (traceparent != NULL && pgd_trace_parse(traceparent, &tp) == NULL)
		flags = tp.flags;
	dfjson_object_add(vars, "sys_trace_id", dfjson_make_string(trace_id));
	dfjson_object_add(vars, "sys_trace_flags",
					  dfjson_make_string(pstrdup(flags)));
	if (tracestate != NULL && tracestate[0] != '\0')
		dfjson_object_add(vars, "sys_tracestate",
						  dfjson_make_string(tracestate));
}

DfJson *
pgd_step_vars(const char *instance_id, const PgdRunInfo *run)
{
	char   *err = NULL;
	DfJson *vars =
		run->vars ? dfjson_parse(run->vars, strlen(run->vars), &err) : NULL;

	if (vars == NULL || vars->type != DFJ_OBJECT)
		vars = dfjson_make_object();
	dfjson_object_add(vars, "sys_instance_id",
					  dfjson_make_string(instance_id));
	dfjson_object_add(vars, "sys_label",
					  dfjson_make_string(run->label ? run->label : ""));
	add_trace_vars(instance_id, vars);
	/* df.start(…, idempotency_key) keeps it with the variables (start.c) */
	if (dfjson_get(vars, "sys_idempotency_key") == NULL)
		dfjson_object_add(vars, "sys_idempotency_key", dfjson_make_string(""));
	return vars;
}

/* ---------------------------------------------------------------------
 * Liveness and the prologue of a transition
 * ---------------------------------------------------------------------
 */

bool
pgd_node_is_live(const PgdGraph *g, int n, const char *scope)
{
	const char **ids = palloc(sizeof(char *) * (DF_MAX_DEPTH + 2));
	int			 nids = 0;
	int			   a, rows;
	char		 **row_ids;
	PgdNodeStatus *statuses;
	char		 **stamps;

	for (a = n; a >= 0 && nids < DF_MAX_DEPTH + 2; a = g->nodes[a].parent)
	{
		int p = g->nodes[a].parent;

		ids[nids++] = g->nodes[a].id;
		/*
		 * An undo runs after its COMPENSATED node (and the body around it)
		 * ended: its liveness is its own subtree's.
		 */
		if (p >= 0 && g->nodes[p].type == DF_NODE_COMPENSATED &&
			g->nodes[p].right == a)
			break;
	}
	rows = pgd_store_node_stamps(g->instance_id, ids, nids, &row_ids,
								 &statuses, &stamps);
	return pgd_live(g, n, scope, rows, row_ids, statuses, stamps);
}

bool
pgd_lock_target(const char *instance_id, const PgdRunInfo *run,
				PgdInstanceStatus want, const char *node_id, const char *scope,
				PgdGraph **g, int *n)
{
	PgdRunInfo		  loaded;
	PgdInstanceStatus status;

	if (run == NULL)
	{
		if (!pgd_store_load_run(instance_id, &loaded))
			return false;
		run = &loaded;
	}
	if (!pgd_store_lock_run(instance_id, &status) || status != want)
		return false;
	if ((*g = pgd_graph_get(instance_id, run->token)) == NULL)
		return false;
	pgd_graph_remember_run(*g, run);
	if (node_id == NULL)
		return true;
	return (*n = pgd_graph_find(*g, node_id)) >= 0 &&
		pgd_node_is_live(*g, *n, scope);
}

/* ---------------------------------------------------------------------
 * Instance start and end
 * ---------------------------------------------------------------------
 */

/*
 * The instance has ended (its status and end event written): completions
 * already in the inbox are recorded on their nodes (their effects
 * happened), the nodes still running become cancelled, and the engine
 * state goes.  running: a node may still be running (false only for a
 * completion where none can be).
 */
static void
end_instance(const char *instance_id, bool running)
{
	if (pgd_internal_index_has("inbox_instance_idx", 1,
							   (const char *const[]){instance_id}))
		(void) pgd_inbox_record_ended(instance_id);
	if (running)
		pgd_store_cancel_running_nodes(instance_id);
	pgd_store_end_instance(instance_id);
	pgd_interrupt_at_commit(instance_id, instance_id);
	pgd_instance_finished_at_commit(instance_id);
}

void
pgd_apply_end_instance(const char *instance_id)
{
	end_instance(instance_id, true);
}

void
pgd_apply_end_with(PgdGraph *g, const char *scope, PgdInstanceStatus status,
				   const char *kind, const char *detail)
{
	if (pgd_store_instance_finished(g->instance_id, status))
		pgd_store_event_add(g->instance_id, kind, NULL, scope, 0, detail);
	pgd_apply_end_instance(g->instance_id);
}

static void
finish_instance(PgdGraph *g, const char *scope, PgdOutcome outcome)
{
	if (!outcome.ok && wrapper_hooks != NULL &&
		wrapper_hooks->instance_failed != NULL &&
		wrapper_hooks->instance_failed(g, scope, outcome))
		return;
	if (pgd_store_instance_finished(g->instance_id,
									outcome.ok ? PGD_INSTANCE_COMPLETED :
												 PGD_INSTANCE_FAILED))
		pgd_store_event_add(g->instance_id,
							outcome.ok ? "instance_completed" :
										 "instance_failed",
							NULL, scope, 0,
							outcome.ok ?
								NULL :
								pgd_event_detail("error", outcome.result));
	end_instance(g->instance_id, !outcome.ok || g->may_end_running);
}

/*
 * When the engine loads an instance (its "start" task), the submitter it
 * carries (df_internal.runs, written by df.start) must still be the one in
 * df.instances and still be allowed.  A role that can write submitted_by
 * (a superuser, or a BYPASSRLS role someone gave UPDATE on it) could
 * otherwise make an instance that an ordinary role started look like a
 * superuser's.  On a problem the instance fails before any step runs: its
 * status becomes 'failed', its nodes stay pending, and the reason goes to
 * the server log.
 */
bool
pgd_submitter_still_allowed(const char *instance_id, Oid submitter)
{
	Oid	  recorded = pgd_store_instance_submitter(instance_id);
	char *problem;

	if (recorded != submitter)
		problem =
			psprintf("The submitted_by of instance %s was changed after df.start "
					 "(started by OID %u, now OID %u); the instance fails without running.",
					 instance_id, submitter, recorded);
	else
		problem = pgd_identity_problem(submitter);
	if (problem == NULL)
		return true;

	ereport(WARNING,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("instance %s failed when it was loaded", instance_id),
			 errdetail("%s", problem)));
	pgd_store_instance_finished(instance_id, PGD_INSTANCE_FAILED);
	pgd_apply_end_instance(instance_id);
	return false;
}

void
pgd_apply_start(PgdGraph *g)
{
	char *scope = pgd_root_scope(g->instance_id, 1);

	pgd_store_instance_started(g->instance_id, scope); /* and its event */
	start_node(g, g->root, scope);
	pgd_store_flush();
}

/*
 * df.cancel(compensate => true) of a running instance with undos
 * registered: the root ends failed with kind 'cancelled', the body's
 * scope is abandoned (its tasks go, its running steps are interrupted, a
 * late completion finds the root ended), and compensation begins (the
 * instance_failed hook).  False, having changed nothing, when there is
 * nothing to compensate.
 */
static bool
cancel_compensating(const char *instance_id, const char *reason)
{
	PgdGraph   *g;
	const char	  *root_id;
	char		 **ids;
	PgdNodeStatus *statuses;
	char		 **stamps;
	PgdOutcome	   outcome = {0};

	if (wrapper_hooks == NULL || wrapper_hooks->instance_failed == NULL ||
		!pgd_lock_target(instance_id, NULL, PGD_INSTANCE_RUNNING, NULL, NULL,
						 &g, NULL))
		return false;
	root_id = g->nodes[g->root].id;
	if (pgd_store_node_stamps(instance_id, &root_id, 1, &ids, &statuses,
							  &stamps) != 1 ||
		stamps[0] == NULL || statuses[0] != PGD_NODE_RUNNING)
		return false;
	outcome.ok = false;
	outcome.result = pstrdup(reason);
	outcome.code = pstrdup("cancelled");
	outcome.node = (char *) root_id;
	if (!pgd_store_undo_pending(instance_id, instance_id))
		return false;
	node_done(g, g->root, stamps[0], outcome);
	abandon_scope(g, stamps[0]);
	if (!wrapper_hooks->instance_failed(g, stamps[0], outcome))
		elog(ERROR, "compensation of instance %s did not begin", instance_id);
	pgd_store_flush();
	return true;
}

bool
pgd_apply_cancel(const char *instance_id, const char *reason, bool compensate)
{
	if (!pgd_store_lock_run(instance_id, NULL))
		return false;
	if (compensate && cancel_compensating(instance_id, reason))
		return true;
	pgd_store_instance_finished(instance_id, PGD_INSTANCE_CANCELLED);
	pgd_store_event_add(instance_id, "instance_cancelled", NULL, NULL, 0,
						pgd_event_detail("reason", reason));
	pgd_apply_end_instance(instance_id);
	return true;
}

/* ---------------------------------------------------------------------
 * Loops and breaks
 * ---------------------------------------------------------------------
 */

/* The loop ends with outcome: its body's results join its scope, then it completes. */
static void
loop_finish(PgdGraph *g, int loop, const char *loop_scope,
			const char *body_scope, PgdOutcome outcome)
{
	if (!pgd_loop_moves_scope(g, loop))
		merge_results(g, body_scope, loop_scope, outcome.ok);
	pgd_store_loop_forget(g->instance_id, g->nodes[loop].id, loop_scope);
	complete(g, loop, loop_scope, outcome);
}

static void
start_loop(PgdGraph *g, int loop, const char *scope)
{
	if (g->nodes[loop].loop_problem != NULL)
	{
		/* settings written by hand into df.nodes that do not parse */
		complete(g, loop, scope,
				 pgd_failure("%s", g->nodes[loop].loop_problem));
		return;
	}
	pgd_store_loop_open(g->instance_id, g->nodes[loop].id, scope);
	start_node(g, g->nodes[loop].left,
			   pgd_loop_moves_scope(g, loop) ?
				   scope :
				   pgd_loop_body_scope(g, loop, scope, 1));
}

/*
 * The next iteration, now: a new generation, a new body scope (empty named
 * results for a root loop, carried ones otherwise), the body started again.
 * A loop that moves its scope (the root, a branch's root) moves its own
 * state and stamp along.
 */
static void
begin_iteration(PgdGraph *g, int loop, const char *loop_scope)
{
	const char *loop_id = g->nodes[loop].id;
	int			gen =
		pgd_store_loop_next_generation(g->instance_id, loop_id, loop_scope);
	char *old_body;
	char *new_body;

	if (pgd_loop_moves_scope(g, loop))
	{
		/* the whole execution starts over: the loop node itself moves on */
		old_body = pstrdup(loop_scope);
		new_body = pgd_loop_body_scope(g, loop, loop_scope, gen);
		if (pgd_is_root_loop(g, loop))
			merge_results(g, old_body, old_body, false);
		else
			pgd_store_results_move(g->instance_id, old_body, new_body);
		pgd_store_loop_move_scope(g->instance_id, loop_id, loop_scope,
								  new_body);
		node_running(g, loop, new_body);
	}
	else
	{
		old_body = pgd_loop_body_scope(g, loop, loop_scope, gen - 1);
		new_body = pgd_loop_body_scope(g, loop, loop_scope, gen);
		pgd_store_results_move(g->instance_id, old_body, new_body);
	}
	pgd_store_drop_scope(g->instance_id, old_body);
	start_node(g, g->nodes[loop].left, new_body);
}

/* A body run (and its while-condition) said "again": now, later, or never. */
static void
next_iteration(PgdGraph *g, int loop, const char *loop_scope,
			   const char *body_scope)
{
	int64		iterations;
	TimestampTz started;
	TimestampTz due;

	pgd_store_loop_count_iteration(g->instance_id, g->nodes[loop].id,
								   loop_scope, &iterations, &started);
	switch (pgd_loop_pace(iterations, started, GetCurrentTimestamp(),
						  pgd_loop_iteration_floor, &due))
	{
		case PGD_LOOP_TOO_MANY:
			loop_finish(g, loop, loop_scope, body_scope,
						pgd_loop_limit_failure());
			break;
		case PGD_LOOP_LATER:
			/* at most one iteration per floor: come back when it is due */
			pgd_store_timer_add(g->instance_id, g->nodes[loop].id, loop_scope,
								due);
			break;
		case PGD_LOOP_NOW:
			begin_iteration(g, loop, loop_scope);
			break;
	}
}

/*
 * df.break(): complete every node from the BREAK up to the nearest loop
 * with the break value, drop whatever else runs inside that loop's current
 * body, and end the loop with the value.  Without an enclosing loop the
 * break fails (and with it the instance).
 */
static void
run_break(PgdGraph *g, int n, const char *scope)
{
	PgdOutcome value = {true, g->nodes[n].break_value};
	int		   loop = pgd_enclosing_loop(g, n);
	int		   child = n;
	char	  *s = pstrdup(scope);
	char	  *loop_scope;

	if (loop < 0)
	{
		complete(g, n, scope, pgd_break_outside_loop());
		return;
	}

	/* unwind: the BREAK and every node up to the loop complete with the value */
	node_done(g, n, s, value);
	while (g->nodes[child].parent != loop)
	{
		int	  p = g->nodes[child].parent;
		char *ps = pgd_parent_scope(g, child, s);

		if (strcmp(ps, s) != 0)
			merge_results(g, s, ps, true);
		node_done(g, p, ps, value);
		child = p;
		s = ps;
	}

	/* s is the loop's body scope: everything else still running in it is no longer wanted */
	loop_scope = pgd_parent_scope(g, child, s);
	abandon_scope(g, s);
	pgd_store_joins_drop_scope(g->instance_id, s);
	pgd_store_results_drop_below(g->instance_id, s);
	loop_finish(g, loop, loop_scope, s, value);
}

/* ---------------------------------------------------------------------
 * Starting nodes
 * ---------------------------------------------------------------------
 */

static void
start_if_rows(PgdGraph *g, int n, const char *scope)
{
	char *error;
	bool  yes =
		pgd_if_rows_decide(&g->nodes[n],
						   pgd_visible_results(g->instance_id, scope), &error);

	if (error)
		complete(g, n, scope, pgd_failure("%s", error));
	else
		start_node(g, yes ? g->nodes[n].left : g->nodes[n].right, scope);
}

static void
start_branches(PgdGraph *g, int n, const char *scope)
{
	PgdNode *join = &g->nodes[n];
	int		 i;

	/* its counter is made by the first branch that ends */
	for (i = 0; i < pgd_join_width(join); i++)
	{
		int			  b = pgd_join_branch(join, i);
		PgdNodeStatus status;
		char		 *result;

		start_node(g, b, pgd_branch_scope(g, b, scope));
		/*
		 * A branch that ended at once may have ended the JOIN too (a
		 * break out of it, a failure in a saga, the instance's end): then
		 * the others do not start.  A step only queues its task.
		 */
		if (pgd_start_action(&g->nodes[b]) == PGD_START_STEP ||
			pgd_start_action(&g->nodes[b]) == PGD_START_HTTP)
			continue;
		node_state(g, b, &status, &result);
		if (pgd_node_status_is_terminal(status) &&
			!node_running_in(g, n, scope))
			break;
	}
}

static void
start_race(PgdGraph *g, int n, const char *scope)
{
	PgdNode		 *race = &g->nodes[n];
	PgdNodeStatus status;
	char		 *result;

	start_node(g, race->left, pgd_branch_scope(g, race->left, scope));
	/* the left branch may have decided the race already */
	node_state(g, n, &status, &result);
	if (!pgd_node_status_is_terminal(status))
		start_node(g, race->right, pgd_branch_scope(g, race->right, scope));
}

static void
start_node(PgdGraph *g, int n, const char *scope)
{
	PgdNode	  *node = &g->nodes[n];
	PgdOutcome outcome = {0};

	check_stack_depth();
	node_running(g, n, scope);

	switch (pgd_start_action(node))
	{
		case PGD_START_STEP:
			pgd_store_task_add(g->instance_id, node->id, scope, PGD_TASK_STEP);
			break;
		case PGD_START_HTTP:
			pgd_store_task_add(g->instance_id, node->id, scope, PGD_TASK_HTTP);
			break;
		case PGD_START_TIMER:
			if (pgd_timer_start(g, n, scope, &outcome))
				complete(g, n, scope, outcome);
			break;
		case PGD_START_LEFT:
			start_node(g, node->left, scope);
			break;
		case PGD_START_CONDITION:
			start_node(g, node->condition, scope);
			break;
		case PGD_START_IF_ROWS:
			start_if_rows(g, n, scope);
			break;
		case PGD_START_BRANCHES:
			start_branches(g, n, scope);
			break;
		case PGD_START_RACE:
			start_race(g, n, scope);
			break;
		case PGD_START_LOOP:
			start_loop(g, n, scope);
			break;
		case PGD_START_BREAK:
			run_break(g, n, scope);
			break;
		case PGD_START_WRAPPER:
			if (wrapper_hooks == NULL)
				complete(g, n, scope, pgd_unsupported_node(node));
			else
				wrapper_hooks->start(g, n, scope);
			break;
		case PGD_START_UNSUPPORTED:
			complete(g, n, scope, pgd_unsupported_node(node));
			break;
	}
}

/* ---------------------------------------------------------------------
 * Completing nodes
 * ---------------------------------------------------------------------
 */

/*
 * In a saga (the join_fails_fast hook), branch 'failed' of JOIN p failing
 * ends the JOIN at once: the branches still running are
 * cancelled first (their scopes abandoned, their roots failed with code
 * 'cancelled'), and the JOIN fails with the failed branch's error, so that
 * the compensation undoes what completed and nothing runs on behind it.
 */
static bool
join_fail_fast(PgdGraph *g, int p, int failed, const char *pscope,
			   PgdOutcome outcome)
{
	PgdNode	  *join = &g->nodes[p];
	int		   width = pgd_join_width(join);
	int		   index = 0;
	PgdOutcome cancelled = {0};
	PgdOutcome fail;

	if (wrapper_hooks == NULL || wrapper_hooks->join_fails_fast == NULL ||
		!wrapper_hooks->join_fails_fast(g, p))
		return false;
	cancelled.result = pstrdup("cancelled: another branch of the JOIN failed");
	cancelled.code = pstrdup("cancelled");
	for (int i = 0; i < width; i++)
	{
		int			  b = pgd_join_branch(join, i);
		char		 *bscope = branch_scope_now(g, b, pscope);
		PgdNodeStatus status;
		char		 *result;

		if (b == failed)
			index = i;
		node_state(g, b, &status, &result);
		if (b != failed && !pgd_node_status_is_terminal(status))
		{
			abandon_scope(g, bscope);
			pgd_store_joins_drop_scope(g->instance_id, bscope);
			if (g->nodes[b].type == DF_NODE_LOOP)
				pgd_store_loop_forget(g->instance_id, g->nodes[b].id, bscope);
			node_done(g, b, bscope, cancelled);
		}
		merge_results(g, bscope, pscope, false);
	}
	pgd_store_join_close(g->instance_id, join->id, pscope);
	fail = pgd_failure(PGD_MSG_JOIN_BRANCH_FAILED, index + 1,
					   outcome.result ? outcome.result : "unknown error");
	fail.code = outcome.code;
	fail.node = outcome.node;
	complete(g, p, pscope, fail);
	return true;
}

/* A JOIN branch finished: one fewer running; the last one finishes the JOIN. */
static void
join_branch_done(PgdGraph *g, int p, int child, const char *pscope,
				 PgdOutcome child_outcome)
{
	PgdNode		  *join = &g->nodes[p];
	int			   width = pgd_join_width(join);
	PgdNodeStatus *statuses;
	char		 **results;
	const char **ids;
	PgdOutcome	 outcome = {0};
	int			 i;

	/* the last branch's count deletes the counter */
	if (pgd_store_join_count(g->instance_id, join->id, pscope, width) > 0)
	{
		if (!child_outcome.ok)
			(void) join_fail_fast(g, p, child, pscope, child_outcome);
		return;
	}

	statuses = palloc(sizeof(PgdNodeStatus) * width);
	results = palloc(sizeof(char *) * width);
	ids = palloc(sizeof(char *) * width);
	for (i = 0; i < width; i++)
		ids[i] = g->nodes[pgd_join_branch(join, i)].id;
	pgd_store_node_states(g->instance_id, ids, width, statuses, results);
	outcome = pgd_join_outcome(join, statuses, results);
	/* the first failed branch's error code goes on (a CATCH above matches it) */
	for (i = 0; i < width && !outcome.ok && outcome.code == NULL; i++)
		if (statuses[i] != PGD_NODE_COMPLETED)
			pgd_store_node_error_code(g->instance_id,
									  g->nodes[pgd_join_branch(join, i)].id,
									  &outcome);

	/*
	 * The branches' named results join the JOIN's scope only when it
	 * succeeds; an instance without any has nothing to merge.
	 */
	if (pgd_store_has_results(g->instance_id))
	{
		for (i = 0; i < width; i++)
		{
			int b = pgd_join_branch(join, i);

			merge_results(g, branch_scope_now(g, b, pscope), pscope,
						  outcome.ok);
		}
	}
	complete(g, p, pscope, outcome);
}

/* A RACE branch finished first: the other is abandoned, the race decided. */
static void
race_decided(PgdGraph *g, int p, int winner, const char *pscope,
			 PgdOutcome outcome)
{
	PgdNode		 *race = &g->nodes[p];
	int			  loser = pgd_race_loser(race, winner);
	char		 *loser_scope = branch_scope_now(g, loser, pscope);
	PgdNodeStatus status;
	char		 *result;

	node_state(g, p, &status, &result);
	if (pgd_node_status_is_terminal(status))
		return; /* decided already; cannot happen for live branches */

	abandon_scope(g, loser_scope);
	if (g->nodes[loser].type == DF_NODE_LOOP)
	{
		PgdOutcome lost = {false, pstrdup(PGD_MSG_LOOP_LOST_RACE)};

		node_done(g, loser, loser_scope, lost);
		pgd_store_loop_forget(g->instance_id, g->nodes[loser].id, loser_scope);
	}
	merge_results(g, loser_scope, pscope, false);
	merge_results(g, branch_scope_now(g, winner, pscope), pscope, outcome.ok);
	/* the loser's undos run first; the race ends when they are done */
	if (wrapper_hooks != NULL && wrapper_hooks->branch_lost != NULL &&
		wrapper_hooks->branch_lost(g, p, loser, loser_scope))
		return;
	complete(g, p, pscope, pgd_race_outcome(race, winner, outcome));
}

void
pgd_apply_race_finish(PgdGraph *g, int race, int loser, const char *pscope)
{
	int			  winner = pgd_race_loser(&g->nodes[race], loser);
	PgdNodeStatus status;
	PgdOutcome	  outcome = {0};

	node_state(g, winner, &status, &outcome.result);
	outcome.ok = status == PGD_NODE_COMPLETED;
	if (!outcome.ok)
		pgd_store_node_error_code(g->instance_id, g->nodes[winner].id,
								  &outcome);
	complete(g, race, pscope,
			 pgd_race_outcome(&g->nodes[race], winner, outcome));
}

/* The last body result of a while-loop whose condition said "stop". */
static PgdOutcome
last_body_result(PgdGraph *g, int loop)
{
	PgdNodeStatus status;
	char		 *body_result;
	PgdOutcome	  last = {0};

	node_state(g, g->nodes[loop].left, &status, &body_result);
	last.ok = true;
	last.result = body_result ? body_result : pstrdup("null");
	return last;
}

static void
complete(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	PgdNode	   *node = &g->nodes[n];
	int			p = node->parent;
	char	   *pscope;
	PgdReaction r;

	check_stack_depth();
	if (!outcome.ok && outcome.node == NULL)
		outcome.node = node->id;
	if (!outcome.ok && pgd_is_step(node) && wrapper_hooks != NULL &&
		wrapper_hooks->step_failed(g, n, scope, &outcome))
		return;
	node_done(g, n, scope, outcome);
	if (outcome.ok && node->result_name != NULL)
		pgd_store_result_save(g->instance_id, scope, node->result_name,
							  outcome.result);

	if (p < 0)
	{
		finish_instance(g, scope, outcome);
		return;
	}

	pscope = pgd_parent_scope(g, n, scope);
	r = pgd_react(g, p, n, outcome);
	switch (r.kind)
	{
		case PGD_REACT_START:
			start_node(g, r.next, pscope);
			break;
		case PGD_REACT_COMPLETE:
			complete(g, p, pscope, r.outcome);
			break;
		case PGD_REACT_JOIN_COUNT:
			join_branch_done(g, p, n, pscope, outcome);
			break;
		case PGD_REACT_RACE_DECIDED:
			race_decided(g, p, n, pscope, outcome);
			break;
		case PGD_REACT_LOOP_CONDITION:
			start_node(g, r.next, scope);
			break;
		case PGD_REACT_LOOP_AGAIN:
			next_iteration(g, p, pscope, scope);
			break;
		case PGD_REACT_LOOP_END:
			loop_finish(g, p, pscope, scope, r.outcome);
			break;
		case PGD_REACT_LOOP_END_LAST:
			loop_finish(g, p, pscope, scope, last_body_result(g, p));
			break;
		case PGD_REACT_WRAPPER:
			wrapper_hooks->child_done(g, p, n, pscope, outcome);
			break;
		case PGD_REACT_INVALID:
			elog(ERROR, "a %s node cannot have children",
				 df_node_type_name(g->nodes[p].type));
			break;
	}
}

void
pgd_apply_complete(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	complete(g, n, scope, outcome);
	pgd_store_flush();
}

/* ---------------------------------------------------------------------
 * Timers and signals
 * ---------------------------------------------------------------------
 */

void
pgd_apply_timer(PgdGraph *g, int n, const char *scope)
{
	PgdOutcome outcome = {0};

	if (g->nodes[n].type == DF_NODE_LOOP)
		begin_iteration(g, n, scope);
	else if (pgd_is_wrapper(&g->nodes[n]) && wrapper_hooks != NULL)
		wrapper_hooks->timer(g, n, scope);
	else if (pgd_timer_fired(g, n, scope, &outcome))
		complete(g, n, scope, outcome);
	pgd_store_flush();
}

/*
 * Hand buffered signals to registered waits: each wait, oldest first, gets
 * the oldest signal of its name.  Completing a wait may start new waits,
 * which look at the mailbox themselves, so the loop re-reads each time.
 *
 * The executor has removed the instance's other deliver tasks first: one
 * delivery covers every signal committed before it.
 */
void
pgd_apply_deliver(PgdGraph *g)
{
	char *node_id;
	char *scope;
	char *name;
	char *payload;
	int	  n;

	while (pgd_store_wait_matched(g->instance_id, &node_id, &scope, &name))
	{
		pgd_store_wait_remove(g->instance_id, node_id, scope);
		n = pgd_graph_find(g, node_id);
		if (n < 0 || !pgd_node_is_live(g, n, scope))
			continue; /* a stale wait: the signal stays for a live one */
		pgd_store_drop_wait_timer(g->instance_id, node_id, scope);
		if (!pgd_store_signal_take(g->instance_id, name, &payload))
			elog(ERROR,
				 "signal '%s' of instance %s vanished under the instance lock",
				 name, g->instance_id);
		pgd_store_event_add(g->instance_id, "signal_received", node_id, scope,
							0, pgd_event_detail("name", name));
		complete(g, n, scope,
				 (PgdOutcome){true, pgd_signal_result(name, false, payload)});
	}
	if (wrapper_hooks != NULL && wrapper_hooks->deliver != NULL)
		wrapper_hooks->deliver(g);
	pgd_store_flush();
}
