/*-------------------------------------------------------------------------
 *
 * transition.c
 *	  State transitions of an instance: starting a node, completing it, and
 *	  what its parent does about that.
 *
 * Everything here runs inside the executor's SPI connection, in the
 * transaction that consumed the triggering input (a claimed task), with the
 * instance's df_internal.runs row locked.  A transition therefore commits
 * together with the step that caused it: there is no second transaction
 * that could fail after the first one committed (DESIGN.md §5 rule 3).
 *
 * Compound nodes have no tasks.  Starting a THEN starts its left child,
 * starting a JOIN starts every branch, and so on down to the leaves, which
 * get a "step" task.  Completing a node hands its outcome to its parent:
 *
 *	 THEN	left ok -> start right; left failed or right done -> THEN done
 *	 IF		condition ok -> start the arm its truthiness picks; arm done ->
 *			IF done; condition failed -> IF failed
 *	 JOIN	one fewer branch running; the last one finishes the JOIN: failed
 *			with "JOIN branch <i> failed: ..." if any branch failed, else
 *			the array of branch results, and branch results merge back
 *	 RACE	the first finisher decides; the loser's pending tasks are
 *			removed (a running loser finds out under the runs lock)
 *	 LOOP	body ok -> while-condition, or the next iteration; condition
 *			true -> next iteration, false -> LOOP done with the last body
 *			result; a failure fails the LOOP; df.break() inside ends it
 *			with the break value (see "Loops and breaks" below)
 *
 * Reaching the root finishes the instance and removes its engine state.
 *
 * Every node start and end writes an event (events.c) with the same
 * statement that updates the node; instance starts and ends write one too.
 *
 * Locks: only rows of the instance whose runs row the caller holds; tasks
 * claimed by others are skipped (SKIP LOCKED), never waited for.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "engine/engine.h"
#include "core/settings.h"
#include "results/results.h"

static void start_node(PgdGraph *g, int n, const char *scope);
static void start_loop(PgdGraph *g, int loop, const char *scope);
static void run_break(PgdGraph *g, int n, const char *scope);
static void loop_child_done(PgdGraph *g, int p, int n, const char *pscope, const char *scope,
							PgdOutcome outcome);

/* The execution scope of a JOIN/RACE branch: "<scope>::<branch root id>::1". */
static char *
child_scope(PgdGraph *g, int child, const char *scope)
{
	return psprintf("%s::%s::1", scope, g->nodes[child].id);
}

/* Does node n run in a scope of its own below its parent's? */
static bool
opens_scope(PgdGraph *g, int p)
{
	DfNodeType	t = g->nodes[p].type;

	return t == DF_NODE_JOIN || t == DF_NODE_RACE ||
		(t == DF_NODE_LOOP && g->nodes[p].parent >= 0);
}

/* Number of "::" separators: a root scope "<instance>::<generation>" has one. */
static int
scope_depth(const char *scope)
{
	int			n = 0;
	const char *p = scope;

	while ((p = strstr(p, "::")) != NULL)
	{
		n++;
		p += 2;
	}
	return n;
}

/* Strip the last "::<node id>::<generation>" of a child scope. */
static char *
strip_scope(const char *scope)
{
	char	   *s = pstrdup(scope);
	int			i;
	int			seps = 0;

	for (i = strlen(s) - 1; i > 0; i--)
	{
		if (s[i] == ':' && s[i - 1] == ':')
		{
			if (++seps == 2)
			{
				s[i - 1] = '\0';
				return s;
			}
			i--;
		}
	}
	elog(ERROR, "pg_durable: malformed execution scope \"%s\"", scope);
	return NULL;				/* keep compiler quiet */
}

char *
pgd_parent_scope(PgdGraph *g, int node, const char *scope)
{
	int			p = g->nodes[node].parent;

	if (p >= 0 && opens_scope(g, p))
		return strip_scope(scope);
	return pstrdup(scope);
}

/* ---------------------------------------------------------------------
 * Row updates
 * ---------------------------------------------------------------------
 */

/*
 * Node updates are buffered and written by one statement: a step usually
 * ends a node, ends its parent and starts the next node, and three UPDATEs
 * of df.nodes cost three executor start-ups (each re-reading the table's
 * CHECK constraints).  The buffer is written before any other engine
 * statement runs (pgd_spi_exec calls pgd_flush_node_writes), so nothing
 * ever reads a node row that is behind; a node already in the buffer
 * flushes it first, so each row appears once per statement.  Each write
 * comes with its event: node_started, or node_completed / node_failed with
 * the duration since the node started (the old row's updated_at, read
 * before the update) and the truncated error or a SQL step's row count,
 * never the result itself.
 */
#define MAX_NODE_WRITES 32

typedef struct NodeWrite
{
	char		id[PGD_ID_LEN + 1];
	char	   *scope;
	bool		done;			/* else: started */
	bool		ok;
	char	   *result;
	int			attempt;
	char	   *detail;			/* the error event detail (jsonb text) */
} NodeWrite;

static char pending_instance[PGD_ID_LEN + 1];
static NodeWrite pending[MAX_NODE_WRITES];
static int	npending = 0;
static bool flushing = false;

