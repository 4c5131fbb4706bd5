/*-------------------------------------------------------------------------
 *
 * store_saga.c
 *	  The engine store's functions for sagas (orchestration-api.md §2,
 *	  issue 16): the registration of an undo (store.h; the statements are
 *	  in store.c's table).
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
