/*-------------------------------------------------------------------------
 *
 * wrappers.c
 *	  The wrapper nodes' part of a transition: RETRY, TIMEOUT, CATCH and
 *	  FAIL (docs/design/failure-handling.md).  The engine calls
 *	  these through its wrapper hooks (engine/apply.h), installed by
 *	  pgd_orchestration_init() when the library loads.
 *
 *	 RETRY	 (mode 'step') the child runs in the wrapper's scope; when a SQL
 *			 or HTTP step below it fails, the nearest RETRY decides
 *			 (retry.c): the node stays running and its next attempt is a
 *			 task due after the back-off (a SQL step: a new step task; an
 *			 HTTP step: the same task row, lease released, so the call
 *			 keeps its Idempotency-Key; a TASK: its rows, offered again
 *			 when due, with the same idempotency key).  The attempt, the policy's maximum
 *			 and the next attempt's time are in the node's status_details;
 *			 the drawn delay is in the retry_scheduled event.  Completed
 *			 steps never run again: only the failed one is retried.
 *	 TIMEOUT the child runs in a scope of its own, with a timer on the
 *			 wrapper at the deadline.  The child finishing first drops the
 *			 timer; the timer firing first abandons the child's scope (its
 *			 tasks go, its running SQL is interrupted at commit, an HTTP
 *			 completion finds its task gone and is fenced out) and fails
 *			 the wrapper with kind 'timeout'.  The runs lock orders the
 *			 two: whichever comes second finds the wrapper finished.
 *	 CATCH	 the child runs; a failure that matches the patterns (all when
 *			 none are given) runs the handler with $error bound (a named
 *			 result "error" in the wrapper's scope: kind, code, message,
 *			 node); the handler's outcome is the wrapper's.
 *	 FAIL	 fails at once with kind 'fail' and its message, substituted.
 *	 BREAKER is breaker_node.c's; a refused admission may be
 *			 retried like a step (a timer on the node, then a new admission).
 *	 COMPENSATED runs its forward step; the forward's outcome
 *			 is the node's.  When the forward completes, its undo (right)
 *			 is registered in the same transaction; the undo runs only in
 *			 compensation (saga.c).
 *	 SAGA	 runs its body in a scope of its own; a body that
 *			 completes completes the SAGA; one that fails is compensated
 *			 (saga.c), and on_compensated (right) runs in the SAGA's scope.
 *
 * Locks: the caller holds the instance's runs row; the tasks removed here
 * are the wrapper's own, deleted with SKIP LOCKED.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "engine/apply.h"
#include "engine/scope.h"
#include "store/external_tasks.h"
#include "store/store.h"
#include "orchestration/orchestration.h"
#include "results/results.h"

/*
 * The HTTP task a retry kept for its next attempt, and the transaction
 * that kept it (a kept id left behind by an aborted transaction means
 * nothing to the next one).
 */
static int64			  kept_task_id = 0;
static LocalTransactionId kept_lxid = InvalidLocalTransactionId;

bool
pgd_retry_kept_task(int64 task_id)
{
	bool kept = kept_task_id != 0 && kept_task_id == task_id &&
		kept_lxid == PGD_MY_LXID;

	kept_task_id = 0;
	return kept;
}

static PgdOutcome
failure_with_code(const char *code, char *message)
{
	PgdOutcome o = {0};

	o.ok = false;
	o.result = message;
	o.code = pstrdup(code);
	return o;
}

/* ---------------------------------------------------------------------
 * FAIL
 * ---------------------------------------------------------------------
 */

void
pgd_fail_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	PgdRunInfo	   run;
	char		  *err = NULL;
	char		  *message = node->wrapper->fail_message;

	if (strchr(message, '{') != NULL || strchr(message, '$') != NULL)
	{
		pgd_graph_run(g, &run);
		message = pgd_substitute(message, pgd_step_vars(g->instance_id, &run),
								 pgd_visible_results(g->instance_id, scope),
								 PGD_SUBST_RAW, &err);
		if (message == NULL)
			message = err;
	}
	{
		PgdOutcome o = failure_with_code("fail", pstrdup(message));

		o.retryable = node->wrapper->fail_retryable;
		pgd_apply_finish_node(g, n, scope, o);
	}
}

/* ---------------------------------------------------------------------
 * TIMEOUT
 * ---------------------------------------------------------------------
 */

