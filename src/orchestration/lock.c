/*-------------------------------------------------------------------------
 *
 * lock.c
 *	  Node LOCK, df.with_lock (docs/design/locks-and-limits.md §1): its
 *	  child runs while the node holds every one of its keys.
 *
 * Start: the keys (templates) are substituted with the variables and the
 * named results the node sees, named in the submitter's space (or a shared
 * lock space granted to it: docs/design/tenancy.md), sorted in byte order
 * and made unique; they
 * must all sort after every key an enclosing LOCK of the same node path
 * holds (the lock order check: a nested lock out of order fails with
 * "lock order violation", code lock_order_violation), so that every
 * instance takes keys in the one canonical order.
 *
 * Taking: one key after the other (store/lock_keys.c).  A key that is
 * not free queues the node as its waiter and the node waits: its
 * status_details get the sorted keys ("lock_keys"), "lock_mode",
 * "lock_state" waiting, "waiting_for" and the wait's "deadline", and its
 * history a lock_waiting event (then lock_acquired or lock_timeout); the
 * release that hands it the key queues a timer task due now for it, and
 * that timer takes the next keys.  With wait_timeout a timer at the
 * deadline fails the node with kind lock_timeout if it still waits then.
 * Holding every key, the child starts in a scope of its own; $lock (a
 * named result "lock" there: {"token": <the largest>, "tokens": {key:
 * token}}) is bound when a node below refers to it.  A node that never
 * waited writes no status_details (df.locks shows what it holds): the
 * cost of an uncontended lock is its entries and its node row.
 *
 * End: the child finished, or the node timed out: the node's entries go
 * and their keys pass to their next waiters, in the same transaction.  An
 * abandoned scope or an ended instance releases its entries in the store
 * (pgd_store_drop_scope, pgd_store_end_instance), so nothing is held by a
 * node that has ended.
 *
 * Locks: the caller holds the instance's runs row; keys as lock_keys.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "engine/apply.h"
#include "engine/scope.h"
#include "store/store.h"
#include "orchestration/orchestration.h"
#include "results/results.h"

static PgdOutcome
lock_failure(const char *code, char *message)
{
	PgdOutcome o = {0};

	o.ok = false;
	o.result = message;
	o.code = code ? pstrdup(code) : NULL;
	return o;
}

static int
cmp_keys(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * The node's keys substituted, sorted and unique, in *keys; NULL, or the
 * problem with one of them.
 */
static char *
substituted_keys(PgdGraph *g, int n, const char *scope, char ***keys,
				 int *nkeys)
{
	const DfLockConfig *cfg = g->nodes[n].lock;
	DfJson			   *vars = NULL;
	DfJson			   *results = NULL;
	PgdRunInfo			run;
	char			  **out = palloc(sizeof(char *) * cfg->nkeys);
	int					m = 0;

	pgd_graph_run(g, &run);

	for (int i = 0; i < cfg->nkeys; i++)
	{
		char *k = cfg->keys[i];
		char *err = NULL;
		char *problem;

		if (strchr(k, '{') != NULL || strchr(k, '$') != NULL)
		{
			if (vars == NULL)
				vars = pgd_step_vars(g->instance_id, &run);
			/* the named results are read only when a key names one */
			if (results == NULL)
				results = strchr(k, '$') != NULL ?
					pgd_visible_results(g->instance_id, scope) :
					NULL;
			if ((k = pgd_substitute_strict(k, vars,
										   results ? results :
													 dfjson_make_object(),
										   &err)) == NULL)
				return psprintf("df.with_lock: key %d (\"%s\"): %s", i + 1,
								cfg->keys[i], err);
		}
		if ((problem = df_lock_check_key(k)) != NULL)
			return psprintf("df.with_lock: key %d (\"%s\"): %s", i + 1,
							cfg->keys[i], problem);
		/* in the submitter's own space unless its lock space is shared with it */
		out[m++] =
			pgd_store_space_name(PGD_SPACE_LOCK, k, run.submitted_by, "use");
	}
	qsort(out, m, sizeof(char *), cmp_keys);
	*nkeys = 0;
	for (int i = 0; i < m; i++)
		if (i == 0 || strcmp(out[i], out[i - 1]) != 0)
			out[(*nkeys)++] = out[i];
	*keys = out;
	return NULL;
}

