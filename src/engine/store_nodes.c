/*-------------------------------------------------------------------------
 *
 * store_nodes.c
 *	  The engine store's node writes: node starts and ends are buffered and
 *	  written at the end of a transition, with their events; and the reads
 *	  of a node's state and stamps, which see the buffer.
 *
 * Node starts and ends are buffered and written at the end of a
 * transition, or before any other statement of the store that reads or
 * writes df.nodes or the history runs, so the engine never reads a node
 * row that is behind (pgd_store_node_stamps reads through the buffer).
 * The driver (apply.c) writes them at the end of every transition; the
 * commit hook refuses a commit with writes still buffered.  Each write
 * comes with its event: node_started, or node_completed / node_failed
 * with the duration since the node started and the truncated error or a
 * SQL step's row count, never the result itself.  An event's time is
 * when its write was buffered.
 *
 * A batch (issue 14) holds them from one transition to the next instead
 * (pgd_store_hold_node_writes), and the executor writes them before its
 * commit.  A node that starts and ends in one batch, a chain step the
 * batch runs itself and the THEN nodes around it, is then one update of
 * its row, not two, with both events: the second update of a row in one
 * transaction also made PostgreSQL check the row's three foreign keys
 * again at commit (the first version's xmin is the transaction's own),
 * which locked the instance and both children (KEY SHARE) and wrote a
 * lock record each.  A 20-step chain in one batch: 3.9 node updates and
 * 2.75 of those locks per step before, 2.4 and none now.  The cost: a
 * step's own statement sees the rows of its instance as the batch's last
 * write left them (its node still pending, not running); other sessions
 * see nothing of the batch before its commit either way.
 *
 * Its two events are one row of df_internal.events as well (started_at
 * holds the start's time): when the end is the next write, the history
 * shows the start just before the end; when other writes came between
 * (a THEN, a wrapper), the flush draws the ids of its events first, the
 * row's id is the one drawn at the start's place and ended_id the one at
 * the end's (df_internal.history_events).  A step of a 20-step chain run
 * in one batch was three event rows, its own and its THEN's start and
 * end; it is two.
 *
 * The buffer keeps a subtransaction's writes (the later steps of a batch
 * run in subtransactions, batch.c): what a rolled-back one buffered is
 * gone, and what it wrote is buffered again (store_subxact_callback),
 * like the step tasks a batch holds (store_tasks.c).
 *
 * The buffer is written without a statement (write_flush): each node
 * row is found by its whole primary key and updated in place, with index
 * entries only when the update is not HOT, and the events go in as one
 * multi-insert (one WAL record per page of rows) with their index
 * entries.  One statement per flush was the form before, an UPDATE of the
 * rows from arrays of the writes' columns and an INSERT of their events:
 * about 26 us per write, 40% of the executors' time in 20-step chains
 * (pg_stat_statements); before that, groups of eight UPDATEs, most of
 * whose time went to preparing df.nodes' CHECK constraints again.  No
 * CHECK constraint or trigger runs for these writes: the columns written
 * are the engine's own (a status of its three, a result its parser
 * produced, a stamp, the time; an event kind of its list), no trigger of
 * df.nodes fires for an update of them (the root-node check watches
 * instance_id and id, and the foreign keys skip an update that leaves
 * theirs as they were), and df_internal.events has none.  Executor CPU
 * per step of a 20-step chain fell from 121-128 us to 99-113, and of a
 * chain of steps each under a df.with_lock from 182-186 to 137-142
 * (issues 14, 17).
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
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "utils/reltrigger.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/spi.h"
#include "engine/store.h"
#include "engine/store_stmt.h"

#define MAX_NODE_WRITES 128 /* not yet written, at one time */

typedef struct NodeWrite
{
	char			 instance_id[PGD_ID_LEN + 1];
	char			 id[PGD_ID_LEN + 1];
	char			*scope;
	bool			 done; /* else: started */
	bool			 ok;
	char			*result;
	int				 attempt;
	char			*detail;  /* the error event detail (jsonb text) */
	TimestampTz		 at;	  /* when it was buffered: its event's time */
	SubTransactionId made;	  /* the subtransaction that buffered it */
	SubTransactionId written; /* written in; 0: not yet */
} NodeWrite;

/*
 * The buffer, in the order of the writes: those written in a
 * subtransaction that may still roll back, then those not written yet
 * (TopTransactionContext).
 */
static NodeWrite *writes = NULL;
static int		  nwrites = 0;
static int		  maxwrites = 0;
static int		  nunwritten = 0;
static bool		  flushing = false;
static bool		  hold_writes = false;

/* The step task being run, so that its node's end event carries the attempt. */
static char current_node[PGD_ID_LEN + 1];
static int	current_attempt = 0;

/*
 * The columns of a flush's statement, one array each with an element per
 * write: id, scope, state, result, attempt, detail, the time of its event,
 * the time its node started when that start is in the flush too, whether
 * it is a start whose update the node's end in the same flush makes,
 * whether it is a start or an end whose start and end are one event row,
 * and (GROUP_IDS) the event row's id and its end's place (ended_id).
 */
