/*-------------------------------------------------------------------------
 *
 * node_writes.c
 *	  The engine store's node writes: node starts and ends are buffered and
 *	  written at the end of a transition, with their events; and the reads
 *	  of a node's state and stamps, which see the buffer.
 *
 * Node starts and ends are buffered and written at the end of a
 * transition, or before any other statement of the store that reads or
 * writes df.nodes or the history runs, so the engine never reads a node
 * row that is behind (pgd_store_node_stamps and pgd_store_node_states
 * read through the buffer).
 * The driver (apply.c) writes them at the end of every transition; the
 * commit hook refuses a commit with writes still buffered.  Each write
 * comes with its event: node_started, or node_completed / node_failed
 * with the duration since the node started and the truncated error or a
 * SQL step's row count, never the result itself.  An event's time is
 * when its write was buffered.
 *
 * A batch holds them from one transition to the next instead
 * (pgd_store_hold_writes), and the executor writes them before its
 * commit.  A node that starts and ends in one batch, a chain step the
 * batch runs itself and the THEN nodes around it, is then one update of
 * its row, not two, with both events: a second update of a row in one
 * transaction would also make PostgreSQL check the row's three foreign
 * keys again at commit (the first version's xmin is the transaction's
 * own), which locks the instance and both children (KEY SHARE) and writes
 * a lock record each.  A 20-step chain in one batch makes 2.4 node
 * updates per step and none of those locks, where writing at each
 * transition makes 3.9 and 2.75.  The cost: a
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
 * in one batch is two event rows, where a row per event would make three
 * (its own and its THEN's start and end).
 *
 * The buffer keeps a subtransaction's writes (the later steps of a batch
 * run in subtransactions, batch.c): what a rolled-back one buffered is
 * gone, and what it wrote is buffered again (node_writes_subxact_abort),
 * like the step tasks a batch holds (tasks.c).
 *
 * The buffer is written at once per flush, straight into the heaps and
 * indexes of df.nodes and df_internal.events, or by one statement when
 * the user has put a trigger of their own on them (node_rows.c).
 *
 * Locks: the rows of the instance whose runs row the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

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

/* The step task being run, so that its node's end event carries the attempt. */
static char current_node[PGD_ID_LEN + 1];
static int	current_attempt = 0;

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
 * ids (NW_IDS), the two are one event row too: its id is the one drawn
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
 * ids the event ids drawn for them (NW_IDS, else NULL).
 */
static void
write_args(const NodeWrite *ws, int i, int n, NodeWriteMode mode,
		   const int64 *ids, Datum **v, bool **nulls)
{
	const NodeWrite *w = &ws[i];
	int				 start = start_of_end(ws, i);
	bool			 merged = false;

	v[NW_ID][i] = pgd_text_datum(w->id);
	v[NW_SCOPE][i] = pgd_text_datum(w->scope);
	v[NW_STATE][i] = pgd_text_datum(!w->done ? "r" : w->ok ? "c" : "f");
	v[NW_RESULT][i] = w->result ? pgd_text_datum(w->result) : (Datum) 0;
	nulls[NW_RESULT][i] = w->result == NULL;
	v[NW_ATTEMPT][i] = Int32GetDatum(w->attempt);
	v[NW_DETAIL][i] = w->detail ? pgd_text_datum(w->detail) : (Datum) 0;
	nulls[NW_DETAIL][i] = w->detail == NULL;
	v[NW_AT][i] = TimestampTzGetDatum(w->at);
	/* an end whose start is in this flush too: measured from that start */
	v[NW_START_AT][i] =
		start >= 0 ? TimestampTzGetDatum(ws[start].at) : (Datum) 0;
	nulls[NW_START_AT][i] = start < 0;
	v[NW_LATER][i] = BoolGetDatum(end_of_start(ws, i, n) != NULL);
	if (mode == NW_IDS)
		merged = merged_end(ws, i, n) != NULL ||
			(start >= 0 && merged_end(ws, start, n) == w);
	v[NW_STARTED][i] = BoolGetDatum(mode != NW_ROWS &&
									(merged || start_and_end(ws, i, n) ||
									 (i > 0 && start_and_end(ws, i - 1, n))));
	/* the row's id, and its end's place when its start's is the id */
	nulls[NW_EID][i] = nulls[NW_ENDED][i] = true;
	if (mode == NW_IDS && merged && w->done)
	{
		v[NW_EID][i] = Int64GetDatum(ids[start]);
		v[NW_ENDED][i] = Int64GetDatum(ids[i]);
		nulls[NW_EID][i] = nulls[NW_ENDED][i] = false;
	}
	else if (mode == NW_IDS)
	{
		v[NW_EID][i] = Int64GetDatum(ids[i]);
		nulls[NW_EID][i] = false;
	}
}

