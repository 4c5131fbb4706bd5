/*-------------------------------------------------------------------------
 *
 * row_prep.h
 *	  A table's column defaults and CHECK constraints, prepared once per
 *	  backend for the rows df.start writes without a statement (row_prep.c).
 *
 * Locks: none of its own; the caller has the table open.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_ROW_PREP_H
#define PG_DURABLE_ROW_PREP_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

typedef struct PgdRowPrep PgdRowPrep;

/*
 * The prepared defaults and checks of rel, built at the first call in this
 * backend and again after the table's definition changed.  Valid until the
 * next call.
 */
extern PgdRowPrep *pgd_row_prep(Relation rel);

/*
 * Fill slot's columns that given (indexed by attribute number - 1) does not
 * mark with their defaults (NULL where there is none), as an INSERT does.
 */
extern void pgd_row_prep_defaults(PgdRowPrep *prep, TupleTableSlot *slot,
								  const bool *given, ExprContext *econtext);

/*
 * The NOT NULL and CHECK constraints of rri's table on the row in slot,
 * with the errors an INSERT raises (estate's per-tuple context evaluates
 * them).
 */
extern void pgd_row_prep_check(PgdRowPrep *prep, ResultRelInfo *rri,
							   TupleTableSlot *slot, EState *estate);

#endif /* PG_DURABLE_ROW_PREP_H */