void
pgd_timeout_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	TimestampTz	   due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 node->wrapper->timeout_ms);

	pgd_store_timer_add(g->instance_id, node->id, scope, due);
	/* the deadline, for df.instance_nodes */
	pgd_store_node_details_merge(g->instance_id, node->id,
								 psprintf("{\"deadline\": \"%s\"}",
										  timestamptz_to_str(due)));
	pgd_apply_start_node(g, node->left,
						 pgd_branch_scope(g, node->left, scope));
}

void
pgd_timeout_fired(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	char		  *child_scope = pgd_branch_scope(g, node->left, scope);
	char		  *secs = df_seconds_text(node->wrapper->timeout_ms * 1000);

	pgd_apply_abandon_scope(g, child_scope);
	pgd_store_joins_drop_scope(g->instance_id, child_scope);
	pgd_store_results_merge(g->instance_id, child_scope, scope, false);
	pgd_store_event_add(g->instance_id, "timeout_fired", node->id, scope, 0,
						pgd_event_detail("seconds", secs));
	pgd_apply_finish_node(g, n, scope,
						  failure_with_code("timeout",
											psprintf("df.timeout: not finished within %s s",
													 secs)));
}

/* ---------------------------------------------------------------------
 * CATCH
 * ---------------------------------------------------------------------
 */

static bool
catch_matches(const DfWrapperConfig *cfg, const PgdOutcome *outcome)
{
	if (cfg->nerrors < 0)
		return true;
	return df_error_matches_any(cfg->errors, cfg->nerrors, outcome->code);
}

/* ---------------------------------------------------------------------
 * RETRY, mode 'subtree'
 *
 * The child runs in a scope of its own per generation,
 * "<scope>::<retry id>::<generation>", as a loop body does.  A failure
 * that the policy retries abandons that generation (its tasks, waits and
 * named results go, its running steps are interrupted) and puts a timer on
 * the RETRY at the back-off; the timer starts the child again in the next
 * generation, so every step of it runs again (a late completion of the old
 * generation finds its failed subtree root above it and is discarded).
 * The attempt is in the RETRY node's status_details.
 * ---------------------------------------------------------------------
 */

static char *
generation_scope(const PgdGraph *g, int n, const char *scope, int gen)
{
	return psprintf("%s::%s::%d", scope, g->nodes[n].id, gen);
}

static void
subtree_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];

	pgd_store_node_details_merge(g->instance_id, node->id,
								 psprintf("{\"attempt\": 1, \"max_attempts\": %d}",
										  node->wrapper->retry.max_attempts));
	pgd_apply_start_node(g, node->left, generation_scope(g, n, scope, 1));
}

static void	 read_attempt(const char *details, int *attempt, int64 *since_ms);
static int64 now_ms(TimestampTz now);
static const char *verdict_text(PgdRetryVerdict v);