/* Writes ws[0..n-1]: their columns, then the rows (node_rows.c). */
static void
write_flush(const NodeWrite *ws, int n, NodeWriteMode mode, const int64 *ids)
{
	Datum *v[NW_COLS];
	bool  *nulls[NW_COLS];

	for (int c = 0; c < NW_COLS; c++)
	{
		v[c] = palloc0(sizeof(Datum) * n);
		nulls[c] = palloc0(sizeof(bool) * n);
	}
	for (int i = 0; i < n; i++)
		write_args(ws, i, n, mode, ids, v, nulls);
	store_write_node_rows(ws[0].instance_id, n, mode, v, nulls);
	for (int c = 0; c < NW_COLS; c++)
	{
		pfree(v[c]);
		pfree(nulls[c]);
	}
}

/*
 * n event ids, in the order the sequence hands them out: for a flush, one
 * for each write of it (a start whose end is the next write shares its
 * end's: its entry is unused), one statement only when a start and its
 * end with writes between them make one row; for a held instance start,
 * one (held_start.c).
 */
int64 *
store_draw_event_ids(int n)
{
	Oid	   seq = pgd_internal_relid("events_id_seq");
	int64 *ids = palloc(sizeof(int64) * n);

	/* as nextval(), without a statement (the engine's own sequence) */
	for (int i = 0; i < n; i++)
		ids[i] = nextval_internal(seq, false);
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

/* How this flush writes its events; NW_IDS draws their ids. */
static NodeWriteMode
flush_mode(const NodeWrite *ws, int n)
{
	/* a start and its end in one row: not before the schema has the view */
	if (!pgd_internal_relation_exists("history_events"))
		return NW_ROWS;
	if (!store_events_have_ended_id())
		return NW_PAIRS;
	for (int i = 0; i < n; i++)
		if (merged_end(ws, i, n) != NULL)
			return NW_IDS;
	return NW_PAIRS;
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
		NodeWriteMode mode = flush_mode(ws, n);
		int64		 *ids = mode == NW_IDS ? store_draw_event_ids(n) : NULL;

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
 * executor holds them for the rest of its batch (pgd_store_hold_writes).
 */
void
pgd_store_flush(void)
{
	if (!store_writes_held())
		store_flush_node_writes();
}

/*
 * The attempt of node_id's step under way (pgd_store_set_attempt), or 0:
 * its end event carries it, and a SQL step's next attempt goes on from it.
 */
int
store_current_attempt_of(const char *node_id)
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
	w->attempt = done ? store_current_attempt_of(node_id) : 0;
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
					 PgdNodeStatus *status, char **result)
{
	pgd_store_node_states(instance_id, &node_id, 1, status, result);
}

/* The newest write of a node not written yet, or NULL. */
static const NodeWrite *
newest_unwritten(const char *instance_id, const char *id)
{
	for (int i = nwrites - 1; i >= nwrites - nunwritten; i--)
		if (strcmp(writes[i].id, id) == 0 &&
			strcmp(writes[i].instance_id, instance_id) == 0)
			return &writes[i];
	return NULL;
}

/*
 * The result a write leaves in its node's row, as store_read_node_rows
 * reads it back: a completed node's JSON as jsonb prints it, a failed
 * node's error text, a start's none.
 */
static char *
write_result(const NodeWrite *w)
{
	Jsonb *jb;

	if (!w->done || w->result == NULL)
		return NULL;
	if (!w->ok)
		return pstrdup(w->result);
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
											CStringGetDatum(w->result)));
	return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
}

