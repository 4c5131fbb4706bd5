/*-------------------------------------------------------------------------
 *
 * task_rows.c
 *	  The claim of a task by its id, the read of an instance's runs row
 *	  and a JOIN's counter counted down and closed, without statements.
 *
 * Every task an executor runs is claimed by its id (the ring of published
 * ids, wake.c), and every transition reads its instance's runs row.  As
 * statements they cost 35 us a claim (a DELETE of the task in a CTE, the
 * runs row joined) and 3 us a read, the largest statement cost of a
 * fan-out's branch after the node writes (pg_stat_statements, 600
 * fan-outs of 20 branches).  Here each row is found by its primary key:
 *
 * - the claim deletes the task row without waiting (a row locked by
 *   somebody is locked first, without waiting): a row another transaction
 *   holds (locked, being deleted or updated) is not claimed, as SKIP
 *   LOCKED skipped it; nor is a row not due yet or an
 *   HTTP task (the HTTP worker's).  A row changed by a transaction that
 *   committed after the snapshot is not claimed either, and the queue is
 *   scanned at commit: a statement would have claimed its new version.
 * - the runs row is read with a snapshot taken now, as a statement's.
 *
 * df_internal's tables are the engine's own: no trigger or rule of theirs
 * runs for these rows (none is defined; a user's would be bypassed here).
 *
 * Locks: runs, then tasks (AccessShareLock, RowExclusiveLock), in the
 * order of the claim's statement and of the update scripts' LOCK TABLE;
 * the task row, deleted (the caller's subtransaction); no lock on the
 * runs row (pgd_store_lock_run takes it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

/* rel's column name (node_rows.c), or an error naming it */
#define column(rel, name) store_attnum((rel), (name), false)

/* Column name of tup as text (NULL for SQL NULL), of a text column. */
#define text_column(tup, rel, name) \
	store_text_attr((tup), RelationGetDescr(rel), column((rel), (name)))

/* The instance's runs row (store_key_row). */
static HeapTuple
run_row(const char *instance_id, LOCKMODE lockmode, Relation *rel)
{
	return store_key_row(pgd_internal_relid("runs"),
						 pgd_internal_relid("runs_pkey"), "instance_id",
						 instance_id, lockmode, rel);
}

/*
 * The runs row of the instance into run, as store_read_run reads it from
 * a statement's columns; false when the instance has none.
 */
bool
store_read_run_row(const char *instance_id, PgdRunInfo *run)
{
	Relation  rel;
	HeapTuple tup = run_row(instance_id, AccessShareLock, &rel);
	TupleDesc desc = RelationGetDescr(rel);

	if (tup != NULL)
	{
		bool  isnull;
		Datum d;
		char *status;

		d = heap_getattr(tup, column(rel, "submitted_by"), desc, &isnull);
		run->submitted_by = isnull ? InvalidOid : DatumGetObjectId(d);
		run->label = text_column(tup, rel, "label");
		d = heap_getattr(tup, column(rel, "vars"), desc, &isnull);
		if (isnull)
			run->vars = NULL;
		else
		{
			Jsonb *vars = DatumGetJsonbP(d);

			run->vars = JsonbToCString(NULL, &vars->root, VARSIZE(vars));
		}
		status = text_column(tup, rel, "status");
		if (status == NULL || !pgd_instance_status_parse(status, &run->status))
			run->status = PGD_INSTANCE_FAILED;
		d = heap_getattr(tup, column(rel, "created_at"), desc, &isnull);
		run->token = isnull ?
			NULL :
			DatumGetCString(DirectFunctionCall1(timestamptz_out, d));
		run->database = text_column(tup, rel, "database");
		/* steps of the engine's own database run here */
		if (run->database != NULL && strcmp(run->database, pgd_database) == 0)
			run->database = NULL;
	}
	table_close(rel, NoLock);
	return tup != NULL;
}

/*
 * The trace context df.start recorded in the instance's df.instances row:
 * its trace id, and the caller's traceparent and tracestate
 * (NULL when none was given), read as store_read_run_row reads the runs
 * row; false when the instance has no row or no trace id (one of the 0.3.0
 * schema, whose table has no such column).
 */
