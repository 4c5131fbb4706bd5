/*-------------------------------------------------------------------------
 *
 * persisted.h
 *	  Reading the persisted form of a graph (persisted.c): df.nodes keeps
 *	  left and right children in columns, and the other links in the query
 *	  column as JSON.
 *
 * An IF or LOOP keeps its condition as {"condition_node":"<id>"}, a JOIN
 * its branches beyond the second as {"extra_nodes":["<id>",...]}.  The
 * engine's graph cache and the monitoring functions both turn rows back
 * into a tree with these links.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_PERSISTED_H
#define PG_DURABLE_PERSISTED_H

#include "postgres.h"

#include "graph/graph.h"

/* The ids a persisted node links to through its query config. */
typedef struct DfConfigLinks
{
	const char	*condition_id; /* IF/LOOP condition, or NULL */
	int			 nextras;	   /* JOIN branches after the second */
	const char **extra_ids;
} DfConfigLinks;

/*
 * The links in the config of a node of this type (none for a type that
 * has none, or when query is NULL or not a JSON object).  An entry of
 * extra_nodes that is not a string is left out.
 */
extern void df_config_links(DfNodeType type, const char *query,
							DfConfigLinks *links);

#endif /* PG_DURABLE_PERSISTED_H */