/*
 * The rows of the nodes ids[i] with need[i], read by their keys (no
 * statement) into found[i], statuses[i], and stamps[i] and results[i]
 * unless those are NULL; the other entries are left as they are.
 */
static void
read_rows_of(const char *instance_id, int n, const char *const *ids,
			 const bool *need, bool *found, char **statuses, char **stamps,
			 char **results)
{
	const char **missing = palloc(sizeof(char *) * Max(n, 1));
	int			*where = palloc(sizeof(int) * Max(n, 1));
	int			 m = 0;
	bool		*f;
	char	   **st;
	char	   **sp;
	char	   **res;

	for (int i = 0; i < n; i++)
		if (need[i])
		{
			where[m] = i;
			missing[m++] = ids[i];
		}
	if (m > 0)
	{
		f = palloc(sizeof(bool) * m);
		st = palloc(sizeof(char *) * m);
		sp = stamps ? palloc(sizeof(char *) * m) : NULL;
		res = results ? palloc(sizeof(char *) * m) : NULL;
		store_read_node_rows(instance_id, m, missing, f, st, sp, res);
		for (int j = 0; j < m; j++)
		{
			found[where[j]] = f[j];
			statuses[where[j]] = st[j];
			if (stamps)
				stamps[where[j]] = sp[j];
			if (results)
				results[where[j]] = res[j];
		}
	}
	pfree(missing);
	pfree(where);
}

/*
 * ... of the nodes ids[0..n-1] (a JOIN's branches): a node with a write
 * not written yet as that write leaves its row, the others from their
 * rows.  The buffer stays: a fan-out run in one batch writes each node's
 * start and end as one update, as a chain does, instead of writing all
 * its starts when its first JOIN ends.
 */
void
pgd_store_node_states(const char *instance_id, const char *const *ids, int n,
					  PgdNodeStatus *status_of, char **results)
{
	bool  *need = palloc(sizeof(bool) * Max(n, 1));
	bool  *found = palloc(sizeof(bool) * Max(n, 1));
	char **statuses = palloc(sizeof(char *) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		const NodeWrite *w = newest_unwritten(instance_id, ids[i]);

		need[i] = w == NULL;
		if (w != NULL)
		{
			statuses[i] = pstrdup(write_status(w));
			results[i] = write_result(w);
		}
	}
	read_rows_of(instance_id, n, ids, need, found, statuses, NULL, results);
	for (int i = 0; i < n; i++)
		if (need[i] && !found[i])
			elog(ERROR, "node %s of instance %s disappeared", ids[i],
				 instance_id);
	for (int i = 0; i < n; i++)
		status_of[i] = pgd_node_status_of(statuses[i]);
	pfree(need);
	pfree(found);
	pfree(statuses);
}

/*
 * id, status and stamp (execution_id) of the named nodes that exist: those
 * kept for the transaction (stamps.c) from there, a node of the
 * buffer not kept with its row from the overlay below, the others read
 * (and kept from then on).
 */