bool
pgd_store_instance_trace(const char *instance_id, char **trace_id,
						 char **traceparent, char **tracestate)
{
	Relation   rel;
	HeapTuple  tup = store_key_row(pgd_df_relid("instances"),
								   pgd_df_relid("instances_pkey"), "id",
								   instance_id, AccessShareLock, &rel);
	AttrNumber a = store_attnum(rel, "trace_id", true);

	*trace_id = *traceparent = *tracestate = NULL;
	if (tup != NULL && a != InvalidAttrNumber)
	{
		TupleDesc desc = RelationGetDescr(rel);

		*trace_id = store_text_attr(tup, desc, a);
		*traceparent = store_text_attr(tup, desc, column(rel, "traceparent"));
		*tracestate = store_text_attr(tup, desc, column(rel, "tracestate"));
	}
	table_close(rel, NoLock);
	return *trace_id != NULL;
}

/*
 * Lock the instance's runs row as SELECT status ... FOR UPDATE does, with
 * wait (LockWaitBlock), NOWAIT (LockWaitError: the same error) or SKIP
 * LOCKED (LockWaitSkip), its status into *status: PGD_RUN_TAKEN;
 * PGD_RUN_HELD when another transaction holds it (SKIP LOCKED);
 * PGD_RUN_GONE when there is none; PGD_RUN_CHANGED when a transaction
 * that committed after the snapshot, or that it waited for, changed it
 * (the caller's statement then locks its newest version, as it would
 * have).  A row this transaction holds already is taken at once, without
 * a new lock.  A chain's every step took it with a statement (5 us a
 * step, perf), and every start (14 us).  Under a transaction
 * snapshot (df.cancel in a REPEATABLE READ transaction) it is always
 * PGD_RUN_CHANGED: the statement raises what such a transaction raises.
 */
PgdRunLock
store_lock_run_row(const char *instance_id, LockWaitPolicy wait, char **status)
{
	Relation	   rel;
	HeapTuple	   tup;
	HeapTupleData  locked;
	Buffer		   buffer = InvalidBuffer;
	TM_FailureData tmfd;
	PgdRunLock	   result;

	*status = NULL;
	if (IsolationUsesXactSnapshot())
		return PGD_RUN_CHANGED;
	tup = run_row(instance_id, RowShareLock, &rel);
	if (tup == NULL)
		result = PGD_RUN_GONE;
	else
	{
		locked.t_self = tup->t_self;
		switch (heap_lock_tuple(rel, &locked, GetCurrentCommandId(true),
								LockTupleExclusive, wait, false, &buffer,
								&tmfd))
		{
			case TM_Ok:
				result = PGD_RUN_TAKEN;
				*status = text_column(&locked, rel, "status");
				break;
			case TM_WouldBlock:
				result = PGD_RUN_HELD;
				break;
			case TM_Deleted:
				result = PGD_RUN_GONE;
				break;
			default:
				result = PGD_RUN_CHANGED;
				break;
		}
		if (BufferIsValid(buffer))
			ReleaseBuffer(buffer);
	}
	table_close(rel, NoLock);
	return result;
}

/*
 * Delete the instance's runs row, which this transaction holds (a row
 * deleted as DELETE does, but no trigger of runs fires: the caller knows
 * df_internal.maps, whose foreign key cascades, has no rows of it).
 * False when the row is not there or was not this transaction's to
 * delete (the caller's statement then does what a statement does).
 */
bool
store_delete_run_row(const char *instance_id)
{
	Relation	   rel;
	HeapTuple	   tup;
	TM_FailureData tmfd;
	bool		   done;

	if (IsolationUsesXactSnapshot())
		return false;
	tup = run_row(instance_id, RowExclusiveLock, &rel);
	/* the caller holds the row (its own lock is no wait) */
	done = tup != NULL &&
		heap_delete(rel, &tup->t_self, GetCurrentCommandId(true),
					InvalidSnapshot, true, &tmfd, false) == TM_Ok;
	table_close(rel, NoLock);
	CommandCounterIncrement();
	return done;
}

/*
 * Claim task task_id: its row deleted by this (sub)transaction, its
 * columns and its instance's runs row in c.  False when it is not there,
 * not due, an HTTP task, or held by another transaction.
 */
