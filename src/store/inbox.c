/*-------------------------------------------------------------------------
 *
 * inbox.c
 *	  The engine store's functions for the inbox
 *	  (docs/design/batches-and-inbox.md §4; store.h): completions whose
 *	  instance's runs row another transaction held when their step ended.
 *
 * A step that finds its runs row held (SKIP LOCKED) does not wait: it
 * inserts its completion into df_internal.inbox together with an 'apply'
 * task and commits, so the step's effects, its result and the row that
 * will apply it commit together.  Each row has an apply task of its own,
 * committed with it; an apply task takes the runs row and applies every
 * committed row of its instance in id order, deleting them in the same
 * transaction.  It first deletes the instance's other apply tasks that it
 * sees (SKIP LOCKED), then reads the inbox in a later statement: every
 * task it deleted committed before that read, and so did its row, which
 * the read therefore finds (or a committed applier already took).  A row
 * that commits after the read keeps its own task.  So no completion can be
 * left without a task, and no apply task is skipped because another
 * "already exists".
 *
 * Under a schema without the inbox (the new library before ALTER
 * EXTENSION ... UPDATE) nothing here is used: the step waits for its runs
 * row (pgd_internal_relation_exists).
 *
 * Locks: the runs row taken with SKIP LOCKED (never waits); the inbox is
 * insert only and read and deleted under the instance's runs lock; other
 * apply tasks are deleted with SKIP LOCKED.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

#define T TEXTOID

/* The inbox's statements (statements.c runs them: store_exec). */
enum
{
	INBOX_RUN_SKIP,
	INBOX_RUN_EXISTS,
	INBOX_ADD,
	INBOX_APPLY_DROP,
	INBOX_TAKE,
	INBOX_DROP,
	INBOX_OTHER_APPLY,
	INBOX_RESTORE_TASK,
	INBOX_STMTS
};

static const PgdStmtDef inbox_stmts[INBOX_STMTS] = {
	/* the two reads of the runs row read neither nodes nor the history */
	[INBOX_RUN_SKIP] =
		{"the runs row with SKIP LOCKED",
		 0, REACH_INSTANCE,
		 "SELECT status FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "FOR UPDATE SKIP LOCKED",
		 1,
		 {T}},
	[INBOX_RUN_EXISTS] =
		{"is the runs row there?",
		 0, REACH_INSTANCE,
		 "SELECT 1 FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[INBOX_ADD] =
		{"a completion into the inbox, with its apply task",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "WITH x AS (INSERT INTO df_internal.inbox (instance_id, node_id, scope, "
		 " attempt, ok, result, code, error_node, retryable, retry_after_ms, compensated) "
		 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)) "
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) "
		 "VALUES ($1, $1, 'apply') RETURNING id",
		 11,
		 {T, T, T, INT4OID, BOOLOID, T, T, T, BOOLOID, INT8OID, BOOLOID}},
	[INBOX_APPLY_DROP] =
		{"the instance's other apply tasks nobody holds",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "DELETE FROM df_internal.tasks WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
		 " SELECT id FROM df_internal.tasks "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND kind OPERATOR(pg_catalog.=) 'apply' "
		 " FOR UPDATE SKIP LOCKED))",
		 1,
		 {T}},
	[INBOX_TAKE] =
		{"the instance's committed completions, deleted, in id order",
		 0, REACH_INSTANCE,
		 "WITH d AS (DELETE FROM df_internal.inbox "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 RETURNING *) "
		 "SELECT node_id, scope, attempt, ok, result, code, error_node, "
		 " retryable, retry_after_ms, compensated FROM d ORDER BY id",
		 1,
		 {T}},
	[INBOX_DROP] =
		{"the completions of an ended instance",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "DELETE FROM df_internal.inbox "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[INBOX_OTHER_APPLY] =
		{"another apply task of the instance that nobody claimed, after $2",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT id FROM df_internal.tasks "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND kind OPERATOR(pg_catalog.=) 'apply' "
		 "AND id OPERATOR(pg_catalog.>) $2::pg_catalog.int8 "
		 "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
		 2,
		 {T, T}},
	[INBOX_RESTORE_TASK] =
		{"a new apply task for completions that have none",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) "
		 "VALUES ($1, $1, 'apply') RETURNING id",
		 1,
		 {T}},
};

#undef T

static PgdStmtPlan inbox_plans[INBOX_STMTS];

#define INBOX_RUN(s, ...) STORE_EXEC(inbox_stmts, inbox_plans, s, __VA_ARGS__)

/*
 * Take the runs row with SKIP LOCKED: true with the row's status in
 * *status when taken; false when it is held elsewhere (*held) or gone.
 * The row is locked by its key (store_lock_run_row); a row changed since
 * the snapshot by statements, of which a row released between the two
 * reads as held, which only sends a completion to the inbox.
 */
bool
store_run_lock_skip(const char *instance_id, bool *held, char **status)
{
	*held = false;
	switch (store_lock_run_row(instance_id, LockWaitSkip, status))
	{
		case PGD_RUN_TAKEN:
			return true;
		case PGD_RUN_HELD:
			*held = true;
			return false;
		case PGD_RUN_GONE:
			return false;
		case PGD_RUN_CHANGED:
			break;
	}
	if (INBOX_RUN(INBOX_RUN_SKIP, instance_id) > 0)
	{
		*status = store_get_string(0, 1);
		return true;
	}
	*held = INBOX_RUN(INBOX_RUN_EXISTS, instance_id) > 0;
	return false;
}