int
pgd_store_node_stamps(const char *instance_id, const char *const *node_ids,
					  int n, char ***ids, PgdNodeStatus **status_of,
					  char ***stamps)
{
	char **statuses;

	bool  *found = palloc(sizeof(bool) * Max(n, 1));
	bool  *need = palloc(sizeof(bool) * Max(n, 1));
	char **st = palloc(sizeof(char *) * Max(n, 1));
	char **sp = palloc(sizeof(char *) * Max(n, 1));
	int	   rows = 0;

	for (int i = 0; i < n; i++)
	{
		found[i] = store_stamps_find(instance_id, node_ids[i], &st[i], &sp[i]);
		if (!found[i] && newest_unwritten(instance_id, node_ids[i]) != NULL)
		{
			found[i] = true;
			st[i] = sp[i] = NULL;
		}
		need[i] = !found[i];
	}
	/* the rows as written so far; the overlay below adds the buffer */
	read_rows_of(instance_id, n, node_ids, need, found, st, sp, NULL);
	for (int i = 0; i < n; i++)
		if (need[i] && found[i])
			store_stamps_put(instance_id, node_ids[i], st[i], sp[i]);
	*ids = palloc(sizeof(char *) * Max(n, 1));
	statuses = palloc(sizeof(char *) * Max(n, 1));
	*stamps = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (found[i])
		{
			(*ids)[rows] = pstrdup(node_ids[i]);
			statuses[rows] = st[i];
			(*stamps)[rows] = sp[i];
			rows++;
		}
	/* the rows as the node writes not written yet leave them */
	store_overlay_node_writes(instance_id, rows, *ids, statuses, *stamps);
	*status_of = palloc(sizeof(PgdNodeStatus) * Max(rows, 1));
	for (int i = 0; i < rows; i++)
		(*status_of)[i] = pgd_node_status_of(statuses[i]);
	return rows;
}

/*
 * The one change of a node's status, buffered with its event: to running
 * (node_started), or to completed or failed as outcome says (node_completed,
 * node_failed).  A node runs from pending, and again from an end (a loop's
 * next generation, a retry); it ends only from running, or pending when it
 * ends before its start was written (both in one transition), or from
 * cancelled when its completion was in the inbox as its instance ended.  A cassert
 * build asserts the previous status (the row with the writes not written
 * yet on top) is one of from_mask.
 */
void
pgd_store_set_node_status(const char *instance_id, const char *node_id,
						  const char *scope, int from_mask, PgdNodeStatus to,
						  PgdOutcome outcome)
{
#ifdef USE_ASSERT_CHECKING
	{
		PgdNodeStatus from;
		char		 *result;

		pgd_store_node_state(instance_id, node_id, &from, &result);
		Assert((from_mask & PGD_STATUS_MASK(from)) != 0);
		Assert(to == PGD_NODE_RUNNING ||
			   (to == PGD_NODE_COMPLETED) == outcome.ok);
	}
#endif
	buffer_node_write(instance_id, node_id, scope, to != PGD_NODE_RUNNING,
					  outcome);
}

/*
 * What a node that has just started waits for (json: an object of keys,
 * docs/reference/tables-and-views.md): they go into its status_details,
 * beside execution_id.  Its start still in the buffer carries them, so the
 * row is still written once (its detail, which a start's event does not
 * use, holds its status_details).  False when its start was written
 * already: the caller merges them (pgd_store_node_details_merge).
 */
bool
pgd_store_node_waiting(const char *instance_id, const char *node_id,
					   const char *scope, const char *json)
{
	for (int i = nwrites - 1; i >= nwrites - nunwritten; i--)
	{
		NodeWrite	  *w = &writes[i];
		StringInfoData d;

		if (w->done || strcmp(w->id, node_id) != 0 ||
			strcmp(w->instance_id, instance_id) != 0 ||
			strcmp(w->scope, scope) != 0)
			continue;
		Assert(json[0] == '{');
		initStringInfo(&d);
		appendStringInfoString(&d, "{\"execution_id\": ");
		escape_json(&d, scope);
		if (json[1] != '}' && json[1] != '\0')
			appendStringInfo(&d, ", %s", json + 1);
		else
			appendStringInfoChar(&d, '}');
		w->detail = MemoryContextStrdup(TopTransactionContext, d.data);
		pfree(d.data);
		return true;
	}
	return false;
}