enum
{
	COL_ID,
	COL_SCOPE,
	COL_STATE,
	COL_RESULT,
	COL_ATTEMPT,
	COL_DETAIL,
	COL_AT,
	COL_START_AT,
	COL_LATER,
	COL_STARTED,
	COL_EID,
	COL_ENDED,
	FLUSH_COLS
};

static const Oid col_types[FLUSH_COLS] = {
	TEXTOID,		TEXTOID,		TEXTOID, TEXTOID, INT4OID, TEXTOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, BOOLOID, INT8OID, INT8OID};


/*
 * How a flush writes the events: for a schema without started_at (0.3.0,
 * until updated), each its own row; a start and its end when it is the
 * next write, one row; and a start and its end with other writes between
 * them, one row too, whose ids are drawn for the flush beforehand.
 */
typedef enum GroupMode
{
	GROUP_ROWS,
	GROUP_PAIRS,
	GROUP_IDS
} GroupMode;

static SPIPlanPtr flush_plans[3];
static bool		  flush_planned[3]; /* pgd_spi_run_kept */

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
 * in an array parameter (id = ANY($2), issue 22), and then the ids as a
 * list (instance_id = $1 AND id IN ($2, $8, ...)), where the planner may
 * search the primary key by its first column alone and apply the list as
 * a filter.  The UPDATE then finds each row by its ctid, which nobody
 * else changes meanwhile: the caller holds the instance's runs row.
 */
static char *
flush_sql(GroupMode mode)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s,
						   "WITH w AS MATERIALIZED (SELECT * FROM ROWS FROM (");
	for (int c = 0; c < FLUSH_COLS; c++)
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
		" status_details = pg_catalog.jsonb_build_object('execution_id', x.scope), "
		" updated_at = pg_catalog.now() "
		"FROM x WHERE n.ctid OPERATOR(pg_catalog.=) x.tid "
		"RETURNING x.ord, n.id, n.result, x.st, x.scope, x.att, x.det, "
		" COALESCE(x.start_at, x.old_at) AS old, x.at, "
		" CASE WHEN x.started THEN x.start_at END AS started, x.eid, x.ended) ");
	appendStringInfo(&s,
					 "INSERT INTO df_internal.events "
					 "(%sinstance_id, at, kind, node_id, scope, attempt, duration_ms, detail%s) "
					 "SELECT %s$1, u.at, CASE u.st WHEN 'r' THEN 'node_started' WHEN 'c' THEN 'node_completed' "
					 " ELSE 'node_failed' END, u.id, u.scope, "
					 "CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN NULLIF(u.att, 0) END, "
					 "CASE WHEN u.st OPERATOR(pg_catalog.<>) 'r' THEN "
					 " GREATEST(0, (pg_catalog.date_part('epoch', u.at "
					 " OPERATOR(pg_catalog.-) u.old) OPERATOR(pg_catalog.*) 1000)::bigint) END, "
					 "CASE u.st WHEN 'r' THEN NULL WHEN 'f' THEN u.det::pg_catalog.jsonb "
					 " ELSE CASE WHEN pg_catalog.jsonb_typeof(u.result OPERATOR(pg_catalog.->) 'row_count') "
					 " OPERATOR(pg_catalog.=) 'number' "
					 " THEN pg_catalog.jsonb_build_object('row_count', u.result OPERATOR(pg_catalog.->) 'row_count') "
					 " END END%s FROM (",
					 mode == GROUP_IDS ? "id, " : "",
					 mode == GROUP_IDS		 ? ", started_at, ended_id" :
						 mode == GROUP_PAIRS ? ", started_at" :
											   "",
					 mode == GROUP_IDS ? "u.eid, " : "",
					 mode == GROUP_IDS		 ? ", u.started, u.ended" :
						 mode == GROUP_PAIRS ? ", u.started" :
											   "");
	appendStringInfoString(&s,
						   "SELECT * FROM u UNION ALL "
						   "SELECT w.ord, w.id::varchar, NULL::pg_catalog.jsonb, w.st, w.scope, w.att, "
						   " w.det, NULL::pg_catalog.timestamptz, w.at, NULL::pg_catalog.timestamptz, "
						   " w.eid, NULL::pg_catalog.int8 FROM w WHERE w.later AND NOT w.started"
						   ") u ORDER BY u.ord");
	return s.data;
}

