/*-------------------------------------------------------------------------
 *
 * rows.c
 *	  What the store's direct row access shares: a row found by its key
 *	  through a unique index, as a statement would find it; a column by
 *	  its name; a text column's value; whether a table has a trigger of the
 *	  user's that a statement would fire.  node_rows.c, node_reads.c and
 *	  task_rows.c read and write the engine's hottest rows through these
 *	  instead of statements.
 *
 * Locks: a row found is returned with its table open in the lock mode the
 * caller asks for; the row itself is not locked here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/reltrigger.h"
#include "utils/snapmgr.h"

#include "store/store.h"
#include "store/store_internal.h"

/* rel's column name; 0 (missing_ok) or an error when it has none */
AttrNumber
store_attnum(Relation rel, const char *name, bool missing_ok)
{
	AttrNumber attnum = attnameAttNum(rel, name, false);

	if (attnum <= 0 && !missing_ok)
		elog(ERROR, "table %s has no column \"%s\"",
			 RelationGetRelationName(rel), name);
	return attnum > 0 ? attnum : 0;
}

/* Column a of tup as a C string, NULL for SQL NULL (a text-like column). */
char *
store_text_attr(HeapTuple tup, TupleDesc desc, AttrNumber a)
{
	bool  isnull;
	Datum d = heap_getattr(tup, a, desc, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/*
 * The row of relid whose text column col is value, found through the
 * unique index indexid as a statement after this transaction's writes
 * finds it (a snapshot taken now), copied, or NULL; *rel is left open
 * with lockmode.
 */
HeapTuple
store_key_row(Oid relid, Oid indexid, const char *col, const char *value,
			  LOCKMODE lockmode, Relation *rel)
{
	TupleDesc	desc;
	AttrNumber	a;
	ScanKeyData key;
	Snapshot	snap;
	SysScanDesc scan;
	HeapTuple	tup;

	/* a statement would see what this transaction wrote before it */
	CommandCounterIncrement();
	*rel = table_open(relid, lockmode);
	desc = RelationGetDescr(*rel);
	a = store_attnum(*rel, col, false);
	ScanKeyInit(&key, a, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(value));
	key.sk_collation = TupleDescAttr(desc, a - 1)->attcollation;
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = systable_beginscan(*rel, indexid, true, snap, 1, &key);
	tup = systable_getnext(scan);
	tup = HeapTupleIsValid(tup) ? heap_copytuple(tup) : NULL;
	systable_endscan(scan);
	UnregisterSnapshot(snap);
	return tup;
}

bool
pgd_store_user_trigger(Relation rel, int16 event)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger *t = &td->triggers[i];

		if (t->tgisinternal || t->tgenabled == TRIGGER_DISABLED ||
			(t->tgtype & event) == 0 ||
			strcmp(t->tgname, "instances_root_node_same_instance_fkey") == 0 ||
			strcmp(t->tgname, "restore_hold") == 0 ||
			strcmp(t->tgname, "restore_load") == 0)
			continue;
		return true;
	}
	return false;
}
