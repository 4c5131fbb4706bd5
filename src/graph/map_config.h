/*-------------------------------------------------------------------------
 *
 * map_config.h
 *	  The settings of node MAP, df.map's dynamic fan-out (docs/design/map.md),
 *	  checked and parsed in one place (map_config.c): df.start's validation,
 *	  the graph cache and df.map's builder use it.
 *
 * A MAP node has the SQL step whose rows it maps over in left_node, the
 * step template run once per row in right_node, and {"max_concurrent": n}
 * (n >= 1) in query, or no query for no cap: one copy of the step per row.
 * Or, in lanes mode, {"lanes": n, "collect": b, "tolerated_failures": k}:
 * n copies of the step (the lanes), each running the items one after
 * another, the rows kept in a table rather than in the query's result.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_MAP_CONFIG_H
#define PG_DURABLE_MAP_CONFIG_H

#include "postgres.h"

#include "graph/graph.h"

/* The largest max_concurrent (the graph node limit: no more children can exist). */
#define DF_MAP_MAX_CONCURRENT DF_MAX_NODES

/* The lanes a df.map in lanes mode has when max_concurrent is not given. */
#define DF_MAP_DEFAULT_LANES 32

/* A MAP node's settings. */
typedef struct DfMapSettings
{
	int	 max_concurrent;	 /* children (or lanes) at once, 0 for no cap */
	bool lanes;				 /* lanes mode */
	bool collect;			 /* lanes mode: the result is the items' results */
	int	 tolerated_failures; /* lanes mode: failed items skipped */
} DfMapSettings;

/*
 * Parse a MAP node's query: NULL when it is valid, else what is wrong with
 * it.
 */
extern char *df_map_settings(const char *query, DfMapSettings *s);

/* The same, giving only max_concurrent (or the lanes; 0 for no cap). */
extern char *df_map_parse(const char *query, int *max_concurrent);

/* What is wrong with MAP node n (not its children), or NULL. */
extern char *df_map_check(const DfNode *n);

#endif /* PG_DURABLE_MAP_CONFIG_H */