static SPIPlanPtr
flush_plan(GroupMode mode)
{
	Oid		   types[1 + FLUSH_COLS];
	SPIPlanPtr plan;
	char	  *sql;

	if (flush_plans[mode] != NULL)
		return flush_plans[mode];
	types[0] = TEXTOID;
	for (int c = 0; c < FLUSH_COLS; c++)
		types[1 + c] = get_array_type(col_types[c]);
	sql = flush_sql(mode);
	plan = SPI_prepare_cursor(sql, 1 + FLUSH_COLS, types,
							  CURSOR_OPT_GENERIC_PLAN);
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
 * The write of the same node that ends it later in ws[from..n-1], for a
 * start: then the start is only its event, the end's update makes both.
 */
static const NodeWrite *
end_of_start(const NodeWrite *ws, int from, int n)
{
	if (ws[from].done)
		return NULL;
	for (int j = from + 1; j < n; j++)
		if (strcmp(ws[j].id, ws[from].id) == 0)
			return ws[j].done ? &ws[j] : NULL;
	return NULL;
}

/*
 * Is ws[i] a start whose end is ws[i + 1], in the same scope?  Then the
 * two are one event row: the end's, with the start's time in started_at
 * (df_internal.history_events shows the start just before the end).  A
 * step that a batch starts and runs, and a one-step workflow's step, are
 * that; a compound node, whose children's writes come between, is not.
 */
static bool
start_and_end(const NodeWrite *ws, int i, int n)
{
	return i + 1 < n && !ws[i].done && ws[i + 1].done &&
		strcmp(ws[i].id, ws[i + 1].id) == 0 &&
		strcmp(ws[i].scope, ws[i + 1].scope) == 0;
}

/*
 * Is ws[i] a start whose end comes later in ws[0..n-1] in the same
 * scope, with other writes between?  Then, when the flush draws its event
 * ids (GROUP_IDS), the two are one event row too: its id is the one drawn
 * at the start's place, and ended_id the one drawn at the end's.  A THEN
 * or a wrapper node (a LOCK, a LIMIT, a CATCH) around a step that a batch
 * runs is that.
 */
static const NodeWrite *
merged_end(const NodeWrite *ws, int i, int n)
{
	const NodeWrite *end = end_of_start(ws, i, n);

	if (end == NULL || end == &ws[i + 1] ||
		strcmp(end->scope, ws[i].scope) != 0)
		return NULL;
	return end;
}

/*
 * The start in ws[0..i-1] that write ws[i] ends, or -1: the node's write
 * before it, when that is a start (end_of_start of it is ws[i]).
 */
static int
start_of_end(const NodeWrite *ws, int i)
{
	for (int j = i - 1; ws[i].done && j >= 0; j--)
		if (strcmp(ws[j].id, ws[i].id) == 0)
			return ws[j].done ? -1 : j;
	return -1;
}

/*
 * The columns of write ws[i] at element i of v and nulls ('r'unning,
 * 'c'ompleted, 'f'ailed); ws[0..n-1] are the writes of this flush, and
 * ids the event ids drawn for them (GROUP_IDS, else NULL).
 */
static void
write_args(const NodeWrite *ws, int i, int n, GroupMode mode, const int64 *ids,
		   Datum **v, bool **nulls)
{
	const NodeWrite *w = &ws[i];
	int				 start = start_of_end(ws, i);
	bool			 merged = false;

	v[COL_ID][i] = pgd_text_datum(w->id);
	v[COL_SCOPE][i] = pgd_text_datum(w->scope);
	v[COL_STATE][i] = pgd_text_datum(!w->done ? "r" : w->ok ? "c" : "f");
	v[COL_RESULT][i] = w->result ? pgd_text_datum(w->result) : (Datum) 0;
	nulls[COL_RESULT][i] = w->result == NULL;
	v[COL_ATTEMPT][i] = Int32GetDatum(w->attempt);
	v[COL_DETAIL][i] = w->detail ? pgd_text_datum(w->detail) : (Datum) 0;
	nulls[COL_DETAIL][i] = w->detail == NULL;
	v[COL_AT][i] = TimestampTzGetDatum(w->at);
	/* an end whose start is in this flush too: measured from that start */
	v[COL_START_AT][i] =
		start >= 0 ? TimestampTzGetDatum(ws[start].at) : (Datum) 0;
	nulls[COL_START_AT][i] = start < 0;
	v[COL_LATER][i] = BoolGetDatum(end_of_start(ws, i, n) != NULL);
	if (mode == GROUP_IDS)
		merged = merged_end(ws, i, n) != NULL ||
			(start >= 0 && merged_end(ws, start, n) == w);
	v[COL_STARTED][i] = BoolGetDatum(mode != GROUP_ROWS &&
									 (merged || start_and_end(ws, i, n) ||
									  (i > 0 && start_and_end(ws, i - 1, n))));
	/* the row's id, and its end's place when its start's is the id */
	nulls[COL_EID][i] = nulls[COL_ENDED][i] = true;
	if (mode == GROUP_IDS && merged && w->done)
	{
		v[COL_EID][i] = Int64GetDatum(ids[start]);
		v[COL_ENDED][i] = Int64GetDatum(ids[i]);
		nulls[COL_EID][i] = nulls[COL_ENDED][i] = false;
	}
	else if (mode == GROUP_IDS)
	{
		v[COL_EID][i] = Int64GetDatum(ids[i]);
		nulls[COL_EID][i] = false;
	}
}

/*
 * Writes ws[0..n-1] in one statement, through which a trigger of the
 * user's on df.nodes or df_internal.events fires (write_flush).
 */
static void
write_flush_statement(const NodeWrite *ws, int n, GroupMode mode,
					  const int64 *ids)
{
	Datum  values[1 + FLUSH_COLS];
	Datum *v[FLUSH_COLS];
	bool  *nulls[FLUSH_COLS];
	int	   dims[1] = {n};
	int	   lbs[1] = {1};
	int	   rc;

	for (int c = 0; c < FLUSH_COLS; c++)
	{
		v[c] = palloc0(sizeof(Datum) * n);
		nulls[c] = palloc0(sizeof(bool) * n);
	}
	for (int i = 0; i < n; i++)
		write_args(ws, i, n, mode, ids, v, nulls);
	values[0] = pgd_text_datum(ws[0].instance_id);
	for (int c = 0; c < FLUSH_COLS; c++)
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
	rc =
		pgd_spi_run_kept(flush_plan(mode), &flush_planned[mode], values, NULL);
	if (rc < 0)
		elog(ERROR, "engine statement \"node writes\" failed: %s",
			 SPI_result_code_string(rc));
	for (int c = 0; c < FLUSH_COLS; c++)
	{
		pfree(DatumGetPointer(values[1 + c]));
		pfree(v[c]);
		pfree(nulls[c]);
	}
}

/*
 * df.nodes and df_internal.events, opened for a flush: the rows are written
 * straight into their heaps and indexes (flush_rows).
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
		n_updated_at;
	/* df_internal.events (0: the schema has no such column) */
	AttrNumber e_id, e_instance_id, e_at, e_kind, e_node_id, e_scope,
		e_attempt, e_duration, e_detail, e_started_at, e_ended_id;
} FlushRels;

