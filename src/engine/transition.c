/*-------------------------------------------------------------------------
 *
 * transition.c
 *	  The pure decisions of the state machine: what starting a node does,
 *	  how a parent reacts to a finished child, the outcome of a JOIN or a
 *	  RACE, the pace of loops, and whether a step is still wanted.
 *
 * See transition.h for the rules.  The driver that reads the inputs and
 * writes the decisions is apply.c.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "common/messages.h"
#include "engine/scope.h"
#include "engine/transition.h"
#include "results/results.h"

PgdStartAction
pgd_start_action(const PgdNode *node)
{
	switch (node->type)
	{
		case DF_NODE_SQL:
			return PGD_START_STEP;
		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			return PGD_START_HTTP;
		case DF_NODE_SLEEP:
		case DF_NODE_WAIT_SCHEDULE:
		case DF_NODE_SIGNAL:
			return PGD_START_TIMER;
		case DF_NODE_THEN:
			return PGD_START_LEFT;
		case DF_NODE_IF:
			return node->condition >= 0 ? PGD_START_CONDITION :
										  PGD_START_IF_ROWS;
		case DF_NODE_JOIN:
			return PGD_START_BRANCHES;
		case DF_NODE_RACE:
			return PGD_START_RACE;
		case DF_NODE_LOOP:
			return PGD_START_LOOP;
		case DF_NODE_BREAK:
			return PGD_START_BREAK;
		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_CATCH:
		case DF_NODE_FAIL:
		case DF_NODE_COMPENSATED:
		case DF_NODE_SAGA:
		case DF_NODE_BREAKER:
		case DF_NODE_MAP: /* orchestration/map.c */
		case DF_NODE_LIMIT:
		case DF_NODE_PUBLISH:
		case DF_NODE_EVENT:
		case DF_NODE_LOCK:
		case DF_NODE_TASK: /* orchestration/task_node.c */
			return PGD_START_WRAPPER;
	}
	return PGD_START_UNSUPPORTED;
}

bool
pgd_is_wrapper(const PgdNode *node)
{
	return node->type == DF_NODE_RETRY || node->type == DF_NODE_TIMEOUT ||
		node->type == DF_NODE_CATCH || node->type == DF_NODE_FAIL ||
		node->type == DF_NODE_COMPENSATED || node->type == DF_NODE_SAGA ||
		node->type == DF_NODE_BREAKER || node->type == DF_NODE_MAP ||
		node->type == DF_NODE_LIMIT || node->type == DF_NODE_PUBLISH ||
		node->type == DF_NODE_EVENT || node->type == DF_NODE_LOCK;
}

int64
pgd_attempt_timeout_ms(const PgdGraph *g, int n)
{
	int a;

	for (a = g->nodes[n].parent; a >= 0; a = g->nodes[a].parent)
		if (g->nodes[a].type == DF_NODE_RETRY &&
			g->nodes[a].wrapper_problem == NULL &&
			!g->nodes[a].wrapper->retry.instance_policy)
			return Max(g->nodes[a].wrapper->retry.attempt_timeout_ms, 0);
	return 0;
}

bool
pgd_is_step(const PgdNode *node)
{
	return node->type == DF_NODE_SQL || node->type == DF_NODE_HTTP ||
		node->type == DF_NODE_HTTP_MULTIPART || node->type == DF_NODE_TASK;
}

bool
pgd_result_truthy(const char *result)
{
	char   *err = NULL;
	DfJson *v = dfjson_parse(result, strlen(result), &err);

	return v ? pgd_truthy(v) : pgd_truthy_text(result);
}

static PgdReaction
reaction(PgdReactionKind kind, int next, PgdOutcome outcome)
{
	PgdReaction r;

	r.kind = kind;
	r.next = next;
	r.outcome = outcome;
	return r;
}

