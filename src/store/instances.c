/*-------------------------------------------------------------------------
 *
 * instances.c
 *	  The store's functions for instances: runs rows and instance
 *	  statuses, an instance's end (its engine state removed), the graph's
 *	  rows for the graph cache, and a scope abandoned (its tasks, waits,
 *	  limit slots and keyed locks).
 *
 * Locks: pgd_store_lock_run takes the instance's runs row (FOR UPDATE);
 * everything else writes rows of the instance whose runs row the caller
 * holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

/* ---------------------------------------------------------------------
 * Instances and their runs rows
 * ---------------------------------------------------------------------
 */

/*
 * The status a runs row holds: only the engine writes it (pending, then
 * running).  Any other text is treated as an ended instance, which no
 * transition acts on.
 */
static void
run_status(const char *text, PgdInstanceStatus *status)
{
	if (!pgd_instance_status_parse(text, status))
		*status = PGD_INSTANCE_FAILED;
}

/*
 * How the next runs row is taken: waiting (the first task of a batch), NOWAIT
 * (a later one: held elsewhere, the lock raises an error that rolls back only
 * that task, which leads the next batch; docs/design/batches-and-inbox.md §2
 * and docs/design/architecture.md §5 rule 1), or SKIP LOCKED once (a step's
 * completion, which goes to the inbox when the row is held;
 * docs/design/batches-and-inbox.md §4).
 */
static bool run_nowait = false;
static bool run_skip = false;
static bool run_held = false;

void
pgd_store_set_run_nowait(bool nowait)
{
	run_nowait = nowait;
}

void
pgd_store_set_run_skip(bool skip)
{
	run_skip = skip;
	if (skip)
		run_held = false;
}

bool
pgd_store_run_held(void)
{
	return run_held;
}

/*
 * Lock the instance's runs row.  Returns false when the instance has no
 * runs row (finished and cleaned up, or never existed), or when it was
 * taken with SKIP LOCKED and is held elsewhere (pgd_store_run_held); else
 * sets *status (when status is not NULL).
 */
bool
pgd_store_lock_run(const char *instance_id, PgdInstanceStatus *status)
{
	char *st;

	if (run_skip)
	{
		run_skip = false; /* once */
		if (!store_run_lock_skip(instance_id, &run_held, &st))
			return false;
	}
	else
	{
		/* by the key; by the statement when the row changed meanwhile */
		switch (store_lock_run_row(instance_id,
								   run_nowait ? LockWaitError : LockWaitBlock,
								   &st))
		{
			case PGD_RUN_TAKEN:
				break;
			case PGD_RUN_GONE:
				return false;
			case PGD_RUN_HELD:
			case PGD_RUN_CHANGED:
				if (RUN(run_nowait ? STMT_RUN_LOCK_NOWAIT : STMT_RUN_LOCK,
						instance_id) == 0)
					return false;
				st = store_get_string(0, 1);
				break;
		}
	}
	store_stamps_locked(instance_id);
	if (status)
	{
		run_status(st, status);
		store_overlay_held_start(instance_id, status);
	}
	return true;
}

/*
 * An instance ends with status (the caller holds its runs row, so it has not
 * ended yet, whatever df.instances.status says); false when its df.instances
 * row is gone.
 */
bool
pgd_store_instance_finished(const char *instance_id, PgdInstanceStatus status)
{
	Assert((PGD_INSTANCE_ENDED & PGD_STATUS_MASK(status)) != 0);
	store_held_start_ends(instance_id);
	return pgd_store_set_instance_status(
		instance_id,
		PGD_STATUS_MASK(PGD_INSTANCE_PENDING) |
			PGD_STATUS_MASK(PGD_INSTANCE_RUNNING),
		status);
}


/* The submitter df.instances records, InvalidOid if none. */
Oid
pgd_store_instance_submitter(const char *instance_id)
{
	Oid submitter;

	if (store_instance_submitter_row(instance_id, &submitter))
		return submitter;
	if (RUN(STMT_INSTANCE_SUBMITTER, instance_id) == 0)
		return InvalidOid;
	return (Oid) strtoul(store_get_string(0, 1), NULL, 10);
}

/*
 * The index, on instance_id first, of each table STMT_END_INSTANCE
 * empties, and of df_internal.maps, whose rows go with the runs row (ON
 * DELETE CASCADE).
 */
static const char *const end_indexes[] = {
	"tasks_instance_idx",	"results_pkey", "joins_pkey", "loops_pkey",
	"signals_instance_idx", "waits_pkey",	"maps_pkey"};