static Datum
text_array(int n, char *const *items)
{
	Datum	   *elems = palloc(sizeof(Datum) * n);
	bool	   *nulls = palloc(sizeof(bool) * n);
	int			dims[1] = {n};
	int			lbs[1] = {1};
	int			i;

	for (i = 0; i < n; i++)
	{
		nulls[i] = items[i] == NULL;
		elems[i] = nulls[i] ? (Datum) 0 : pgd_text_datum(items[i]);
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false, TYPALIGN_INT));
}

void
pgd_flush_node_writes(void)
{
	Oid			types[7] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,
	TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID};
	Datum		values[7];
	char	   *ids[MAX_NODE_WRITES];
	char	   *scopes[MAX_NODE_WRITES];
	char	   *results[MAX_NODE_WRITES];
	char	   *details[MAX_NODE_WRITES];
	char	   *states[MAX_NODE_WRITES];
	Datum		attempts[MAX_NODE_WRITES];
	int			n = npending;
	int			i;

	if (n == 0 || flushing)
		return;
	for (i = 0; i < n; i++)
	{
		NodeWrite  *w = &pending[i];

		ids[i] = w->id;
		scopes[i] = w->scope;
		/* 'r'unning, 'c'ompleted, 'f'ailed */
		states[i] = !w->done ? "r" : w->ok ? "c" : "f";
		results[i] = w->result;
		details[i] = w->detail;
		attempts[i] = Int32GetDatum(w->attempt);
	}
	values[0] = pgd_text_datum(pending_instance);
	values[1] = text_array(n, ids);
	values[2] = text_array(n, scopes);
	values[3] = text_array(n, states);
	values[4] = text_array(n, results);
	values[5] = PointerGetDatum(construct_array(attempts, n, INT4OID, 4, true, TYPALIGN_INT));
	values[6] = text_array(n, details);

	npending = 0;
	flushing = true;
	PG_TRY();
	{
		/*
		 * The rows are found by the primary key (id = ANY), each row's new
		 * values by its id's position k in $2: a join with the arrays let
		 * the generic plan hash-join a scan of the whole table.
		 */
#define K "pg_catalog.array_position($2, n.id::text)"
		pgd_spi_exec("WITH o AS (SELECT n.id, n.updated_at FROM df.nodes n "
					 " WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
					 " AND n.id OPERATOR(pg_catalog.=) ANY ($2)), "
					 "u AS (UPDATE df.nodes n SET "
					 " status = CASE ($4)[" K "] WHEN 'r' THEN 'running' WHEN 'c' THEN 'completed' "
					 "  ELSE 'failed' END, "
					 " result = CASE ($4)[" K "] WHEN 'r' THEN NULL "
					 "  WHEN 'c' THEN (($5)[" K "])::pg_catalog.jsonb "
					 "  ELSE pg_catalog.to_jsonb(($5)[" K "]) END, "
					 " status_details = pg_catalog.jsonb_build_object('execution_id', ($3)[" K "]), "
					 " updated_at = pg_catalog.now() "
					 " WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
					 " AND n.id OPERATOR(pg_catalog.=) ANY ($2) "
					 " RETURNING n.id, n.result, " K " AS k) "
					 "INSERT INTO df_internal.events "
					 "(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
					 "SELECT $1, CASE ($4)[u.k] WHEN 'r' THEN 'node_started' WHEN 'c' THEN 'node_completed' "
					 " ELSE 'node_failed' END, u.id, ($3)[u.k], "
					 "CASE WHEN ($4)[u.k] OPERATOR(pg_catalog.<>) 'r' THEN NULLIF(($6)[u.k], 0) END, "
					 "CASE WHEN ($4)[u.k] OPERATOR(pg_catalog.<>) 'r' THEN "
					 " GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
					 " OPERATOR(pg_catalog.-) o.updated_at) OPERATOR(pg_catalog.*) 1000)::bigint) END, "
					 "CASE ($4)[u.k] WHEN 'r' THEN NULL WHEN 'f' THEN (($7)[u.k])::pg_catalog.jsonb "
					 " ELSE CASE WHEN pg_catalog.jsonb_typeof(u.result OPERATOR(pg_catalog.->) 'row_count') "
					 " OPERATOR(pg_catalog.=) 'number' "
					 " THEN pg_catalog.jsonb_build_object('row_count', u.result OPERATOR(pg_catalog.->) 'row_count') "
					 " END END "
					 "FROM u LEFT JOIN o ON o.id OPERATOR(pg_catalog.=) u.id ORDER BY u.k",
					 7, types, values, NULL, false);
#undef K
	}
	PG_FINALLY();
	{
		flushing = false;
	}
	PG_END_TRY();
}

/* Forget the buffer: its transaction was rolled back. */
void
pgd_discard_node_writes(void)
{
	npending = 0;
	flushing = false;
}

bool
pgd_node_writes_pending(void)
{
	return npending > 0;
}

