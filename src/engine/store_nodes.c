/*-------------------------------------------------------------------------
 *
 * store_nodes.c
 *	  The engine store's node writes: node starts and ends are buffered and
 *	  written at the end of a transition, with their events.
 *
 * Node starts and ends are buffered and written at the end of a
 * transition, or before any other statement of the store runs, so nothing
 * ever reads a node row that is behind; a node already in the buffer
 * flushes it first.  The driver (apply.c) flushes at the end of every
 * transition; the commit hook refuses a commit with writes still buffered
 * and forgets them on abort.  Each write comes with its event:
 * node_started, or node_completed / node_failed with the duration since
 * the node started (the old row's updated_at, read before the update) and
 * the truncated error or a SQL step's row count, never the result itself.
 *
 * The buffer is written by statements of up to GROUP_MAX writes
 * each (a chain step ends its node and its parent and starts the next; a
 * wrapper node adds its own start and end): one execution per group
 * instead of one per node, which is most of what a wrapper node around a
 * step cost (issue 17).  Their text is made here, one per group size, and
 * their plans kept like the store's.  In a group each node is its own
 * UPDATE by the whole primary key (instance_id = $1 AND id = $2), so
 * every plan of it finds one row by one index lookup.  Two earlier forms
 * let a generic plan made while df.nodes was small or had no statistics
 * (a fresh cluster) read every node of the instance for each write,
 * which made wide JOINs quadratic: the ids in an array parameter (id =
 * ANY($2), issue 22), and then the ids as a list (instance_id = $1 AND id
 * IN ($2, $8, ...)), where the planner may search the primary key by its
 * first column alone and apply the list as a filter, a path it keeps
 * because it returns rows in index order.  A 5,000-branch fan-out took
 * 6.6 ms per branch that way, 0.9 ms now (bench/run --widths on fresh
 * clusters).
 *
 * Locks: the rows of the instance whose runs row the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/spi.h"
#include "engine/store.h"
#include "engine/store_stmt.h"

#define MAX_NODE_WRITES 32

typedef struct NodeWrite
{
	char  id[PGD_ID_LEN + 1];
	char *scope;
	bool  done; /* else: started */
	bool  ok;
	char *result;
	int	  attempt;
	char *detail; /* the error event detail (jsonb text) */
} NodeWrite;

static char		 pending_instance[PGD_ID_LEN + 1];
static NodeWrite pending[MAX_NODE_WRITES];
static int		 npending = 0;
static bool		 flushing = false;

/* The step task being run, so that its node's end event carries the attempt. */
static char current_node[PGD_ID_LEN + 1];
static int	current_attempt = 0;

/* Parameters of a write in a group statement: id, scope, state, result, attempt, detail. */
#define GROUP_MAX	 8
#define GROUP_ARGS	 6
#define GROUP_PARAMS (1 + GROUP_MAX * GROUP_ARGS)

static SPIPlanPtr group_plans[GROUP_MAX + 1];
static bool		  group_planned[GROUP_MAX + 1]; /* pgd_spi_run_kept */

/*
 * The text of the statement that writes k nodes ($1: the instance): one
 * UPDATE of each node by its whole primary key, each reading the row's
 * old updated_at (the statement's snapshot sees the row as it was), and
 * one INSERT of their events in the order of the writes.
 */