bool
store_claim_task_row(int64 task_id, PgdClaim *c)
{
	Relation	   rel;
	TupleDesc	   desc;
	ScanKeyData	   key;
	Snapshot	   snap;
	SysScanDesc	   scan;
	HeapTuple	   tup;
	HeapTuple	   copy = NULL;
	HeapTupleData  locked;
	Buffer		   buffer = InvalidBuffer;
	TM_FailureData tmfd;
	TM_Result	   res;
	bool		   isnull;
	char		  *kind;

	/* a statement would see what this transaction wrote before it */
	CommandCounterIncrement();
	/*
	 * runs before tasks, as the claim's statement locked them and as an
	 * update's script locks them first (sql/pg_durable--0.3.0--0.4.0.sql):
	 * the other order deadlocked with ALTER EXTENSION UPDATE (t/022)
	 */
	table_close(table_open(pgd_internal_relid("runs"), AccessShareLock),
				NoLock);
	rel = table_open(pgd_internal_relid("tasks"), RowExclusiveLock);
	desc = RelationGetDescr(rel);
	ScanKeyInit(&key, column(rel, "id"), BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum(task_id));
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = systable_beginscan(rel, pgd_internal_relid("tasks_pkey"), true,
							  snap, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		TimestampTz run_at =
			DatumGetTimestampTz(heap_getattr(tup, column(rel, "run_at"), desc,
											 &isnull));

		kind = text_column(tup, rel, "kind");
		if (!isnull && run_at <= GetCurrentTimestamp() &&
			strcmp(kind, "http") != 0 && strcmp(kind, "external") != 0)
			copy = heap_copytuple(tup);
	}
	systable_endscan(scan);
	UnregisterSnapshot(snap);
	if (copy == NULL)
	{
		table_close(rel, NoLock);
		return false;
	}
	/*
	 * Deleted without waiting, as FOR UPDATE SKIP LOCKED skips a row
	 * another transaction holds.  A row somebody has locked (this
	 * transaction's queue scan, or another transaction) is locked first,
	 * without waiting: one this transaction locked is its own, another's
	 * is skipped.  Deleting at once saves the lock's WAL record of every
	 * other claim.
	 */
	res = heap_delete(rel, &copy->t_self, GetCurrentCommandId(true),
					  InvalidSnapshot, false, &tmfd, false);
	if (res == TM_BeingModified)
	{
		locked.t_self = copy->t_self;
		res = heap_lock_tuple(rel, &locked, GetCurrentCommandId(true),
							  LockTupleExclusive, LockWaitSkip, false, &buffer,
							  &tmfd);
		if (BufferIsValid(buffer))
			ReleaseBuffer(buffer);
		if (res == TM_Ok)
			simple_heap_delete(rel, &copy->t_self);
	}
	if (res != TM_Ok)
	{
		/* changed since the snapshot: a scan finds its new version */
		if (res == TM_Updated)
			pgd_queue_rescan();
		table_close(rel, NoLock);
		return false;
	}
	CommandCounterIncrement();
	c->task = pgd_task_ref(PGD_TASK_REF_ROW, task_id);
	c->instance_id = text_column(copy, rel, "instance_id");
	c->node_id = text_column(copy, rel, "node_id");
	c->scope = text_column(copy, rel, "scope");
	kind = text_column(copy, rel, "kind");
	if (!pgd_task_kind_parse(kind, &c->kind))
		elog(ERROR, "unknown task kind \"%s\"", kind);
	c->attempts = DatumGetInt32(heap_getattr(copy, column(rel, "attempts"),
											 desc, &isnull));
	c->engine_errors =
		DatumGetInt32(heap_getattr(copy, column(rel, "engine_errors"), desc,
								   &isnull));
	c->last_engine_error = text_column(copy, rel, "last_engine_error");
	table_close(rel, NoLock);
	/* the caller overlays a start held in memory (held_start.c) */
	c->has_run = store_read_run_row(c->instance_id, &c->run);
	return true;
}

/*
 * The index entries of tup, just written to rel: of an insert (which -1),
 * or of an update that was not HOT (which as pgd_simple_heap_update says),
 * those whose predicate it meets, as an INSERT or UPDATE makes them.
 */
static void
index_entries(Relation rel, HeapTuple tup, int which)
{
	EState		   *estate = CreateExecutorState();
	ResultRelInfo  *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot =
		MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);

	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	ExecStoreHeapTuple(tup, slot, false);
	if (which < 0)
		(void) pgd_insert_index_tuples(rri, slot, estate);
	else
		(void) pgd_insert_index_tuples_update(rri, slot, estate, which);
	ExecDropSingleTupleTableSlot(slot);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
}

