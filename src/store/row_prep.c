/*-------------------------------------------------------------------------
 *
 * row_prep.c
 *	  A table's column defaults and CHECK constraints, prepared once per
 *	  backend for the rows df.start writes without a statement.
 *
 * An INSERT, and ExecConstraints for a row written without one, reads each
 * CHECK expression of the table from its catalog text (stringToNode),
 * plans it and builds its expression state again in every statement; so
 * does a column default.  For df.start's one node row of a one-step
 * workflow that was 16% of the call (perf, 20,000 starts in one
 * transaction): the ids' checks, the node types', the status IN list and
 * the result name's regular expression, read from text every time.
 * Here they are prepared at the first row of a backend and
 * kept, in a memory context of their own, until the table's definition
 * changes: the relation cache's invalidation of the table (ALTER TABLE,
 * a new or dropped constraint or default) marks them stale, and the next
 * call prepares them again.  The slot of a table that was dropped (DROP
 * EXTENSION, then CREATE EXTENSION in the same session) goes to the next
 * table that needs one.
 *
 * The checks are those ExecConstraints runs, in its order: NOT NULL, then
 * every CHECK constraint (NOT VALID ones included, as for any new row;
 * PostgreSQL 18's NOT ENFORCED ones not).  A row that fails one is handed
 * to ExecConstraints itself, which raises the error an INSERT raises, with
 * its detail.  A table with a generated column is refused (an error):
 * the rows written here would not compute it.
 *
 * Locks: none of its own; the caller has the table open.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodes.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "store/store_internal.h"

#define ROW_PREP_TABLES 4

struct PgdRowPrep
{
	Oid			  relid; /* InvalidOid: a free slot */
	bool		  valid; /* false after the table's invalidation */
	MemoryContext cxt;	 /* everything below */
	int			  natts;
	ExprState	**defaults; /* per attribute, NULL: none (or dropped) */
	bool		 *notnull;	/* per attribute */
	int			  nchecks;
	ExprState	**checks;
};

static PgdRowPrep preps[ROW_PREP_TABLES];
static bool		  callback_registered = false;

static void
row_prep_invalidate(Datum arg, Oid relid)
{
	for (int i = 0; i < ROW_PREP_TABLES; i++)
		if (preps[i].relid != InvalidOid &&
			(relid == InvalidOid || preps[i].relid == relid))
			preps[i].valid = false;
}

/* Build p's states for rel, in p->cxt (emptied first). */
static void
row_prep_build(PgdRowPrep *p, Relation rel)
{
	TupleDesc	  desc = RelationGetDescr(rel);
	MemoryContext old;

	MemoryContextReset(p->cxt);
	old = MemoryContextSwitchTo(p->cxt);
	p->natts = desc->natts;
	p->defaults = palloc0(sizeof(ExprState *) * desc->natts);
	p->notnull = palloc0(sizeof(bool) * desc->natts);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		Node			 *expr;

		if (att->attisdropped)
			continue;
		if (att->attgenerated)
			elog(ERROR,
				 "table \"%s\" has a generated column \"%s\", which pg_durable cannot fill",
				 RelationGetRelationName(rel), NameStr(att->attname));
		p->notnull[a] = att->attnotnull;
		expr = build_column_default(rel, a + 1);
		if (expr != NULL)
			p->defaults[a] =
				ExecInitExpr(expression_planner((Expr *) expr), NULL);
	}
	p->nchecks = 0;
	p->checks = NULL;
	if (desc->constr != NULL && desc->constr->num_check > 0)
	{
		ConstrCheck *check = desc->constr->check;

		p->checks = palloc0(sizeof(ExprState *) * desc->constr->num_check);
		for (int i = 0; i < desc->constr->num_check; i++)
		{
			Expr *expr;

#if PG_VERSION_NUM >= 180000
			if (!check[i].ccenforced)
				continue;
#endif
			expr = stringToNode(check[i].ccbin);
			p->checks[p->nchecks++] =
				ExecInitExpr(expression_planner(expr), NULL);
		}
	}
	MemoryContextSwitchTo(old);
	p->valid = true;
}

