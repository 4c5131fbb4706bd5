/*-------------------------------------------------------------------------
 *
 * joins_loops.c
 *	  The store's functions for JOIN counters (df_internal.joins; in a
 *	  batch held in memory first, HELD_JOIN_COUNTS) and loop state
 *	  (df_internal.loops).
 *
 * Locks: the caller holds the instance's runs row.
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
 * JOIN counters and loop state
 * ---------------------------------------------------------------------
 */

/*
 * JOIN counters held in memory.  In an executor's batch
 * (store_writes_held) the first branch of a JOIN to end writes no
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
			store_writes_held() && store_held_fits(instance_id, node_id);
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