static AttrNumber
flush_attnum(Relation rel, const char *name, bool missing_ok)
{
	AttrNumber attnum = attnameAttNum(rel, name, false);

	if (attnum <= 0 && !missing_ok)
		elog(ERROR, "table %s has no column \"%s\"",
			 RelationGetRelationName(rel), name);
	return attnum > 0 ? attnum : 0;
}

static void
flush_open(FlushRels *r)
{
	Oid df = get_namespace_oid("df", false);
	Oid internal = get_namespace_oid("df_internal", false);
	Oid nodes = get_relname_relid("nodes", df);
	Oid events = get_relname_relid("events", internal);

	r->nodes_pkey = get_relname_relid("nodes_pkey", df);
	if (!OidIsValid(nodes) || !OidIsValid(events) ||
		!OidIsValid(r->nodes_pkey))
		elog(ERROR, "the tables of pg_durable's node writes are missing");
	r->nodes = table_open(nodes, RowExclusiveLock);
	r->events = table_open(events, RowExclusiveLock);
	r->n_instance_id = flush_attnum(r->nodes, "instance_id", false);
	r->n_id = flush_attnum(r->nodes, "id", false);
	r->n_status = flush_attnum(r->nodes, "status", false);
	r->n_result = flush_attnum(r->nodes, "result", false);
	r->n_details = flush_attnum(r->nodes, "status_details", false);
	r->n_updated_at = flush_attnum(r->nodes, "updated_at", false);
	r->e_id = flush_attnum(r->events, "id", false);
	r->e_instance_id = flush_attnum(r->events, "instance_id", false);
	r->e_at = flush_attnum(r->events, "at", false);
	r->e_kind = flush_attnum(r->events, "kind", false);
	r->e_node_id = flush_attnum(r->events, "node_id", false);
	r->e_scope = flush_attnum(r->events, "scope", false);
	r->e_attempt = flush_attnum(r->events, "attempt", false);
	r->e_duration = flush_attnum(r->events, "duration_ms", false);
	r->e_detail = flush_attnum(r->events, "detail", false);
	r->e_started_at = flush_attnum(r->events, "started_at", true);
	r->e_ended_id = flush_attnum(r->events, "ended_id", true);

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

bool
pgd_store_user_trigger(Relation rel, int16 event)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger *t = &td->triggers[i];

		if (t->tgisinternal || t->tgenabled == TRIGGER_DISABLED ||
			(t->tgtype & event) == 0 ||
			strcmp(t->tgname, "instances_root_node_same_instance_fkey") == 0)
			continue;
		return true;
	}
	return false;
}

/* A jsonb datum from JSON text. */
static Datum
flush_jsonb(const char *text)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
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