/*
 * May the instance have rows of engine state beside its runs row?  Asked
 * of each table's index, with a dirty snapshot (a row being made
 * counts); an index this schema lacks says yes.  Most instances end with
 * none: the step that ends them has claimed their last task.
 */
static bool
end_has_state(const char *instance_id)
{
	for (int i = 0; i < lengthof(end_indexes); i++)
		if (!pgd_internal_relation_exists(end_indexes[i]) ||
			pgd_internal_index_has(end_indexes[i], 1,
								   (const char *const[]){instance_id}))
			return true;
	return false;
}

/*
 * An instance has ended: remove its engine state.  Tasks claimed by
 * running steps are skipped; those steps find the runs row gone and
 * discard themselves.  An instance with no state but its runs row (as
 * the indexes say) has that row deleted by its key, which the caller
 * holds; the statement cost 64 us at each instance's end (perf).
 */
void
pgd_store_end_instance(const char *instance_id)
{
	pgd_store_lock_release(instance_id, NULL, NULL); /* its keyed locks */
	pgd_store_forget_held_tasks(instance_id);
	store_drop_held_join_counts(instance_id);
	store_drop_held_map_counts(instance_id);
	if (end_has_state(instance_id) || !store_delete_run_row(instance_id))
		RUN(STMT_END_INSTANCE, instance_id);
	pgd_store_limit_release(instance_id, NULL, NULL);
	/*
	 * completions nobody will apply, when the index has any
	 * (a row being made counts); one committed later is its apply task's
	 */
	if (pgd_internal_index_has("inbox_instance_idx", 1,
							   (const char *const[]){instance_id}))
		(void) pgd_store_inbox_drop(instance_id);
}

/*
 * An ending instance stops the nodes still running: a RACE's loser, the
 * branches a failed JOIN or df.map abandoned, what df.cancel caught.
 * They become cancelled, so that an ended instance shows no node
 * running.  The caller skips it where no node can be running (a
 * completed instance of a graph that abandons no scope), so that most
 * ends cost no statement more.
 */
void
pgd_store_cancel_running_nodes(const char *instance_id)
{
	if (RUN(STMT_CANCEL_RUNNING_NODES, instance_id) > 0)
		store_stamps_forget(); /* the rows kept say running */
}

/*
 * The node rows of an instance and its root's id; 0 when it has none
 * (store_load_node_rows reads them by the primary keys).
 */
int
pgd_store_load_nodes(const char *instance_id, char **root_id,
					 PgdStoredNode **rows)
{
	return store_load_node_rows(instance_id, root_id, rows);
}

/*
 * Has the current transaction (or a subtransaction of it that has not
 * aborted) started the instance, sent it signals, or cancelled it?  None of
 * them reaches the engine before the transaction commits.  The engine's
 * run row is written by df.start in the caller's transaction and changed
 * after that only by the engine's own units, so its xmin is the caller's
 * transaction only while the start is uncommitted.
 */
void
pgd_store_uncommitted_by_me(const char *instance_id, bool *started,
							bool *signals, bool *cancel)
{
	int rows;
	int i;

	*started = *signals = *cancel = false;
	/*
	 * A transaction that has written nothing has an XID of none of them: a
	 * df.await_instance in a transaction of its own runs no statement here
	 * (58 us a call on average in bench/peers/run, where most calls come
	 * from 16 or 64 clients at once).
	 */
	if (!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return;
	rows = RUN(STMT_SIGNALS_AND_CANCELS_XMIN, instance_id);
	for (i = 0; i < rows; i++)
	{
		bool		  isnull;
		int			  what = DatumGetInt32(store_get_datum(i, 1, &isnull));
		TransactionId xmin =
			DatumGetTransactionId(store_get_datum(i, 2, &isnull));

		if (!TransactionIdIsCurrentTransactionId(xmin))
			continue;
		if (what == 1)
			*signals = true;
		else if (what == 2)
			*cancel = true;
		else
			*started = true;
	}
}

void
pgd_store_drop_scope(const char *instance_id, const char *scope)
{
	RUN(STMT_TASKS_DROP_SCOPE, instance_id, scope);
	RUN(STMT_WAITS_DROP_SCOPE, instance_id, scope);
	pgd_store_limit_release(instance_id, NULL, scope);
	pgd_store_lock_release(instance_id, NULL, scope); /* its keyed locks */
}