static void
subtree_child_done(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	const PgdNode		*node = &g->nodes[n];
	const DfRetryPolicy *p = &node->wrapper->retry;
	TimestampTz			 now = GetCurrentTimestamp();
	int					 attempt;
	int64				 since_ms;
	int64				 delay_ms;
	PgdRetryVerdict		 verdict;
	char				*gen_scope;
	DfJson				*d;
	DfJson				*ev;
	TimestampTz			 due;
	char				*error;
	char				*err = NULL;

	read_attempt(pgd_store_node_details(g->instance_id, node->id), &attempt,
				 &since_ms);
	gen_scope = generation_scope(g, n, scope, attempt);
	if (outcome.ok)
	{
		pgd_store_results_merge(g->instance_id, gen_scope, scope, true);
		pgd_apply_finish_node(g, n, scope, outcome);
		return;
	}
	if (since_ms < 0)
		since_ms = now_ms(now);
	verdict =
		pgd_retry_decide(p, attempt, outcome.code, outcome.retryable,
						 outcome.retry_after_ms, now_ms(now) - since_ms,
						 pg_prng_double(&pg_global_prng_state), &delay_ms);
	ev = dfjson_make_object();
	dfjson_object_add(ev, "code",
					  outcome.code ? dfjson_make_string(outcome.code) :
									 dfjson_make_null());
	dfjson_object_add(ev, "mode", dfjson_make_string("subtree"));
	if (verdict != PGD_RETRY_AGAIN)
	{
		if (attempt > 1)
		{
			dfjson_object_add(ev, "attempts",
							  dfjson_make_number(psprintf("%d", attempt)));
			dfjson_object_add(ev, "reason",
							  dfjson_make_string(verdict_text(verdict)));
			dfjson_object_add(ev, "error",
							  dfjson_make_string(psprintf("gave up after %d attempts",
														  attempt)));
			pgd_store_event_add(g->instance_id, "retries_exhausted", node->id,
								scope, attempt, dfjson_to_text(ev));
		}
		pgd_store_results_merge(g->instance_id, gen_scope, scope, false);
		pgd_apply_finish_node(g, n, scope, outcome);
		return;
	}

	/* this generation is over: whatever of it still runs is not wanted */
	pgd_apply_abandon_scope(g, gen_scope);
	pgd_store_joins_drop_scope(g->instance_id, gen_scope);
	pgd_store_results_merge(g->instance_id, gen_scope, scope, false);
	due = TimestampTzPlusMilliseconds(now, delay_ms);
	pgd_store_timer_add(g->instance_id, node->id, scope, due);

	d = dfjson_make_object();
	dfjson_object_add(d, "attempt",
					  dfjson_make_number(psprintf("%d", attempt + 1)));
	dfjson_object_add(d, "next_attempt_at",
					  dfjson_make_string(timestamptz_to_str(due)));
	dfjson_object_add(d, "retry_since_ms",
					  dfjson_make_number(psprintf(INT64_FORMAT, since_ms)));
	error = pgd_error_json(outcome);
	dfjson_object_add(d, "last_error",
					  dfjson_parse(error, strlen(error), &err));
	pgd_store_node_details_merge(g->instance_id, node->id, dfjson_to_text(d));

	dfjson_object_add(ev, "attempt",
					  dfjson_make_number(psprintf("%d", attempt + 1)));
	dfjson_object_add(ev, "delay_ms",
					  dfjson_make_number(psprintf(INT64_FORMAT, delay_ms)));
	dfjson_object_add(ev, "error",
					  dfjson_make_string(outcome.result ? outcome.result :
														  ""));
	pgd_store_event_add(g->instance_id, "retry_scheduled", node->id, scope,
						attempt, dfjson_to_text(ev));
}

/* The back-off of a subtree retry is over: the next generation starts. */
static void
subtree_timer(PgdGraph *g, int n, const char *scope)
{
	int	  attempt;
	int64 since_ms;

	read_attempt(pgd_store_node_details(g->instance_id, g->nodes[n].id),
				 &attempt, &since_ms);
	pgd_store_node_details_merge(g->instance_id, g->nodes[n].id,
								 "{\"next_attempt_at\": null}");
	pgd_apply_start_node(g, g->nodes[n].left,
						 generation_scope(g, n, scope, attempt));
}

static bool
is_subtree_retry(const PgdNode *node)
{
	return node->type == DF_NODE_RETRY && node->wrapper_problem == NULL &&
		node->wrapper->retry.subtree;
}

/* ---------------------------------------------------------------------
 * The operations of FAIL, TIMEOUT, RETRY and CATCH (dispatch.c's table)
 * ---------------------------------------------------------------------
 */

/* The child won: the deadline is no longer wanted. */
void
pgd_timeout_child_done(PgdGraph *g, int n, int child, const char *scope,
					   PgdOutcome outcome)
{
	const PgdNode *node = &g->nodes[n];

	pgd_store_node_tasks_drop(g->instance_id, node->id, scope);
	pgd_store_results_merge(g->instance_id, pgd_branch_scope(g, child, scope),
							scope, outcome.ok);
	pgd_apply_finish_node(g, n, scope, outcome);
}

/* A failure of the child that matches runs the handler with $error bound. */
void
pgd_catch_child_done(PgdGraph *g, int n, int child, const char *scope,
					 PgdOutcome outcome)
{
	const PgdNode *node = &g->nodes[n];

	if (child == node->left && !outcome.ok &&
		catch_matches(node->wrapper, &outcome))
	{
		char *error = pgd_error_json(outcome);

		pgd_store_event_add(g->instance_id, "error_caught", node->id, scope, 0,
							pgd_event_detail("code", outcome.code ?
													 outcome.code :
													 "error"));
		pgd_store_result_save(g->instance_id, scope, "error", error);
		pgd_apply_start_node(g, node->right, scope);
		return;
	}
	pgd_apply_finish_node(g, n, scope, outcome);
}

/*
 * A RETRY of mode 'subtree' runs its child per generation; one of mode
 * 'step' is only looked up when a step below it fails
 * (pgd_wrapper_retry_failed), so it starts and ends with its child.
 */
void
pgd_retry_start(PgdGraph *g, int n, const char *scope)
{
	if (is_subtree_retry(&g->nodes[n]))
		subtree_start(g, n, scope);
	else
		pgd_apply_start_node(g, g->nodes[n].left, scope);
}

