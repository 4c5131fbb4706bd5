/*-------------------------------------------------------------------------
 *
 * map_items.c
 *	  The engine store's functions for node MAP, df.map's dynamic fan-out
 *	  (docs/design/map.md; store.h).
 *
 * The children of a MAP are real nodes: when its query's rows are known,
 * the transition inserts one copy of the step template per row into
 * df.nodes (fresh ids, the template's links rewritten), lists them in
 * df_internal.map_items (map node, item number, child root) and gives each
 * child its row as the named result "item" in the child's scope.  The
 * counters of a running MAP execution (how many children there are, how
 * many were started, how many finished) are a df_internal.maps row.  The
 * graph cache reads map_items to link the children to their MAP.
 *
 * Every statement here runs after the buffered node writes (statements.c) are
 * written, like the store's own.
 *
 * Locks: rows of the instance whose runs row the caller holds; maps rows
 * are changed only under that lock, so counting a child's end is exactly
 * once (it commits with the child's last step) and waits for nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

#define T  TEXTOID
#define TA TEXTARRAYOID

/* The statements of df.map's rows (statements.c runs them: store_exec). */
enum
{
	MAP_ITEMS_LOAD,
	MAP_NODES_ADD,
	MAP_ITEMS_ADD,
	MAP_ITEMS_BIND,
	MAP_OPEN,
	MAP_CHILD_DONE,
	MAP_STARTED,
	MAP_CLOSE,
	MAP_DROP_RESULTS,
	MAP_RESULTS,
	MAP_COUNTS,
	MAP_ROWS_ADD,
	MAP_ROW_BIND,
	MAP_ROW_KEEP,
	MAP_ROW_DROP,
	MAP_LANE_COUNTERS,
	MAP_LANE_COUNTERS_WRITE,
	MAP_ITEM_RESULTS_DROP,
	MAP_ROWS_SIZE,
	MAP_ROWS_RESULTS,
	MAP_ROWS_FAILURES,
	MAP_ROWS_DROP,
	MAP_STMTS
};

