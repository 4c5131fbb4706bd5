/*-------------------------------------------------------------------------
 *
 * node_rows.c
 *	  The rows of a flush of node writes (node_writes.c): each node's row in
 *	  df.nodes and the events in df_internal.events.
 *
 * The rows are written without a statement: each node row is found by its
 * whole primary key and updated in place, with index entries only when the
 * update is not HOT, and the events go in as one multi-insert (one WAL
 * record per page of rows) with their index entries.  A statement per
 * flush (an UPDATE of the rows from arrays of the writes' columns and an
 * INSERT of their events) costs about 26 us per write, 40% of the
 * executors' time in 20-step chains (pg_stat_statements), most of it in
 * preparing df.nodes' CHECK constraints again.  No CHECK constraint or
 * trigger runs for these writes: the columns written are the engine's own
 * (a status of its three, a result its parser produced, a stamp, the
 * time; an event kind of its list), no trigger of df.nodes fires for an
 * update of them (the root-node check watches instance_id and id, and the
 * foreign keys skip an update that leaves theirs as they were), and
 * df_internal.events has none.  Written this way, a step of a 20-step
 * chain costs an executor about a fifth less CPU than with the statement,
 * and a step under a df.with_lock about a quarter less.
 *
 * A trigger of the user's on df.nodes (UPDATE) or df_internal.events
 * (INSERT) keeps the statement (write_rows_statement), so that it fires.
 *
 * Locks: the rows of the instance whose runs row the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/reltrigger.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

static const Oid col_types[NW_COLS] = {
	TEXTOID,		TEXTOID,		TEXTOID, TEXTOID, INT4OID, TEXTOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, BOOLOID, INT8OID, INT8OID};

uint64 store_event_rows = 0;

static SPIPlanPtr flush_plans[3];
static bool		  flush_planned[3]; /* pgd_spi_run_kept */

/*
 * The instance's history row that the flush under way adds to its events
 * (set by store_flush_with_instance_event, node_writes.c).
 */
PgdFlushTail store_flush_tail;

/*
 * The text of the statement that writes a flush ($1: the instance, $2..
 * $13 the columns above): the writes as rows (w); for each one that
 * updates its node, the row's place and old updated_at, found by the
 * whole primary key (x; the statement's snapshot sees the row as it was);
 * one UPDATE of those rows by their place (u); and one INSERT of the
 * events in the order of the writes, a start whose node ends later in the
 * flush being only its event row (or none, when its end's row is both).
 *
 * The lookup by the primary key is a subquery of its own (OFFSET 0), so
 * that its plan has both columns as index conditions whatever the
 * statistics: two earlier forms let a generic plan made while df.nodes
 * was small or had no statistics (a fresh cluster) read every node of
 * the instance for each write, which made wide JOINs quadratic: the ids
 * in an array parameter (id = ANY($2)), and then the ids as a
 * list (instance_id = $1 AND id IN ($2, $8, ...)), where the planner may
 * search the primary key by its first column alone and apply the list as
 * a filter.  The UPDATE then finds each row by its ctid, which nobody
 * else changes meanwhile: the caller holds the instance's runs row.
 */