static char *
group_sql(int k)
{
	StringInfoData s;
	int			   i;

	initStringInfo(&s);
	appendStringInfoString(&s, "WITH ");
	for (i = 0; i < k; i++)
	{
		int b = 2 + i * GROUP_ARGS;

		appendStringInfo(&s,
						 "%su%d AS (UPDATE df.nodes n SET "
						 " status = CASE $%d WHEN 'r' THEN 'running' WHEN 'c' THEN 'completed' ELSE 'failed' END, "
						 " result = CASE $%d WHEN 'r' THEN NULL WHEN 'c' THEN $%d::pg_catalog.jsonb "
						 "  ELSE pg_catalog.to_jsonb($%d) END, "
						 " status_details = pg_catalog.jsonb_build_object('execution_id', $%d), "
						 " updated_at = pg_catalog.now() "
						 "FROM (SELECT o.updated_at FROM df.nodes o WHERE o.instance_id OPERATOR(pg_catalog.=) $1 "
						 " AND o.id OPERATOR(pg_catalog.=) $%d) o "
						 "WHERE n.instance_id OPERATOR(pg_catalog.=) $1 AND n.id OPERATOR(pg_catalog.=) $%d "
						 "RETURNING %d AS ord, n.id, n.result, $%d AS st, $%d AS scope, $%d AS att, "
						 " $%d AS det, o.updated_at AS old)",
						 i > 0 ? ", " : "", i + 1, b + 2, b + 2, b + 3, b + 3,
						 b + 1, b, b, i + 1, b + 2, b + 1, b + 4, b + 5);
	}
	appendStringInfoString(
		&s,
		" INSERT INTO df_internal.events "
		"(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
		"SELECT $1, CASE u.st WHEN 'r' THEN 'node_started' WHEN 'c' THEN 'node_completed' "
		" ELSE 'node_failed' END, u.id, u.scope, "
		"CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN NULLIF(u.att, 0) END, "
		"CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN "
		" GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
		" OPERATOR(pg_catalog.-) u.old) OPERATOR(pg_catalog.*) 1000)::bigint) END, "
		"CASE u.st WHEN 'r' THEN NULL WHEN 'f' THEN u.det::pg_catalog.jsonb "
		" ELSE CASE WHEN pg_catalog.jsonb_typeof(u.result OPERATOR(pg_catalog.->) 'row_count') "
		" OPERATOR(pg_catalog.=) 'number' "
		" THEN pg_catalog.jsonb_build_object('row_count', u.result OPERATOR(pg_catalog.->) 'row_count') "
		" END END FROM (");
	for (i = 0; i < k; i++)
		appendStringInfo(&s, "%sSELECT * FROM u%d", i > 0 ? " UNION ALL " : "",
						 i + 1);
	appendStringInfoString(&s, ") u ORDER BY u.ord");
	return s.data;
}

static SPIPlanPtr
group_plan(int k)
{
	Oid		   types[GROUP_PARAMS];
	SPIPlanPtr plan;
	char	  *sql;
	int		   i;

	if (group_plans[k] != NULL)
		return group_plans[k];
	types[0] = TEXTOID;
	for (i = 0; i < k; i++)
	{
		int b = 1 + i * GROUP_ARGS;

		types[b] = types[b + 1] = types[b + 2] = types[b + 3] = TEXTOID;
		types[b + 4] = INT4OID;
		types[b + 5] = TEXTOID;
	}
	sql = group_sql(k);
	plan = SPI_prepare_cursor(sql, 1 + k * GROUP_ARGS, types,
							  CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR,
			 "could not prepare the engine statement \"%d node writes\": %s",
			 k, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR,
			 "could not keep the plan of the engine statement \"%d node writes\"",
			 k);
	pfree(sql);
	group_plans[k] = plan;
	return plan;
}

/* The arguments of write w at values[b..b+5] ('r'unning, 'c'ompleted, 'f'ailed). */
static void
write_args(const NodeWrite *w, Datum *values, char *nulls, int b)
{
	values[b] = pgd_text_datum(w->id);
	values[b + 1] = pgd_text_datum(w->scope);
	values[b + 2] = pgd_text_datum(!w->done ? "r" : w->ok ? "c" : "f");
	values[b + 3] = w->result ? pgd_text_datum(w->result) : (Datum) 0;
	nulls[b + 3] = w->result ? ' ' : 'n';
	values[b + 4] = Int32GetDatum(w->attempt);
	values[b + 5] = w->detail ? pgd_text_datum(w->detail) : (Datum) 0;
	nulls[b + 5] = w->detail ? ' ' : 'n';
}

