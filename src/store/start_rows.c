/*-------------------------------------------------------------------------
 *
 * start_rows.c
 *	  df.start's rows written without a statement (api/start.c calls
 *	  them): its node rows, its df.instances row and its runs row, each
 *	  with its statement beside it for when a trigger of the user's must
 *	  fire or the table is of an older schema.
 *
 * In a one-step workflow's df.start, the INSERT of the instance row and
 * the INSERT ... SELECT of its runs row were half of the call's time
 * (203 us a start, 5,000 in one transaction; perf of 20,000: 74 us and 29
 * us of it): their executor start, the CHECK constraints read from their
 * text, and the look of ON CONFLICT into every unique index.  Written
 * here as start.c writes the node rows, the rows get what an INSERT gives
 * them (defaults, NOT NULL and CHECK constraints, every index; row_prep.c
 * prepares the first two once per backend), except the triggers: each
 * function leaves the row to the statement, returning false, when a user
 * has put an INSERT trigger on the table, and when the table lacks one of
 * the columns (the schema of an older version before its update).
 *
 * Locks: RowExclusiveLock on df.instances and df_internal.runs,
 * AccessShareLock on df.vars (read with the statement's snapshot).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "executor/executor.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/compat.h"
#include "common/messages.h"
#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "store/types.h"

#define ID_ATTEMPTS		  10
#define NODE_INSERT_BATCH 1000

/* The statement of the node rows when a trigger of the user's must fire. */
enum
{
	START_NODES,
	START_STMTS
};

static const PgdStmtDef start_stmts[START_STMTS] = {
	[START_NODES] =
		{"df.start's node rows, by a statement through which the user's triggers fire",
		 0, REACH_INSTANCE,
		 "INSERT INTO df.nodes (instance_id, submitted_by, database, id, node_type, "
		 "query, result_name, left_node, right_node) "
		 "SELECT $1, $2::pg_catalog.regrole, $3, u.* "
		 "FROM ROWS FROM (pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), "
		 "pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9)) AS u",
		 9,
		 {TEXTOID, OIDOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,
		  TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID}},
};

static PgdStmtPlan start_plans[START_STMTS];

/* An instance's id, from the strong source. */
void
pgd_store_random_instance_id(char *out)
{
	uint8 bytes[4];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random instance id")));
	snprintf(out, PGD_ID_LEN + 1, "%02x%02x%02x%02x", bytes[0], bytes[1],
			 bytes[2], bytes[3]);
}

/* A text column's value, SQL NULL (*isnull) for a NULL string. */
static Datum
text_or_null(const char *s, bool *isnull)
{
	*isnull = s == NULL;
	return s ? pgd_text_datum(s) : (Datum) 0;
}

/* The error of a start that drew ID_ATTEMPTS ids, all taken. */
void
pgd_store_no_free_instance_id(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg(PGD_MSG_START_FAILED,
					"could not find a free instance id")));
}

/*
 * The attribute numbers of rel's columns; false when one is missing (a
 * table of an older schema) or a user's INSERT trigger on rel must fire:
 * the caller's statement writes the row then.
 */
static bool
row_columns(Relation rel, int n, const char *const *columns, int *attnums)
{
	bool missing = false;

	for (int c = 0; c < n; c++)
	{
		attnums[c] = attnameAttNum(rel, columns[c], true);
		missing |= attnums[c] <= 0;
	}
	return !missing && !pgd_store_user_trigger(rel, TRIGGER_TYPE_INSERT);
}

/*
 * Insert into rel the row of the n given columns' values, the others at
 * their defaults, checked as an INSERT checks it, with every index entry;
 * the statements after it see it.
 */
static void
insert_row(Relation rel, int n, const int *attnums, const Datum *values,
		   const bool *nulls)
{
	bool	   *given = palloc0(sizeof(bool) * RelationGetDescr(rel)->natts);
	PgdRowPrep *prep;
	EState	   *estate = CreateExecutorState();
	ResultRelInfo  *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot;

	for (int c = 0; c < n; c++)
		given[attnums[c] - 1] = true;
	prep = store_row_prep(rel);
	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = table_slot_create(rel, NULL);
	ExecClearTuple(slot);
	store_row_prep_defaults(prep, slot, given, GetPerTupleExprContext(estate));
	for (int c = 0; c < n; c++)
	{
		slot->tts_values[attnums[c] - 1] = values[c];
		slot->tts_isnull[attnums[c] - 1] = nulls[c];
	}
	ExecStoreVirtualTuple(slot);
	store_row_prep_check(prep, rri, slot, estate);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	(void) pgd_insert_index_tuples(rri, slot, estate);

	ExecDropSingleTupleTableSlot(slot);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	CommandCounterIncrement();
}