static char *
flush_sql(NodeWriteMode mode)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s,
						   "WITH w AS MATERIALIZED (SELECT * FROM ROWS FROM (");
	for (int c = 0; c < NW_COLS; c++)
		appendStringInfo(&s, "%spg_catalog.unnest($%d)", c > 0 ? ", " : "",
						 c + 2);
	appendStringInfoString(
		&s,
		") WITH ORDINALITY AS w(id, scope, st, result, att, det, at, "
		" start_at, later, started, eid, ended, ord)), "
		"x AS (SELECT w.*, o.tid, o.updated_at AS old_at FROM w CROSS JOIN LATERAL "
		" (SELECT o.ctid AS tid, o.updated_at FROM df.nodes o "
		"  WHERE o.instance_id OPERATOR(pg_catalog.=) $1 "
		"  AND o.id OPERATOR(pg_catalog.=) w.id OFFSET 0) o "
		" WHERE NOT w.later), "
		"u AS (UPDATE df.nodes n SET "
		" status = CASE x.st WHEN 'r' THEN 'running' WHEN 'c' THEN 'completed' ELSE 'failed' END, "
		" result = CASE x.st WHEN 'r' THEN NULL WHEN 'c' THEN x.result::pg_catalog.jsonb "
		"  ELSE pg_catalog.to_jsonb(x.result) END, "
		" status_details = CASE WHEN x.st OPERATOR(pg_catalog.=) 'r' AND x.det IS NOT NULL "
		"  THEN x.det::pg_catalog.jsonb ELSE pg_catalog.jsonb_build_object('execution_id', x.scope) END, "
		" updated_at = pg_catalog.now() "
		"FROM x WHERE n.ctid OPERATOR(pg_catalog.=) x.tid "
		"RETURNING x.ord, n.id, n.result, n.left_node IS NULL AND n.right_node IS NULL AS leaf, "
		" x.st, x.scope, x.att, x.det, "
		" COALESCE(x.start_at, x.old_at) AS old, x.at, "
		" CASE WHEN x.started THEN x.start_at END AS started, x.eid, x.ended) ");
	appendStringInfo(
		&s,
		"INSERT INTO df_internal.events "
		"(%sinstance_id, at, kind, node_id, scope, attempt, duration_ms, detail%s) "
		"SELECT %s$1, u.at, CASE u.st WHEN 'r' THEN 'node_started' WHEN 'c' THEN 'node_completed' "
		" ELSE 'node_failed' END, u.id, "
		"CASE WHEN pg_catalog.starts_with(u.scope, $1 OPERATOR(pg_catalog.||) '::') "
		" AND %s THEN pg_catalog.substr(u.scope, pg_catalog.length($1) OPERATOR(pg_catalog.+) 1) "
		" ELSE u.scope END, "
		"CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN NULLIF(u.att, 0) END, "
		"CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN "
		" GREATEST(0, (pg_catalog.date_part('epoch', u.at "
		" OPERATOR(pg_catalog.-) u.old) OPERATOR(pg_catalog.*) 1000)::bigint) END, "
		"CASE u.st WHEN 'r' THEN NULL WHEN 'f' THEN u.det::pg_catalog.jsonb "
		" ELSE CASE WHEN u.leaf AND pg_catalog.jsonb_typeof(u.result OPERATOR(pg_catalog.->) 'row_count') "
		" OPERATOR(pg_catalog.=) 'number' "
		" THEN pg_catalog.jsonb_build_object('row_count', u.result OPERATOR(pg_catalog.->) 'row_count') "
		" END END%s FROM (",
		mode == NW_IDS ? "id, " : "",
		mode == NW_IDS		 ? ", started_at, ended_id" :
			mode == NW_PAIRS ? ", started_at" :
							   "",
		mode == NW_IDS ? "u.eid, " : "",
		/* kept without the instance's id where the view puts it back */
		mode != NW_ROWS ? "true" : "false",
		mode == NW_IDS		 ? ", u.started, u.ended" :
			mode == NW_PAIRS ? ", u.started" :
							   "");
	appendStringInfoString(&s,
						   "SELECT * FROM u UNION ALL "
						   "SELECT w.ord, w.id::varchar, NULL::pg_catalog.jsonb, false, w.st, w.scope, w.att, "
						   " w.det, NULL::pg_catalog.timestamptz, w.at, NULL::pg_catalog.timestamptz, "
						   " w.eid, NULL::pg_catalog.int8 FROM w WHERE w.later AND NOT w.started"
						   ") u ORDER BY u.ord");
	return s.data;
}

static SPIPlanPtr
flush_plan(NodeWriteMode mode)
{
	Oid		   types[1 + NW_COLS];
	SPIPlanPtr plan;
	char	  *sql;

	if (flush_plans[mode] != NULL)
		return flush_plans[mode];
	types[0] = TEXTOID;
	for (int c = 0; c < NW_COLS; c++)
		types[1 + c] = get_array_type(col_types[c]);
	sql = flush_sql(mode);
	plan =
		SPI_prepare_cursor(sql, 1 + NW_COLS, types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR,
			 "could not prepare the engine statement \"node writes\": %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR,
			 "could not keep the plan of the engine statement \"node writes\"");
	pfree(sql);
	flush_plans[mode] = plan;
	return plan;
}

/*
 * The rows in one statement, through which a trigger of the user's on
 * df.nodes or df_internal.events fires (store_write_node_rows).
 */
static void
write_rows_statement(const char *instance_id, int n, NodeWriteMode mode,
					 Datum **v, bool **nulls)
{
	Datum values[1 + NW_COLS];
	int	  dims[1] = {n};
	int	  lbs[1] = {1};
	int	  rc;

	values[0] = pgd_text_datum(instance_id);
	for (int c = 0; c < NW_COLS; c++)
	{
		int16 len;
		bool  byval;
		char  align;

		get_typlenbyvalalign(col_types[c], &len, &byval, &align);
		values[1 + c] =
			PointerGetDatum(construct_md_array(v[c], nulls[c], 1, dims, lbs,
											   col_types[c], len, byval,
											   align));
	}
	store_event_rows++;
	rc =
		pgd_spi_run_kept(flush_plan(mode), &flush_planned[mode], values, NULL);
	if (rc < 0)
		elog(ERROR, "engine statement \"node writes\" failed: %s",
			 SPI_result_code_string(rc));
	for (int c = 0; c < NW_COLS; c++)
		pfree(DatumGetPointer(values[1 + c]));
}