static void
buffer_node_write(PgdGraph *g, int n, const char *scope, bool done, PgdOutcome outcome)
{
	NodeWrite  *w;
	int			i;

	if (npending > 0 && strcmp(pending_instance, g->instance_id) != 0)
		pgd_flush_node_writes();
	for (i = 0; i < npending; i++)
		if (strcmp(pending[i].id, g->nodes[n].id) == 0)
		{
			pgd_flush_node_writes();
			break;
		}
	if (npending == MAX_NODE_WRITES)
		pgd_flush_node_writes();

	strlcpy(pending_instance, g->instance_id, sizeof(pending_instance));
	w = &pending[npending++];
	strlcpy(w->id, g->nodes[n].id, sizeof(w->id));
	w->scope = MemoryContextStrdup(TopTransactionContext, scope);
	w->done = done;
	w->ok = outcome.ok;
	w->result = done && outcome.result ? MemoryContextStrdup(TopTransactionContext, outcome.result) : NULL;
	w->attempt = done ? pgd_event_attempt(g->nodes[n].id) : 0;
	w->detail = done && !outcome.ok ?
		MemoryContextStrdup(TopTransactionContext, pgd_event_detail("error", outcome.result)) : NULL;
}

/* The node starts (its node_started event goes with the update). */
static void
node_set_running(PgdGraph *g, int n, const char *scope)
{
	PgdOutcome	none = {true, NULL};

	buffer_node_write(g, n, scope, false, none);
	}

static void
node_set_done(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	buffer_node_write(g, n, scope, true, outcome);
	}

static void
enqueue_step(PgdGraph *g, int n, const char *scope)
{
	PGD_EXEC("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
			 "VALUES ($1, $2, $3, 'step') RETURNING id",
			 g->instance_id, g->nodes[n].id, scope);
	pgd_task_ready_at_commit(strtoll(pgd_spi_getstring(0, 1), NULL, 10));
}

/* An HTTP call: the HTTP worker's task, not the executors' (http_worker.c). */
static void
enqueue_http(PgdGraph *g, int n, const char *scope)
{
	PGD_EXEC("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
			 "VALUES ($1, $2, $3, 'http')",
			 g->instance_id, g->nodes[n].id, scope);
	pgd_http_wake_at_commit();
}

static void
save_named_result(PgdGraph *g, const char *scope, const char *name, const char *result)
{
	PGD_EXEC("INSERT INTO df_internal.results AS r (instance_id, scope, name, value) "
				 "VALUES ($1, $2, $3, $4::pg_catalog.json) "
				 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
				 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
				 g->instance_id, scope, name, result);
}

/* Copy a branch scope's named results into its parent scope (later wins), then drop the branch's. */
static void
merge_results(PgdGraph *g, const char *from_scope, const char *to_scope, bool keep)
{
	if (keep)
		PGD_EXEC("INSERT INTO df_internal.results (instance_id, scope, name, value) "
					 "SELECT instance_id, $3, name, value FROM df_internal.results "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2 "
					 "ORDER BY seq "
					 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
					 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
				 g->instance_id, from_scope, to_scope);
	PGD_EXEC("DELETE FROM df_internal.results "
				 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
				 "AND (scope OPERATOR(pg_catalog.=) $2 "
				 "OR pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::'))",
				 g->instance_id, from_scope);
}

/*
 * A scope is abandoned (a lost RACE branch, a loop body that broke or moved
 * to its next generation): remove the pending tasks of the scope and
 * everything below it (running ones are skipped) and its registered signal
 * waits, which would otherwise stay until the instance ends, one more per
 * loop iteration.
 */
static void
drop_scope_tasks(PgdGraph *g, const char *scope)
{
	PGD_EXEC("DELETE FROM df_internal.tasks WHERE id IN ("
				 " SELECT id FROM df_internal.tasks "
				 " WHERE instance_id OPERATOR(pg_catalog.=) $1 "
				 " AND (scope OPERATOR(pg_catalog.=) $2 "
				 "  OR pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::')) "
				 " FOR UPDATE SKIP LOCKED)",
				 g->instance_id, scope);
	PGD_EXEC("DELETE FROM df_internal.waits "
			 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
			 "AND (scope OPERATOR(pg_catalog.=) $2 "
			 "OR pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::'))",
			 g->instance_id, scope);
}

/* Status and result (as JSON text) of a node. */
static void
node_state(PgdGraph *g, int n, char **status, char **result)
{
	if (PGD_EXEC("SELECT status, result::text, "
					 "CASE WHEN pg_catalog.jsonb_typeof(result) = 'string' "
					 "THEN result OPERATOR(pg_catalog.#>>) '{}' END "
					 "FROM df.nodes "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
				 g->instance_id, g->nodes[n].id) == 0)
		elog(ERROR, "pg_durable: node %s of instance %s disappeared",
			 g->nodes[n].id, g->instance_id);
	*status = pgd_spi_getstring(0, 1);
	if (*status != NULL && strcmp(*status, "failed") == 0)
		*result = pgd_spi_getstring(0, 3);	/* the error text */
	else
		*result = pgd_spi_getstring(0, 2);
}

static bool
is_terminal_status(const char *status)
{
	return status != NULL &&
		(strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0);
}

/* ---------------------------------------------------------------------
 * Instance end
 * ---------------------------------------------------------------------
 */

/*
 * An instance has ended (finished or cancelled; the caller set its status
 * and holds its runs lock): remove its engine state, interrupt whatever of
 * it still runs, and wake df.await_instance at commit.  Tasks claimed by
 * running steps are skipped; those steps find the runs row gone and discard
 * themselves.
 */