void
pgd_retry_child_done(PgdGraph *g, int n, int child, const char *scope,
					 PgdOutcome outcome)
{
	if (is_subtree_retry(&g->nodes[n]))
		subtree_child_done(g, n, scope, outcome);
	else
		pgd_apply_finish_node(g, n, scope, outcome);
}

void
pgd_retry_timer(PgdGraph *g, int n, const char *scope)
{
	if (is_subtree_retry(&g->nodes[n]))
		subtree_timer(g, n, scope);
}

/* enclosing_retry: no RETRY inside an undo, whose default policy applies */
#define UNDO_DEFAULT_POLICY (-2)

/* Is a, the parent of c, the COMPENSATED node whose undo c is? */
static bool
undo_boundary(const PgdGraph *g, int a, int c)
{
	return g->nodes[a].type == DF_NODE_COMPENSATED && g->nodes[a].right == c;
}

/*
 * The nearest RETRY above node n (mode 'step'), or -1; within an undo
 * without a RETRY of its own, UNDO_DEFAULT_POLICY.
 */
static int
enclosing_retry(const PgdGraph *g, int n)
{
	int a;
	int c = n;

	for (a = g->nodes[n].parent; a >= 0; c = a, a = g->nodes[a].parent)
	{
		if (undo_boundary(g, a, c))
			return UNDO_DEFAULT_POLICY;
		if (g->nodes[a].type == DF_NODE_RETRY &&
			g->nodes[a].wrapper_problem == NULL)
			return g->nodes[a].wrapper->retry.subtree ? -1 : a;
	}
	return -1;
}

/*
 * The default policy of an undo (docs/design/sagas.md §8): retried without
 * limit, from 1 s to 60 s, full jitter, with the default classification.
 */
static const DfRetryPolicy *
undo_policy(void)
{
	static DfRetryPolicy p;
	static bool			 made = false;

	if (!made)
	{
		df_retry_defaults(&p);
		p.max_attempts = 0;
		p.initial_ms = 1000;
		p.backoff_rate = 2.0;
		p.max_interval_ms = 60000;
		p.jitter = DF_JITTER_FULL;
		made = true;
	}
	return &p;
}

/* The RETRY above node n whose policy is on_failure 'continue', or -1. */
static int
continuing_policy(const PgdGraph *g, int n)
{
	int a;
	int c = n;

	for (a = g->nodes[n].parent; a >= 0; c = a, a = g->nodes[a].parent)
	{
		if (undo_boundary(g, a, c))
			return -1; /* an undo does not give up into a result */
		if (g->nodes[a].type == DF_NODE_RETRY &&
			g->nodes[a].wrapper_problem == NULL &&
			g->nodes[a].wrapper->retry.on_failure_continue)
			return a;
	}
	return -1;
}

/* The attempt under way and when the first began (from status_details). */
static void
read_attempt(const char *details, int *attempt, int64 *since_ms)
{
	char   *err = NULL;
	DfJson *d = details ? dfjson_parse(details, strlen(details), &err) : NULL;
	int64	v;

	*attempt = 1;
	*since_ms = -1;
	if (d != NULL && dfjson_get_int64(dfjson_get(d, "attempt"), &v) && v > 0 &&
		v <= PG_INT32_MAX)
		*attempt = (int) v;
	if (d != NULL && dfjson_get_int64(dfjson_get(d, "retry_since_ms"), &v))
		*since_ms = v;
}

static int64
now_ms(TimestampTz now)
{
	return (now / 1000) +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY *
		1000;
}

static const char *
verdict_text(PgdRetryVerdict v)
{
	switch (v)
	{
		case PGD_RETRY_NOT_RETRYABLE:
			return "not retryable";
		case PGD_RETRY_EXHAUSTED:
			return "exhausted";
		case PGD_RETRY_OUT_OF_TIME:
			return "max_duration";
		case PGD_RETRY_AGAIN:
			break;
	}
	return "again";
}

/*
 * A SQL or HTTP step failed: the nearest RETRY's policy decides whether
 * it runs again.  True when the next attempt is scheduled.
 */
