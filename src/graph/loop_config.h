/*-------------------------------------------------------------------------
 *
 * loop_config.h
 *	  The settings of a LOOP node, parsed and checked (loop_config.c).
 *
 * A LOOP built without settings has no query, as in the reference's
 * JSON.  df.loop(..., continue_on_failure => true) writes the query
 * {"continue_on_failure":true}; once persisted, a loop with a
 * while-condition also keeps its link {"condition_node": "<id>"} there
 * (graph/persisted.c).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_LOOP_CONFIG_H
#define PG_DURABLE_LOOP_CONFIG_H

#include "postgres.h"

typedef struct DfLoopConfig
{
	/* a failed body run starts the next iteration instead of failing */
	bool continue_on_failure;
} DfLoopConfig;

/*
 * Parse a LOOP node's query (NULL: the defaults); NULL when fine, else what
 * is wrong.  persisted: the query is a df.nodes row's, which may also hold
 * the condition_node link.
 */
extern char *df_loop_parse(const char *query, bool persisted,
						   DfLoopConfig *cfg);

/* The query a LOOP node with these settings is written with (NULL: none). */
extern char *df_loop_query(const DfLoopConfig *cfg);

#endif /* PG_DURABLE_LOOP_CONFIG_H */
