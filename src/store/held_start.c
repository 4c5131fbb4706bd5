/*-------------------------------------------------------------------------
 *
 * held_start.c
 *	  The engine store's start of an instance, held while the executor
 *	  holds its batch's node writes.
 *
 * An instance starts in a transition that writes 'running' into its
 * df.instances row and its runs row, and adds its instance_started event.
 * In a batch these wait until the batch writes its node writes, before
 * its commit (store_write_held_start), and the two updates are not
 * written at all when the instance ends in the batch first: a one-step
 * workflow is then one update of its df.instances row, not two (the
 * update is not HOT, status is indexed: a heap record and four index
 * entries), and its runs row is deleted without being updated first.  Its
 * instance_started event is then the start of its end's row, as a node's
 * start is (node_writes.c): the row's id is drawn when the instance
 * starts, its end's place is ended_id, and df_internal.history_events
 * shows both.
 *
 * Reads of the runs row's status through the store (pgd_store_lock_run,
 * pgd_store_load_run, a claim) see the held start
 * (store_overlay_held_start); a step's own statement sees its instance
 * as pending, as it sees its node.
 *
 * One start is held at a time.  made, ended, written and event_written
 * are the subtransactions that held it, ended the instance, wrote the
 * updates and wrote the event; a rolled-back subtransaction takes back
 * what it did, and what one committed belongs to its parent from then on
 * (held_start_subxact_abort).
 *
 * Locks: the runs row of the instance, which the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

static char				started_id[PGD_ID_LEN + 1];
static SubTransactionId made = InvalidSubTransactionId; /* none held */
static SubTransactionId ended = InvalidSubTransactionId;
static SubTransactionId written = InvalidSubTransactionId;
static SubTransactionId event_written = InvalidSubTransactionId;
static int64			event_id;	 /* drawn for instance_started; 0: none */
static char			   *event_scope; /* TopTransactionContext */
static TimestampTz		event_at;
static uint64			event_mark; /* store_event_rows when it was drawn */

/*
 * The event statements.  An end with its start: as STMT_EVENT_ADD
 * (statements.c), with the start's id, time and the end's place, the ids
 * as in node_writes.c.  Both are written as the held start is, after
 * nothing else: they name no held writes.
 */
enum
{
	START_EVENT,
	START_AND_END_EVENT,
	START_STMTS
};

static const PgdStmtDef start_stmts[START_STMTS] = {
	[START_EVENT] =
		{"an instance's start, with the id drawn for it",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.events (id, instance_id, at, kind, scope) "
		 "VALUES ($1, $2, $3, 'instance_started', $4)",
		 4,
		 {INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID}},
	[START_AND_END_EVENT] =
		{"an instance's start and end as one history row",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.events "
		 "(id, instance_id, kind, scope, duration_ms, detail, started_at, ended_id) "
		 "SELECT $1, $2, $4, $5, "
		 "(SELECT GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
		 "OPERATOR(pg_catalog.-) i.created_at) OPERATOR(pg_catalog.*) 1000)::bigint) "
		 "FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $2), "
		 "$6::pg_catalog.jsonb, $3, "
		 "pg_catalog.nextval('df_internal.events_id_seq'::pg_catalog.regclass)",
		 6,
		 {INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID}},
};

static PgdStmtPlan start_plans[START_STMTS];

/* Does the start held still owe its updates (not written, not moot)? */
static bool
owes_updates(void)
{
	return made != InvalidSubTransactionId &&
		written == InvalidSubTransactionId && ended == InvalidSubTransactionId;
}

/* Does it still owe its instance_started event (drawn, not written)? */
static bool
owes_event(void)
{
	return made != InvalidSubTransactionId && event_id != 0 &&
		event_written == InvalidSubTransactionId;
}

static void
write_start_updates(const char *instance_id)
{
	(void) pgd_store_set_instance_status(instance_id,
										 PGD_STATUS_MASK(PGD_INSTANCE_PENDING),
										 PGD_INSTANCE_RUNNING);
}

/* Is instance_id's start held, its updates neither written nor moot? */
static bool
start_held(const char *instance_id)
{
	return owes_updates() && strcmp(started_id, instance_id) == 0;
}

/* Write what the start held still owes: its updates, its event. */
static void
store_write_held_start(void)
{
	if (owes_updates())
	{
		write_start_updates(started_id);
		written = GetCurrentSubTransactionId();
	}
	if (owes_event())
	{
		Datum values[4];

		values[0] = Int64GetDatum(event_id);
		values[1] = pgd_text_datum(started_id);
		values[2] = TimestampTzGetDatum(event_at);
		values[3] = pgd_text_datum(store_event_scope(started_id, event_scope));
		store_event_rows++;
		store_exec(&start_stmts[START_EVENT], &start_plans[START_EVENT],
				   values, NULL);
		event_written = GetCurrentSubTransactionId();
	}
}

/* A status read from the runs row, as the start held leaves it. */
void
store_overlay_held_start(const char *instance_id, PgdInstanceStatus *status)
{
	if (*status == PGD_INSTANCE_PENDING && start_held(instance_id))
		*status = PGD_INSTANCE_RUNNING;
}

/*
 * The instance ends (pgd_store_instance_finished): its held updates are
 * moot, since every end removes the runs row too (pgd_store_end_instance).
 */
void
store_held_start_ends(const char *instance_id)
{
	if (start_held(instance_id))
		ended = GetCurrentSubTransactionId();
}

