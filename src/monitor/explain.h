/*-------------------------------------------------------------------------
 *
 * explain.h
 *	  Rendering a workflow graph as the indented text tree of df.explain.
 *
 * The renderer is shared by the dry run (a graph, DSL text or SQL text) and
 * the live form (an instance): the live form passes a marker callback that
 * returns the status icon of a node (" ✓", " ✗", ...), and only then are
 * node lines right-padded so that the markers line up.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_EXPLAIN_H
#define PG_DURABLE_EXPLAIN_H

#include "postgres.h"

#include "graph/graph.h"

/*
 * Status marker of one node, e.g. "✓" (without the leading space), or NULL
 * for none.  Called once for each node that has a line of its own (an
 * unnamed THEN is flattened into its chain and has none).
 */
typedef const char *(*DfExplainMarkerFn)(const DfNode *node, void *arg);

/*
 * The tree of a valid graph (df_graph_validate returned NULL), lines joined
 * by '\n', no trailing newline.  marker may be NULL.  The result is
 * palloc'd in CurrentMemoryContext.
 */
extern char *df_explain_graph(const DfNode *root, DfExplainMarkerFn marker,
							  void *marker_arg);

/*
 * The inferred status of a node of a live instance ("completed", "failed",
 * "running", "pending", "skipped"), or NULL when there is none.
 */
typedef const char *(*DfExplainStatusFn)(const DfNode *node, void *arg);

/*
 * explain_dot.c: the graph as a Graphviz digraph (df.explain(…, format =>
 * 'dot')), nodes coloured by status when status is given; title, when not
 * NULL, labels the picture.  palloc'd in CurrentMemoryContext.
 */
extern char *df_explain_dot(const DfNode *root, DfExplainStatusFn status,
							void *arg, const char *title);

#endif /* PG_DURABLE_EXPLAIN_H */
