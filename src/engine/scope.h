/*-------------------------------------------------------------------------
 *
 * scope.h
 *	  Execution-scope arithmetic (scope.c): the names of the scopes that
 *	  JOIN/RACE branches and loop bodies run in, and the way back up.
 *
 * A scope names one execution of a subtree (see types.h).  Scopes nest by
 * appending "::<node id>::<generation>"; stripping the last two parts
 * gives the enclosing scope.  A loop that is the root of the instance or of
 * a JOIN/RACE branch does not nest: the loop node and its body run in the
 * scope it was started in, and each iteration moves that scope to the next
 * generation ("<instance>::<generation>" for the root, "<parent
 * scope>::<loop id>::<generation>" for a branch), as the reference runs such
 * a loop in one child execution.  Any other loop runs its body
 * in a scope of its own below the loop's.
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

/*
 * The scope a JOIN/RACE branch starts in: "<scope>::<branch root id>::1".
 * A branch whose root is a loop moves on from there (pgd_loop_moves_scope).
 */
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

/*
 * A loop whose body runs in the loop's own scope, which moves to the next
 * generation each iteration: the root loop and a JOIN/RACE branch's root.
 */
extern bool pgd_loop_moves_scope(const PgdGraph *g, int loop);

/* Is scope the scope outer or one nested in it? */
extern bool pgd_scope_within(const char *scope, const char *outer);

#endif /* PG_DURABLE_SCOPE_H */