PgdReaction
pgd_react(const PgdGraph *g, int parent, int child, PgdOutcome outcome)
{
	const PgdNode *p = &g->nodes[parent];

	switch (p->type)
	{
		case DF_NODE_THEN:
			if (child == p->left && outcome.ok)
				return reaction(PGD_REACT_START, p->right, outcome);
			return reaction(PGD_REACT_COMPLETE, -1, outcome);

		case DF_NODE_IF:
			if (child == p->condition && outcome.ok)
				return reaction(PGD_REACT_START,
								pgd_result_truthy(outcome.result) ? p->left :
																	p->right,
								outcome);
			return reaction(PGD_REACT_COMPLETE, -1, outcome);

		case DF_NODE_JOIN:
			return reaction(PGD_REACT_JOIN_COUNT, -1, outcome);

		case DF_NODE_RACE:
			return reaction(PGD_REACT_RACE_DECIDED, -1, outcome);

		case DF_NODE_LOOP:
			if (!outcome.ok && child == p->left &&
				p->loop.continue_on_failure &&
				pgd_loop_consumes_failure(outcome))
				return reaction(PGD_REACT_LOOP_AGAIN, -1, outcome);
			if (!outcome.ok)
				return reaction(PGD_REACT_LOOP_END, -1, outcome);
			if (child == p->left && p->condition >= 0)
				return reaction(PGD_REACT_LOOP_CONDITION, p->condition,
								outcome);
			if (child == p->condition && !pgd_result_truthy(outcome.result))
				return reaction(PGD_REACT_LOOP_END_LAST, -1, outcome);
			return reaction(PGD_REACT_LOOP_AGAIN, -1, outcome);

		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_CATCH:
		case DF_NODE_COMPENSATED:
		case DF_NODE_SAGA:
		case DF_NODE_BREAKER:
		case DF_NODE_MAP:
		case DF_NODE_LIMIT:
		case DF_NODE_LOCK:
			return reaction(PGD_REACT_WRAPPER, -1, outcome);

		default:
			return reaction(PGD_REACT_INVALID, -1, outcome);
	}
}

bool
pgd_if_rows_decide(const PgdNode *node, const DfJson *visible_results,
				   char **error)
{
	DfJson *r;
	DfJson *rc;

	*error = NULL;
	if (node->if_rows_name == NULL)
	{
		*error = pstrdup("df.if_rows: invalid condition configuration");
		return false;
	}
	r = dfjson_get(visible_results, node->if_rows_name);
	if (r == NULL)
	{
		*error = psprintf(PGD_MSG_IF_ROWS_NOT_FOUND, node->if_rows_name);
		return false;
	}
	rc = dfjson_get(r, "row_count");
	if (rc == NULL || rc->type != DFJ_NUMBER)
	{
		*error = psprintf(PGD_MSG_IF_ROWS_NOT_SQL, node->if_rows_name);
		return false;
	}
	return strtod(rc->str, NULL) > 0;
}

int
pgd_join_width(const PgdNode *join)
{
	return 2 + join->nextras;
}

int
pgd_join_branch(const PgdNode *join, int i)
{
	return (i == 0) ? join->left :
		(i == 1)	? join->right :
					  join->extras[i - 2];
}

PgdOutcome
pgd_join_outcome(const PgdNode *join, const PgdNodeStatus *statuses,
				 char *const *results)
{
	int			   n = pgd_join_width(join);
	StringInfoData arr;
	PgdOutcome	   ok = {0};
	int			   i;

	/* the first failure in branch order decides; branches count from 1 */
	for (i = 0; i < n; i++)
		if (statuses[i] != PGD_NODE_COMPLETED)
			return pgd_failure(PGD_MSG_JOIN_BRANCH_FAILED, i + 1,
							   results[i] ? results[i] : "unknown error");

	initStringInfo(&arr);
	appendStringInfoChar(&arr, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&arr, ',');
		appendStringInfoString(&arr, results[i] ? results[i] : "null");
	}
	appendStringInfoChar(&arr, ']');
	ok.ok = true;
	ok.result = arr.data;
	return ok;
}