/*
 * The df.instances row of instance_id, copied into *row (NULL when there
 * is none), found by its primary key with a snapshot taken now, as a
 * statement after this transaction's writes finds it; *rel is left open
 * with lockmode.  False, with nothing open, under a transaction snapshot
 * (a REPEATABLE READ caller: its statements raise what such a
 * transaction raises) or without the table: the caller's statement then
 * does the work.
 */
static bool
instance_row(const char *instance_id, LOCKMODE lockmode, Relation *rel,
			 HeapTuple *row)
{
	Oid df = get_namespace_oid("df", false);
	Oid instances = get_relname_relid("instances", df);
	Oid pkey = get_relname_relid("instances_pkey", df);

	if (!OidIsValid(instances) || !OidIsValid(pkey) ||
		IsolationUsesXactSnapshot())
		return false;
	*row = store_key_row(instances, pkey, "id", instance_id, lockmode, rel);
	return true;
}

/*
 * The submitter df.instances records for the instance into *submitter
 * (InvalidOid when there is no row), read by its primary key; false when
 * the caller's statement must read it (instance_row).  The statement
 * cost 11-16 us at every instance's start (perf).
 */
bool
store_instance_submitter_row(const char *instance_id, Oid *submitter)
{
	Relation  rel;
	HeapTuple row;
	bool	  isnull;

	if (!instance_row(instance_id, AccessShareLock, &rel, &row))
		return false;
	*submitter = InvalidOid;
	if (row != NULL)
	{
		Datum d = heap_getattr(row, column(rel, "submitted_by"),
							   RelationGetDescr(rel), &isnull);

		if (!isnull)
			*submitter = DatumGetObjectId(d);
	}
	table_close(rel, NoLock);
	return true;
}

/*
 * An instance ends with status: its df.instances row updated as
 * STMT_INSTANCE_FINISHED does (status, updated_at, completed_at when it
 * completed, NULL otherwise), found by its primary key with a snapshot
 * taken now.  1 when updated, 0 when there is no row, -1 when the
 * caller's statement must do it: a trigger of the user's on df.instances
 * (it fires for a statement), a row another transaction changed after
 * the snapshot (its owner may UPDATE it; the statement updates the new
 * version), or a transaction snapshot (instance_row).  The update is
 * never HOT (status is indexed): the new version's index entries are made
 * as an UPDATE makes them.  The statement cost 62 us at every instance's
 * end (perf).
 */
int
store_finish_instance_row(const char *instance_id, const char *status)
{
	Relation	rel;
	TupleDesc	desc;
	HeapTuple	tup;
	HeapTuple	copy;
	Datum	   *values;
	bool	   *nulls;
	bool	   *replace;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	int			which;
	int			result;

	if (!instance_row(instance_id, RowExclusiveLock, &rel, &copy))
		return -1;
	if (pgd_store_user_trigger(rel, TRIGGER_TYPE_UPDATE))
	{
		table_close(rel, NoLock);
		return -1;
	}
	if (copy == NULL)
	{
		table_close(rel, NoLock);
		return 0;
	}
	desc = RelationGetDescr(rel);
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc0(sizeof(bool) * desc->natts);
	replace = palloc0(sizeof(bool) * desc->natts);
#define SET(name, datum, null) \
	do \
	{ \
		AttrNumber a_ = column(rel, (name)); \
		values[a_ - 1] = (datum); \
		nulls[a_ - 1] = (null); \
		replace[a_ - 1] = true; \
	} while (0)
	SET("status", CStringGetTextDatum(status), false);
	SET("updated_at", TimestampTzGetDatum(now), false);
	SET("completed_at", TimestampTzGetDatum(now),
		strcmp(status, "completed") != 0);
#undef SET
	tup = heap_modify_tuple(copy, desc, values, nulls, replace);
	if (pgd_heap_update(rel, &copy->t_self, tup, &which) != TM_Ok)
		result = -1;
	else
	{
		if (which != 0)
			index_entries(rel, tup, which);
		result = 1;
	}
	table_close(rel, NoLock);
	CommandCounterIncrement();
	return result;
}