bool
pgd_wrapper_retry_failed(PgdGraph *g, int n, const char *scope,
						 PgdOutcome *outcome)
{
	const PgdNode		*node = &g->nodes[n];
	int					 r = enclosing_retry(g, n);
	const DfRetryPolicy *p;
	TimestampTz			 now = GetCurrentTimestamp();
	int					 attempt;
	int64				 since_ms;
	int64				 delay_ms;
	PgdRetryVerdict		 verdict;
	DfJson				*d;
	DfJson				*ev;
	TimestampTz			 due;
	char				*error;
	char				*err = NULL;

	if (r == -1)
		return false;
	p = r == UNDO_DEFAULT_POLICY ? undo_policy() : &g->nodes[r].wrapper->retry;
	read_attempt(pgd_store_node_details(g->instance_id, node->id), &attempt,
				 &since_ms);
	if (since_ms < 0)
		since_ms = now_ms(now);
	verdict =
		pgd_retry_decide(p, attempt, outcome->code, false,
						 outcome->retry_after_ms, now_ms(now) - since_ms,
						 pg_prng_double(&pg_global_prng_state), &delay_ms);
	if (outcome->final)
		verdict = PGD_RETRY_NOT_RETRYABLE;

	ev = dfjson_make_object();
	dfjson_object_add(ev, "code",
					  outcome->code ? dfjson_make_string(outcome->code) :
									  dfjson_make_null());
	if (verdict != PGD_RETRY_AGAIN)
	{
		int c = continuing_policy(g, n);

		if (attempt > 1)
		{
			dfjson_object_add(ev, "attempts",
							  dfjson_make_number(psprintf("%d", attempt)));
			dfjson_object_add(ev, "reason",
							  dfjson_make_string(verdict_text(verdict)));
			dfjson_object_add(ev, "error",
							  dfjson_make_string(psprintf("gave up after %d attempts",
														  attempt)));
			pgd_store_event_add(g->instance_id, "retries_exhausted", node->id,
								scope, attempt, dfjson_to_text(ev));
			pgd_store_node_details_merge(g->instance_id, node->id,
										 "{\"next_attempt_at\": null}");
		}
		if (c >= 0)
		{
			/* df.start(on_failure => 'continue'): the step ends with its error */
			PgdOutcome go_on = {0};

			go_on.ok = true;
			go_on.result =
				psprintf("{\"error\":%s}", pgd_error_json(*outcome));
			pgd_store_event_add(g->instance_id, "error_caught", node->id,
								scope, attempt,
								pgd_event_detail("code",
												 outcome->code ?
													 outcome->code :
													 "error"));
			*outcome = go_on;
		}
		return false;
	}

	due = TimestampTzPlusMilliseconds(now, delay_ms);
	if (node->type == DF_NODE_SQL)
		pgd_store_step_retry_at(g->instance_id, node->id, scope, due);
	else if (node->type == DF_NODE_BREAKER)
		pgd_store_timer_add(g->instance_id, node->id, scope, due);
	else if (node->type == DF_NODE_TASK)
	{
		/* the same rows: the next attempt keeps the idempotency key */
		kept_task_id = pgd_store_external_retry_at(g->instance_id, node->id,
												   scope, due);
		kept_lxid = PGD_MY_LXID;
		if (kept_task_id == 0)
			return false;
	}
	else
	{
		kept_task_id =
			pgd_store_http_retry_at(g->instance_id, node->id, scope, due);
		kept_lxid = PGD_MY_LXID;
		if (kept_task_id == 0)
			return false;
	}

	d = dfjson_make_object();
	dfjson_object_add(d, "attempt",
					  dfjson_make_number(psprintf("%d", attempt + 1)));
	dfjson_object_add(d, "max_attempts",
					  dfjson_make_number(psprintf("%d", p->max_attempts)));
	dfjson_object_add(d, "next_attempt_at",
					  dfjson_make_string(timestamptz_to_str(due)));
	dfjson_object_add(d, "retry_since_ms",
					  dfjson_make_number(psprintf(INT64_FORMAT, since_ms)));
	error = pgd_error_json(*outcome);
	dfjson_object_add(d, "last_error",
					  dfjson_parse(error, strlen(error), &err));
	pgd_store_node_details_merge(g->instance_id, node->id, dfjson_to_text(d));

	dfjson_object_add(ev, "attempt",
					  dfjson_make_number(psprintf("%d", attempt + 1)));
	dfjson_object_add(ev, "delay_ms",
					  dfjson_make_number(psprintf(INT64_FORMAT, delay_ms)));
	dfjson_object_add(ev, "error",
					  dfjson_make_string(outcome->result ? outcome->result :
														   ""));
	pgd_store_event_add(g->instance_id, "retry_scheduled", node->id, scope,
						attempt, dfjson_to_text(ev));
	return true;
}
