/*-------------------------------------------------------------------------
 *
 * instance_state.c
 *	  The engine store's functions for the state of instances: runs rows
 *	  and instance statuses, JOIN counters, loop state, named results,
 *	  signals and waits, readiness (store.h; the statements are in
 *	  statements.c's table).
 *
 * Locks: pgd_store_lock_run takes the instance's runs row (FOR UPDATE);
 * everything else writes rows of the instance whose runs row the caller
 * holds, or (df.signal) inserts rows without locking the instance.
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
	int done;

	store_held_start_ends(instance_id);
	done = store_finish_instance_row(instance_id,
									 pgd_instance_status_name(status));
	if (done >= 0)
		return done > 0;
	return RUN(STMT_INSTANCE_FINISHED, instance_id,
			   pgd_instance_status_name(status)) > 0;
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
 * The node rows of an instance and its root's id; 0 when it has none
 * (store_load_node_rows reads them by the primary keys).
 */
int
pgd_store_load_nodes(const char *instance_id, char **root_id,
					 PgdStoredNode **rows)
{
	return store_load_node_rows(instance_id, root_id, rows);
}

/* ---------------------------------------------------------------------
 * JOIN counters and loop state
 * ---------------------------------------------------------------------
 */

/*
 * JOIN counters held in memory.  In an executor's batch
 * (store_node_writes_held) the first branch of a JOIN to end writes no
 * counter row: the count is an entry of this list, and a JOIN whose
 * branches all end in the batch (a fan-out it runs itself) never has a
 * row, where it had an insert, its index entry and a delete (about 290
 * bytes of WAL a branch in fan-outs of 20).  Each count releases the
 * entry and adds the next one, so a rolled-back subtransaction's counts
 * are undone with its entries (txn_buffer.c).  A count still held when
 * the batch ends is written as its row before the commit (from
 * pgd_store_write_node_writes), and before any statement that names
 * df_internal.joins or runs df.check()'s rows (store_run); an ending
 * instance's are dropped, as STMT_END_INSTANCE deletes its rows.  A
 * commit with one unwritten is refused.
 */
static void
join_counts_check_written(void)
{
	store_held_check_written(&store_held_join_counts, "JOIN counters");
}

static void
join_counts_subxact_abort(SubTransactionId mySubid)
{
	store_held_subxact_abort(&store_held_join_counts, mySubid);
}

/* The counter row of (instance, JOIN, scope) at width - 1 branches running. */
static int
count_row(const char *instance_id, const char *node_id, const char *scope,
		  int width, bool hold, bool *absent)
{
	bool by_statement;
	int	 remaining = store_join_count_row(instance_id, node_id, scope, width,
										  hold, &by_statement, absent);

	if (by_statement)
	{
		Datum values[4];

		values[0] = pgd_text_datum(instance_id);
		values[1] = pgd_text_datum(node_id);
		values[2] = pgd_text_datum(scope);
		values[3] = Int32GetDatum(remaining);
		store_run(STMT_JOIN_OPEN, values, NULL);
	}
	return remaining;
}

/* Write the counts held in memory as rows (each released first). */
static void
join_counts_write(void)
{
	int			  i = 0;
	PgdHeldEntry *h;

	while ((h = store_held_next(&store_held_join_counts, NULL, &i)) != NULL)
	{
		int	 remaining = h->remaining;
		bool absent;

		store_held_release(&store_held_join_counts, h);
		(void) count_row(h->instance_id, h->node_id, h->scope, remaining + 1,
						 false, &absent);
		if (!absent)
			elog(ERROR,
				 "JOIN %s of instance %s had a counter row and one in memory",
				 h->node_id, h->instance_id);
	}
}

const PgdHeldOps store_join_counts_ops = {
	.write = join_counts_write,
	.check_written = join_counts_check_written,
	.subxact_abort = join_counts_subxact_abort,
};

/* An instance ended: its counts held in memory go, as its rows do. */
void
store_drop_held_join_counts(const char *instance_id)
{
	store_held_drop(&store_held_join_counts, instance_id, NULL, NULL);
}

/*
 * One branch fewer: the number still running.  No JOIN has a counter row
 * before a branch of it ends (task_rows.c); the statement makes the
 * first one when the table has columns the row code does not know.
 */
