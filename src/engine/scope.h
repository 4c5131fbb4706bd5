/*-------------------------------------------------------------------------
 *
 * scope.h
 *	  Execution-scope arithmetic (scope.c): the names of the scopes that
 *	  JOIN/RACE branches and loop bodies run in, and the way back up.
 *
 * A scope names one execution of a subtree (see types.h).  Scopes nest by
 * appending "::<node id>::<generation>"; stripping the last two parts
 * gives the enclosing scope.  A root loop does not nest: each iteration
 * replaces the root scope "<instance>::<generation>".
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SCOPE_H
#define PG_DURABLE_SCOPE_H

#include "postgres.h"

#include "engine/graph_cache.h"

/* "<instance>::<generation>": the scope of a root generation. */
extern char *pgd_root_scope(const char *instance_id, int generation);

/* The scope of a JOIN/RACE branch: "<scope>::<branch root id>::1". */
extern char *pgd_branch_scope(const PgdGraph *g, int branch,
							  const char *scope);

/* Does a child of node p run in a scope of its own below p's? */
extern bool pgd_opens_scope(const PgdGraph *g, int p);

/* The scope node's parent runs in, given node runs in scope. */
extern char *pgd_parent_scope(const PgdGraph *g, int node, const char *scope);

/* Strip the last "::<node id>::<generation>" of a nested scope. */
extern char *pgd_strip_scope(const char *scope);

/* Number of "::" separators: a root scope has one. */
extern int pgd_scope_depth(const char *scope);

/* The scope a loop's body runs in, for generation gen. */
extern char *pgd_loop_body_scope(const PgdGraph *g, int loop,
								 const char *loop_scope, int gen);

/* A loop that is the root restarts the whole instance each iteration. */
extern bool pgd_is_root_loop(const PgdGraph *g, int loop);

#endif /* PG_DURABLE_SCOPE_H */