/*
 * df.nodes and df_internal.events, opened for a flush: the rows are written
 * straight into their heaps and indexes (store_write_node_rows).
 */
typedef struct FlushRels
{
	Relation		nodes;
	Relation		events;
	Oid				nodes_pkey;
	EState		   *estate;
	ResultRelInfo  *nodes_rri;
	ResultRelInfo  *events_rri;
	TupleTableSlot *node_slot;
	ExprState	   *event_id_default;
	/* attribute numbers: df.nodes */
	AttrNumber n_instance_id, n_id, n_status, n_result, n_details,
		n_updated_at, n_left, n_right;
	/* df_internal.events (0: the schema has no such column) */
	AttrNumber e_id, e_instance_id, e_at, e_kind, e_node_id, e_scope,
		e_attempt, e_duration, e_detail, e_started_at, e_ended_id,
		e_instance_started_at, e_instance_completed_at, e_instance_duration;
} FlushRels;

static TupleTableSlot *instance_event_slot(FlushRels *r, int64 event_id,
										   const char *instance_id,
										   TimestampTz started_at,
										   const char *kind, const char *scope,
										   const char *detail);
static bool			   merge_instance_end(FlushRels *r, TupleTableSlot *slot,
										  const char *instance_id);

/*
 * scope without the instance's id in front: "::1" for "<id>::1" (every
 * scope of an instance starts with "<id>::"); any other text as it is.
 */
static const char *
scope_without_instance(const char *instance_id, const char *scope)
{
	size_t n;

	if (scope == NULL || instance_id == NULL)
		return scope;
	n = strlen(instance_id);
	if (n == 0 || strncmp(scope, instance_id, n) != 0 ||
		strncmp(scope + n, "::", 2) != 0)
		return scope;
	return scope + n;
}

/*
 * scope as a row of df_internal.events keeps it: without the instance's id
 * in front, which df_internal.history_events puts back; 8 bytes less per
 * history row, about 16 per chain step.  Whole when the schema
 * has no such view (an older version's, which would show it as kept).  A
 * flush knows that from its mode and strips it itself.
 */
const char *
store_event_scope(const char *instance_id, const char *scope)
{
	if (!pgd_internal_relation_exists("history_events"))
		return scope;
	return scope_without_instance(instance_id, scope);
}

/*
 * A new event row of r's events: a slot of the table, every column NULL
 * (the caller sets its own).
 */
static TupleTableSlot *
event_slot(FlushRels *r)
{
	TupleTableSlot *slot = table_slot_create(r->events, NULL);

	ExecClearTuple(slot);
	for (int a = 0; a < RelationGetDescr(r->events)->natts; a++)
	{
		slot->tts_values[a] = (Datum) 0;
		slot->tts_isnull[a] = true;
	}
	return slot;
}

/* Insert the event rows of slots[0 .. n - 1] with their index entries, and drop the slots. */
static void
insert_events(FlushRels *r, TupleTableSlot **slots, int n)
{
	store_event_rows += n;
	if (n > 0)
		table_multi_insert(r->events, slots, n, GetCurrentCommandId(true), 0,
						   NULL);
	for (int i = 0; i < n; i++)
	{
		if (r->events_rri->ri_NumIndices > 0)
			(void) pgd_insert_index_tuples(r->events_rri, slots[i], r->estate);
		ExecDropSingleTupleTableSlot(slots[i]);
	}
}

/*
 * The milliseconds from from to at, as GREATEST(0, (date_part('epoch', at
 * - from) * 1000)::bigint).
 */
static int64
duration_ms(TimestampTz at, TimestampTz from)
{
	double ms = rint((double) (at - from) / 1000000.0 * 1000.0);

	return ms > 0 ? (int64) ms : 0;
}