/* The node starts in scope (its node_started event goes with the update). */
void
pgd_store_node_running(const char *instance_id, const char *node_id,
					   const char *scope)
{
	PgdOutcome none = {true, NULL};

	pgd_store_set_node_status(instance_id, node_id, scope,
							  PGD_STATUS_MASK(PGD_NODE_PENDING) |
								  PGD_STATUS_MASK(PGD_NODE_RUNNING) |
								  PGD_STATUS_MASK(PGD_NODE_COMPLETED) |
								  PGD_STATUS_MASK(PGD_NODE_FAILED) |
								  PGD_STATUS_MASK(PGD_NODE_CANCELLED),
							  PGD_NODE_RUNNING, none);
}

/* The node ends in scope with outcome. */
void
pgd_store_node_done(const char *instance_id, const char *node_id,
					const char *scope, PgdOutcome outcome)
{
	pgd_store_set_node_status(instance_id, node_id, scope,
							  PGD_STATUS_MASK(PGD_NODE_PENDING) |
								  PGD_STATUS_MASK(PGD_NODE_RUNNING) |
								  PGD_STATUS_MASK(PGD_NODE_CANCELLED),
							  outcome.ok ? PGD_NODE_COMPLETED :
										   PGD_NODE_FAILED,
							  outcome);
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
 * The node buffer in the transaction buffer (txn_buffer.c)
 * ---------------------------------------------------------------------
 */

/* A transition whose node updates were never written must not commit. */
static void
node_writes_check_written(void)
{
	if (nunwritten > 0)
		elog(ERROR, "node updates were not written before commit");
}

static void
node_writes_forget(void)
{
	writes = NULL; /* in TopTransactionContext */
	nwrites = maxwrites = nunwritten = 0;
	flushing = false;
}

/*
 * A subtransaction rolled back: what it (or one below it: their ids are
 * higher) buffered is gone, and what it wrote is buffered again, not
 * written.
 */
static void
node_writes_subxact_abort(SubTransactionId mySubid)
{
	int k = 0;

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

/*
 * One committed into the transaction itself: what it wrote only the
 * transaction's rollback takes back, so it is forgotten.
 */
static void
node_writes_subxact_commit(SubTransactionId mySubid,
						   SubTransactionId parentSubid)
{
	if (parentSubid == TopSubTransactionId)
		forget_written(mySubid);
}

const PgdHeldOps store_node_writes_ops = {
	.write = store_flush_node_writes,
	.check_written = node_writes_check_written,
	.subxact_abort = node_writes_subxact_abort,
	.subxact_commit = node_writes_subxact_commit,
	.forget = node_writes_forget,
};

/*
 * The same row, inserted by the flush of the instance's node writes that
 * this call makes (store_flush_node_writes), with their events, as the
 * last one: one multi-insert record instead of two, about 50 bytes of WAL
 * less for an instance that starts and ends in one batch.
 * False when the flush did not insert it (nothing to flush, a trigger of
 * the user's): the caller inserts it after the flush.
 */
bool
store_flush_with_instance_event(int64 event_id, const char *instance_id,
								TimestampTz started_at, const char *kind,
								const char *scope, const char *detail,
								bool alone)
{
	bool done;

	store_flush_tail.set = true;
	store_flush_tail.done = false;
	store_flush_tail.event_id = event_id;
	store_flush_tail.instance_id = instance_id;
	store_flush_tail.started_at = started_at;
	store_flush_tail.kind = kind;
	store_flush_tail.scope = scope;
	store_flush_tail.detail = detail;
	store_flush_tail.alone = alone;
	PG_TRY();
	{
		store_flush_node_writes();
	}
	PG_FINALLY();
	{
		done = store_flush_tail.done;
		store_flush_tail.set = false;
	}
	PG_END_TRY();
	return done;
}
