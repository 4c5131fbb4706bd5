/*-------------------------------------------------------------------------
 *
 * sagas.c
 *	  The engine store's functions for sagas (docs/design/sagas.md): the
 *	  registration of an undo, the undos a compensation takes and their end,
 *	  and the resumption of a stopped compensation (store.h; the statements are
 *	  in statements.c's table, but for the rare df.compensate ones here).
 *
 * An undo is registered in df_internal.compensations by the transition
 * in which the forward step of its COMPENSATED node completed, so the row
 * commits with the forward step's effects or not at all: a forward step
 * that failed (its SQL rolled back) registers nothing.  A compensation
 * takes the registered undos whose forward scope lies within a scope (a
 * SAGA's body, a losing RACE branch, the whole instance) and marks them
 * with its own name (compensated_by).
 *
 * Locks: rows of the instance whose runs row the caller holds;
 * pgd_store_instance_resume takes the df.instances row first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

int64
pgd_store_undo_register(const char *instance_id, const char *node_id,
						const char *scope, const char *results)
{
	if (RUN(STMT_UNDO_REGISTER, instance_id, node_id, scope, results) != 1)
		elog(ERROR, "the undo of node %s was not registered", node_id);
	return strtoll(store_get_string(0, 1), NULL, 10);
}

int
pgd_store_undo_claim(const char *instance_id, const char *within,
					 const char *owner, bool all, PgdUndoRow **rows)
{
	int n = RUN(STMT_UNDO_NEXT, instance_id, within, owner, all ? NULL : "1");

	*rows = palloc0(sizeof(PgdUndoRow) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		(*rows)[i].seq = strtoll(store_get_string(i, 1), NULL, 10);
		(*rows)[i].node_id = store_get_string(i, 2);
		(*rows)[i].scope = store_get_string(i, 3);
		(*rows)[i].results = store_get_string(i, 4);
		(*rows)[i].attempts = atoi(store_get_string(i, 5));
	}
	return n;
}

char *
pgd_store_undo_finish(const char *instance_id, int64 seq, bool ok,
					  const char *error)
{
	if (RUN(STMT_UNDO_FINISH, instance_id, psprintf(INT64_FORMAT, seq),
			ok ? "done" : "failed", ok ? NULL : error) != 1)
		return NULL;
	return store_get_string(0, 2);
}

int
pgd_store_undos_done(const char *instance_id, const char *owner,
					 char ***node_ids, char ***errors)
{
	int n = RUN(STMT_UNDOS_DONE, instance_id, owner);

	*node_ids = palloc(sizeof(char *) * Max(n, 1));
	*errors = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char *state = store_get_string(i, 2);

		(*node_ids)[i] = store_get_string(i, 1);
		/* NULL: done; else the error of an undo that failed */
		(*errors)[i] = strcmp(state, "done") == 0 ?
			NULL :
			(store_get_string(i, 3) ? store_get_string(i, 3) : pstrdup(""));
	}
	return n;
}

bool
pgd_store_undo_pending(const char *instance_id, const char *within)
{
	return RUN(STMT_UNDO_PENDING, instance_id, within) > 0;
}

void
pgd_store_undo_tally(const char *instance_id, const char *owner, int *running,
					 int *failed)
{
	RUN(STMT_UNDO_TALLY, instance_id, owner);
	*running = atoi(store_get_string(0, 1));
	*failed = atoi(store_get_string(0, 2));
}

int
pgd_store_undo_requeue(const char *instance_id, const char *within,
					   bool failed_too, char ***owners)
{
	int n = RUN(STMT_UNDO_REQUEUE, instance_id, within,
				failed_too ? "true" : "false");

	*owners = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		(*owners)[i] = store_get_string(i, 1);
	return n;
}

#define T TEXTOID