static void
flush_open(FlushRels *r)
{
	r->nodes_pkey = pgd_df_relid("nodes_pkey");
	r->nodes = table_open(pgd_df_relid("nodes"), RowExclusiveLock);
	r->events = table_open(pgd_internal_relid("events"), RowExclusiveLock);
	r->n_instance_id = store_attnum(r->nodes, "instance_id", false);
	r->n_id = store_attnum(r->nodes, "id", false);
	r->n_status = store_attnum(r->nodes, "status", false);
	r->n_result = store_attnum(r->nodes, "result", false);
	r->n_details = store_attnum(r->nodes, "status_details", false);
	r->n_updated_at = store_attnum(r->nodes, "updated_at", false);
	r->n_left = store_attnum(r->nodes, "left_node", false);
	r->n_right = store_attnum(r->nodes, "right_node", false);
	r->e_id = store_attnum(r->events, "id", false);
	r->e_instance_id = store_attnum(r->events, "instance_id", false);
	r->e_at = store_attnum(r->events, "at", false);
	r->e_kind = store_attnum(r->events, "kind", false);
	r->e_node_id = store_attnum(r->events, "node_id", false);
	r->e_scope = store_attnum(r->events, "scope", false);
	r->e_attempt = store_attnum(r->events, "attempt", false);
	r->e_duration = store_attnum(r->events, "duration_ms", false);
	r->e_detail = store_attnum(r->events, "detail", false);
	r->e_started_at = store_attnum(r->events, "started_at", true);
	r->e_ended_id = store_attnum(r->events, "ended_id", true);
	r->e_instance_started_at =
		store_attnum(r->events, "instance_started_at", true);
	r->e_instance_completed_at =
		store_attnum(r->events, "instance_completed_at", true);
	r->e_instance_duration =
		store_attnum(r->events, "instance_duration_ms", true);

	r->estate = CreateExecutorState();
	r->nodes_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(r->nodes_rri, r->nodes, 0, NULL, 0);
	ExecOpenIndices(r->nodes_rri, false);
	r->events_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(r->events_rri, r->events, 0, NULL, 0);
	ExecOpenIndices(r->events_rri, false);
	r->node_slot =
		MakeSingleTupleTableSlot(RelationGetDescr(r->nodes), &TTSOpsHeapTuple);
	r->event_id_default = NULL;
}

static void
flush_close(FlushRels *r)
{
	ExecDropSingleTupleTableSlot(r->node_slot);
	ExecCloseIndices(r->nodes_rri);
	ExecCloseIndices(r->events_rri);
	FreeExecutorState(r->estate);
	table_close(r->events, NoLock);
	table_close(r->nodes, NoLock);
}

/* A jsonb datum from JSON text. */
static Datum
flush_jsonb(const char *text)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
}

/*
 * A large result compressed in its row, as PostgreSQL compresses a value
 * only once its row passes 2 kB: a JOIN's result repeats its branches'
 * (the root of a fan-out of 20 holds all 20 of them), and compressed its
 * row's new version stays on its page, a HOT update, instead of moving to
 * another one with a lock record, an index entry and the whole row in the
 * WAL.  A value that does not compress is kept as it is;
 * readers decompress it as any compressed value.
 */
#define RESULT_COMPRESS_MIN 256

static Datum
compact_result(Datum value)
{
	Datum compressed;

	if (VARSIZE_ANY(DatumGetPointer(value)) < RESULT_COMPRESS_MIN)
		return value;
	compressed = toast_compress_datum(value, (char) default_toast_compression);
	return DatumGetPointer(compressed) == NULL ? value : compressed;
}

/* {"key": value} */
static Datum
flush_jsonb_pair(const char *key, JsonbValue *value)
{
	JsonbParseState *state = NULL;
	JsonbValue		 k;
	JsonbValue		*res;

	k.type = jbvString;
	k.val.string.len = strlen(key);
	k.val.string.val = (char *) key;
	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	(void) pushJsonbValue(&state, WJB_KEY, &k);
	(void) pushJsonbValue(&state, WJB_VALUE, value);
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(res));
}

/* A JSON string, or null, as jsonb. */
static Datum
flush_jsonb_string(const char *str)
{
	JsonbValue v;

	if (str == NULL)
	{
		v.type = jbvNull;
		return JsonbPGetDatum(JsonbValueToJsonb(&v));
	}
	v.type = jbvString;
	v.val.string.len = strlen(str);
	v.val.string.val = (char *) str;
	return JsonbPGetDatum(JsonbValueToJsonb(&v));
}

/*
 * A step's row count from its result: {"row_count": n}, or NULL.  Only a
 * leaf's event has it: a THEN, a JOIN, a wrapper ends with a copy of a
 * child's result, whose own event has the count already.
 */