static const PgdStmtDef map_stmts[MAP_STMTS] = {
	[MAP_ITEMS_LOAD] =
		{"an instance's MAP children, by map and item",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT map_node, item, node_id FROM df_internal.map_items "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "ORDER BY map_node, item",
		 1,
		 {T}},
	[MAP_NODES_ADD] =
		{"the copies of a MAP's step, as nodes of its instance",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "INSERT INTO df.nodes (instance_id, submitted_by, database, id, node_type, "
		 "query, result_name, left_node, right_node) "
		 "SELECT m.instance_id, m.submitted_by, m.database, u.* "
		 "FROM df.nodes m, ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4), "
		 "pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), "
		 "pg_catalog.unnest($8)) AS u "
		 "WHERE m.instance_id OPERATOR(pg_catalog.=) $1 AND m.id OPERATOR(pg_catalog.=) $2",
		 8,
		 {T, T, TA, TA, TA, TA, TA, TA}},
	[MAP_ITEMS_ADD] =
		{"the items of the copies just added",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.map_items (instance_id, map_node, item, node_id) "
		 "SELECT $1, $2, $3 OPERATOR(pg_catalog.+) (u.ord OPERATOR(pg_catalog.-) 1)::int, u.id "
		 "FROM pg_catalog.unnest($4) WITH ORDINALITY AS u(id, ord)",
		 4,
		 {T, T, INT4OID, TA}},
	[MAP_ITEMS_BIND] =
		{"each item bound as the named result item in its child's scope",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "INSERT INTO df_internal.results AS r (instance_id, scope, name, value) "
		 "SELECT $1, u.s, 'item', u.v::pg_catalog.json "
		 "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS u(s, v) "
		 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
		 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
		 3,
		 {T, TA, TA}},
	[MAP_OPEN] =
		{"the counters of a MAP execution",
		 FLUSH_NODE_WRITES | FLUSH_MAP_COUNTS, REACH_INSTANCE,
		 "INSERT INTO df_internal.maps (instance_id, node_id, scope, total, started) "
		 "VALUES ($1, $2, $3, $4::int, $5::int) "
		 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE "
		 "SET total = EXCLUDED.total, started = EXCLUDED.started, finished = 0, failed = 0",
		 5,
		 {T, T, T, T, T}},
	[MAP_CHILD_DONE] =
		{"a MAP child ended: one more finished",
		 FLUSH_NODE_WRITES | FLUSH_MAP_COUNTS, REACH_INSTANCE,
		 "UPDATE df_internal.maps SET finished = finished OPERATOR(pg_catalog.+) 1 "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 "
		 "RETURNING total, started, finished",
		 3,
		 {T, T, T}},
	[MAP_STARTED] =
		{"how many children of a MAP execution started",
		 FLUSH_NODE_WRITES | FLUSH_MAP_COUNTS, REACH_INSTANCE,
		 "UPDATE df_internal.maps SET started = $4::int "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 4,
		 {T, T, T, T}},
	[MAP_CLOSE] =
		{"an ended MAP execution's counters",
		 FLUSH_NODE_WRITES | FLUSH_MAP_COUNTS, REACH_INSTANCE,
		 "DELETE FROM df_internal.maps "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[MAP_DROP_RESULTS] =
		{"the named results of some MAP children's scopes",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 /* a child's scope is "<scope>::<child root id>::<gen>": one pass over the instance's */
		 "DELETE FROM df_internal.results "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND pg_catalog.starts_with(scope, $2 OPERATOR(pg_catalog.||) '::') "
		 "AND pg_catalog.split_part(pg_catalog.substr(scope, "
		 "pg_catalog.length($2) OPERATOR(pg_catalog.+) 3), '::', 1) "
		 "OPERATOR(pg_catalog.=) ANY ($3)",
		 3,
		 {T, T, TA}},
	[MAP_RESULTS] =
		{"the MAP children's results as one array, in item order",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT COALESCE(pg_catalog.jsonb_agg("
		 "COALESCE(c.result, 'null'::jsonb) ORDER BY u.ord), '[]')::text "
		 "FROM pg_catalog.unnest($2) WITH ORDINALITY AS u(id, ord) "
		 "LEFT JOIN df.nodes c ON c.instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND c.id OPERATOR(pg_catalog.=) u.id",
		 2,
		 {T, TA}},
	[MAP_COUNTS] =
		{"the counters of a MAP execution, for monitoring",
		 FLUSH_MAP_COUNTS, REACH_INSTANCE,
		 "SELECT total, started, finished FROM df_internal.maps "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[MAP_ROWS_ADD] =
		{"a chunk of the rows of a MAP's query, in lanes mode",
		 0, REACH_INSTANCE,
		 /* run inside the user's statement, under its settings: every name qualified */
		 "INSERT INTO df_internal.map_rows (instance_id, node_id, scope, item, value) "
		 "SELECT $1, $2, $3, ($4::pg_catalog.int8 OPERATOR(pg_catalog.+) r.ord "
		 "OPERATOR(pg_catalog.-) 1)::pg_catalog.int4, r.v "
		 "FROM pg_catalog.jsonb_array_elements($5::pg_catalog.jsonb OPERATOR(pg_catalog.->) 'rows') "
		 "WITH ORDINALITY AS r(v, ord)",
		 5,
		 {T, T, T, T, T}},
	[MAP_ROW_BIND] =
		{"a row of a MAP in lanes mode bound as the named result item in its lane's scope",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "INSERT INTO df_internal.results AS r (instance_id, scope, name, value) "
		 "SELECT $1, $5, 'item', m.value::pg_catalog.json FROM df_internal.map_rows m "
		 "WHERE m.instance_id OPERATOR(pg_catalog.=) $1 AND m.node_id OPERATOR(pg_catalog.=) $2 "
		 "AND m.scope OPERATOR(pg_catalog.=) $3 AND m.item OPERATOR(pg_catalog.=) $4::int "
		 "ON CONFLICT (instance_id, scope, name) DO UPDATE "
		 "SET value = EXCLUDED.value, seq = EXCLUDED.seq",
		 5,
		 {T, T, T, T, T}},
	[MAP_ROW_KEEP] =
		{"a done item of a MAP in lanes mode: its result or its error",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.map_rows SET result = $5::jsonb, failed = $6::boolean "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 AND item OPERATOR(pg_catalog.=) $4::int",
		 6,
		 {T, T, T, T, T, T}},
	[MAP_ROW_DROP] =
		{"a done item of a MAP in lanes mode whose result is not kept",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.map_rows "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 AND item OPERATOR(pg_catalog.=) $4::int",
		 4,
		 {T, T, T, T}},
	[MAP_LANE_COUNTERS] =
		{"the counters of a MAP execution in lanes mode",
		 0, REACH_INSTANCE,
		 "SELECT total, started, finished, failed FROM df_internal.maps "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[MAP_LANE_COUNTERS_WRITE] =
		{"the counters of a MAP execution in lanes mode, counted",
		 0, REACH_INSTANCE,
		 "UPDATE df_internal.maps SET started = $4::int, finished = $5::int, failed = $6::int "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 6,
		 {T, T, T, T, T, T}},
	[MAP_ITEM_RESULTS_DROP] =
		{"the named results of an ended item's scope, of a MAP in lanes mode",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "DELETE FROM df_internal.results "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2",
		 2,
		 {T, T}},
	[MAP_ROWS_SIZE] =
		{"the size of the kept results of a MAP in lanes mode",
		 0, REACH_INSTANCE,
		 "SELECT COALESCE(pg_catalog.sum(pg_catalog.octet_length("
		 "COALESCE(result, 'null'::jsonb)::text) OPERATOR(pg_catalog.+) 1), 0)::bigint "
		 "FROM df_internal.map_rows "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[MAP_ROWS_RESULTS] =
		{"the kept results of a MAP in lanes mode as one array, in item order",
		 0, REACH_INSTANCE,
		 "SELECT COALESCE(pg_catalog.jsonb_agg(COALESCE(result, 'null'::jsonb) ORDER BY item), "
		 "'[]')::text FROM df_internal.map_rows "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[MAP_ROWS_FAILURES] =
		{"the failed items of a MAP in lanes mode, in item order",
		 0, REACH_INSTANCE,
		 "SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object("
		 "'item', item OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.||) result ORDER BY item), "
		 "'[]')::text FROM df_internal.map_rows "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3 AND failed",
		 3,
		 {T, T, T}},
	[MAP_ROWS_DROP] =
		{"the rows of an ended MAP execution in lanes mode",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.map_rows "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 AND node_id OPERATOR(pg_catalog.=) $2 "
		 "AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
};

#undef T
#undef TA

static PgdStmtPlan map_plans[MAP_STMTS];

#define MAP_RUN(s, ...) STORE_EXEC(map_stmts, map_plans, s, __VA_ARGS__)

int
pgd_store_map_items_load(const char *instance_id, char ***maps, int **items,
						 char ***children)
{
	int n;

	n = MAP_RUN(MAP_ITEMS_LOAD, instance_id);
	*maps = palloc(sizeof(char *) * Max(n, 1));
	*items = palloc(sizeof(int) * Max(n, 1));
	*children = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		(*maps)[i] = pgd_spi_getstring(i, 1);
		(*items)[i] = atoi(pgd_spi_getstring(i, 2));
		(*children)[i] = pgd_spi_getstring(i, 3);
	}
	return n;
}

void
pgd_store_map_add(const char *instance_id, const char *map_id, int first_item,
				  const PgdMapCopy *copy)
{
	Datum values[8];
	Datum ivalues[4];
	int	  nest;

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(map_id);
	values[2] =
		store_text_array(copy->nnodes, (const char *const *) copy->ids);
	values[3] =
		store_text_array(copy->nnodes, (const char *const *) copy->types);
	values[4] =
		store_text_array(copy->nnodes, (const char *const *) copy->queries);
	values[5] = store_text_array(copy->nnodes,
								 (const char *const *) copy->result_names);
	values[6] =
		store_text_array(copy->nnodes, (const char *const *) copy->lefts);
	values[7] =
		store_text_array(copy->nnodes, (const char *const *) copy->rights);

	/*
	 * The root of an instance is among its nodes already: the nodes side of
	 * the root-node check may skip these rows, as for df.start's (start.c).
	 */
	nest = NewGUCNestLevel();
	(void) set_config_option("pg_durable.start_inserts_nodes", "on", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	store_exec(&map_stmts[MAP_NODES_ADD], &map_plans[MAP_NODES_ADD], values,
			   NULL);
	AtEOXact_GUC(true, nest);

	ivalues[0] = pgd_text_datum(instance_id);
	ivalues[1] = pgd_text_datum(map_id);
	ivalues[2] = Int32GetDatum(first_item);
	ivalues[3] =
		store_text_array(copy->nitems, (const char *const *) copy->roots);
	store_exec(&map_stmts[MAP_ITEMS_ADD], &map_plans[MAP_ITEMS_ADD], ivalues,
			   NULL);
}

void
pgd_store_map_items_bind(const char *instance_id, int n,
						 const char *const *scopes, const char *const *items)
{
	Datum values[3];

	values[0] = pgd_text_datum(instance_id);
	values[1] = store_text_array(n, scopes);
	values[2] = store_text_array(n, items);
	store_exec(&map_stmts[MAP_ITEMS_BIND], &map_plans[MAP_ITEMS_BIND], values,
			   NULL);
}

void
pgd_store_map_open(const char *instance_id, const char *map_id,
				   const char *scope, int total, int started)
{
	MAP_RUN(MAP_OPEN, instance_id, map_id, scope, psprintf("%d", total),
			psprintf("%d", started));
}

bool
pgd_store_map_child_done(const char *instance_id, const char *map_id,
						 const char *scope, int *total, int *started,
						 int *finished)
{
	if (MAP_RUN(MAP_CHILD_DONE, instance_id, map_id, scope) != 1)
		return false;
	*total = atoi(pgd_spi_getstring(0, 1));
	*started = atoi(pgd_spi_getstring(0, 2));
	*finished = atoi(pgd_spi_getstring(0, 3));
	return true;
}

void
pgd_store_map_started(const char *instance_id, const char *map_id,
					  const char *scope, int started)
{
	MAP_RUN(MAP_STARTED, instance_id, map_id, scope, psprintf("%d", started));
}

void
pgd_store_map_close(const char *instance_id, const char *map_id,
					const char *scope)
{
	MAP_RUN(MAP_CLOSE, instance_id, map_id, scope);
}

void
pgd_store_map_drop_results(const char *instance_id, const char *scope, int n,
						   const char *const *node_ids)
{
	Datum values[3];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(scope);
	values[2] = store_text_array(n, node_ids);
	store_exec(&map_stmts[MAP_DROP_RESULTS], &map_plans[MAP_DROP_RESULTS],
			   values, NULL);
}

char *
pgd_store_map_results(const char *instance_id, int n,
					  const char *const *node_ids)
{
	Datum values[2];

	values[0] = pgd_text_datum(instance_id);
	values[1] = store_text_array(n, node_ids);
	/* one JSON array, in item order: a child without a result gives null */
	if (store_exec(&map_stmts[MAP_RESULTS], &map_plans[MAP_RESULTS], values,
				   NULL) != 1)
		elog(ERROR, "the results of a MAP of instance %s could not be read",
			 instance_id);
	return pgd_spi_getstring(0, 1);
}

void
pgd_store_map_counts(const char *instance_id, const char *map_id,
					 const char *scope, int *total, int *started,
					 int *finished)
{
	*total = *started = *finished = -1;
	if (MAP_RUN(MAP_COUNTS, instance_id, map_id, scope) == 1)
	{
		*total = atoi(pgd_spi_getstring(0, 1));
		*started = atoi(pgd_spi_getstring(0, 2));
		*finished = atoi(pgd_spi_getstring(0, 3));
	}
}

void
pgd_store_map_rows_add(const char *instance_id, const char *map_id,
					   const char *scope, int64 first, const char *chunk)
{
	/* inside the query's statement (step_sql.c's row sink): a level of its own */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	MAP_RUN(MAP_ROWS_ADD, instance_id, map_id, scope,
			psprintf(INT64_FORMAT, first), chunk);
	SPI_finish();
}

bool
pgd_store_map_row_bind(const char *instance_id, const char *map_id,
					   const char *scope, int item, const char *item_scope)
{
	return MAP_RUN(MAP_ROW_BIND, instance_id, map_id, scope,
				   psprintf("%d", item), item_scope) == 1;
}

void
pgd_store_map_row_done(const char *instance_id, const char *map_id,
					   const char *scope, int item, const char *keep,
					   bool failed)
{
	if (keep == NULL)
		MAP_RUN(MAP_ROW_DROP, instance_id, map_id, scope, psprintf("%d", item));
	else
		MAP_RUN(MAP_ROW_KEEP, instance_id, map_id, scope, psprintf("%d", item),
				keep, failed ? "true" : "false");
}

/* A MAP's counters (total, started, finished, failed) into its row. */
static void
write_counters(const char *instance_id, const char *map_id, const char *scope,
			   const int c[4])
{
	MAP_RUN(MAP_LANE_COUNTERS_WRITE, instance_id, map_id, scope,
			psprintf("%d", c[1]), psprintf("%d", c[2]), psprintf("%d", c[3]));
}

/*
 * MAP counters held in memory.  In a batch (store_writes_held) the lanes
 * of a MAP count their rows' ends in an entry of this list, read from the
 * row at the first end: the row is written once when the batch ends
 * (pgd_store_write_node_writes), or before any statement that names
 * df_internal.maps (FLUSH_MAP_COUNTS), where each end updated it, a new
 * version of one row per row of the MAP, in one transaction.  Each end
 * releases the entry and adds the next one, so that a rolled-back
 * subtransaction's ends are undone with its entries (txn_buffer.c); an
 * ending instance's go, as its rows do.  A commit with one unwritten is
 * refused.
 */
static void
map_counts_write(void)
{
	int			  i = 0;
	PgdHeldEntry *h;

	while ((h = store_held_next(&store_held_map_counts, NULL, &i)) != NULL)
	{
		store_held_release(&store_held_map_counts, h);
		write_counters(h->instance_id, h->node_id, h->scope, h->counts);
	}
}

static void
map_counts_check_written(void)
{
	store_held_check_written(&store_held_map_counts, "MAP counters");
}

static void
map_counts_subxact_abort(SubTransactionId mySubid)
{
	store_held_subxact_abort(&store_held_map_counts, mySubid);
}

const PgdHeldOps store_map_counts_ops = {
	.write = map_counts_write,
	.check_written = map_counts_check_written,
	.subxact_abort = map_counts_subxact_abort,
};

void
store_drop_held_map_counts(const char *instance_id)
{
	store_held_drop(&store_held_map_counts, instance_id, NULL, NULL);
}

/*
 * A row of a MAP in lanes mode ended (failed or not): one more finished,
 * and the next row started unless none is left or more than tolerated
 * failed.  *next is the row to start, or -1.  The counters (total,
 * started, finished, failed) come from the batch's entry or the row, and
 * go back to an entry in a batch, to the row elsewhere.
 */
bool
pgd_store_map_lane_done(const char *instance_id, const char *map_id,
						const char *scope, bool failed, int tolerated,
						int *total, int *finished, int *nfailed, int *next)
{
	PgdHeldEntry *h =
		store_held_find(&store_held_map_counts, instance_id, map_id, scope);
	bool hold = store_writes_held() && store_held_fits(instance_id, map_id);
	int	 c[4];

	if (h != NULL)
	{
		memcpy(c, h->counts, sizeof(c));
		store_held_release(&store_held_map_counts, h);
	}
	else
	{
		if (MAP_RUN(MAP_LANE_COUNTERS, instance_id, map_id, scope) != 1)
			return false;
		for (int k = 0; k < 4; k++)
			c[k] = atoi(pgd_spi_getstring(0, k + 1));
	}
	c[2]++;
	c[3] += failed ? 1 : 0;
	*next = -1;
	if (c[1] < c[0] && c[3] <= tolerated)
		*next = c[1]++;
	*total = c[0];
	*finished = c[2];
	*nfailed = c[3];
	if (h != NULL || hold)
	{
		h = store_held_add(&store_held_map_counts, instance_id, map_id, scope,
						   "", NULL);
		memcpy(h->counts, c, sizeof(c));
	}
	else
		write_counters(instance_id, map_id, scope, c);
	return true;
}

void
pgd_store_map_item_results_drop(const char *instance_id, const char *item_scope)
{
	MAP_RUN(MAP_ITEM_RESULTS_DROP, instance_id, item_scope);
}

int64
pgd_store_map_rows_size(const char *instance_id, const char *map_id,
						const char *scope)
{
	MAP_RUN(MAP_ROWS_SIZE, instance_id, map_id, scope);
	return pg_strtoint64(pgd_spi_getstring(0, 1));
}

char *
pgd_store_map_rows_results(const char *instance_id, const char *map_id,
						   const char *scope, bool failures)
{
	MAP_RUN(failures ? MAP_ROWS_FAILURES : MAP_ROWS_RESULTS, instance_id,
			map_id, scope);
	return pgd_spi_getstring(0, 1);
}

void
pgd_store_map_rows_drop(const char *instance_id, const char *map_id,
						const char *scope)
{
	MAP_RUN(MAP_ROWS_DROP, instance_id, map_id, scope);
}