static Datum
text_array(Datum *elems, bool *nulls, int n)
{
	int dims[1] = {n};
	int lbs[1] = {1};

	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false,
											  TYPALIGN_INT));
}

/*
 * The same rows by an INSERT, through which a trigger of the user's on
 * df.nodes fires (insert_nodes): its foreign keys are checked at commit,
 * and the nodes side of the root-node check skips them while
 * pg_durable.start_inserts_nodes is on (its WHEN reads the setting).
 */
static void
insert_node_rows_statement(const char *instance_id, Oid submitter,
						   const char *database, int count,
						   const PgdStartNode *rows)
{
	int start;
	int nest = NewGUCNestLevel();

	(void) set_config_option("pg_durable.start_inserts_nodes", "on", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	for (start = 0; start < count; start += NODE_INSERT_BATCH)
	{
		int	   n = Min(NODE_INSERT_BATCH, count - start);
		Datum *cols[6];
		bool  *nulls[6];
		Datum  values[9];
		char   argnulls[9] = "         ";
		int	   c, i;

		for (c = 0; c < 6; c++)
		{
			cols[c] = palloc(sizeof(Datum) * n);
			nulls[c] = palloc0(sizeof(bool) * n);
		}
		for (i = 0; i < n; i++)
		{
			const PgdStartNode *row = &rows[start + i];
			const char *v[6] = {row->id,		  row->node_type, row->query,
								row->result_name, row->left,	  row->right};

			for (c = 0; c < 6; c++)
			{
				nulls[c][i] = v[c] == NULL;
				cols[c][i] = v[c] ? pgd_text_datum(v[c]) : (Datum) 0;
			}
		}
		values[0] = pgd_text_datum(instance_id);
		values[1] = ObjectIdGetDatum(submitter);
		if (database)
			values[2] = pgd_text_datum(database);
		else
			argnulls[2] = 'n';
		for (c = 0; c < 6; c++)
			values[3 + c] = text_array(cols[c], nulls[c], n);

		store_exec(&start_stmts[START_NODES], &start_plans[START_NODES],
				   values, argnulls);
	}
	AtEOXact_GUC(true, nest);
}

/*
 * df.start's node rows go straight into df.nodes's heap and indexes, the way
 * COPY writes them (one WAL record per page of rows), not through an
 * INSERT: an INSERT queues three deferred foreign-key checks per row
 * (nodes_instance_identity_fkey and the two graph references) and the
 * nodes side of the root-node check, and at commit each check is a query
 * that locks the row it finds with a WAL record of its own.  Those rows
 * are all this transaction's own, written just before from one graph
 * whose references df.start made itself: the checks could not fail, and
 * no other transaction can see, let alone delete, the rows they lock.
 * For a 20-step chain they were half of df.start's time and 109 bytes of
 * WAL per step.  The constraints stand for every other write:
 * a restore, a hand-made row, df.map's nodes (map_items.c).  The rows keep
 * everything else an INSERT gives them: the column defaults, the CHECK
 * and NOT NULL constraints, every index, unique ones checked.
 */
static const char *const node_columns[] = {
	"instance_id", "submitted_by", "database",	"id",		 "node_type",
	"query",	   "result_name",  "left_node", "right_node"};

#define NODE_COLUMNS lengthof(node_columns)

/* The values of one row's given columns, in node_columns's order. */
static void
node_row_values(const char *instance_id, Oid submitter, const char *database,
				const PgdStartNode *row, Datum *values, bool *nulls)
{
	const char *v[NODE_COLUMNS] = {instance_id,	  NULL,			 database,
								   row->id,		  row->node_type, row->query,
								   row->result_name, row->left,	 row->right};

	for (int c = 0; c < (int) NODE_COLUMNS; c++)
	{
		nulls[c] = v[c] == NULL;
		values[c] = v[c] ? pgd_text_datum(v[c]) : (Datum) 0;
	}
	values[1] = ObjectIdGetDatum(submitter);
	nulls[1] = false;
}

void
pgd_store_start_nodes(const char *instance_id, Oid submitter,
					  const char *database, int count,
					  const PgdStartNode *rows)
{
	Oid				 relid;
	Relation		 rel;
	TupleDesc		 desc;
	EState			*estate;
	ResultRelInfo	*rri;
	ExprContext		*econtext;
	PgdRowPrep		*prep;
	bool			*is_given;
	int				 given[NODE_COLUMNS];
	TupleTableSlot **slots;
	CommandId		 cid = GetCurrentCommandId(true);
	int				 nslots = Min(NODE_INSERT_BATCH, Max(count, 1));
	int				 c, i, start;

	relid = get_relname_relid("nodes", get_namespace_oid("df", false));
	if (!OidIsValid(relid))
		elog(ERROR, "table df.nodes does not exist");
	rel = table_open(relid, RowExclusiveLock);
	if (pgd_store_user_trigger(rel, TRIGGER_TYPE_INSERT))
	{
		table_close(rel, NoLock);
		insert_node_rows_statement(instance_id, submitter, database, count,
								   rows);
		return;
	}
	desc = RelationGetDescr(rel);
	is_given = palloc0(sizeof(bool) * desc->natts);
	for (c = 0; c < (int) NODE_COLUMNS; c++)
	{
		AttrNumber attnum = attnameAttNum(rel, node_columns[c], false);

		if (attnum <= 0)
			elog(ERROR, "table df.nodes has no column \"%s\"",
				 node_columns[c]);
		given[c] = attnum - 1;
		is_given[attnum - 1] = true;
	}
	/* the other columns' defaults and the checks, prepared once (row_prep.c) */
	prep = store_row_prep(rel);

	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	econtext = GetPerTupleExprContext(estate);

	slots = palloc(sizeof(TupleTableSlot *) * nslots);
	for (i = 0; i < nslots; i++)
		slots[i] = table_slot_create(rel, NULL);

	for (start = 0; start < count; start += nslots)
	{
		int n = Min(nslots, count - start);

		for (i = 0; i < n; i++)
		{
			TupleTableSlot *slot = slots[i];
			Datum			values[NODE_COLUMNS];
			bool			nulls[NODE_COLUMNS];

			ExecClearTuple(slot);
			store_row_prep_defaults(prep, slot, is_given, econtext);
			node_row_values(instance_id, submitter, database, &rows[start + i],
							values, nulls);
			for (c = 0; c < (int) NODE_COLUMNS; c++)
			{
				slot->tts_values[given[c]] = values[c];
				slot->tts_isnull[given[c]] = nulls[c];
			}
			ExecStoreVirtualTuple(slot);
			store_row_prep_check(prep, rri, slot, estate);
		}
		table_multi_insert(rel, slots, n, cid, 0, NULL);
		for (i = 0; i < n; i++)
			(void) pgd_insert_index_tuples(rri, slots[i], estate);
		ResetPerTupleExprContext(estate);
	}

	for (i = 0; i < nslots; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	/* the statements after these see the rows */
	CommandCounterIncrement();
}

/*
 * The df.instances row of a start without an idempotency key, written as
 * pgd_store_start_nodes writes the nodes, under a fresh random id.  As a statement
 * (INSERT ... ON CONFLICT (id) DO NOTHING, through SPI) it was a third of
 * a one-step workflow's df.start: the plan's executor start, the CHECK
 * constraints read from their text again, a look into every unique index
 * before the insert, and 48 bytes of WAL confirming the speculative
 * insertion (perf and pg_waldump).  Here an id already taken,
 * by a committed row or one being made (a dirty snapshot, as a unique
 * check's), draws another; two starts drawing the same id at the same
 * moment, one in 2^32, would see a unique violation as with a plain
 * INSERT.  The row gets everything else an INSERT gives it: the column
 * defaults, the NOT NULL and CHECK constraints (row_prep.c), every index.
 * Its only trigger is the instance side of the root-node check, which the
 * statement skips as well (pg_durable.start_inserts_nodes); the nodes'
 * foreign keys reference it from their side.  Returns false, having
 * written nothing, when a user's INSERT trigger on df.instances must fire
 * or a column is missing (the 0.3.0 script's table before the update):
 * the statement then.
 */
bool
pgd_store_instances_traced(void)
{
	return get_attnum(pgd_df_relid("instances"), "trace_id") != InvalidAttrNumber;
}

bool
pgd_store_start_instance_row(char *instance_id, const char *label,
							 const char *root_id, Oid userid,
							 const char *database, const char *trace_id,
							 const char *traceparent, const char *tracestate)
{
	static const char *const columns[] = {
		"id",		"label",	"root_node",   "submitted_by",
		"database", "trace_id", "traceparent", "tracestate"};
	int		 n = trace_id != NULL ? lengthof(columns) : 5;
	int		 attnums[lengthof(columns)];
	Datum	 values[lengthof(columns)];
	bool	 nulls[lengthof(columns)];
	Relation rel = table_open(pgd_df_relid("instances"), RowExclusiveLock);
	Oid		 pkey = pgd_df_relid("instances_pkey");
	int		 attempt;

	if (!row_columns(rel, n, columns, attnums))
	{
		table_close(rel, NoLock);
		return false;
	}
	for (attempt = 0;; attempt++)
	{
		const char *id = instance_id;

		if (attempt == ID_ATTEMPTS)
			pgd_store_no_free_instance_id();
		pgd_store_random_instance_id(instance_id);
		if (!pgd_index_has(pkey, 1, &id))
			break;
	}
	memset(nulls, 0, sizeof(nulls));
	values[0] = pgd_text_datum(instance_id);
	values[1] = text_or_null(label, &nulls[1]);
	values[2] = pgd_text_datum(root_id);
	values[3] = ObjectIdGetDatum(userid);
	values[4] = text_or_null(database, &nulls[4]);
	if (trace_id != NULL)
	{
		values[5] = pgd_text_datum(trace_id);
		values[6] = text_or_null(traceparent, &nulls[6]);
		values[7] = text_or_null(tracestate, &nulls[7]);
	}
	insert_row(rel, n, attnums, values, nulls);
	table_close(rel, NoLock);
	return true;
}


/* Add key (and value, NULL: a JSON null) to the object being built in *st. */
static void
push_pair(JsonbParseState **st, const char *key, int keylen, const char *value,
		  int valuelen)
{
	JsonbValue k;
	JsonbValue v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = keylen;
	(void) pushJsonbValue(st, WJB_KEY, &k);
	if (value == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) value;
		v.val.string.len = valuelen;
	}
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/*
 * The variables a new instance captures: the submitter's rows of df.vars
 * as {name: value} (a NULL value as JSON null), read through its primary
 * key (pkey) with the snapshot a statement would take, then the value of
 * {sys_idempotency_key}, which wins over a variable of the same name (the
 * statement's jsonb_object_agg(...) || ...).  The trace context is not
 * kept here: df.instances has it (pgd_step_vars).
 */
static Datum
captured_vars(Oid pkey, Oid userid, const char *key)
{
	Relation		 rel = table_open(pgd_df_relid("vars"), AccessShareLock);
	TupleDesc		 desc = RelationGetDescr(rel);
	int				 name_att = attnameAttNum(rel, "name", false);
	int				 value_att = attnameAttNum(rel, "value", false);
	JsonbParseState *st = NULL;
	JsonbValue		*obj;
	ScanKeyData		 skey;
	SysScanDesc		 scan;
	HeapTuple		 tup;
	Snapshot		 snap = RegisterSnapshot(GetTransactionSnapshot());

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	/* a heap attribute number, which systable_beginscan maps to the index's */
	ScanKeyInit(&skey, attnameAttNum(rel, "owner", false),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(userid));
	scan = systable_beginscan(rel, pkey, true, snap, 1, &skey);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool  isnull;
		Datum name = heap_getattr(tup, name_att, desc, &isnull);
		text *n = DatumGetTextPP(name);
		Datum value = heap_getattr(tup, value_att, desc, &isnull);
		text *v = isnull ? NULL : DatumGetTextPP(value);

		push_pair(&st, VARDATA_ANY(n), VARSIZE_ANY_EXHDR(n),
				  v ? VARDATA_ANY(v) : NULL, v ? VARSIZE_ANY_EXHDR(v) : 0);
	}
	systable_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, NoLock);
	if (key != NULL)
		push_pair(&st, "sys_idempotency_key", 19, key, strlen(key));
	obj = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(obj));
}