PgdRowPrep *
store_row_prep(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	PgdRowPrep *p = NULL;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(row_prep_invalidate, (Datum) 0);
		callback_registered = true;
	}
	for (int i = 0; i < ROW_PREP_TABLES && p == NULL; i++)
		if (preps[i].relid == relid)
			p = &preps[i];
	for (int i = 0; i < ROW_PREP_TABLES && p == NULL; i++)
		if (preps[i].relid == InvalidOid)
		{
			p = &preps[i];
			p->cxt = AllocSetContextCreate(TopMemoryContext,
										   "pg_durable prepared row checks",
										   ALLOCSET_SMALL_SIZES);
			p->valid = false;
			p->relid = relid;
		}
	/*
	 * The slot of a table that is gone: DROP EXTENSION and CREATE EXTENSION
	 * in one session make the tables anew, under new OIDs.
	 */
	for (int i = 0; i < ROW_PREP_TABLES && p == NULL; i++)
		if (!preps[i].valid &&
			!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(preps[i].relid)))
		{
			p = &preps[i];
			p->relid = relid;
		}
	if (p == NULL)
		elog(ERROR, "more than %d tables with prepared row checks",
			 ROW_PREP_TABLES);
	if (!p->valid)
	{
		/* valid once built: an error in between leaves it to be built again */
		row_prep_build(p, rel);
	}
	return p;
}

/*
 * Whatever an expression keeps for its later evaluations in
 * ecxt_per_query_memory goes to the prepared states' context, not to the
 * caller's query, whose memory goes with its executor state: a hashed IN
 * list keeps its hash table there and a pointer to it in the state.
 * expression_planner does not hash IN lists today (the assert-enabled
 * build ran a CHECK with ten constants over several transactions without
 * this, unharmed), so this only keeps a later planner from making the
 * prepared checks read freed memory.  The values of a row still go to the
 * caller's per-tuple memory.
 */
static Datum
eval_kept(PgdRowPrep *prep, ExprState *state, ExprContext *econtext,
		  bool *isnull)
{
	MemoryContext save = econtext->ecxt_per_query_memory;
	Datum		  d;

	econtext->ecxt_per_query_memory = prep->cxt;
	d = ExecEvalExprSwitchContext(state, econtext, isnull);
	econtext->ecxt_per_query_memory = save;
	return d;
}

void
store_row_prep_defaults(PgdRowPrep *prep, TupleTableSlot *slot,
					  const bool *given, ExprContext *econtext)
{
	for (int a = 0; a < prep->natts; a++)
	{
		if (given[a])
			continue;
		slot->tts_isnull[a] = true;
		slot->tts_values[a] = (Datum) 0;
		if (prep->defaults[a] != NULL)
			slot->tts_values[a] = eval_kept(prep, prep->defaults[a], econtext,
											&slot->tts_isnull[a]);
	}
}

void
store_row_prep_check(PgdRowPrep *prep, ResultRelInfo *rri, TupleTableSlot *slot,
				   EState *estate)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);
	bool		 ok = true;

	slot_getallattrs(slot);
	for (int a = 0; a < prep->natts && ok; a++)
		if (prep->notnull[a] && slot->tts_isnull[a])
			ok = false;
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < prep->nchecks && ok; i++)
	{
		/* as ExecCheck: a NULL result passes */
		bool  isnull;
		Datum d = eval_kept(prep, prep->checks[i], econtext, &isnull);

		ok = isnull || DatumGetBool(d);
	}
	if (ok)
		return;
	/* the error of an INSERT, with its detail */
	ExecConstraints(rri, slot, estate);
	elog(ERROR,
		 "a row of \"%s\" failed a prepared check that the table's own checks passed",
		 RelationGetRelationName(rri->ri_RelationDesc));
}