int
pgd_race_loser(const PgdNode *race, int winner)
{
	return (winner == race->left) ? race->right : race->left;
}

PgdOutcome
pgd_race_outcome(const PgdNode *race, int winner, PgdOutcome outcome)
{
	PgdOutcome failed;

	if (outcome.ok)
		return outcome;
	failed =
		pgd_failure(PGD_MSG_RACE_BRANCH_FAILED,
					winner == race->left ? "left" : "right", outcome.result);
	/* the branch's error code and node go on (a CATCH above matches them) */
	failed.code = outcome.code;
	failed.node = outcome.node;
	return failed;
}

/*
 * A loop with continue_on_failure goes on after a body run that failed with
 * what its work raised: a SQL or HTTP step's error of any kind (code sql:*,
 * http:*, connection, timeout), or a failure-handling wrapper's inside the
 * body (circuit_open, queue_timeout, lock_timeout, fail), all of which
 * carry an error code.  A failure without a code is the engine's (a
 * reference that cannot be substituted, an unsupported node, a nested
 * loop's backstop, df.if_rows without its result) and stays fatal, as do
 * lock_order_violation (the body is written wrong, and would be every
 * time) and cancelled (the instance or its JOIN is going away).
 */
bool
pgd_loop_consumes_failure(PgdOutcome outcome)
{
	char *kind;

	if (outcome.ok || outcome.code == NULL)
		return false;
	kind = pgd_error_kind(outcome.code);
	return strcmp(kind, "lock_order_violation") != 0 &&
		strcmp(kind, "cancelled") != 0;
}

/*
 * An iteration begins at least floor_ms after the previous one began (a
 * timer when that would be sooner), and a loop scope runs at most
 * PGD_MAX_LOOP_ITERATIONS iterations.
 */
PgdLoopPace
pgd_loop_pace(int64 iterations, TimestampTz started, TimestampTz now,
			  int floor_ms, TimestampTz *due)
{
	if (iterations > PGD_MAX_LOOP_ITERATIONS)
		return PGD_LOOP_TOO_MANY;
	*due = TimestampTzPlusMilliseconds(started, floor_ms);
	return *due > now ? PGD_LOOP_LATER : PGD_LOOP_NOW;
}

PgdOutcome
pgd_loop_limit_failure(void)
{
	return pgd_failure(PGD_MSG_LOOP_MAX_ITERATIONS, PGD_MAX_LOOP_ITERATIONS);
}

int
pgd_enclosing_loop(const PgdGraph *g, int n)
{
	int a;

	for (a = g->nodes[n].parent; a >= 0 && g->nodes[a].type != DF_NODE_LOOP;
		 a = g->nodes[a].parent)
		;
	return a;
}

PgdOutcome
pgd_break_outside_loop(void)
{
	return pgd_failure(PGD_MSG_BREAK_OUTSIDE_LOOP);
}

PgdOutcome
pgd_unsupported_node(const PgdNode *node)
{
	return pgd_failure("%s nodes are not supported by this version of pg_durable yet",
					   df_node_type_name(node->type));
}

bool
pgd_live(const PgdGraph *g, int n, const char *scope, int rows,
		 char *const *ids, const PgdNodeStatus *statuses, char *const *stamps)
{
	int i;

	for (i = 0; i < rows; i++)
	{
		if (strcmp(ids[i], g->nodes[n].id) == 0)
		{
			if (statuses[i] != PGD_NODE_RUNNING || stamps[i] == NULL ||
				strcmp(stamps[i], scope) != 0)
				return false;
		}
		else if (pgd_node_status_is_terminal(statuses[i]))
			return false;
		else if (stamps[i] != NULL && !pgd_scope_within(scope, stamps[i]))
			return false; /* the ancestor runs another execution now */
	}
	return true;
}