/* A completion into the inbox, with the apply task that will apply it. */
void
pgd_store_inbox_add(const char *instance_id, const char *node_id,
					const char *scope, int attempt, const PgdOutcome *o)
{
	Datum values[11];
	char  nulls[11] = "           ";

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = Int32GetDatum(attempt);
	values[4] = BoolGetDatum(o->ok);
	values[5] = o->result ? pgd_text_datum(o->result) : (Datum) 0;
	nulls[5] = o->result ? ' ' : 'n';
	values[6] = o->code ? pgd_text_datum(o->code) : (Datum) 0;
	nulls[6] = o->code ? ' ' : 'n';
	values[7] = o->node ? pgd_text_datum(o->node) : (Datum) 0;
	nulls[7] = o->node ? ' ' : 'n';
	values[8] = BoolGetDatum(o->retryable);
	values[9] = Int64GetDatum(o->retry_after_ms);
	values[10] = BoolGetDatum(o->compensated);
	if (store_exec(&inbox_stmts[INBOX_ADD], &inbox_plans[INBOX_ADD], values,
				   nulls) != 1)
		elog(ERROR, "the apply task of instance %s was not inserted",
			 instance_id);
	pgd_task_ready_at_commit(strtoll(pgd_spi_getstring(0, 1), NULL, 10));
}

/*
 * Does the instance have completions in the inbox (or is one being
 * committed)?  Read without a lock, by the index: no statement, whose
 * plan could scan the table, and which would cost more than the lookup.
 */
bool
pgd_store_inbox_pending(const char *instance_id)
{
	/* reads neither df.nodes nor the history: node writes stay buffered */
	return pgd_internal_index_has("inbox_instance_idx", 1,
								  (const char *const[]){instance_id});
}

/*
 * Under the runs lock: delete the instance's other apply tasks (SKIP
 * LOCKED: one claimed elsewhere finds nothing or applies what came after),
 * then delete and return its committed completions in id order.  The
 * order of the two statements is what makes it safe (see the banner).
 */
int
pgd_store_inbox_take(const char *instance_id, PgdInboxEntry **rows)
{
	int n;

	(void) INBOX_RUN(INBOX_APPLY_DROP, instance_id);
	n = INBOX_RUN(INBOX_TAKE, instance_id);
	*rows = palloc0(sizeof(PgdInboxEntry) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		PgdInboxEntry *e = &(*rows)[i];

		e->node_id = pgd_spi_getstring(i, 1);
		e->scope = pgd_spi_getstring(i, 2);
		e->attempt = atoi(pgd_spi_getstring(i, 3));
		e->outcome.ok = strcmp(pgd_spi_getstring(i, 4), "t") == 0;
		e->outcome.result = pgd_spi_getstring(i, 5);
		e->outcome.code = pgd_spi_getstring(i, 6);
		e->outcome.node = pgd_spi_getstring(i, 7);
		e->outcome.retryable = strcmp(pgd_spi_getstring(i, 8), "t") == 0;
		e->outcome.retry_after_ms = strtoll(pgd_spi_getstring(i, 9), NULL, 10);
		e->outcome.compensated = strcmp(pgd_spi_getstring(i, 10), "t") == 0;
	}
	return n;
}

/*
 * The completions of an instance that has ended (no runs row): nothing
 * will apply them.  Returns how many were dropped.
 */
int
pgd_store_inbox_drop(const char *instance_id)
{
	return INBOX_RUN(INBOX_DROP, instance_id);
}

/*
 * An apply task that found the runs row held may leave its work to
 * another apply task of the instance, when it can lock one nobody has
 * claimed: that task stays (this transaction does not delete it), and
 * whoever claims it reads the inbox after this task's row committed.
 * Only the tasks after after_id (the caller's own) are looked at, through
 * tasks_apply_idx in id order: the entries of the applied ones before it
 * stay in the index until a VACUUM, and in a wide fan-out there are
 * thousands.  An older task nobody claimed is not lost by it: it is in the
 * queue, and runs; it only is not the one this task leaves its work to.
 *
 * The lock hides that task from a claim by id while this transaction
 * runs, and a claim that finds it held drops its id from the ring of
 * published ids (wake.c), so nothing would name it again before the
 * safety poll: this transaction's commit publishes its id again.
 * Without that, the last branches of a 100-branch fan-out waited for the
 * poll, 5 s, in bench/peers/run (24 steps/s at one client), and df.map
 * over 1,000 rows ran at 175 steps/s in one bench/run out of three.  (A
 * queue scan at commit did it before: a scan skips the tasks that other
 * batches hold, 500 buffers and 0.7 ms each in a fan-out.)
 */
bool
pgd_store_inbox_other_apply(const char *instance_id, int64 after_id)
{
	if (INBOX_RUN(INBOX_OTHER_APPLY, instance_id,
				  psprintf(INT64_FORMAT, after_id)) == 0)
		return false;
	pgd_task_ready_at_commit(strtoll(pgd_spi_getstring(0, 1), NULL, 10));
	return true;
}

/* reconciliation: a new apply task for completions that have none */
void
pgd_store_inbox_restore_task(const char *instance_id)
{
	if (INBOX_RUN(INBOX_RESTORE_TASK, instance_id) == 1)
		pgd_task_ready_at_commit(strtoll(pgd_spi_getstring(0, 1), NULL, 10));
}