/*
 * rel has no column but the dropped ones and names[0 .. n - 1]: a row
 * this file makes gives none a default it would have to know.
 */
static bool
known_columns(Relation rel, const PgdRowLayout *layout)
{
	const char *const *names = layout->columns;
	int				   n = layout->ncolumns;
	TupleDesc		   desc = RelationGetDescr(rel);

	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		bool			  known = att->attisdropped;

		for (int k = 0; k < n && !known; k++)
			known = strcmp(NameStr(att->attname), names[k]) == 0;
		if (!known)
			return false;
	}
	return true;
}


/*
 * Insert a task row of kind for the node in scope (node_id NULL: the
 * instance's), due now, without a statement; returns its id, or -1 when
 * the table has a column this file does not know (the caller's statement
 * then gives it its default).  As the INSERT did: the id from
 * tasks_id_seq, run_at the transaction's start (now()), attempts and
 * engine errors 0, the rest NULL, an entry in each index whose predicate
 * it meets.  A step's INSERT took 30 us in fan-outs (pg_stat_statements).
 */
int64
store_insert_task_row(const char *instance_id, const char *node_id,
					  const char *scope, const char *kind)
{
	Relation  rel;
	TupleDesc desc;
	Datum	 *values;
	bool	 *nulls;
	HeapTuple tup;
	int64	  id;

	/* runs before tasks, as the claim (above) */
	table_close(table_open(pgd_internal_relid("runs"), AccessShareLock),
				NoLock);
	rel = table_open(pgd_internal_relid("tasks"), RowExclusiveLock);
	desc = RelationGetDescr(rel);
	if (!known_columns(rel, store_row_layout(PGD_ROWS_TASKS)))
	{
		table_close(rel, NoLock);
		return -1;
	}
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	memset(nulls, true, sizeof(bool) * desc->natts);
	id = nextval_internal(pgd_internal_relid("tasks_id_seq"), false);
#define SET(name, datum) \
	do \
	{ \
		AttrNumber a_ = column(rel, (name)); \
		values[a_ - 1] = (datum); \
		nulls[a_ - 1] = false; \
	} while (0)
	SET("id", Int64GetDatum(id));
	SET("instance_id", CStringGetTextDatum(instance_id));
	if (node_id != NULL)
		SET("node_id", CStringGetTextDatum(node_id));
	SET("scope", CStringGetTextDatum(scope));
	SET("kind", CStringGetTextDatum(kind));
	SET("run_at", TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	SET("attempts", Int32GetDatum(0));
	SET("engine_errors", Int32GetDatum(0));
#undef SET
	tup = heap_form_tuple(desc, values, nulls);
	simple_heap_insert(rel, tup);
	index_entries(rel, tup, -1);
	table_close(rel, NoLock);
	/* the statements and reads after this one see the row */
	CommandCounterIncrement();
	return id;
}

/* ---------------------------------------------------------------------
 * JOIN counters
 *
 * A JOIN's counter row (df_internal.joins) is counted down by each branch
 * that ends, and deleted when the JOIN closes: 1.9 statements of 12 us
 * a branch in fan-outs of 20 branches (pg_stat_statements).  The row is
 * found by its primary key with SnapshotSelf (this transaction's writes
 * seen; nobody else changes the rows of an instance whose runs row the
 * caller holds) and updated in place: remaining is not indexed, so the
 * update is HOT unless the page is full, and then its index entries are
 * made as an UPDATE makes them.
 *
 * The row is made by the first branch that ends, not when the JOIN starts:
 * until then it would only say that every branch is still
 * running.  A JOIN's execution has a scope of its own (a loop's next
 * generation is another scope), and a branch's end reaches the count
 * only while the JOIN is live (the liveness check), so a missing row
 * means no branch has ended yet.  The last branch deletes it.  A JOIN of
 * two branches writes an insert and a delete instead of an insert, two
 * updates and a delete (a 20-branch fan-out has 19 JOINs).
 * ---------------------------------------------------------------------
 */

/* The JOIN's counter row, copied, or NULL; *rel is opened (RowExclusiveLock). */
static HeapTuple
join_row(const char *instance_id, const char *node_id, const char *scope,
		 Relation *rel)
{
	TupleDesc	desc;
	ScanKeyData keys[3];
	const char *values[3] = {instance_id, node_id, scope};
	const char *names[3] = {"instance_id", "node_id", "scope"};
	SysScanDesc scan;
	HeapTuple	tup;

	/* what this transaction wrote is seen and may be changed again */
	CommandCounterIncrement();
	*rel = table_open(pgd_internal_relid("joins"), RowExclusiveLock);
	desc = RelationGetDescr(*rel);
	for (int i = 0; i < 3; i++)
	{
		AttrNumber a = column(*rel, names[i]);

		ScanKeyInit(&keys[i], a, BTEqualStrategyNumber, F_TEXTEQ,
					CStringGetTextDatum(values[i]));
		keys[i].sk_collation = TupleDescAttr(desc, a - 1)->attcollation;
	}
	scan = systable_beginscan(*rel, pgd_internal_relid("joins_pkey"), true,
							  SnapshotSelf, 3, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		tup = heap_copytuple(tup);
	systable_endscan(scan);
	return tup;
}


/*
 * One branch of a JOIN of width branches ended: the number still
 * running.  The first end makes the counter row (width - 1), the last
 * deletes it; false in *by_statement unless the row could not be made
 * here (a column this file does not know: the caller's statement makes
 * it, with its defaults).  With hold, the first end makes no row: true in
 * *absent, the caller keeps the count in memory (joins_loops.c).
 */
int
store_join_count_row(const char *instance_id, const char *node_id,
					 const char *scope, int width, bool hold,
					 bool *by_statement, bool *absent)
{
	Relation   rel;
	HeapTuple  old = join_row(instance_id, node_id, scope, &rel);
	TupleDesc  desc = RelationGetDescr(rel);
	AttrNumber a_remaining = column(rel, "remaining");
	Datum	  *values;
	bool	  *nulls;
	bool	  *replace;
	HeapTuple  tup;
	bool	   isnull;
	int		   remaining;
	int		   which;

	*by_statement = false;
	*absent = old == NULL;
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc0(sizeof(bool) * desc->natts);
	if (old == NULL)
	{
		/* the first branch to end */
		remaining = width - 1;
		if (remaining > 0 && !hold &&
			!known_columns(rel, store_row_layout(PGD_ROWS_JOINS)))
			*by_statement = true;
		else if (remaining > 0 && !hold)
		{
			values[column(rel, "instance_id") - 1] =
				CStringGetTextDatum(instance_id);
			values[column(rel, "node_id") - 1] = CStringGetTextDatum(node_id);
			values[column(rel, "scope") - 1] = CStringGetTextDatum(scope);
			values[a_remaining - 1] = Int32GetDatum(remaining);
			for (int a = 0; a < desc->natts; a++)
				nulls[a] = TupleDescAttr(desc, a)->attisdropped;
			tup = heap_form_tuple(desc, values, nulls);
			simple_heap_insert(rel, tup);
			index_entries(rel, tup, -1);
		}
		table_close(rel, NoLock);
		CommandCounterIncrement();
		return remaining;
	}
	remaining =
		DatumGetInt32(heap_getattr(old, a_remaining, desc, &isnull)) - 1;
	if (remaining <= 0)
	{
		/* the last branch: the JOIN closes */
		simple_heap_delete(rel, &old->t_self);
		table_close(rel, NoLock);
		CommandCounterIncrement();
		return remaining;
	}
	replace = palloc0(sizeof(bool) * desc->natts);
	values[a_remaining - 1] = Int32GetDatum(remaining);
	replace[a_remaining - 1] = true;
	tup = heap_modify_tuple(old, desc, values, nulls, replace);
	which = pgd_simple_heap_update(rel, &old->t_self, tup);
	/* not HOT (a full page): the index entries, as an UPDATE's */
	if (which != 0)
		index_entries(rel, tup, which);
	table_close(rel, NoLock);
	CommandCounterIncrement();
	return remaining;
}

/* The JOIN's counter goes (it closed). */
void
store_join_close_row(const char *instance_id, const char *node_id,
					 const char *scope)
{
	Relation  rel;
	HeapTuple old = join_row(instance_id, node_id, scope, &rel);

	if (old != NULL)
		simple_heap_delete(rel, &old->t_self);
	table_close(rel, NoLock);
	CommandCounterIncrement();
}
