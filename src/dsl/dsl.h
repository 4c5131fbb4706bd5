/*-------------------------------------------------------------------------
 *
 * dsl.h
 *	  The workflow DSL: the SQL builders and operators (dsl.c, dsl_http.c)
 *	  and the guard against helper results used as steps (dsl_guard.c).
 *
 * The builders are pure: JSON in, JSON out.  The guard keeps a
 * transaction-local list of the texts that helpers returned.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_DSL_H
#define PG_DURABLE_DSL_H

#include "postgres.h"
#include "graph/graph.h"
#include "common/json.h"

/* dsl.c: an operand of a composer as a node (auto-wrap, checks) */
extern DfNode *dsl_operand(const char *text);

/*
 * dsl_guard.c: detection of helper results (df.setvar ...) used as steps.
 * A helper notes the text it returned; a composer refuses an operand that
 * is such a text.
 */
extern void pgd_note_helper_result(const char *helper, const char *result);
extern void pgd_check_not_helper_result(const char *operand);

#endif /* PG_DURABLE_DSL_H */