/* The failure of a nested lock out of order, or NULL. */
static char *
order_violation(PgdGraph *g, int n, char *first)
{
	StringInfoData ids;
	char		  *held;

	initStringInfo(&ids);
	for (int a = g->nodes[n].parent; a >= 0; a = g->nodes[a].parent)
		if (g->nodes[a].type == DF_NODE_LOCK)
			appendStringInfo(&ids, "%s%s", ids.len > 0 ? "," : "",
							 g->nodes[a].id);
	if (ids.len == 0 ||
		(held = pgd_store_lock_max_held(g->instance_id, ids.data)) == NULL ||
		strcmp(first, held) > 0)
		return NULL;
	if (strcmp(first, held) == 0)
		return psprintf("lock order violation: key \"%s\" is held already by an enclosing df.with_lock of this instance, "
						"and a nested lock must take keys that sort after \"%s\"",
						pgd_space_display(first), pgd_space_display(held));
	return psprintf("lock order violation: key \"%s\" sorts before key \"%s\", which an enclosing df.with_lock of this instance holds; "
					"nested locks must take their keys in one order (take \"%s\" in the outer lock)",
					pgd_space_display(first), pgd_space_display(held),
					pgd_space_display(first));
}

/*
 * What the subtree of node n needs: does a node below refer to $lock (else
 * no $lock is bound), and may one bind a named result (else there is
 * nothing to carry from the child's scope)?  A walk of the cached graph.
 */
static void
subtree_needs(const PgdGraph *g, int n, bool *uses_lock, bool *binds)
{
	const PgdNode *node = &g->nodes[n];

	check_stack_depth();
	if (node->query != NULL && strstr(node->query, "$lock") != NULL)
		*uses_lock = true;
	if (node->result_name != NULL || node->type == DF_NODE_CATCH ||
		node->type == DF_NODE_LOCK)
		*binds = true;
	if (node->left >= 0)
		subtree_needs(g, node->left, uses_lock, binds);
	if (node->right >= 0)
		subtree_needs(g, node->right, uses_lock, binds);
	if (node->condition >= 0)
		subtree_needs(g, node->condition, uses_lock, binds);
	for (int i = 0; i < node->nextras; i++)
		subtree_needs(g, node->extras[i], uses_lock, binds);
}

static void
finish_lock(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	if (g->nodes[n].lock->nkeys == 1)
		pgd_store_lock_release_one(g->instance_id, g->nodes[n].id, scope);
	else
		pgd_store_lock_release(g->instance_id, g->nodes[n].id, scope);
	/* a wait's deadline timer; without one, the only timers are consumed wake-ups */
	if (g->nodes[n].lock->wait_timeout_ms >= 0)
		pgd_store_node_tasks_drop(g->instance_id, g->nodes[n].id, scope);
	pgd_apply_finish_node(g, n, scope, outcome);
}

static DfJson *
lock_details(PgdGraph *g, int n)
{
	char   *err = NULL;
	char   *text = pgd_store_node_details(g->instance_id, g->nodes[n].id);
	DfJson *d = text ? dfjson_parse(text, strlen(text), &err) : NULL;

	return (d != NULL && d->type == DFJ_OBJECT) ? d : NULL;
}

