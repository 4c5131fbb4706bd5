/*-------------------------------------------------------------------------
 *
 * store_saga.c
 *	  The engine store's functions for sagas (orchestration-api.md §2,
 *	  issue 16): the registration of an undo, the choice of the next undo
 *	  to run and its end (store.h; the statements are in store.c's table).
 *
 * An undo is registered in df_internal.compensations by the transition
 * in which the forward step of its COMPENSATED node completed, so the row
 * commits with the forward step's effects or not at all: a forward step
 * that failed (its SQL rolled back) registers nothing.
 *
 * Locks: rows of the instance whose runs row the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/store.h"
#include "engine/store_stmt.h"

int64
pgd_store_undo_register(const char *instance_id, const char *node_id,
						const char *scope, const char *results)
{
	if (RUN(STMT_UNDO_REGISTER, instance_id, node_id, scope, results) != 1)
		elog(ERROR, "the undo of node %s was not registered", node_id);
	return strtoll(store_get_string(0, 1), NULL, 10);
}

bool
pgd_store_undo_next(const char *instance_id, int64 *seq, char **node_id,
					char **scope, char **results)
{
	if (RUN(STMT_UNDO_NEXT, instance_id) == 0)
		return false;
	*seq = strtoll(store_get_string(0, 1), NULL, 10);
	*node_id = store_get_string(0, 2);
	*scope = store_get_string(0, 3);
	*results = store_get_string(0, 4);
	return true;
}

void
pgd_store_undo_finish(const char *instance_id, int64 seq, bool ok,
					  const char *error)
{
	RUN(STMT_UNDO_FINISH, instance_id, psprintf(INT64_FORMAT, seq),
		ok ? "done" : "failed", ok ? NULL : error);
}

int
pgd_store_undos_done(const char *instance_id, char ***node_ids)
{
	int n = RUN(STMT_UNDOS_DONE, instance_id);

	*node_ids = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		(*node_ids)[i] = store_get_string(i, 1);
	return n;
}

bool
pgd_store_undo_pending(const char *instance_id)
{
	return RUN(STMT_UNDO_PENDING, instance_id) > 0;
}
