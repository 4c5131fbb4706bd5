/*-------------------------------------------------------------------------
 *
 * monitor.h
 *	  Reading instances as their owner sees them: the node rows of an
 *	  instance, the status inferred for each node, and what the monitoring
 *	  functions and the live form of df.explain show of them.
 *
 * Everything here reads df.instances and df.nodes as the calling role, so
 * row-level security decides what exists: an instance the caller may not
 * see is reported exactly like one that does not exist.  Only df.metrics
 * reads engine-wide, with the bootstrap superuser's privileges.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_MONITOR_H
#define PG_DURABLE_MONITOR_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/timestamp.h"

#include "graph/graph.h"

/*
 * What df.list_instances, df.instance_info and friends call function_name:
 * the reference names its orchestration this way, and scripts compare it.
 */
#define PGD_FUNCTION_NAME "pg_durable::orchestration::execute-function-graph"

/* One df.nodes row, linked to its children. */
typedef struct PgdNodeRow
{
	char	   *id;
	DfNodeType	type;
	char	   *node_type;
	char	   *query;
	char	   *result_name;
	char	   *left_id;
	char	   *right_id;
	char	   *status;			/* physical status */
	char	   *result;			/* result::text, NULL if none */
	char	   *status_details; /* status_details::text, NULL if none */
	char	   *stamp;			/* status_details->>'execution_id' */
	TimestampTz updated_at;
	bool		updated_at_null;

	/* links, indexes into the row array (-1 when absent) */
	int	 left;
	int	 right;
	int	 condition;
	int	 nextras;
	int *extras;

	/* filled by pgd_infer_statuses */
	const char *inferred;	   /* pending|running|completed|failed|skipped */
	int			from_ancestor; /* index of the driving ancestor, or -1 */
} PgdNodeRow;

/* An instance as its owner sees it. */
typedef struct PgdInstanceView
{
	char	   *id;
	char	   *label;
	char	   *status;
	char	   *root_id;
	char	   *output; /* PGD_SQL_OUTPUT, or NULL */
	int			root;	/* index of the root row, -1 if missing */
	int			nnodes;
	PgdNodeRow *nodes;
	int			norder; /* rows in tree order (pre-order walk) */
	int		   *order;
} PgdInstanceView;

/*
 * infer.c: the inferred status of every node (reference §1.5).  A pure
 * function of the rows and their links; sets inferred, from_ancestor and
 * the tree order.
 */
extern void pgd_infer_statuses(PgdInstanceView *view);

/*
 * monitor_load.c: the instance and its node rows as the caller sees them,
 * links resolved and statuses inferred, allocated in CurrentMemoryContext;
 * NULL if the caller cannot see the instance.  Opens and closes its own
 * SPI connection.
 */
extern PgdInstanceView *pgd_load_instance_view(const char *instance_id);

/*
 * monitor_load.c, for the OTLP exporter (inside SPI, as the caller): the
 * views of n distinct instances in two statements, views[k] allocated in
 * cxts[k] (NULL when the instance is not there); links resolved, statuses
 * not inferred.  Only what spans use is read: no output, no node status,
 * status_details or updated_at, the result of HTTP nodes only.
 */
extern void pgd_load_instance_views(int n, const char *const *ids,
									PgdInstanceView **views,
									MemoryContext	 *cxts);

/*
 * explain_map.c: the query of MAP node map_id as df.explain(id) shows it,
 * with "items" (how many children df.map made, and their states) added.
 */
extern char *pgd_explain_map_config(const char *instance_id,
									const char *map_id, const char *query);

/*
 * visibility.c: when the caller can see the instance in df.instances, run
 * read(instance_id, arg) inside SPI with the bootstrap superuser's
 * privileges (for df_internal's tables) and return true; else false.
 */
typedef void (*PgdEngineRead)(const char *instance_id, void *arg);
extern bool pgd_read_as_engine(const char *instance_id, PgdEngineRead read,
							   void *arg);

/*
 * history.c: the relation to read the history from, with an alias after
 * it: df_internal.history_events (one row per event, a start written in
 * its end's row as sub 0), or under a schema without the view (0.3.0,
 * until ALTER EXTENSION UPDATE) the events with sub 1.
 */
extern const char *pgd_history_events(void);
/* the condition a reader of the events with ids in ($n, $m] adds */
extern char *pgd_history_window(int n, int m);

/*
 * visibility.c: put the first ncols columns of every row of SPI_tuptable
 * into the materialized result of a set-returning function.
 */
extern void pgd_spi_rows_to_srf(FunctionCallInfo fcinfo, int ncols);

/* SQL expressions shared by the monitoring queries (i = df.instances, n = its root node). */
#define PGD_SQL_EXECUTION_COUNT \
	"COALESCE((pg_catalog.regexp_match(n.status_details OPERATOR(pg_catalog.->>) 'execution_id', " \
	"'::([0-9]{1,18})$'))[1]::bigint, 1)"
#define PGD_SQL_OUTPUT \
	"CASE WHEN i.status OPERATOR(pg_catalog.=) 'completed' THEN n.result::text " \
	"WHEN i.status OPERATOR(pg_catalog.=) 'failed' " \
	"AND n.status_details OPERATOR(pg_catalog.?) 'compensation' THEN " \
	PGD_SQL_COMPENSATION_TEXT " " \
	"WHEN i.status OPERATOR(pg_catalog.=) 'failed' THEN " \
	"CASE WHEN pg_catalog.jsonb_typeof(n.result) OPERATOR(pg_catalog.=) 'string' " \
	"THEN n.result OPERATOR(pg_catalog.#>>) '{}' ELSE n.result::text END " \
	"WHEN i.status OPERATOR(pg_catalog.=) 'compensated' THEN " \
	"COALESCE(CASE WHEN n.status OPERATOR(pg_catalog.=) 'completed' THEN n.result::text END, " \
	PGD_SQL_COMPENSATION_TEXT ") END"

/*
 * What a compensation did, from the root's status_details "compensation"
 * ({error, undos, failures}): "compensation of <node> failed: <error>"
 * when an undo failed, else "compensated", then the failure it undid and
 * how many undos ran (df.compensations lists them).
 */
#define PGD_SQL_COMPENSATION_TEXT \
	"pg_catalog.format('%s; the failure it undid: %s; undos that ran: %s', " \
	"COALESCE('compensation of ' OPERATOR(pg_catalog.||) " \
	"(n.status_details OPERATOR(pg_catalog.#>>) '{compensation,failures,0,node}') OPERATOR(pg_catalog.||) " \
	"' failed: ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.#>>) '{compensation,failures,0,error}'), " \
	"'compensated'), " \
	"COALESCE(n.status_details OPERATOR(pg_catalog.#>>) '{compensation,error}', 'none recorded'), " \
	"COALESCE(pg_catalog.jsonb_array_length(n.status_details OPERATOR(pg_catalog.#>) '{compensation,undos}'), 0))"
#define PGD_SQL_ROOT_JOIN \
	"df.instances i LEFT JOIN df.nodes n " \
	"ON n.instance_id OPERATOR(pg_catalog.=) i.id AND n.id OPERATOR(pg_catalog.=) i.root_node"

#endif /* PG_DURABLE_MONITOR_H */
