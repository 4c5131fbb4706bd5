/*-------------------------------------------------------------------------
 *
 * txn_kinds.c
 *	  The kinds of writes the transaction buffer holds, in the order they
 *	  are written, each with its file's operations; and the store's
 *	  set-up when the library loads.
 *
 * This is the only file that names every kind: the buffer (txn_buffer.c)
 * knows them by their operations, and each kind's file knows only its
 * own, so that no file of the store calls one above it.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/store.h"
#include "store/store_internal.h"

static const PgdHeldOps *const kinds[HELD_KINDS] = {
	[HELD_LOCK_KEYS] = &store_lock_keys_ops,
	[HELD_LIMIT_SLOTS] = &store_limit_slots_ops,
	[HELD_JOIN_COUNTS] = &store_join_counts_ops,
	[HELD_MAP_COUNTS] = &store_map_counts_ops,
	[HELD_START] = &store_held_start_ops,
	[HELD_NODE_WRITES] = &store_node_writes_ops,
	[HELD_TASKS] = &store_held_tasks_ops,
	[HELD_STAMPS] = &store_stamps_ops,
};

/* From _PG_init: the transaction buffer's callbacks and the prepare hook. */
void
pgd_store_init(void)
{
	store_txn_buffer_init(kinds);
	store_tasks_init();
}