/* status_details: the sorted keys, the mode and the deadline, with the state. */
static void
write_details(PgdGraph *g, int n, char **keys, int nkeys, const char *deadline,
			  const char *state, const char *waiting_for, DfJson *tokens)
{
	DfJson *d = dfjson_make_object();
	DfJson *arr = dfjson_make_array();
	DfJson *space_keys = dfjson_make_array();

	for (int i = 0; i < nkeys; i++)
	{
		dfjson_array_add(arr, dfjson_make_string(pgd_space_display(keys[i])));
		dfjson_array_add(space_keys, dfjson_make_string(keys[i]));
	}
	dfjson_object_add(d, "lock_keys", arr);
	/* the keys as the engine names them (tenancy.md): a timer takes these */
	dfjson_object_add(d, "lock_space_keys", space_keys);
	dfjson_object_add(d, "lock_mode",
					  dfjson_make_string(g->nodes[n].lock->shared ?
											 "shared" :
											 "exclusive"));
	if (deadline != NULL)
		dfjson_object_add(d, "deadline", dfjson_make_string(deadline));
	dfjson_object_add(d, "lock_state", dfjson_make_string(state));
	dfjson_object_add(d, "waiting_on",
					  waiting_for ? dfjson_make_string("lock") :
									dfjson_make_null());
	dfjson_object_add(d, "waiting_for",
					  waiting_for ?
						  dfjson_make_string(pgd_space_display(waiting_for)) :
						  dfjson_make_null());
	if (tokens != NULL)
		dfjson_object_add(d, "lock_tokens", tokens);
	pgd_store_node_details_merge(g->instance_id, g->nodes[n].id,
								 dfjson_to_text(d));
}

/* Every key is held (tokens[i] of keys[i]): $lock, and the child starts. */
static void
lock_held(PgdGraph *g, int n, const char *scope, char **keys, int nkeys,
		  const int64 *tokens, const char *deadline, bool waited)
{
	const PgdNode *node = &g->nodes[n];
	char		  *child_scope = pgd_branch_scope(g, node->left, scope);
	DfJson		  *tj = dfjson_make_object();
	int64		   max = 0;
	bool		   uses_lock = false;
	bool		   binds = false;

	for (int i = 0; i < nkeys; i++)
	{
		dfjson_object_add(tj, pgd_space_display(keys[i]),
						  dfjson_make_number(psprintf(INT64_FORMAT,
													  tokens[i])));
		max = Max(max, tokens[i]);
	}
	/*
	 * A node that never waited has no details to change (df.locks shows
	 * what it holds); one that waited says it holds its keys now, which a
	 * late timer reads.
	 */
	if (waited)
	{
		DfJson *ev = dfjson_make_object();

		dfjson_object_add(ev, "tokens", tj);
		write_details(g, n, keys, nkeys, deadline, "held", NULL, tj);
		pgd_store_event_add(g->instance_id, "lock_acquired", node->id, scope,
							0, dfjson_to_text(ev));
	}
	if (waited && node->lock->wait_timeout_ms >= 0)
		pgd_store_node_tasks_drop(g->instance_id, node->id, scope);
	subtree_needs(g, node->left, &uses_lock, &binds);
	if (uses_lock)
	{
		DfJson *lock = dfjson_make_object();

		dfjson_object_add(lock, "token",
						  dfjson_make_number(psprintf(INT64_FORMAT, max)));
		dfjson_object_add(lock, "tokens", tj);
		pgd_store_result_save(g->instance_id, child_scope, "lock",
							  dfjson_to_text(lock));
	}
	pgd_apply_start_node(g, node->left, child_scope);
}

static void
lock_timed_out(PgdGraph *g, int n, const char *scope, const char *key)
{
	pgd_store_event_add(g->instance_id, "lock_timeout", g->nodes[n].id, scope,
						0, pgd_event_detail("key", pgd_space_display(key)));
	finish_lock(g, n, scope,
				lock_failure("lock_timeout",
							 psprintf("df.with_lock: key \"%s\" not acquired within %s s",
									  pgd_space_display(key),
									  df_seconds_text(g->nodes[n]
														  .lock
														  ->wait_timeout_ms *
													  1000))));
}

static bool
parse_deadline(const char *text, TimestampTz *deadline)
{
	if (text == NULL)
		return false;
	*deadline =
		DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
												CStringGetDatum(text),
												ObjectIdGetDatum(InvalidOid),
												Int32GetDatum(-1)));
	return true;
}

/*
 * Take the keys not held yet (e: the ones held before, ne of them), in
 * order, until one must be waited for; with all held, the child starts.
 */