int
pgd_store_join_count(const char *instance_id, const char *node_id,
					 const char *scope, int width)
{
	PgdHeldEntry *h =
		store_held_find(&store_held_join_counts, instance_id, node_id, scope);
	bool in_memory;
	int	 remaining;

	if (h != NULL)
	{
		remaining = h->remaining - 1;
		store_held_release(&store_held_join_counts, h);
		in_memory = true;
	}
	else
	{
		bool hold =
			store_node_writes_held() && store_held_fits(instance_id, node_id);
		bool absent;

		remaining =
			count_row(instance_id, node_id, scope, width, hold, &absent);
		in_memory = hold && absent;
	}
	if (remaining < 0)
		elog(ERROR, "JOIN %s of instance %s counted more than its %d branches",
			 node_id, instance_id, width);
	if (in_memory && remaining > 0)
		store_held_add(&store_held_join_counts, instance_id, node_id, scope, "",
					   NULL)->remaining = remaining;
	return remaining;
}

void
pgd_store_join_close(const char *instance_id, const char *node_id,
					 const char *scope)
{
	PgdHeldEntry *h =
		store_held_find(&store_held_join_counts, instance_id, node_id, scope);

	if (h != NULL)
		store_held_release(&store_held_join_counts, h);
	else
		store_join_close_row(instance_id, node_id, scope);
}

void
pgd_store_joins_drop_scope(const char *instance_id, const char *scope)
{
	RUN(STMT_JOINS_DROP_SCOPE, instance_id, scope);
}

void
pgd_store_loop_open(const char *instance_id, const char *node_id,
					const char *scope)
{
	RUN(STMT_LOOP_OPEN, instance_id, node_id, scope);
}

void
pgd_store_loop_forget(const char *instance_id, const char *node_id,
					  const char *scope)
{
	RUN(STMT_LOOP_FORGET, instance_id, node_id, scope);
}

/* The loop's next generation begins now: returns its number. */
int
pgd_store_loop_next_generation(const char *instance_id, const char *node_id,
							   const char *scope)
{
	bool isnull;

	if (RUN(STMT_LOOP_NEXT_GENERATION, instance_id, node_id, scope) == 0)
		elog(ERROR, "loop %s of instance %s has no state", node_id,
			 instance_id);
	return DatumGetInt32(store_get_datum(0, 1, &isnull));
}

void
pgd_store_loop_move_scope(const char *instance_id, const char *node_id,
						  const char *from_scope, const char *to_scope)
{
	RUN(STMT_LOOP_MOVE_SCOPE, instance_id, node_id, to_scope, from_scope);
}

/* Count an iteration: the count so far and when the current one began. */
bool
pgd_store_loop_count_iteration(const char *instance_id, const char *node_id,
							   const char *scope, int64 *iterations,
							   TimestampTz *started)
{
	bool isnull;

	if (RUN(STMT_LOOP_COUNT_ITERATION, instance_id, node_id, scope) == 0)
		elog(ERROR, "loop %s of instance %s has no state", node_id,
			 instance_id);
	*iterations = DatumGetInt64(store_get_datum(0, 1, &isnull));
	*started = DatumGetTimestampTz(store_get_datum(0, 2, &isnull));
	return true;
}

/* ---------------------------------------------------------------------
 * Named results
 * ---------------------------------------------------------------------
 */

void
pgd_store_result_save(const char *instance_id, const char *scope,
					  const char *name, const char *value)
{
	RUN(STMT_RESULT_SAVE, instance_id, scope, name, value);
}

/*
 * A branch scope's named results join to_scope (later wins) when keep,
 * then the branch's (and those below it) are dropped.
 */
void
pgd_store_results_merge(const char *instance_id, const char *from_scope,
						const char *to_scope, bool keep)
{
	if (keep)
		RUN(STMT_RESULTS_COPY, instance_id, from_scope, to_scope);
	RUN(STMT_RESULTS_DROP_SCOPE, instance_id, from_scope);
}

/*
 * Has the instance a named result in any scope?  When it has none, a
 * JOIN's branches have none to merge (pgd_apply's join_branch_done skips
 * their two statements each).
 */
bool
pgd_store_has_results(const char *instance_id)
{
	/*
	 * by the primary key's first column, without a statement (5 us a JOIN
	 * in fan-outs, perf); only the holder of the runs row
	 * writes them, so what is being written elsewhere is nothing
	 */
	return pgd_internal_index_has("results_pkey", 1,
								  (const char *const[]){instance_id});
}

/* A scope's named results move to another scope (a loop's next generation). */
void
pgd_store_results_move(const char *instance_id, const char *from_scope,
					   const char *to_scope)
{
	RUN(STMT_RESULTS_MOVE, instance_id, from_scope, to_scope);
}