/* A SQL step's row count from its result: {"row_count": n}, or NULL. */
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
 * new result to *result.  False when the instance has no such node.
 * Nobody else changes the row meanwhile: the caller holds the instance's
 * runs row; should someone have, the update fails ("tuple concurrently
 * updated") rather than write over it.
 */
static bool
flush_update_node(FlushRels *r, Snapshot snap, const char *instance_id,
				  Datum **v, bool **nulls, int i, TimestampTz *old_at,
				  bool *old_at_null, Jsonb **result)
{
	TupleDesc	desc = RelationGetDescr(r->nodes);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	old;
	HeapTuple	tup;
	Datum	   *values = palloc0(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc0(sizeof(bool) * desc->natts);
	bool	   *replace = palloc0(sizeof(bool) * desc->natts);
	const char *st = TextDatumGetCString(v[COL_STATE][i]);
	char	   *scope = TextDatumGetCString(v[COL_SCOPE][i]);
	char	   *res =
		  nulls[COL_RESULT][i] ? NULL : TextDatumGetCString(v[COL_RESULT][i]);
	Datum	   d;
	bool	   found;
	int		   which;
	JsonbValue sv;

	ScanKeyInit(&keys[0], r->n_instance_id, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(instance_id));
	ScanKeyInit(&keys[1], r->n_id, BTEqualStrategyNumber, F_TEXTEQ,
				v[COL_ID][i]);
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
			*result = DatumGetJsonbP(values[r->n_result - 1]);
		replace[r->n_details - 1] = true;
		sv.type = jbvString;
		sv.val.string.len = strlen(scope);
		sv.val.string.val = scope;
		values[r->n_details - 1] = flush_jsonb_pair("execution_id", &sv);
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
 * Writes ws[0..n-1]: each write that updates its node, then the events in
 * the order of the writes.  Straight into the heaps and indexes, not by a
 * statement (the file's comment); the events as one multi-insert.
 */
static void
write_flush(const NodeWrite *ws, int n, GroupMode mode, const int64 *ids)
{
	MemoryContext cxt =
		AllocSetContextCreate(CurrentMemoryContext, "pg_durable node writes",
							  ALLOCSET_DEFAULT_SIZES);
	MemoryContext	 old = MemoryContextSwitchTo(cxt);
	Datum			*v[FLUSH_COLS];
	bool			*nulls[FLUSH_COLS];
	FlushRels		 r;
	Snapshot		 snap;
	TupleDesc		 edesc;
	TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * n);
	int				 nslots = 0;
	const char		*instance_id = ws[0].instance_id;
	ExprContext		*econtext;

	for (int c = 0; c < FLUSH_COLS; c++)
	{
		v[c] = palloc0(sizeof(Datum) * n);
		nulls[c] = palloc0(sizeof(bool) * n);
	}
	for (int i = 0; i < n; i++)
		write_args(ws, i, n, mode, ids, v, nulls);

	flush_open(&r);
	if (pgd_store_user_trigger(r.nodes, TRIGGER_TYPE_UPDATE) ||
		pgd_store_user_trigger(r.events, TRIGGER_TYPE_INSERT))
	{
		flush_close(&r);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		write_flush_statement(ws, n, mode, ids);
		return;
	}
	/* the rows as the statements before this one left them */
	CommandCounterIncrement();
	snap = RegisterSnapshot(GetLatestSnapshot());
	edesc = RelationGetDescr(r.events);
	econtext = GetPerTupleExprContext(r.estate);
	if (mode != GROUP_IDS)
	{
		Node *expr = build_column_default(r.events, r.e_id);

		if (expr == NULL)
			elog(ERROR, "df_internal.events.id has no default");
		r.event_id_default = ExecPrepareExpr((Expr *) expr, r.estate);
	}

	for (int i = 0; i < n; i++)
	{
		const char	   *st = TextDatumGetCString(v[COL_STATE][i]);
		bool			later = DatumGetBool(v[COL_LATER][i]);
		bool			started = DatumGetBool(v[COL_STARTED][i]);
		TimestampTz		old_at = 0;
		bool			old_null = true;
		Jsonb		   *result = NULL;
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
									&old_at, &old_null, &result))
			continue;

		slot = slots[nslots++] = table_slot_create(r.events, NULL);
		ExecClearTuple(slot);
		ev = slot->tts_values;
		en = slot->tts_isnull;
		for (int a = 0; a < edesc->natts; a++)
		{
			ev[a] = (Datum) 0;
			en[a] = true;
		}
		if (mode == GROUP_IDS)
		{
			ev[r.e_id - 1] = v[COL_EID][i];
			en[r.e_id - 1] = nulls[COL_EID][i];
		}
		else
			ev[r.e_id - 1] =
				ExecEvalExprSwitchContext(r.event_id_default, econtext,
										  &en[r.e_id - 1]);
		ev[r.e_instance_id - 1] = CStringGetTextDatum(instance_id);
		en[r.e_instance_id - 1] = false;
		ev[r.e_at - 1] = v[COL_AT][i];
		en[r.e_at - 1] = false;
		ev[r.e_kind - 1] =
			CStringGetTextDatum(st[0] == 'r'	 ? "node_started" :
									st[0] == 'c' ? "node_completed" :
												   "node_failed");
		en[r.e_kind - 1] = false;
		ev[r.e_node_id - 1] = v[COL_ID][i];
		en[r.e_node_id - 1] = false;
		ev[r.e_scope - 1] = v[COL_SCOPE][i];
		en[r.e_scope - 1] = false;
		if (st[0] != 'r' && !later)
		{
			int32		att = DatumGetInt32(v[COL_ATTEMPT][i]);
			TimestampTz from = old_at;
			bool		from_null = old_null;

			if (att != 0)
			{
				ev[r.e_attempt - 1] = Int32GetDatum(att);
				en[r.e_attempt - 1] = false;
			}
			/* measured from its start in this flush, else from the row's last write */
			if (!nulls[COL_START_AT][i])
			{
				from = DatumGetTimestampTz(v[COL_START_AT][i]);
				from_null = false;
			}
			if (!from_null)
			{
				/* as GREATEST(0, (date_part('epoch', at - from) * 1000)::bigint) */
				double ms =
					rint((double) (DatumGetTimestampTz(v[COL_AT][i]) - from) /
						 1000000.0 * 1000.0);

				ev[r.e_duration - 1] = Int64GetDatum(ms > 0 ? (int64) ms : 0);
				en[r.e_duration - 1] = false;
			}
			if (st[0] == 'f')
			{
				if (!nulls[COL_DETAIL][i])
				{
					ev[r.e_detail - 1] =
						flush_jsonb(TextDatumGetCString(v[COL_DETAIL][i]));
					en[r.e_detail - 1] = false;
				}
			}
			else
				ev[r.e_detail - 1] =
					flush_row_count(result, &en[r.e_detail - 1]);
		}
		if (mode != GROUP_ROWS && r.e_started_at != 0 && !later && started &&
			!nulls[COL_START_AT][i])
		{
			ev[r.e_started_at - 1] = v[COL_START_AT][i];
			en[r.e_started_at - 1] = false;
		}
		if (mode == GROUP_IDS && r.e_ended_id != 0 && !later &&
			!nulls[COL_ENDED][i])
		{
			ev[r.e_ended_id - 1] = v[COL_ENDED][i];
			en[r.e_ended_id - 1] = false;
		}
		ExecStoreVirtualTuple(slot);
	}

	if (nslots > 0)
	{
		table_multi_insert(r.events, slots, nslots, GetCurrentCommandId(true),
						   0, NULL);
		for (int i = 0; i < nslots; i++)
			if (r.events_rri->ri_NumIndices > 0)
				(void) pgd_insert_index_tuples(r.events_rri, slots[i],
											   r.estate);
	}
	for (int i = 0; i < nslots; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	flush_close(&r);
	UnregisterSnapshot(snap);
	/* the statements after this one see the rows */
	CommandCounterIncrement();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * n event ids, in the order the sequence hands them out: for a flush, one
 * for each write of it (a start whose end is the next write shares its
 * end's: its entry is unused), one statement only when a start and its
 * end with writes between them make one row; for a held instance start,
 * one (store_start.c).
 */
int64 *
store_draw_event_ids(int n)
{
	Oid	   types[1] = {INT4OID};
	Datum  values[1];
	int64 *ids = palloc(sizeof(int64) * n);

	values[0] = Int32GetDatum(n);
	if (pgd_spi_exec("SELECT pg_catalog.nextval('df_internal.events_id_seq'::pg_catalog.regclass) "
					 "FROM pg_catalog.generate_series(1, $1)",
					 1, types, values, NULL, false) != n)
		elog(ERROR, "engine statement \"event ids\" drew too few ids");
	for (int i = 0; i < n; i++)
	{
		bool isnull;

		ids[i] =
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
										SPI_tuptable->tupdesc, 1, &isnull));
	}
	return ids;
}

/*
 * Has df_internal.events the column ended_id (it came with its index), so
 * that a start and its end with other events between them can be one row?
 */
bool
store_events_have_ended_id(void)
{
	return pgd_internal_relation_exists("events_ended_id_idx");
}

/* How this flush writes its events; GROUP_IDS draws their ids. */
static GroupMode
flush_mode(const NodeWrite *ws, int n)
{
	/* a start and its end in one row: not before the schema has the view */
	if (!pgd_internal_relation_exists("history_events"))
		return GROUP_ROWS;
	if (!store_events_have_ended_id())
		return GROUP_PAIRS;
	for (int i = 0; i < n; i++)
		if (merged_end(ws, i, n) != NULL)
			return GROUP_IDS;
	return GROUP_PAIRS;
}

/*
 * Drop the written entries that only the transaction's own rollback
 * could take back: those written in subtransactions at or above
 * 'from' (TopSubTransactionId: all).
 */
static void
forget_written(SubTransactionId from)
{
	int k = 0;

	for (int i = 0; i < nwrites; i++)
		if (writes[i].written == 0 || writes[i].written < from)
			writes[k++] = writes[i];
	nwrites = k;
}

/* The status a write leaves its node's row in. */
static const char *
write_status(const NodeWrite *w)
{
	return !w->done ? "running" : w->ok ? "completed" : "failed";
}

/* Write every buffered node write not written yet. */
void
store_flush_node_writes(void)
{
	NodeWrite		*ws;
	int				 n = nunwritten;
	SubTransactionId now = GetCurrentSubTransactionId();

	if (n == 0 || flushing)
		return;
	ws = &writes[nwrites - n];
	flushing = true;
	PG_TRY();
	{
		GroupMode mode = flush_mode(ws, n);
		int64	 *ids = mode == GROUP_IDS ? store_draw_event_ids(n) : NULL;

		write_flush(ws, n, mode, ids);
		if (ids)
			pfree(ids);
	}
	PG_FINALLY();
	{
		flushing = false;
	}
	PG_END_TRY();
	for (int i = 0; i < n; i++)
	{
		ws[i].written = now;
		/* the row as this write left it (the last write of a node wins) */
		store_stamps_put(ws[i].instance_id, ws[i].id, write_status(&ws[i]),
						 ws[i].scope);
	}
	nunwritten = 0;
	if (now == TopSubTransactionId)
		forget_written(TopSubTransactionId);
}

/*
 * The end of a transition: its node writes are written now, unless the
 * executor holds them for the rest of its batch (pgd_store_hold_node_writes).
 */
void
pgd_store_flush(void)
{
	if (!hold_writes)
		store_flush_node_writes();
}

/*
 * The executor runs a batch: may node writes stay buffered from one
 * transition to the next until the batch ends (or a statement of the
 * store runs)?  A chain step's start and end are then one update of its
 * row instead of two (issue 14).  The executor writes them before its
 * commit with pgd_store_write_node_writes.
 */
void
pgd_store_hold_node_writes(bool hold)
{
	hold_writes = hold;
}

bool
store_node_writes_held(void)
{
	return hold_writes;
}

/*
 * ... and an instance's start held with them (store_start.c), and the
 * keyed locks and limit slots still held in memory (store_locks.c,
 * store_limits.c)
 */
void
pgd_store_write_node_writes(void)
{
	pgd_store_lock_write_held();
	pgd_store_limit_write_held();
	store_write_held_start();
	store_flush_node_writes();
	hold_writes = false;
}

static int
current_attempt_of(const char *node_id)
{
	if (current_node[0] != '\0' && strcmp(node_id, current_node) == 0)
		return current_attempt;
	return 0;
}

static void
buffer_node_write(const char *instance_id, const char *node_id,
				  const char *scope, bool done, PgdOutcome outcome)
{
	NodeWrite *w;
	int		   i;

	if (nunwritten > 0 &&
		strcmp(writes[nwrites - 1].instance_id, instance_id) != 0)
		store_flush_node_writes();
	/*
	 * A node already in the buffer is written first, so that a statement
	 * updates a row once, except the end of a node whose start is there
	 * (the end's update makes both, end_of_start).
	 */
	for (i = nwrites - nunwritten; i < nwrites; i++)
		if (strcmp(writes[i].id, node_id) == 0)
		{
			if (!done || writes[i].done || end_of_start(writes, i, nwrites))
				store_flush_node_writes();
			break;
		}
	if (nunwritten == MAX_NODE_WRITES)
		store_flush_node_writes();

	if (nwrites == maxwrites)
	{
		int newmax = Max(maxwrites * 2, MAX_NODE_WRITES * 2);

		writes = writes == NULL ?
			MemoryContextAlloc(TopTransactionContext,
							   newmax * sizeof(NodeWrite)) :
			repalloc(writes, newmax * sizeof(NodeWrite));
		maxwrites = newmax;
	}
	w = &writes[nwrites++];
	nunwritten++;
	strlcpy(w->instance_id, instance_id, sizeof(w->instance_id));
	strlcpy(w->id, node_id, sizeof(w->id));
	w->scope = MemoryContextStrdup(TopTransactionContext, scope);
	w->done = done;
	w->ok = outcome.ok;
	w->result = done && outcome.result ?
		MemoryContextStrdup(TopTransactionContext, outcome.result) :
		NULL;
	w->attempt = done ? current_attempt_of(node_id) : 0;
	w->detail = done && !outcome.ok ?
		MemoryContextStrdup(TopTransactionContext,
							pgd_event_error_detail(outcome)) :
		NULL;
	w->at = GetCurrentTimestamp();
	w->made = GetCurrentSubTransactionId();
	w->written = 0;
}

/*
 * Rows of df.nodes read without writing the buffer first (a node's status
 * and stamp, pgd_store_node_stamps) are brought up to date with it: the
 * newest write of a node not written yet is its state.
 */
static void
store_overlay_node_writes(const char *instance_id, int rows, char **ids,
						  char **statuses, char **stamps)
{
	for (int i = nwrites - nunwritten; i < nwrites; i++)
	{
		const NodeWrite *w = &writes[i];

		if (strcmp(w->instance_id, instance_id) != 0)
			return; /* the buffer holds one instance's writes */
		for (int r = 0; r < rows; r++)
			if (ids[r] != NULL && strcmp(ids[r], w->id) == 0)
			{
				statuses[r] = pstrdup(write_status(w));
				stamps[r] = pstrdup(w->scope);
			}
	}
}

/* Status and result (as JSON text; the error text of a failed node) of a node. */
void
pgd_store_node_state(const char *instance_id, const char *node_id,
					 char **status, char **result)
{
	pgd_store_node_states(instance_id, &node_id, 1, status, result);
}

/* ... of the nodes ids[0..n-1], in one statement (a JOIN's branches). */
void
pgd_store_node_states(const char *instance_id, const char *const *ids, int n,
					  char **statuses, char **results)
{
	Datum values[2];

	values[0] = pgd_text_datum(instance_id);
	values[1] = store_text_array(n, ids);
	if (store_run(STMT_NODE_STATE, values, NULL) != n)
		elog(ERROR, "the states of %d nodes of instance %s were not read", n,
			 instance_id);
	for (int i = 0; i < n; i++)
	{
		statuses[i] = store_get_string(i, 1);
		if (statuses[i] == NULL)
			elog(ERROR, "node %s of instance %s disappeared", ids[i],
				 instance_id);
		results[i] =
			store_get_string(i, strcmp(statuses[i], "failed") == 0 ? 3 : 2);
	}
}

/* Has the buffer a write of the node not written yet? */
static bool
buffered(const char *instance_id, const char *id)
{
	for (int i = nwrites - nunwritten; i < nwrites; i++)
		if (strcmp(writes[i].id, id) == 0 &&
			strcmp(writes[i].instance_id, instance_id) == 0)
			return true;
	return false;
}

/* id, status and stamp (execution_id) of the named nodes that exist. */
int
pgd_store_node_stamps(const char *instance_id, const char *const *node_ids,
					  int n, char ***ids, char ***statuses, char ***stamps)
{
	Datum values[2];
	int	  rows;

	if (store_stamps_get(instance_id, node_ids, n, buffered, ids, statuses,
						 stamps))
		rows = n;
	else
	{
		values[0] = pgd_text_datum(instance_id);
		values[1] = store_text_array(n, node_ids);
		rows = store_run(STMT_NODE_STAMPS, values, NULL);
		*ids = pgd_spi_column(rows, 1);
		*statuses = pgd_spi_column(rows, 2);
		*stamps = pgd_spi_column(rows, 3);
		for (int r = 0; r < rows; r++)
			store_stamps_put(instance_id, (*ids)[r], (*statuses)[r],
							 (*stamps)[r]);
	}
	/* the rows as the node writes not written yet leave them */
	store_overlay_node_writes(instance_id, rows, *ids, *statuses, *stamps);
	return rows;
}

/* The node starts in scope (its node_started event goes with the update). */
void
pgd_store_node_running(const char *instance_id, const char *node_id,
					   const char *scope)
{
	PgdOutcome none = {true, NULL};

	buffer_node_write(instance_id, node_id, scope, false, none);
}

/* The node ends in scope with outcome. */
void
pgd_store_node_done(const char *instance_id, const char *node_id,
					const char *scope, PgdOutcome outcome)
{
	buffer_node_write(instance_id, node_id, scope, true, outcome);
}

/* The attempt that node_id's end event records (NULL node_id: none). */
void
pgd_store_set_attempt(const char *node_id, int attempt)
{
	if (node_id == NULL)
	{
		current_node[0] = '\0';
		current_attempt = 0;
		return;
	}
	strlcpy(current_node, node_id, sizeof(current_node));
	current_attempt = attempt;
}

/* ---------------------------------------------------------------------
 * The commit hooks of the node buffer
 * ---------------------------------------------------------------------
 */

static void
store_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* a transition whose node updates were never written must not commit */
			if (nunwritten > 0)
				elog(ERROR, "node updates were not written before commit");
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			writes = NULL; /* in TopTransactionContext */
			nwrites = maxwrites = nunwritten = 0;
			flushing = false;
			hold_writes = false;
			break;
		default:
			break;
	}
}

/*
 * A subtransaction rolled back: what it (or one below it: their ids are
 * higher) buffered is gone, and what it wrote is buffered again, not
 * written.  One committed into the transaction itself: what it wrote
 * only the transaction's rollback takes back, so it is forgotten.
 */
static void
store_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int k = 0;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		if (parentSubid == TopSubTransactionId)
			forget_written(mySubid);
		return;
	}
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	nunwritten = 0;
	for (int i = 0; i < nwrites; i++)
	{
		NodeWrite *w = &writes[i];

		if (w->made >= mySubid)
			continue;
		if (w->written >= mySubid)
			w->written = 0;
		if (w->written == 0)
			nunwritten++;
		writes[k++] = *w;
	}
	nwrites = k;
	flushing = false;
}

void
pgd_store_register_xact_callback(void)
{
	RegisterXactCallback(store_xact_callback, NULL);
	RegisterSubXactCallback(store_subxact_callback, NULL);
	store_register_task_callbacks();
	store_register_start_callbacks();
	store_register_lock_callbacks();
	store_register_stamps_callbacks();
	store_register_limit_callbacks();
}