static Datum
flush_row_count(Jsonb *result, bool *isnull)
{
	JsonbValue	key;
	JsonbValue *count;

	*isnull = true;
	if (result == NULL || !JB_ROOT_IS_OBJECT(result) ||
		JB_ROOT_IS_SCALAR(result))
		return (Datum) 0;
	key.type = jbvString;
	key.val.string.len = strlen("row_count");
	key.val.string.val = "row_count";
	count = findJsonbValueFromContainer(&result->root, JB_FOBJECT, &key);
	if (count == NULL || count->type != jbvNumeric)
		return (Datum) 0;
	*isnull = false;
	return flush_jsonb_pair("row_count", count);
}

/*
 * Update write i's node row (found by the whole primary key): its status,
 * result, stamp and updated_at.  Its old updated_at goes to *old_at, its
 * new result to *result, whether it is a leaf (no children) to *leaf.
 * False when the instance has no such node.
 * Nobody else changes the row meanwhile: the caller holds the instance's
 * runs row; should someone have, the update fails ("tuple concurrently
 * updated") rather than write over it.
 */
static bool
flush_update_node(FlushRels *r, Snapshot snap, const char *instance_id,
				  Datum **v, bool **nulls, int i, TimestampTz *old_at,
				  bool *old_at_null, Jsonb **result, bool *leaf)
{
	TupleDesc	desc = RelationGetDescr(r->nodes);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	old;
	HeapTuple	tup;
	Datum	   *values = palloc0(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc0(sizeof(bool) * desc->natts);
	bool	   *replace = palloc0(sizeof(bool) * desc->natts);
	const char *st = TextDatumGetCString(v[NW_STATE][i]);
	char	   *scope = TextDatumGetCString(v[NW_SCOPE][i]);
	char	   *res =
		  nulls[NW_RESULT][i] ? NULL : TextDatumGetCString(v[NW_RESULT][i]);
	Datum	   d;
	bool	   found;
	int		   which;
	JsonbValue sv;

	ScanKeyInit(&keys[0], r->n_instance_id, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(instance_id));
	ScanKeyInit(&keys[1], r->n_id, BTEqualStrategyNumber, F_TEXTEQ,
				v[NW_ID][i]);
	/* compared as the index orders them */
	keys[0].sk_collation =
		TupleDescAttr(desc, r->n_instance_id - 1)->attcollation;
	keys[1].sk_collation = TupleDescAttr(desc, r->n_id - 1)->attcollation;
	scan = systable_beginscan(r->nodes, r->nodes_pkey, true, snap, 2, keys);
	old = systable_getnext(scan);
	found = HeapTupleIsValid(old);
	*result = NULL;
	if (found)
	{
		d = heap_getattr(old, r->n_updated_at, desc, old_at_null);
		*old_at = *old_at_null ? 0 : DatumGetTimestampTz(d);
		*leaf = heap_attisnull(old, r->n_left, desc) &&
			heap_attisnull(old, r->n_right, desc);

		replace[r->n_status - 1] = true;
		values[r->n_status - 1] =
			CStringGetTextDatum(st[0] == 'r'	 ? "running" :
									st[0] == 'c' ? "completed" :
												   "failed");
		replace[r->n_result - 1] = true;
		if (st[0] == 'r' || res == NULL)
			isnull[r->n_result - 1] = true;
		else if (st[0] == 'c')
			values[r->n_result - 1] = flush_jsonb(res);
		else
			values[r->n_result - 1] = flush_jsonb_string(res);
		if (!isnull[r->n_result - 1])
		{
			*result = DatumGetJsonbP(values[r->n_result - 1]);
			values[r->n_result - 1] = compact_result(values[r->n_result - 1]);
		}
		replace[r->n_details - 1] = true;
		if (st[0] == 'r' && !nulls[NW_DETAIL][i])
		{
			/* a start's detail: its status_details (pgd_store_node_waiting) */
			values[r->n_details - 1] =
				flush_jsonb(TextDatumGetCString(v[NW_DETAIL][i]));
		}
		else
		{
			sv.type = jbvString;
			sv.val.string.len = strlen(scope);
			sv.val.string.val = scope;
			values[r->n_details - 1] = flush_jsonb_pair("execution_id", &sv);
		}
		replace[r->n_updated_at - 1] = true;
		values[r->n_updated_at - 1] =
			TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

		tup = heap_modify_tuple(old, desc, values, isnull, replace);
		which = pgd_simple_heap_update(r->nodes, &old->t_self, tup);
		if (which != 0 && r->nodes_rri->ri_NumIndices > 0)
		{
			ExecStoreHeapTuple(tup, r->node_slot, false);
			(void) pgd_insert_index_tuples_update(r->nodes_rri, r->node_slot,
												  r->estate, which);
			ExecClearTuple(r->node_slot);
		}
	}
	systable_endscan(scan);
	return found;
}

/*
 * The rows of a flush: each write that updates its node, then the events
 * in the order of the writes.  Straight into the heaps and indexes, not
 * by a statement (the file's comment); the events as one multi-insert.
 */
void
store_write_node_rows(const char *instance_id, int n, NodeWriteMode mode,
					  Datum **v, bool **nulls)
{
	MemoryContext cxt =
		AllocSetContextCreate(CurrentMemoryContext, "pg_durable node writes",
							  ALLOCSET_DEFAULT_SIZES);
	MemoryContext	 old = MemoryContextSwitchTo(cxt);
	FlushRels		 r;
	Snapshot		 snap;
	TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * (n + 1));
	int				 nslots = 0;
	ExprContext		*econtext;

	flush_open(&r);
	if (pgd_store_user_trigger(r.nodes, TRIGGER_TYPE_UPDATE) ||
		pgd_store_user_trigger(r.events, TRIGGER_TYPE_INSERT))
	{
		flush_close(&r);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		write_rows_statement(instance_id, n, mode, v, nulls);
		return;
	}
	/* the rows as the statements before this one left them */
	CommandCounterIncrement();
	snap = RegisterSnapshot(GetLatestSnapshot());
	econtext = GetPerTupleExprContext(r.estate);
	if (mode != NW_IDS)
	{
		Node *expr = build_column_default(r.events, r.e_id);

		if (expr == NULL)
			elog(ERROR, "df_internal.events.id has no default");
		r.event_id_default = ExecPrepareExpr((Expr *) expr, r.estate);
	}

	for (int i = 0; i < n; i++)
	{
		const char	   *st = TextDatumGetCString(v[NW_STATE][i]);
		bool			later = DatumGetBool(v[NW_LATER][i]);
		bool			started = DatumGetBool(v[NW_STARTED][i]);
		TimestampTz		old_at = 0;
		bool			old_null = true;
		Jsonb		   *result = NULL;
		bool			leaf = false;
		TupleTableSlot *slot;
		Datum		   *ev;
		bool		   *en;

		if (later)
		{
			/* a start whose end is later in the flush: its event only */
			if (started)
				continue;
		}
		else if (!flush_update_node(&r, snap, instance_id, v, nulls, i,
									&old_at, &old_null, &result, &leaf))
			continue;

		slot = slots[nslots++] = event_slot(&r);
		ev = slot->tts_values;
		en = slot->tts_isnull;
		if (mode == NW_IDS)
		{
			ev[r.e_id - 1] = v[NW_EID][i];
			en[r.e_id - 1] = nulls[NW_EID][i];
		}
		else
			ev[r.e_id - 1] =
				ExecEvalExprSwitchContext(r.event_id_default, econtext,
										  &en[r.e_id - 1]);
		ev[r.e_instance_id - 1] = CStringGetTextDatum(instance_id);
		en[r.e_instance_id - 1] = false;
		ev[r.e_at - 1] = v[NW_AT][i];
		en[r.e_at - 1] = false;
		ev[r.e_kind - 1] =
			CStringGetTextDatum(st[0] == 'r'	 ? "node_started" :
									st[0] == 'c' ? "node_completed" :
												   "node_failed");
		en[r.e_kind - 1] = false;
		ev[r.e_node_id - 1] = v[NW_ID][i];
		en[r.e_node_id - 1] = false;
		/* kept without the instance's id where the view puts it back (flush_mode) */
		ev[r.e_scope - 1] = v[NW_SCOPE][i];
		if (mode != NW_ROWS)
		{
			char *scope = TextDatumGetCString(v[NW_SCOPE][i]);

			ev[r.e_scope - 1] =
				CStringGetTextDatum(scope_without_instance(instance_id,
														   scope));
		}
		en[r.e_scope - 1] = false;
		if (st[0] != 'r' && !later)
		{
			int32		att = DatumGetInt32(v[NW_ATTEMPT][i]);
			TimestampTz from = old_at;
			bool		from_null = old_null;

			if (att != 0)
			{
				ev[r.e_attempt - 1] = Int32GetDatum(att);
				en[r.e_attempt - 1] = false;
			}
			/* measured from its start in this flush, else from the row's last write */
			if (!nulls[NW_START_AT][i])
			{
				from = DatumGetTimestampTz(v[NW_START_AT][i]);
				from_null = false;
			}
			if (!from_null)
			{
				ev[r.e_duration - 1] =
					Int64GetDatum(duration_ms(DatumGetTimestampTz(v[NW_AT][i]),
											  from));
				en[r.e_duration - 1] = false;
			}
			if (st[0] == 'f')
			{
				if (!nulls[NW_DETAIL][i])
				{
					ev[r.e_detail - 1] =
						flush_jsonb(TextDatumGetCString(v[NW_DETAIL][i]));
					en[r.e_detail - 1] = false;
				}
			}
			else if (leaf)
				ev[r.e_detail - 1] =
					flush_row_count(result, &en[r.e_detail - 1]);
		}
		if (mode != NW_ROWS && r.e_started_at != 0 && !later && started &&
			!nulls[NW_START_AT][i])
		{
			ev[r.e_started_at - 1] = v[NW_START_AT][i];
			en[r.e_started_at - 1] = false;
		}
		if (mode == NW_IDS && r.e_ended_id != 0 && !later &&
			!nulls[NW_ENDED][i])
		{
			ev[r.e_ended_id - 1] = v[NW_ENDED][i];
			en[r.e_ended_id - 1] = false;
		}
		ExecStoreVirtualTuple(slot);
	}

	/*
	 * the instance's row, its end's place after every event of the flush;
	 * or the flush's only row, when that is the whole instance
	 */
	if (store_flush_tail.set && !store_flush_tail.done && strcmp(store_flush_tail.instance_id, instance_id) == 0)
	{
		if (nslots == 1 && merge_instance_end(&r, slots[0], instance_id))
			store_flush_tail.done = true;
		else if ((slots[nslots] =
					  instance_event_slot(&r, store_flush_tail.event_id, instance_id,
										  store_flush_tail.started_at, store_flush_tail.kind,
										  store_flush_tail.scope, store_flush_tail.detail)) != NULL)
		{
			nslots++;
			store_flush_tail.done = true;
		}
	}
	insert_events(&r, slots, nslots);
	flush_close(&r);
	UnregisterSnapshot(snap);
	/* the statements after this one see the rows */
	CommandCounterIncrement();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* The created_at of the instance's df.instances row; false when there is none. */
static bool
instance_created_at(const char *instance_id, TimestampTz *created)
{
	Relation  instances;
	HeapTuple row;
	Datum	  d = (Datum) 0;
	bool	  isnull = true;

	row = store_key_row(pgd_df_relid("instances"),
						pgd_df_relid("instances_pkey"), "id", instance_id,
						AccessShareLock, &instances);
	if (row != NULL)
		d = heap_getattr(row, store_attnum(instances, "created_at", false),
						 RelationGetDescr(instances), &isnull);
	table_close(instances, NoLock);
	if (isnull)
		return false;
	*created = DatumGetTimestampTz(d);
	return true;
}

/*
 * The instance's start and end as part of slot, the flush's only row (the
 * caller's tail), when that row is a node_completed with its own start,
 * in the instance's scope, and no history row was written since the
 * instance started: the instance was that one node, and the row is also
 * its instance_started (at instance_started_at, NULL when it is the
 * node's started_at) and instance_completed (the view's subs -1 and 2).
 * One row and one index entry instead of two, about 200 bytes of WAL
 * less for a one-step workflow.  False, having
 * changed nothing, when it is not so or the schema has no such columns.
 */
static bool
merge_instance_end(FlushRels *r, TupleTableSlot *slot, const char *instance_id)
{
	Datum	   *ev = slot->tts_values;
	bool	   *en = slot->tts_isnull;
	TimestampTz created;
	TimestampTz now;

	if (!store_flush_tail.alone || r->e_instance_started_at == 0 ||
		r->e_instance_completed_at == 0 || r->e_instance_duration == 0 ||
		r->e_started_at == 0 || strcmp(store_flush_tail.kind, "instance_completed") != 0 ||
		store_flush_tail.detail != NULL || en[r->e_started_at - 1] ||
		(r->e_ended_id != 0 && !en[r->e_ended_id - 1]) ||
		strcmp(TextDatumGetCString(ev[r->e_kind - 1]), "node_completed") !=
			0 ||
		strcmp(TextDatumGetCString(ev[r->e_scope - 1]),
			   store_event_scope(instance_id, store_flush_tail.scope)) != 0 ||
		!instance_created_at(instance_id, &created))
		return false;
	now = GetCurrentTimestamp();
	if (DatumGetTimestampTz(ev[r->e_started_at - 1]) != store_flush_tail.started_at)
	{
		ev[r->e_instance_started_at - 1] =
			TimestampTzGetDatum(store_flush_tail.started_at);
		en[r->e_instance_started_at - 1] = false;
	}
	ev[r->e_instance_completed_at - 1] = TimestampTzGetDatum(now);
	en[r->e_instance_completed_at - 1] = false;
	ev[r->e_instance_duration - 1] = Int64GetDatum(duration_ms(now, created));
	en[r->e_instance_duration - 1] = false;
	return true;
}

/*
 * The history row of an instance's end, at now, with its kind, scope and
 * detail (JSON text or NULL) and the duration since the instance's
 * created_at.  With an event_id, the row of its instance_started and its
 * end, as held_start.c's statement inserts it: id event_id (drawn at the
 * start's place), the start's time as started_at, ended_id drawn now from
 * the events' sequence.  Without one (0), the end alone, as STMT_EVENT_ADD
 * inserts it: its id drawn now.  NULL when the schema has no started_at or
 * ended_id for a start, or the instance's row or its created_at is not
 * there.
 */
static TupleTableSlot *
instance_event_slot(FlushRels *r, int64 event_id, const char *instance_id,
					TimestampTz started_at, const char *kind,
					const char *scope, const char *detail)
{
	TimestampTz		created;
	TupleTableSlot *slot;
	TimestampTz		now = GetCurrentTimestamp();
	const char	   *event_scope = store_event_scope(instance_id, scope);
	Oid				seq = pgd_internal_relid("events_id_seq");

	if ((event_id != 0 && (r->e_started_at == 0 || r->e_ended_id == 0)) ||
		!instance_created_at(instance_id, &created))
		return NULL;
	slot = event_slot(r);
#define SET(a, datum) \
	do \
	{ \
		slot->tts_values[a - 1] = (datum); \
		slot->tts_isnull[a - 1] = false; \
	} while (0)
	SET(r->e_id, Int64GetDatum(event_id != 0 ? event_id :
											   nextval_internal(seq, false)));
	SET(r->e_instance_id, CStringGetTextDatum(instance_id));
	SET(r->e_at, TimestampTzGetDatum(now));
	SET(r->e_kind, CStringGetTextDatum(kind));
	if (event_scope != NULL)
		SET(r->e_scope, CStringGetTextDatum(event_scope));
	SET(r->e_duration, Int64GetDatum(duration_ms(now, created)));
	if (detail != NULL)
		SET(r->e_detail, flush_jsonb(detail));
	if (event_id != 0)
	{
		SET(r->e_started_at, TimestampTzGetDatum(started_at));
		SET(r->e_ended_id, Int64GetDatum(nextval_internal(seq, false)));
	}
#undef SET
	ExecStoreVirtualTuple(slot);
	return slot;
}

/*
 * That row, inserted alone (instance_event_slot; event_id 0: an end whose
 * start is not held).  No statement: it cost 28-38 us at the end of every
 * instance that started and ended in one batch, and an end alone was most
 * of the end of an instance whose last node an external worker or the
 * HTTP worker completes (perf); the caller wrote the node writes before.
 * False when a trigger of the user's on df_internal.events must fire, or
 * instance_event_slot cannot make the row: the caller's statement then
 * inserts it.
 */
bool
store_instance_event_row(int64 event_id, const char *instance_id,
						 TimestampTz started_at, const char *kind,
						 const char *scope, const char *detail)
{
	MemoryContext	cxt = AllocSetContextCreate(CurrentMemoryContext,
												"pg_durable instance event",
												ALLOCSET_SMALL_SIZES);
	MemoryContext	old = MemoryContextSwitchTo(cxt);
	FlushRels		r;
	TupleTableSlot *slot = NULL;

	flush_open(&r);
	if (!pgd_store_user_trigger(r.events, TRIGGER_TYPE_INSERT))
		slot = instance_event_slot(&r, event_id, instance_id, started_at, kind,
								   scope, detail);
	if (slot != NULL)
		insert_events(&r, &slot, 1);
	flush_close(&r);
	/* the statements after this one see the row */
	if (slot != NULL)
		CommandCounterIncrement();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return slot != NULL;
}

/*
 * An event of the history other than a node's start or end, as its own
 * row (STMT_EVENT_ADD).  detail is a JSON object as text, or NULL; node_id
 * and scope may be NULL; attempt 0 records NULL.
 */
void
store_history_insert(const char *instance_id, const char *kind,
					 const char *node_id, const char *scope, int attempt,
					 const char *detail)
{
	char attempt_s[16];

	snprintf(attempt_s, sizeof(attempt_s), "%d", attempt);
	store_event_rows++;
	RUN(STMT_EVENT_ADD, instance_id, kind, node_id,
		store_event_scope(instance_id, scope), attempt_s, detail);
}