/* The named results of the scopes below 'scope' are dropped (its own stay). */
void
pgd_store_results_drop_below(const char *instance_id, const char *scope)
{
	RUN(STMT_RESULTS_DROP_BELOW, instance_id, scope);
}

/* Names and values (JSON text) of the named results of these scopes, outermost first. */
int
pgd_store_results_in(const char *instance_id, const char *const *scopes,
					 int nscopes, char ***names, char ***values)
{
	Datum args[2];
	int	  n;

	args[0] = pgd_text_datum(instance_id);
	args[1] = store_text_array(nscopes, scopes);
	n = store_run(STMT_RESULTS_IN, args, NULL);
	*names = pgd_spi_column(n, 1);
	*values = pgd_spi_column(n, 2);
	return n;
}

/* ---------------------------------------------------------------------
 * Signals and waits
 * ---------------------------------------------------------------------
 */

/* Take the oldest buffered signal of this name; *payload is its JSON text. */
bool
pgd_store_signal_take(const char *instance_id, const char *name,
					  char **payload)
{
	if (RUN(STMT_SIGNAL_TAKE, instance_id, name) == 0)
		return false;
	*payload = store_get_string(0, 1);
	return true;
}

/*
 * A signal into the instance's mailbox and a deliver task, in the caller's
 * transaction; nothing of the instance is locked
 * (docs/design/architecture.md §5 rule 2).
 */
void
pgd_store_signal_send(const char *instance_id, const char *name,
					  const char *data, bool is_json)
{
	Datum values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(name);
	values[2] = pgd_text_datum(data);
	values[3] = BoolGetDatum(is_json);
	store_run(STMT_SIGNAL_SEND, values, NULL);
	pgd_store_task_add(instance_id, NULL, instance_id, PGD_TASK_DELIVER);
}

void
pgd_store_wait_add(const char *instance_id, const char *node_id,
				   const char *scope, const char *name)
{
	RUN(STMT_WAIT_ADD, instance_id, node_id, scope, name);
}

/* Remove a wait; false when it was not there (delivered meanwhile). */
bool
pgd_store_wait_remove(const char *instance_id, const char *node_id,
					  const char *scope)
{
	return RUN(STMT_WAIT_REMOVE, instance_id, node_id, scope) > 0;
}

/* The oldest registered wait for which a signal of its name is buffered. */
bool
pgd_store_wait_matched(const char *instance_id, char **node_id, char **scope,
					   char **name)
{
	if (RUN(STMT_WAIT_MATCHED, instance_id) == 0)
		return false;
	*node_id = store_get_string(0, 1);
	*scope = store_get_string(0, 2);
	*name = store_get_string(0, 3);
	return true;
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

/* ---------------------------------------------------------------------
 * Executor 0: readiness and heartbeat
 * ---------------------------------------------------------------------
 */

/* Mark the engine ready and begin a new worker epoch; returns its id. */
char *
pgd_store_announce_ready(void)
{
	Datum version = Int32GetDatum(PGD_ENGINE_SCHEMA_VERSION);

	store_run(STMT_READY_ANNOUNCE, &version, NULL);
	store_run(STMT_EPOCH_CLEAR, NULL, NULL);
	store_run(STMT_EPOCH_NEW, NULL, NULL);
	return store_get_string(0, 1);
}

/*
 * The schema_version of the readiness row; false when there is no row (no
 * executor has started since CREATE EXTENSION).
 */
bool
pgd_store_ready_version(int *version)
{
	bool isnull;

	if (store_run(STMT_READY_VERSION, NULL, NULL) == 0)
		return false;
	*version = DatumGetInt32(store_get_datum(0, 1, &isnull));
	return !isnull;
}

/* Refresh the heartbeat; false when the epoch is gone (the extension was recreated). */
bool
pgd_store_heartbeat(const char *epoch_id)
{
	return RUN(STMT_HEARTBEAT, epoch_id) > 0;
}

/*
 * A scope is abandoned (a lost RACE branch, a loop body that broke or
 * moved to its next generation): remove the pending tasks of the scope and
 * everything below it (running ones are skipped) and its registered signal
 * waits, which would otherwise stay until the instance ends, one more per
 * loop iteration.
 */
void
pgd_store_drop_scope(const char *instance_id, const char *scope)
{
	RUN(STMT_TASKS_DROP_SCOPE, instance_id, scope);
	RUN(STMT_WAITS_DROP_SCOPE, instance_id, scope);
	pgd_store_limit_release(instance_id, NULL, scope);
	pgd_store_lock_release(instance_id, NULL, scope); /* its keyed locks */
}