void
pgd_end_instance(const char *instance_id)
{
	/* one statement: an instance ends at every workflow's last step */
	PGD_EXEC("WITH t AS (DELETE FROM df_internal.tasks WHERE id IN ("
			 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
			 " FOR UPDATE SKIP LOCKED)), "
			 "r AS (DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1), "
			 "j AS (DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1), "
			 "l AS (DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1), "
			 "s AS (DELETE FROM df_internal.signals WHERE instance_id OPERATOR(pg_catalog.=) $1), "
			 "w AS (DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1) "
			 "DELETE FROM df_internal.runs WHERE instance_id OPERATOR(pg_catalog.=) $1",
			 instance_id);
	pgd_interrupt_at_commit(instance_id, instance_id);
	pgd_instance_finished_at_commit(instance_id);
}

static void
finish_instance(PgdGraph *g, const char *scope, PgdOutcome outcome)
{
	if (PGD_EXEC("UPDATE df.instances SET status = $2, updated_at = pg_catalog.now(), "
				 "completed_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'completed' THEN pg_catalog.now() END "
				 "WHERE id OPERATOR(pg_catalog.=) $1 "
				 "AND status NOT IN ('completed', 'failed', 'cancelled')",
				 g->instance_id, outcome.ok ? "completed" : "failed") > 0)
		pgd_event_add(g->instance_id, outcome.ok ? "instance_completed" : "instance_failed",
					  NULL, scope, 0,
					  outcome.ok ? NULL : pgd_event_detail("error", outcome.result));
	pgd_end_instance(g->instance_id);
}

/* ---------------------------------------------------------------------
 * Visible named results
 * ---------------------------------------------------------------------
 */

/*
 * The named results a node in scope sees: its own scope's, then each
 * enclosing scope's, the innermost winning.
 */