/* Writes ws[0..k-1] in one group statement. */
static void
write_group(const NodeWrite *ws, int k)
{
	Datum values[GROUP_PARAMS];
	char  nulls[GROUP_PARAMS];
	int	  i, rc;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = pgd_text_datum(pending_instance);
	for (i = 0; i < k; i++)
		write_args(&ws[i], values, nulls, 1 + i * GROUP_ARGS);
	rc = pgd_spi_run_kept(group_plan(k), &group_planned[k], values, nulls);
	if (rc < 0)
		elog(ERROR, "engine statement \"%d node writes\" failed: %s", k,
			 SPI_result_code_string(rc));
}

void
store_flush_node_writes(void)
{
	int n = npending;
	int i;

	if (n == 0 || flushing)
		return;
	npending = 0;
	flushing = true;
	PG_TRY();
	{
		for (i = 0; i < n; i += GROUP_MAX)
			write_group(&pending[i], Min(GROUP_MAX, n - i));
	}
	PG_FINALLY();
	{
		flushing = false;
	}
	PG_END_TRY();
}

void
pgd_store_flush(void)
{
	store_flush_node_writes();
}

static int
current_attempt_of(const char *node_id)
{
	if (current_node[0] != '\0' && strcmp(node_id, current_node) == 0)
		return current_attempt;
	return 0;
}

static void
buffer_node_write(const char *instance_id, const char *node_id,
				  const char *scope, bool done, PgdOutcome outcome)
{
	NodeWrite *w;
	int		   i;

	if (npending > 0 && strcmp(pending_instance, instance_id) != 0)
		store_flush_node_writes();
	for (i = 0; i < npending; i++)
		if (strcmp(pending[i].id, node_id) == 0)
		{
			store_flush_node_writes();
			break;
		}
	if (npending == MAX_NODE_WRITES)
		store_flush_node_writes();

	strlcpy(pending_instance, instance_id, sizeof(pending_instance));
	w = &pending[npending++];
	strlcpy(w->id, node_id, sizeof(w->id));
	w->scope = MemoryContextStrdup(TopTransactionContext, scope);
	w->done = done;
	w->ok = outcome.ok;
	w->result = done && outcome.result ?
		MemoryContextStrdup(TopTransactionContext, outcome.result) :
		NULL;
	w->attempt = done ? current_attempt_of(node_id) : 0;
	w->detail = done && !outcome.ok ?
		MemoryContextStrdup(TopTransactionContext,
							pgd_event_error_detail(outcome)) :
		NULL;
}

/* The node starts in scope (its node_started event goes with the update). */
void
pgd_store_node_running(const char *instance_id, const char *node_id,
					   const char *scope)
{
	PgdOutcome none = {true, NULL};

	buffer_node_write(instance_id, node_id, scope, false, none);
}

/* The node ends in scope with outcome. */
void
pgd_store_node_done(const char *instance_id, const char *node_id,
					const char *scope, PgdOutcome outcome)
{
	buffer_node_write(instance_id, node_id, scope, true, outcome);
}

/* The attempt that node_id's end event records (NULL node_id: none). */
void
pgd_store_set_attempt(const char *node_id, int attempt)
{
	if (node_id == NULL)
	{
		current_node[0] = '\0';
		current_attempt = 0;
		return;
	}
	strlcpy(current_node, node_id, sizeof(current_node));
	current_attempt = attempt;
}

/*
 * A later step of a batch was rolled back to its subtransaction's start
 * (issue 14): the node writes it buffered went with it.
 */
void
pgd_store_forget_node_writes(void)
{
	npending = 0;
	flushing = false;
}

/* ---------------------------------------------------------------------
 * The commit hook of the node buffer
 * ---------------------------------------------------------------------
 */

static void
store_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* a transition whose node updates were never written must not commit */
			if (npending > 0)
				elog(ERROR, "node updates were not written before commit");
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			npending = 0;
			flushing = false;
			break;
		default:
			break;
	}
}

void
pgd_store_register_xact_callback(void)
{
	RegisterXactCallback(store_xact_callback, NULL);
	store_register_task_callbacks();
}