static void
take_keys(PgdGraph *g, int n, const char *scope, char **keys, int nkeys,
		  const PgdLockEntry *e, int ne, const char *deadline)
{
	const PgdNode *node = &g->nodes[n];
	int64		  *tokens = palloc0(sizeof(int64) * nkeys);
	TimestampTz	   due;

	for (int i = 0; i < nkeys; i++)
	{
		bool have = false;

		for (int j = 0; j < ne && !have; j++)
			if (strcmp(e[j].key, keys[i]) == 0)
			{
				have = true;
				tokens[i] = e[j].token;
			}
		if (have ||
			pgd_store_lock_take(g->instance_id, node->id, scope, keys[i],
								node->lock->shared, &tokens[i]))
			continue;
		/* it waits for keys[i], woken by the release that hands it over */
		if (parse_deadline(deadline, &due))
		{
			if (GetCurrentTimestamp() >= due)
			{
				lock_timed_out(g, n, scope, keys[i]);
				return;
			}
			pgd_store_timer_add(g->instance_id, node->id, scope, due);
		}
		write_details(g, n, keys, nkeys, deadline, "waiting", keys[i], NULL);
		pgd_store_event_add(g->instance_id, "lock_waiting", node->id, scope, 0,
							pgd_event_detail("key",
											 pgd_space_display(keys[i])));
		return;
	}
	lock_held(g, n, scope, keys, nkeys, tokens, deadline, e != NULL);
}

void
pgd_lock_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	char		 **keys = NULL;
	int			   nkeys = 0;
	char		  *problem;
	char		  *deadline = NULL;

	if (node->lock_problem != NULL)
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("%s", node->lock_problem));
		return;
	}
	if ((problem = substituted_keys(g, n, scope, &keys, &nkeys)) != NULL ||
		(problem = order_violation(g, n, keys[0])) != NULL)
	{
		pgd_apply_finish_node(g, n, scope,
							  lock_failure(strncmp(problem, "lock order",
												   10) == 0 ?
											   "lock_order_violation" :
											   NULL,
										   problem));
		return;
	}
	if (node->lock->wait_timeout_ms >= 0)
		deadline =
			pstrdup(timestamptz_to_str(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																   node->lock
																	   ->wait_timeout_ms)));
	take_keys(g, n, scope, keys, nkeys, NULL, 0, deadline);
}

void
pgd_lock_child_done(PgdGraph *g, int n, int child, const char *scope,
					PgdOutcome outcome)
{
	char *child_scope = pgd_branch_scope(g, child, scope);
	bool  uses_lock = false;
	bool  binds = false;

	subtree_needs(g, child, &uses_lock, &binds);
	if (uses_lock)
		pgd_store_lock_result_forget(g->instance_id, child_scope);
	if (binds)
		pgd_store_results_merge(g->instance_id, child_scope, scope,
								outcome.ok);
	finish_lock(g, n, scope, outcome);
}

/*
 * A timer of LOCK node n: a release handed it a key (take the next ones),
 * or its wait's deadline came.  A timer that finds the node holding its
 * keys, or still waiting before its deadline, has nothing to do.
 */
void
pgd_lock_timer(PgdGraph *g, int n, const char *scope)
{
	DfJson		 *d = lock_details(g, n);
	DfJson		 *state = d ? dfjson_get(d, "lock_state") : NULL;
	DfJson		 *keys = d ? dfjson_get(d, "lock_space_keys") : NULL;
	DfJson		 *dl = d ? dfjson_get(d, "deadline") : NULL;
	const char	 *deadline = (dl && dl->type == DFJ_STRING) ? dl->str : NULL;
	PgdLockEntry *e;
	int			  ne;
	char		**k;
	TimestampTz	  due;

	if (d != NULL && keys == NULL)
		keys = dfjson_get(d, "lock_keys");
	if (keys == NULL || keys->type != DFJ_ARRAY || state == NULL ||
		state->type != DFJ_STRING || strcmp(state->str, "held") == 0)
		return;
	ne = pgd_store_lock_entries(g->instance_id, g->nodes[n].id, scope, &e);
	for (int i = 0; i < ne; i++)
		if (!e[i].held)
		{
			if (parse_deadline(deadline, &due) && GetCurrentTimestamp() >= due)
				lock_timed_out(g, n, scope, e[i].key);
			return;
		}
	k = palloc(sizeof(char *) * Max(keys->count, 1));
	for (int i = 0; i < keys->count; i++)
		k[i] = keys->items[i]->str;
	take_keys(g, n, scope, k, keys->count, e, ne, deadline);
}