DfJson *
pgd_visible_results(const char *instance_id, const char *scope)
{
	Oid			types[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	Datum	   *scopes;
	int			nscopes = 0;
	int			cap = 4;
	char	   *s = pstrdup(scope);
	DfJson	   *map = dfjson_make_object();
	int			n,
				i;

	scopes = palloc(sizeof(Datum) * cap);
	for (;;)
	{
		if (nscopes == cap)
			scopes = repalloc(scopes, sizeof(Datum) * (cap *= 2));
		scopes[nscopes++] = pgd_text_datum(s);
		if (scope_depth(s) <= 1)
			break;
		s = strip_scope(s);
	}
	values[0] = pgd_text_datum(instance_id);
	values[1] = PointerGetDatum(construct_array(scopes, nscopes, TEXTOID, -1, false, TYPALIGN_INT));

	/* outermost first, so that inner scopes overwrite */
	n = pgd_spi_exec("SELECT name, value::text FROM df_internal.results "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
					 "AND scope OPERATOR(pg_catalog.=) ANY ($2) "
					 "ORDER BY pg_catalog.length(scope), seq",
					 2, types, values, NULL, false);
	for (i = 0; i < n; i++)
	{
		char	   *name = pgd_spi_getstring(i, 1);
		char	   *value = pgd_spi_getstring(i, 2);
		char	   *err = NULL;
		DfJson	   *v = value ? dfjson_parse(value, strlen(value), &err) : dfjson_make_null();
		int			j;
		bool		replaced = false;

		if (v == NULL)
			v = dfjson_make_string(value);
		for (j = 0; j < map->count; j++)
			if (strcmp(map->pairs[j].key, name) == 0)
			{
				map->pairs[j].value = v;
				replaced = true;
				break;
			}
		if (!replaced)
			dfjson_object_add(map, name, v);
	}
	return map;
}

/* ---------------------------------------------------------------------
 * Liveness
 * ---------------------------------------------------------------------
 */

/*
 * Is node n, run in scope, still wanted?  It must be running with the
 * stamp of this scope, and no ancestor may have finished (a decided RACE
 * above it, a failed instance).  The caller checks the instance status.
 */
bool
pgd_node_is_live(PgdGraph *g, int n, const char *scope)
{
	Oid			types[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	Datum	   *ids = palloc(sizeof(Datum) * (DF_MAX_DEPTH + 2));
	int			nids = 0;
	int			a,
				rows,
				i;
	const char *stamp = scope;

	for (a = n; a >= 0 && nids < DF_MAX_DEPTH + 2; a = g->nodes[a].parent)
		ids[nids++] = pgd_text_datum(g->nodes[a].id);
	values[0] = pgd_text_datum(g->instance_id);
	values[1] = PointerGetDatum(construct_array(ids, nids, TEXTOID, -1, false, TYPALIGN_INT));
	rows = pgd_spi_exec("SELECT id, status, status_details OPERATOR(pg_catalog.->>) 'execution_id' "
						"FROM df.nodes WHERE instance_id OPERATOR(pg_catalog.=) $1 "
						"AND id OPERATOR(pg_catalog.=) ANY ($2)",
						2, types, values, NULL, false);
	for (i = 0; i < rows; i++)
	{
		char	   *id = pgd_spi_getstring(i, 1);
		char	   *status = pgd_spi_getstring(i, 2);
		char	   *exec_id = pgd_spi_getstring(i, 3);

		if (strcmp(id, g->nodes[n].id) == 0)
		{
			if (status == NULL || strcmp(status, "running") != 0 ||
				exec_id == NULL || strcmp(exec_id, stamp) != 0)
				return false;
		}
		else if (is_terminal_status(status))
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Starting nodes
 * ---------------------------------------------------------------------
 */

static PgdOutcome
failure(const char *fmt,...) pg_attribute_printf(1, 2);

static PgdOutcome
failure(const char *fmt,...)
{
	PgdOutcome	o;
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	o.ok = false;
	o.result = buf.data;
	return o;
}

/* df.if_rows: does the named result have rows?  Sets *error instead when it cannot tell. */
static bool
if_rows_condition(PgdGraph *g, int n, const char *scope, char **error)
{
	char	   *err = NULL;
	DfJson	   *cfg = dfjson_parse(g->nodes[n].query, strlen(g->nodes[n].query), &err);
	DfJson	   *name = cfg ? dfjson_get(cfg, "result_name") : NULL;
	DfJson	   *results;
	DfJson	   *r;
	DfJson	   *rc;

	*error = NULL;
	if (name == NULL || name->type != DFJ_STRING)
	{
		*error = pstrdup("df.if_rows: invalid condition configuration");
		return false;
	}
	results = pgd_visible_results(g->instance_id, scope);
	r = dfjson_get(results, name->str);
	if (r == NULL)
	{
		*error = psprintf("df.if_rows: result '%s' not found", name->str);
		return false;
	}
	rc = dfjson_get(r, "row_count");
	if (rc == NULL || rc->type != DFJ_NUMBER)
	{
		*error = psprintf("df.if_rows: result '%s' is not a SQL result (missing row_count)", name->str);
		return false;
	}
	return strtod(rc->str, NULL) > 0;
}

static void
start_node(PgdGraph *g, int n, const char *scope)
{
	PgdNode    *node = &g->nodes[n];

	check_stack_depth();
	node_set_running(g, n, scope);

	switch (node->type)
	{
		case DF_NODE_SQL:
			enqueue_step(g, n, scope);
			break;

		case DF_NODE_THEN:
			start_node(g, node->left, scope);
			break;

		case DF_NODE_IF:
			if (node->condition >= 0)
				start_node(g, node->condition, scope);
			else
			{
				char	   *error;
				bool		yes = if_rows_condition(g, n, scope, &error);

				if (error)
					pgd_transition_complete(g, n, scope, failure("%s", error));
				else
					start_node(g, yes ? node->left : node->right, scope);
			}
			break;

		case DF_NODE_JOIN:
			{
				Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, INT4OID};
				Datum		values[4];
				int			i;

				values[0] = pgd_text_datum(g->instance_id);
				values[1] = pgd_text_datum(node->id);
				values[2] = pgd_text_datum(scope);
				values[3] = Int32GetDatum(2 + node->nextras);
				pgd_spi_exec("INSERT INTO df_internal.joins (instance_id, node_id, scope, remaining) "
							 "VALUES ($1, $2, $3, $4)", 4, types, values, NULL, false);
				start_node(g, node->left, child_scope(g, node->left, scope));
				start_node(g, node->right, child_scope(g, node->right, scope));
				for (i = 0; i < node->nextras; i++)
					start_node(g, node->extras[i], child_scope(g, node->extras[i], scope));
			}
			break;

		case DF_NODE_RACE:
			{
				char	   *status;
				char	   *result;

				start_node(g, node->left, child_scope(g, node->left, scope));
				/* the left branch may have decided the race already */
				node_state(g, n, &status, &result);
				if (!is_terminal_status(status))
					start_node(g, node->right, child_scope(g, node->right, scope));
			}
			break;

		case DF_NODE_SLEEP:
		case DF_NODE_WAIT_SCHEDULE:
		case DF_NODE_SIGNAL:
			pgd_timer_node_start(g, n, scope);
			break;

		case DF_NODE_LOOP:
			start_loop(g, n, scope);
			break;

		case DF_NODE_BREAK:
			run_break(g, n, scope);
			break;

		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			enqueue_http(g, n, scope);
			break;

		default:
			pgd_transition_complete(g, n, scope,
									failure("%s nodes are not supported by this version of pg_durable yet",
											df_node_type_name(node->type)));
			break;
	}
}

/* ---------------------------------------------------------------------
 * Loops and breaks
 *
 * A loop's state is a df_internal.loops row keyed by the loop node and the
 * scope the loop node runs in: its generation, its iteration count and when
 * the current iteration began.  A root loop restarts the whole instance
 * each iteration: the root scope "<instance>::<gen>" moves to the next
 * generation and the named results start empty.  Any other loop runs its
 * body in a scope of its own, "<scope>::<loop id>::<gen>", whose named
 * results are carried to the next generation and merged back into the
 * loop's scope when the loop ends.  An iteration begins at least
 * pg_durable.loop_iteration_floor (one second) after the previous one began
 * (a timer task when it would be sooner), and
 * a loop scope runs at most PGD_MAX_LOOP_ITERATIONS iterations.
 * ---------------------------------------------------------------------
 */

#define PGD_MAX_LOOP_ITERATIONS 100000

static bool
is_root_loop(PgdGraph *g, int loop)
{
	return g->nodes[loop].parent < 0;
}

/* The scope a loop's body runs in, for generation gen. */
static char *
loop_body_scope(PgdGraph *g, int loop, const char *loop_scope, int gen)
{
	if (is_root_loop(g, loop))
		return psprintf("%s::%d", g->instance_id, gen);
	return psprintf("%s::%s::%d", loop_scope, g->nodes[loop].id, gen);
}

static void
loop_forget(PgdGraph *g, int loop, const char *loop_scope)
{
	PGD_EXEC("DELETE FROM df_internal.loops WHERE instance_id OPERATOR(pg_catalog.=) $1 "
				 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
				 g->instance_id, g->nodes[loop].id, loop_scope);
}

/* The loop ends with outcome: its body's results join its scope, then it completes. */
static void
loop_finish(PgdGraph *g, int loop, const char *loop_scope, const char *body_scope,
			PgdOutcome outcome)
{
	if (!is_root_loop(g, loop))
		merge_results(g, body_scope, loop_scope, outcome.ok);
	loop_forget(g, loop, loop_scope);
	pgd_transition_complete(g, loop, loop_scope, outcome);
}

static void
start_loop(PgdGraph *g, int loop, const char *scope)
{
	PGD_EXEC("INSERT INTO df_internal.loops (instance_id, node_id, scope) VALUES ($1, $2, $3) "
				 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE "
				 "SET generation = 1, iterations = 1, iteration_started_at = pg_catalog.clock_timestamp()",
				 g->instance_id, g->nodes[loop].id, scope);
	start_node(g, g->nodes[loop].left,
			   is_root_loop(g, loop) ? scope : loop_body_scope(g, loop, scope, 1));
}

/*
 * The next iteration, now: a new generation, a new body scope (empty named
 * results for a root loop, carried ones otherwise), the body started again.
 */
static void
begin_iteration(PgdGraph *g, int loop, const char *loop_scope)
{
	int			gen;
	char	   *old_body;
	char	   *new_body;
	bool		isnull;

	if (PGD_EXEC("UPDATE df_internal.loops SET generation = generation OPERATOR(pg_catalog.+) 1, "
					 "iteration_started_at = pg_catalog.clock_timestamp() "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
					 "AND scope OPERATOR(pg_catalog.=) $3 RETURNING generation",
				 g->instance_id, g->nodes[loop].id, loop_scope) == 0)
		elog(ERROR, "pg_durable: loop %s of instance %s has no state", g->nodes[loop].id, g->instance_id);
	gen = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

	if (is_root_loop(g, loop))
	{
		/* the whole instance starts over: the loop node itself moves on */
		old_body = pstrdup(loop_scope);
		new_body = psprintf("%s::%d", g->instance_id, gen);
		merge_results(g, old_body, old_body, false);
		{

			PGD_EXEC("UPDATE df_internal.loops SET scope = $3 "
						 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
						 "AND scope OPERATOR(pg_catalog.=) $4",
				 g->instance_id, g->nodes[loop].id, new_body, loop_scope);
		}
		node_set_running(g, loop, new_body);
	}
	else
	{

		old_body = loop_body_scope(g, loop, loop_scope, gen - 1);
		new_body = loop_body_scope(g, loop, loop_scope, gen);
		PGD_EXEC("UPDATE df_internal.results SET scope = $3 "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2",
				 g->instance_id, old_body, new_body);
	}
	drop_scope_tasks(g, old_body);
	start_node(g, g->nodes[loop].left, new_body);
}

/* A body run (and its while-condition) said "again". */
static void
next_iteration(PgdGraph *g, int loop, const char *loop_scope, const char *body_scope)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];
	int64		iterations;
	TimestampTz due;
	bool		isnull;

	values[0] = pgd_text_datum(g->instance_id);
	values[1] = pgd_text_datum(g->nodes[loop].id);
	values[2] = pgd_text_datum(loop_scope);
	if (pgd_spi_exec("UPDATE df_internal.loops SET iterations = iterations OPERATOR(pg_catalog.+) 1 "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
					 "AND scope OPERATOR(pg_catalog.=) $3 "
					 "RETURNING iterations, iteration_started_at",
					 3, types, values, NULL, false) == 0)
		elog(ERROR, "pg_durable: loop %s of instance %s has no state", g->nodes[loop].id, g->instance_id);
	iterations = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	due = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	due = TimestampTzPlusMilliseconds(due, pgd_loop_iteration_floor);

	if (iterations > PGD_MAX_LOOP_ITERATIONS)
	{
		loop_finish(g, loop, loop_scope, body_scope,
					failure("Loop exceeded maximum iteration count of %d. "
							"End the loop with df.break() or a while-condition.",
							PGD_MAX_LOOP_ITERATIONS));
		return;
	}
	if (due > GetCurrentTimestamp())
	{
		Oid			t4[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
		Datum		v4[4];

		/* at most one iteration per second: come back when it is due */
		v4[0] = values[0];
		v4[1] = values[1];
		v4[2] = values[2];
		v4[3] = TimestampTzGetDatum(due);
		pgd_spi_exec("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
					 "VALUES ($1, $2, $3, 'timer', $4)", 4, t4, v4, NULL, false);
		pgd_task_due_at_commit(due);
		return;
	}
	begin_iteration(g, loop, loop_scope);
}

/* The iteration timer of a loop fell due. */
void
pgd_loop_timer(PgdGraph *g, int loop, const char *loop_scope)
{
	begin_iteration(g, loop, loop_scope);
}

/* A child of LOOP node p finished. */
static void
loop_child_done(PgdGraph *g, int p, int n, const char *pscope, const char *scope,
				PgdOutcome outcome)
{
	PgdNode    *loop = &g->nodes[p];

	if (!outcome.ok)
	{
		loop_finish(g, p, pscope, scope, outcome);
		return;
	}
	if (n == loop->left && loop->condition >= 0)
	{
		start_node(g, loop->condition, scope);
		return;
	}
	if (n == loop->condition)
	{
		char	   *err = NULL;
		DfJson	   *v = dfjson_parse(outcome.result, strlen(outcome.result), &err);
		bool		again = v ? pgd_truthy(v) : pgd_truthy_text(outcome.result);

		if (!again)
		{
			char	   *status;
			char	   *body_result;
			PgdOutcome	last;

			/* a while-loop that ends gives the last body result */
			node_state(g, loop->left, &status, &body_result);
			last.ok = true;
			last.result = body_result ? body_result : pstrdup("null");
			loop_finish(g, p, pscope, scope, last);
			return;
		}
	}
	next_iteration(g, p, pscope, scope);
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
	char	   *err = NULL;
	const char *q = g->nodes[n].query;
	DfJson	   *cfg = q ? dfjson_parse(q, strlen(q), &err) : NULL;
	DfJson	   *bv = cfg ? dfjson_get(cfg, "break_value") : NULL;
	PgdOutcome	value = {true, NULL};
	int			a;
	int			child;
	char	   *s;
	char	   *child_scope_s;

	if (bv == NULL || bv->type != DFJ_STRING)
		value.result = pstrdup("null");
	else if (dfjson_parse(bv->str, strlen(bv->str), &err) != NULL)
		value.result = bv->str;
	else
	{
		StringInfoData buf;

		initStringInfo(&buf);
		dfjson_write_string(&buf, bv->str);
		value.result = buf.data;
	}

	for (a = g->nodes[n].parent; a >= 0 && g->nodes[a].type != DF_NODE_LOOP; a = g->nodes[a].parent)
		;
	if (a < 0)
	{
		pgd_transition_complete(g, n, scope,
								failure("df.break() was called outside of a loop. "
										"Use df.break() inside df.loop() (or @>) only."));
		return;
	}

	/* unwind: the BREAK and every node up to the loop complete with the value */
	child = n;
	s = pstrdup(scope);
	node_set_done(g, n, s, value);
	while (g->nodes[child].parent != a)
	{
		int			p = g->nodes[child].parent;
		char	   *ps = pgd_parent_scope(g, child, s);

		if (strcmp(ps, s) != 0)
			merge_results(g, s, ps, true);
		node_set_done(g, p, ps, value);
		child = p;
		s = ps;
	}
	child_scope_s = s;			/* the loop's body scope */

	/* everything else still running in this body is no longer wanted */
	{
		char	   *loop_scope = pgd_parent_scope(g, child, child_scope_s);

		drop_scope_tasks(g, child_scope_s);
		pgd_interrupt_at_commit(g->instance_id, child_scope_s);
		PGD_EXEC("DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1 "
					 "AND (scope OPERATOR(pg_catalog.=) $2 "
					 "OR pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::'))",
				 g->instance_id, child_scope_s);
		PGD_EXEC("DELETE FROM df_internal.results WHERE instance_id OPERATOR(pg_catalog.=) $1 "
					 "AND pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::')",
				 g->instance_id, child_scope_s);
		loop_finish(g, a, loop_scope, child_scope_s, value);
	}
}

/* An instance begins: it is running, and so is its root. */
void
pgd_transition_start_instance(PgdGraph *g)
{
	/*
	 * 'pending' is a parameter: written as a constant, the (generic) plan
	 * found the row through idx_instances_status, reading every pending
	 * instance when thousands wait.
	 */
	PGD_EXEC("UPDATE df.instances SET status = 'running', updated_at = pg_catalog.now() "
			 "WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) $2",
			 g->instance_id, "pending");
	PGD_EXEC("UPDATE df_internal.runs SET status = 'running' "
				 "WHERE instance_id OPERATOR(pg_catalog.=) $1",
				 g->instance_id);
	pgd_event_add(g->instance_id, "instance_started", NULL, psprintf("%s::1", g->instance_id), 0, NULL);
	start_node(g, g->root, psprintf("%s::1", g->instance_id));
}

/* ---------------------------------------------------------------------
 * Completing nodes
 * ---------------------------------------------------------------------
 */

static void
join_branch_done(PgdGraph *g, int p, const char *pscope)
{
	PgdNode    *join = &g->nodes[p];
	int			nbranches = 2 + join->nextras;
	int			i;
	int			remaining;
	StringInfoData arr;
	bool		isnull;

	if (PGD_EXEC("UPDATE df_internal.joins SET remaining = remaining OPERATOR(pg_catalog.-) 1 "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
					 "AND scope OPERATOR(pg_catalog.=) $3 RETURNING remaining",
				 g->instance_id, join->id, pscope) == 0)
		elog(ERROR, "pg_durable: JOIN %s of instance %s has no branch counter",
			 join->id, g->instance_id);
	remaining = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (remaining > 0)
		return;

	PGD_EXEC("DELETE FROM df_internal.joins WHERE instance_id OPERATOR(pg_catalog.=) $1 "
				 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
				 g->instance_id, join->id, pscope);

	/* every branch has finished: the first failure (in branch order) decides */
	initStringInfo(&arr);
	appendStringInfoChar(&arr, '[');
	for (i = 0; i < nbranches; i++)
	{
		int			b = (i == 0) ? join->left : (i == 1) ? join->right : join->extras[i - 2];
		char	   *status;
		char	   *result;

		node_state(g, b, &status, &result);
		if (status == NULL || strcmp(status, "completed") != 0)
		{
			int			failed = i + 1; /* 1-based, as the reference numbers them */
			int			j;

			for (j = 0; j < nbranches; j++)
			{
				b = (j == 0) ? join->left : (j == 1) ? join->right : join->extras[j - 2];
				merge_results(g, child_scope(g, b, pscope), pscope, false);
			}
			pgd_transition_complete(g, p, pscope,
									failure("JOIN branch %d failed: %s", failed,
											result ? result : "unknown error"));
			return;
		}
		if (i > 0)
			appendStringInfoChar(&arr, ',');
		appendStringInfoString(&arr, result ? result : "null");
	}
	appendStringInfoChar(&arr, ']');

	for (i = 0; i < nbranches; i++)
	{
		int			b = (i == 0) ? join->left : (i == 1) ? join->right : join->extras[i - 2];

		merge_results(g, child_scope(g, b, pscope), pscope, true);
	}
	{
		PgdOutcome	ok = {true, arr.data};

		pgd_transition_complete(g, p, pscope, ok);
	}
}

static void
race_branch_done(PgdGraph *g, int p, int winner, const char *pscope, PgdOutcome outcome)
{
	PgdNode    *race = &g->nodes[p];
	int			loser = (winner == race->left) ? race->right : race->left;
	char	   *status;
	char	   *result;

	node_state(g, p, &status, &result);
	if (is_terminal_status(status))
		return;					/* decided already; cannot happen for live branches */

	drop_scope_tasks(g, child_scope(g, loser, pscope));
	pgd_interrupt_at_commit(g->instance_id, child_scope(g, loser, pscope));
	if (g->nodes[loser].type == DF_NODE_LOOP)
	{
		PgdOutcome	lost = {false, pstrdup("Loop branch cancelled after losing RACE")};

		node_set_done(g, loser, child_scope(g, loser, pscope), lost);
		loop_forget(g, loser, child_scope(g, loser, pscope));
	}
	merge_results(g, child_scope(g, loser, pscope), pscope, false);
	merge_results(g, child_scope(g, winner, pscope), pscope, outcome.ok);

	if (outcome.ok)
		pgd_transition_complete(g, p, pscope, outcome);
	else
		pgd_transition_complete(g, p, pscope,
								failure("RACE %s branch failed: %s",
										winner == race->left ? "left" : "right",
										outcome.result));
}

/*
 * Node n finished in scope with outcome: record it and let its parent react.
 */
void
pgd_transition_complete(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	PgdNode    *node = &g->nodes[n];
	int			p = node->parent;
	char	   *pscope;

	check_stack_depth();
	node_set_done(g, n, scope, outcome);
	if (outcome.ok && node->result_name != NULL)
		save_named_result(g, scope, node->result_name, outcome.result);

	if (p < 0)
	{
		finish_instance(g, scope, outcome);
		return;
	}

	pscope = pgd_parent_scope(g, n, scope);
	switch (g->nodes[p].type)
	{
		case DF_NODE_THEN:
			if (n == g->nodes[p].left && outcome.ok)
				start_node(g, g->nodes[p].right, pscope);
			else
				pgd_transition_complete(g, p, pscope, outcome);
			break;

		case DF_NODE_IF:
			if (n == g->nodes[p].condition && outcome.ok)
			{
				char	   *err = NULL;
				DfJson	   *v = dfjson_parse(outcome.result, strlen(outcome.result), &err);
				bool		yes = v ? pgd_truthy(v) : pgd_truthy_text(outcome.result);

				start_node(g, yes ? g->nodes[p].left : g->nodes[p].right, pscope);
			}
			else
				pgd_transition_complete(g, p, pscope, outcome);
			break;

		case DF_NODE_JOIN:
			join_branch_done(g, p, pscope);
			break;

		case DF_NODE_RACE:
			race_branch_done(g, p, n, pscope, outcome);
			break;

		case DF_NODE_LOOP:
			loop_child_done(g, p, n, pscope, scope, outcome);
			break;

		default:
			elog(ERROR, "pg_durable: a %s node cannot have children",
				 df_node_type_name(g->nodes[p].type));
			break;
	}
}