/* df.compensate's statements (statements.c runs them: store_exec). */
enum
{
	SAGA_INSTANCE_LOCK,
	SAGA_RUN_EXISTS,
	SAGA_FAILED_UNDO,
	SAGA_RUN_MAKE,
	SAGA_STMTS
};

static const PgdStmtDef saga_stmts[SAGA_STMTS] = {
	[SAGA_INSTANCE_LOCK] =
		{"lock the df.instances row of an instance to resume",
		 FLUSH_NODE_WRITES, REACH_INSTANCE,
		 "SELECT status FROM df.instances "
		 "WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		 1,
		 {T}},
	[SAGA_RUN_EXISTS] =
		{"has the instance a runs row?",
		 0, REACH_INSTANCE,
		 "SELECT 1 FROM df_internal.runs "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[SAGA_FAILED_UNDO] =
		{"has the instance an undo that failed, or one left to run?",
		 0, REACH_INSTANCE,
		 "SELECT 1 FROM df_internal.compensations "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND state OPERATOR(pg_catalog.=) ANY ('{failed,registered,running}') LIMIT 1",
		 1,
		 {T}},
	[SAGA_RUN_MAKE] =
		{"a resumed instance's new runs row",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.runs "
		 "(instance_id, submitted_by, label, database, vars, status) "
		 "SELECT i.id, i.submitted_by, i.label, i.database, "
		 "COALESCE((SELECT pg_catalog.jsonb_object_agg(v.name, v.value) FROM df.vars v "
		 " WHERE v.owner OPERATOR(pg_catalog.=) i.submitted_by), '{}') "
		 "OPERATOR(pg_catalog.||) CASE WHEN i.idempotency_key IS NULL "
		 "THEN '{}'::pg_catalog.jsonb "
		 "ELSE pg_catalog.jsonb_build_object('sys_idempotency_key', i.idempotency_key) END, "
		 "'running' FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
};

#undef T

static PgdStmtPlan saga_plans[SAGA_STMTS];

#define SAGA_RUN(s, ...) STORE_EXEC(saga_stmts, saga_plans, s, __VA_ARGS__)

/*
 * df.compensate: a failed instance whose compensation stopped, or a
 * cancelled one whose undos never ran, runs again.  Its df.instances row
 * is locked first; it must be 'failed' or 'cancelled' without a runs row
 * and hold an undo that failed or is left to run.  The runs row is made anew from
 * df.instances (submitter, label, database, idempotency key) and the
 * owner's df.vars as they are now, the status set back to 'running'.
 * Returns NULL when done, else what is wrong.
 */
char *
pgd_store_instance_resume(const char *instance_id)
{
	char			 *status;
	PgdInstanceStatus parsed;

	if (SAGA_RUN(SAGA_INSTANCE_LOCK, instance_id) != 1)
		return psprintf("instance %s does not exist", instance_id);
	status = pgd_spi_getstring(0, 1);
	if (status == NULL || !pgd_instance_status_parse(status, &parsed) ||
		(parsed != PGD_INSTANCE_FAILED && parsed != PGD_INSTANCE_CANCELLED))
		return psprintf("instance %s is %s, not failed or cancelled",
						instance_id, status ? status : "without a status");
	if (SAGA_RUN(SAGA_RUN_EXISTS, instance_id) > 0)
		return psprintf("instance %s is still running", instance_id);
	if (SAGA_RUN(SAGA_FAILED_UNDO, instance_id) == 0)
		return psprintf("instance %s has no undo to run: none failed and none is left registered",
						instance_id);
	(void) pgd_store_set_instance_status(
		instance_id, PGD_STATUS_MASK(PGD_INSTANCE_FAILED), PGD_INSTANCE_RUNNING);
	SAGA_RUN(SAGA_RUN_MAKE, instance_id);
	/* what the end stopped runs again: the SAGA its compensation goes on in */
	if (RUN(STMT_RESUME_CANCELLED_NODES, instance_id) > 0)
		store_stamps_forget();
	return NULL;
}
