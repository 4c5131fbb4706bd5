/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  Small SPI helpers for the statements pg_durable runs from C.
 *
 * Every statement uses $n parameters and schema-qualified names with
 * OPERATOR(pg_catalog.x) where an operator is involved, so neither the
 * caller's search_path nor user data can change what it does.  Each
 * distinct statement is prepared once per process and kept (the plan cache
 * re-plans it after DDL, a role change or a new extension), so a call does
 * not parse and plan it again.  The engine's own statements go through its
 * store (store/statements.c), which names each of them and keeps their plans
 * by number; the monitoring functions and df.start use these helpers
 * directly.
 *
 * Locks: none of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/spi.h"

#define PLAN_KEY_LEN 4096

typedef struct PlanEntry
{
	char	   sql[PLAN_KEY_LEN]; /* hash key: the statement text */
	SPIPlanPtr plan;
	bool	   planned; /* executed once: its generic plan was made */
} PlanEntry;

static HTAB *plans = NULL;

/*
 * The engine's plans are generic and kept for the life of the process;
 * they are made at their first execution and again after an invalidation,
 * which a VACUUM or ANALYZE of a table they read sends (its new size in
 * pg_class).  The engine's queues (tasks, runs, the inbox) are empty most
 * of the time, and a plan made while a table is empty takes a sequential
 * scan, kept as the table fills: every lookup of a burst of work then read
 * the whole table.  After a VACUUM of the engine's tables, a chain ran at
 * 1,300-1,950 steps/s instead of 3,400-4,000 (bench/run), and
 * the queue scan's EXISTS over df_internal.runs took a fifth of an
 * executor's CPU.  Every engine statement finds its rows by a key, so a
 * plan is made with enable_seqscan off (and jit off, below): set only
 * while the plan is made, after the invalidations that arrived are read,
 * so that an invalidated plan is seen as one here.
 */
int
pgd_spi_run_kept(SPIPlanPtr plan, bool *planned, const Datum *values,
				 const char *nulls)
{
	int rc;
	int nest;

	AcceptInvalidationMessages();
	if (*planned && SPI_plan_is_valid(plan))
		return SPI_execute_plan(plan, (Datum *) values, nulls, false, 0);
	nest = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/*
	 * A statement that has no other way than a sequential scan (a table
	 * without an index that serves it) keeps it, with the setting's penalty in
	 * its cost, above jit_above_cost: compiled at every execution, 10-90 ms
	 * each.  Without jit off, making plans with enable_seqscan off would cost
	 * that.  Engine plans are small and not worth compiling.
	 */
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	rc = SPI_execute_plan(plan, (Datum *) values, nulls, false, 0);
	AtEOXact_GUC(true, nest);
	*planned = true;
	return rc;
}