/*
 * The instance's end event (kind, in scope), when its instance_started is
 * held: both one row, written here.  False, having done nothing, when
 * they cannot be (another instance, scope or kind; the event written).
 */
bool
store_held_start_end_event(const char *instance_id, const char *kind,
						   const char *scope, const char *detail)
{
	Datum values[6];
	char  nulls[6] = "      ";

	if (!owes_event() || strcmp(started_id, instance_id) != 0 ||
		scope == NULL || strcmp(scope, event_scope) != 0 ||
		strncmp(kind, "instance_", 9) != 0 ||
		strcmp(kind, "instance_started") == 0)
		return false;
	/*
	 * the end's place comes after every node event of the instance: with
	 * them, as the last row of their flush, or after it; without a
	 * statement when it can.  When no history row was written since the
	 * start (alone), the flush's only row may be both (node_rows.c).
	 */
	if (store_flush_with_instance_event(event_id, instance_id, event_at, kind,
										scope, detail,
										store_event_rows == event_mark) ||
		store_instance_event_row(event_id, instance_id, event_at, kind, scope,
								 detail))
	{
		event_written = GetCurrentSubTransactionId();
		return true;
	}
	values[0] = Int64GetDatum(event_id);
	values[1] = pgd_text_datum(instance_id);
	values[2] = TimestampTzGetDatum(event_at);
	values[3] = pgd_text_datum(kind);
	values[4] = pgd_text_datum(store_event_scope(instance_id, scope));
	values[5] = detail ? pgd_text_datum(detail) : (Datum) 0;
	nulls[5] = detail ? ' ' : 'n';
	store_event_rows++;
	store_exec(&start_stmts[START_AND_END_EVENT],
			   &start_plans[START_AND_END_EVENT], values, nulls);
	event_written = GetCurrentSubTransactionId();
	return true;
}

/*
 * An instance begins in scope: it is running and its instance_started
 * event is written (the caller holds its runs row), or held.
 */
void
pgd_store_instance_started(const char *instance_id, const char *scope)
{
	/*
	 * Held unless a batch does not hold its writes, or another instance's
	 * start still owes something that a rollback could take back: it
	 * keeps the slot, so that nothing only the slot remembers is lost
	 */
	if (!store_writes_held() ||
		(made != InvalidSubTransactionId &&
		 ((written != TopSubTransactionId && ended != TopSubTransactionId) ||
		  (event_id != 0 && event_written != TopSubTransactionId))))
	{
		store_write_held_start();
		write_start_updates(instance_id);
		store_history_insert(instance_id, "instance_started", NULL, scope, 0,
							 NULL);
		return;
	}
	strlcpy(started_id, instance_id, sizeof(started_id));
	made = GetCurrentSubTransactionId();
	ended = written = event_written = InvalidSubTransactionId;
	event_id = 0;
	event_scope = NULL;
	if (store_events_have_ended_id())
	{
		/* its place in the history: before the node events that follow */
		store_flush_node_writes();
		event_id = *store_draw_event_ids(1);
		event_scope = MemoryContextStrdup(TopTransactionContext, scope);
		event_at = GetCurrentTimestamp();
		event_mark = store_event_rows;
	}
	else
		store_history_insert(instance_id, "instance_started", NULL, scope, 0,
							 NULL);
}

static void
held_start_check_written(void)
{
	if (owes_updates() || owes_event())
		elog(ERROR, "the start of instance %s was not written before commit",
			 started_id);
}

static void
held_start_forget(void)
{
	made = ended = written = event_written = InvalidSubTransactionId;
	event_id = 0;
	event_scope = NULL; /* in TopTransactionContext */
}

/* sub, or parent when sub is at or below mySubid */
static SubTransactionId
reparent(SubTransactionId sub, SubTransactionId mySubid,
		 SubTransactionId parentSubid)
{
	return sub >= mySubid ? parentSubid : sub;
}

static void
held_start_subxact_commit(SubTransactionId mySubid,
						  SubTransactionId parentSubid)
{
	if (made == InvalidSubTransactionId)
		return;
	made = reparent(made, mySubid, parentSubid);
	if (ended != InvalidSubTransactionId)
		ended = reparent(ended, mySubid, parentSubid);
	if (written != InvalidSubTransactionId)
		written = reparent(written, mySubid, parentSubid);
	if (event_written != InvalidSubTransactionId)
		event_written = reparent(event_written, mySubid, parentSubid);
}

static void
held_start_subxact_abort(SubTransactionId mySubid)
{
	if (made == InvalidSubTransactionId)
		return;
	if (made >= mySubid)
	{
		made = ended = written = event_written = InvalidSubTransactionId;
		event_id = 0; /* a drawn id unused: a gap */
		return;
	}
	if (ended >= mySubid)
		ended = InvalidSubTransactionId;
	if (written >= mySubid)
		written = InvalidSubTransactionId;
	if (event_written >= mySubid)
		event_written = InvalidSubTransactionId;
}

const PgdHeldOps store_held_start_ops = {
	.write = store_write_held_start,
	.check_written = held_start_check_written,
	.subxact_abort = held_start_subxact_abort,
	.subxact_commit = held_start_subxact_commit,
	.forget = held_start_forget,
};

/* The runs row as this transaction sees it: a start held here counts. */
bool
pgd_store_load_run(const char *instance_id, PgdRunInfo *run)
{
	if (!store_read_run_row(instance_id, run))
		return false;
	store_overlay_held_start(instance_id, &run->status);
	return true;
}