/*
 * The engine's runs row of a new instance, with the caller's variables
 * captured; false when the statement must write it (see the top).  Its
 * start_snapshot, which only an EVENT node reads (store/event_bus.c),
 * is NULL unless the graph has one (events): 21 bytes and 8 more for each
 * transaction running, in every instance's row.
 */
bool
pgd_store_start_run_row(const char *instance_id, Oid userid, const char *label,
				  const char *database, const char *key, bool events)
{
	static const char *const columns[] = {"instance_id", "submitted_by",
										  "label",		 "database",
										  "vars",		 "start_snapshot"};
	int						 attnums[lengthof(columns)];
	Datum					 values[lengthof(columns)];
	bool					 nulls[lengthof(columns)];
	int						 n = lengthof(columns);
	Relation rel = table_open(pgd_internal_relid("runs"), RowExclusiveLock);
	Oid		 vars_pkey =
		get_relname_relid("vars_pkey", get_namespace_oid("df", false));

	if (!row_columns(rel, n, columns, attnums) || !OidIsValid(vars_pkey))
	{
		table_close(rel, NoLock);
		return false;
	}
	/* the snapshot at its default; so it is where NOT NULL still holds */
	if (events ||
		TupleDescAttr(RelationGetDescr(rel), attnums[n - 1] - 1)->attnotnull)
		n--;
	memset(nulls, 0, sizeof(nulls));
	values[0] = pgd_text_datum(instance_id);
	values[1] = ObjectIdGetDatum(userid);
	values[2] = text_or_null(label, &nulls[2]);
	values[3] = text_or_null(database, &nulls[3]);
	values[4] = captured_vars(vars_pkey, userid, key);
	values[5] = (Datum) 0;
	nulls[5] = true;
	insert_row(rel, n, attnums, values, nulls);
	table_close(rel, NoLock);
	return true;
}