static PlanEntry *
prepared(const char *sql, int nargs, const Oid *types)
{
	PlanEntry *e;
	bool	   found;
	char	   key[PLAN_KEY_LEN];
	SPIPlanPtr plan;

	if (strlen(sql) >= PLAN_KEY_LEN)
		return NULL; /* not worth keeping */
	if (plans == NULL)
	{
		HASHCTL ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = PLAN_KEY_LEN;
		ctl.entrysize = sizeof(PlanEntry);
		plans = hash_create("pg_durable plans", 64, &ctl,
							HASH_ELEM | HASH_STRINGS);
	}
	/* a lookup reads the key only up to its terminating zero */
	e = hash_search(plans, sql, HASH_FIND, &found);
	if (found)
		return e;

	plan =
		SPI_prepare_cursor(sql, nargs, (Oid *) types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR, "could not prepare (%s): %s",
			 SPI_result_code_string(SPI_result), sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of: %s", sql);
	/* an insertion copies PLAN_KEY_LEN bytes of the key: pad it */
	memset(key, 0, sizeof(key));
	strlcpy(key, sql, sizeof(key));
	e = hash_search(plans, key, HASH_ENTER, &found);
	e->plan = plan;
	e->planned = false;
	return e;
}

/*
 * Run one statement.  Every statement gets a fresh snapshot (read_only is
 * accepted for documentation only): in read committed, a read that reused
 * the transaction's first snapshot could miss what committed just before a
 * task was claimed, and call a live step dead.
 */
int
pgd_spi_exec(const char *sql, int nargs, const Oid *types, const Datum *values,
			 const char *nulls, bool read_only)
{
	int		   rc;
	PlanEntry *e = prepared(sql, nargs, types);

	if (e != NULL)
		rc = pgd_spi_run_kept(e->plan, &e->planned, values, nulls);
	else
		rc = SPI_execute_with_args(sql, nargs, (Oid *) types, (Datum *) values,
								   nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI failed (%s) for: %s", SPI_result_code_string(rc),
			 sql);
	return (int) SPI_processed;
}

int
pgd_exec(const char *sql, int nargs, const char *const *args)
{
	Oid	  types[FUNC_MAX_ARGS];
	Datum values[FUNC_MAX_ARGS];
	char  nulls[FUNC_MAX_ARGS];
	int	  i;

	Assert(nargs <= FUNC_MAX_ARGS);
	for (i = 0; i < nargs; i++)
	{
		types[i] = TEXTOID;
		values[i] = args[i] ? pgd_text_datum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	return pgd_spi_exec(sql, nargs, types, values, nulls, false);
}

/* Column col (1-based) of row as a palloc'd C string in the caller's context, or NULL. */
char *
pgd_spi_getstring(int row, int col)
{
	char *v =
		SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v;
}

char **
pgd_spi_column(int n, int col)
{
	char **v = palloc(sizeof(char *) * Max(n, 1));

	for (int i = 0; i < n; i++)
		v[i] = pgd_spi_getstring(i, col);
	return v;
}

Datum
pgd_text_datum(const char *s)
{
	return PointerGetDatum(cstring_to_text(s));
}

/*
 * In the PG_CATCH of a PG_TRY around an internal subtransaction begun in
 * oldcxt with oldowner: take the error (copied into oldcxt), roll the
 * subtransaction back and return to the caller's memory context and
 * resource owner.
 */
ErrorData *
pgd_subxact_caught(MemoryContext oldcxt, ResourceOwner oldowner)
{
	ErrorData *edata;

	MemoryContextSwitchTo(oldcxt);
	edata = CopyErrorData();
	FlushErrorState();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return edata;
}

char *
pgd_exec_as(Oid role, int sec_flags, char **error, const char *sql, int nargs,
			const char *const *args)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char *volatile value = NULL;
	Oid save_userid;
	int save_sec;

	*error = NULL;
	GetUserIdAndSecContext(&save_userid, &save_sec);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		SetUserIdAndSecContext(role, save_sec | sec_flags);
		if (pgd_exec(sql, nargs, args) > 0)
			value = pgd_spi_getstring(0, 1);
		SetUserIdAndSecContext(save_userid, save_sec);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData *edata;

		SetUserIdAndSecContext(save_userid, save_sec);
		edata = pgd_subxact_caught(oldcxt, oldowner);
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		*error = pstrdup(edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return value;
}

/* A relation of schema df by name, or an error naming it. */
Oid
pgd_df_relid(const char *name)
{
	Oid relid = get_relname_relid(name, get_namespace_oid("df", false));

	if (!OidIsValid(relid))
		elog(ERROR, "relation df.%s does not exist", name);
	return relid;
}

/* A df_internal relation's oid, or an error naming it. */
Oid
pgd_internal_relid(const char *name)
{
	Oid relid =
		get_relname_relid(name, get_namespace_oid("df_internal", false));

	if (!OidIsValid(relid))
		elog(ERROR, "relation df_internal.%s does not exist", name);
	return relid;
}

bool
pgd_internal_relation_exists(const char *name)
{
	Oid ns = get_namespace_oid("df_internal", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid(name, ns));
}

/*
 * Whether a df_internal table has a row whose first nkeys columns of its
 * index `index` are values (text or varchar columns, compared with the
 * index's collations), committed or being made and not deleted by a
 * committed transaction (a dirty snapshot, as a unique check's): found
 * through the index whatever the table's statistics say.  A statement's generic
 * plan, made while a table was empty after a vacuum, scans the whole
 * table for the rest of the session however much it grows (the
 * release of an instance's keyed locks read 233 buffers a call).  False
 * when the index does not exist (the schema of an older version).  The
 * table and the index stay locked (AccessShareLock) to the end of the
 * transaction, as a statement's would.
 */
static bool index_has(Oid indexoid, int nkeys, const char *const *values,
					  const char *column, const char *equals);

static Oid
internal_index(const char *index)
{
	Oid ns = get_namespace_oid("df_internal", true);

	return OidIsValid(ns) ? get_relname_relid(index, ns) : InvalidOid;
}

bool
pgd_internal_index_has(const char *index, int nkeys, const char *const *values)
{
	Oid indexoid = internal_index(index);

	return OidIsValid(indexoid) &&
		index_has(indexoid, nkeys, values, NULL, NULL);
}

/*
 * The same with one key column, for a row whose text column equals equals
 * too (a start task of an instance: tasks_instance_idx, "kind", "start").
 */
bool
pgd_internal_index_has_where(const char *index, const char *value,
							 const char *column, const char *equals)
{
	Oid indexoid = internal_index(index);

	return OidIsValid(indexoid) &&
		index_has(indexoid, 1, &value, column, equals);
}

/* The same for the index indexoid of any schema (df.instances_pkey). */
bool
pgd_index_has(Oid indexoid, int nkeys, const char *const *values)
{
	return index_has(indexoid, nkeys, values, NULL, NULL);
}

/* The scan of the three above; column NULL: any row of those keys. */
static bool
index_has(Oid indexoid, int nkeys, const char *const *values,
		  const char *column, const char *equals)
{
	ScanKeyData	 keys[INDEX_MAX_KEYS];
	Relation	 heap;
	Relation	 irel;
	SnapshotData snap;
	SysScanDesc	 scan;
	HeapTuple	 tuple;
	AttrNumber	 att = InvalidAttrNumber;
	bool		 found = false;

	heap = table_open(IndexGetRelation(indexoid, false), AccessShareLock);
	irel = index_open(indexoid, AccessShareLock);
	if (nkeys < 1 || nkeys > IndexRelationGetNumberOfKeyAttributes(irel))
		elog(ERROR, "index \"%s\" has no %d key columns",
			 RelationGetRelationName(irel), nkeys);
	if (column != NULL &&
		(att = get_attnum(RelationGetRelid(heap), column)) == InvalidAttrNumber)
		elog(ERROR, "table \"%s\" has no column \"%s\"",
			 RelationGetRelationName(heap), column);
	for (int i = 0; i < nkeys; i++)
	{
		ScanKeyInit(&keys[i], irel->rd_index->indkey.values[i],
					BTEqualStrategyNumber, F_TEXTEQ,
					CStringGetTextDatum(values[i]));
		keys[i].sk_collation = irel->rd_indcollation[i];
	}
	InitDirtySnapshot(snap);
	scan = systable_beginscan(heap, indexoid, true, &snap, nkeys, keys);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool  isnull;
		Datum d;

		if (column == NULL)
		{
			found = true;
			break;
		}
		d = heap_getattr(tuple, att, RelationGetDescr(heap), &isnull);
		found = !isnull && strcmp(TextDatumGetCString(d), equals) == 0;
	}
	systable_endscan(scan);
	index_close(irel, NoLock);
	table_close(heap, NoLock);
	return found;
}

void
pgd_engine_rights(PgdCaller *caller)
{
	GetUserIdAndSecContext(&caller->userid, &caller->sec);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   (caller->sec & ~SECURITY_RESTRICTED_OPERATION) |
							   SECURITY_LOCAL_USERID_CHANGE);
}

void
pgd_caller_again(const PgdCaller *caller)
{
	SPI_finish();
	SetUserIdAndSecContext(caller->userid, caller->sec);
}
