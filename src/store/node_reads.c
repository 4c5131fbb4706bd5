/*-------------------------------------------------------------------------
 *
 * node_reads.c
 *	  Node rows read by their keys, without a statement: the state, stamp
 *	  and result of named nodes (node_writes.c reads through its buffer of
 *	  writes on top of them) and an instance's graph rows for the graph
 *	  cache.  The writes of the same rows are node_rows.c's.
 *
 * Locks: AccessShareLock on df.instances and df.nodes; the rows of an
 * instance whose runs row the caller holds, or that nobody changes while
 * the graph is loaded (its nodes are written once by df.start).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

/* What ->> gives for key of an object (NULL: no such key, or not an object). */
static char *
jsonb_field_text(Jsonb *jb, const char *key)
{
	JsonbValue	k;
	JsonbValue *v;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		return NULL;
	k.type = jbvString;
	k.val.string.len = strlen(key);
	k.val.string.val = (char *) key;
	v = findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &k);
	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	return JsonbToCString(NULL, &JsonbValueToJsonb(v)->root, -1);
}

/*
 * The rows of nodes ids[0..n-1] of an instance, each found by the whole
 * primary key without a statement: found[i], its status, when stamps is
 * not NULL its stamp (status_details' execution_id), and when results is
 * not NULL its result as JSON text, or for a failed node the error text
 * (the result's string; NULL when it is not one).  Statements did this before: 1.8 of them per
 * branch of a fan-out of 1,000 branches, about a sixth of the executors'
 * time (pg_stat_statements).  The transaction's own writes are seen
 * (SnapshotSelf), as a statement after them sees them; nobody else changes
 * these rows meanwhile (the caller holds the instance's runs row).
 */
void
store_read_node_rows(const char *instance_id, int n, const char *const *ids,
					 bool *found, char **statuses, char **stamps,
					 char **results)
{
	Oid		   pkey = pgd_df_relid("nodes_pkey");
	Relation   rel;
	TupleDesc  desc;
	AttrNumber a_instance_id;
	AttrNumber a_id;
	AttrNumber a_status;
	AttrNumber a_details;
	AttrNumber a_result;
	Datum	   instance;

	rel = table_open(pgd_df_relid("nodes"), AccessShareLock);
	desc = RelationGetDescr(rel);
	a_instance_id = store_attnum(rel, "instance_id", false);
	a_id = store_attnum(rel, "id", false);
	a_status = store_attnum(rel, "status", false);
	a_details = store_attnum(rel, "status_details", false);
	a_result = store_attnum(rel, "result", false);
	instance = CStringGetTextDatum(instance_id);
	for (int i = 0; i < n; i++)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tup;
		bool		isnull;
		Datum		d;

		ScanKeyInit(&keys[0], a_instance_id, BTEqualStrategyNumber, F_TEXTEQ,
					instance);
		ScanKeyInit(&keys[1], a_id, BTEqualStrategyNumber, F_TEXTEQ,
					CStringGetTextDatum(ids[i]));
		/* compared as the index orders them */
		keys[0].sk_collation =
			TupleDescAttr(desc, a_instance_id - 1)->attcollation;
		keys[1].sk_collation = TupleDescAttr(desc, a_id - 1)->attcollation;
		scan = systable_beginscan(rel, pkey, true, SnapshotSelf, 2, keys);
		tup = systable_getnext(scan);
		found[i] = HeapTupleIsValid(tup);
		statuses[i] = NULL;
		if (stamps != NULL)
			stamps[i] = NULL;
		if (results != NULL)
			results[i] = NULL;
		if (found[i])
		{
			statuses[i] = store_text_attr(tup, desc, a_status);
			d = heap_getattr(tup, a_details, desc, &isnull);
			if (stamps != NULL && !isnull)
				stamps[i] =
					jsonb_field_text(DatumGetJsonbP(d), "execution_id");
			d = heap_getattr(tup, a_result, desc, &isnull);
			if (results != NULL && !isnull)
			{
				Jsonb	  *jb = DatumGetJsonbP(d);
				JsonbValue v;

				if (pgd_node_status_of(statuses[i]) != PGD_NODE_FAILED)
					results[i] = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
				else if (JsonbExtractScalar(&jb->root, &v) &&
						 v.type == jbvString)
					results[i] = pnstrdup(v.val.string.val, v.val.string.len);
			}
		}
		systable_endscan(scan);
	}
	table_close(rel, NoLock);
}

/*
 * An instance's graph rows, as a statement reads them (a snapshot taken
 * now, after this transaction's own writes): its root node's id into
 * *root_id and its nodes into *rows, in the primary key's order; 0 when
 * the instance has no df.instances row.  By the primary keys, without
 * the two statements that cost 120 us an instance of 59 nodes (perf:
 * 6 us a step of a chain of wrapped steps, loaded once per
 * instance and executor).
 */
int
store_load_node_rows(const char *instance_id, char **root_id,
					 PgdStoredNode **rows)
{
	Relation	rel;
	TupleDesc	desc;
	ScanKeyData key;
	Snapshot	snap;
	SysScanDesc scan;
	HeapTuple	tup;
	AttrNumber	a;
	AttrNumber	cols[6];
	const char *names[6] = {"id",		   "node_type", "query",
							"result_name", "left_node", "right_node"};
	int			n = 0;
	int			size = 16;

	tup = store_key_row(pgd_df_relid("instances"),
						pgd_df_relid("instances_pkey"), "id", instance_id,
						AccessShareLock, &rel);
	if (tup != NULL)
		*root_id = store_text_attr(tup, RelationGetDescr(rel),
								   store_attnum(rel, "root_node", false));
	table_close(rel, NoLock);
	if (tup == NULL)
		return 0;
	/* the nodes as a statement after that one sees them */
	snap = RegisterSnapshot(GetLatestSnapshot());

	rel = table_open(pgd_df_relid("nodes"), AccessShareLock);
	desc = RelationGetDescr(rel);
	for (int i = 0; i < lengthof(cols); i++)
		cols[i] = store_attnum(rel, names[i], false);
	a = store_attnum(rel, "instance_id", false);
	ScanKeyInit(&key, a, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(instance_id));
	key.sk_collation = TupleDescAttr(desc, a - 1)->attcollation;
	*rows = palloc(sizeof(PgdStoredNode) * size);
	scan = systable_beginscan(rel, pgd_df_relid("nodes_pkey"), true, snap, 1,
							  &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PgdStoredNode *r;

		if (n == size)
		{
			size *= 2;
			*rows = repalloc(*rows, sizeof(PgdStoredNode) * size);
		}
		r = &(*rows)[n++];
		r->id = store_text_attr(tup, desc, cols[0]);
		r->type = store_text_attr(tup, desc, cols[1]);
		r->query = store_text_attr(tup, desc, cols[2]);
		r->result_name = store_text_attr(tup, desc, cols[3]);
		r->left = store_text_attr(tup, desc, cols[4]);
		r->right = store_text_attr(tup, desc, cols[5]);
	}
	systable_endscan(scan);
	table_close(rel, NoLock);
	UnregisterSnapshot(snap);
	return n;
}
