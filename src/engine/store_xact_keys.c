/*-------------------------------------------------------------------------
 *
 * store_xact_keys.c
 *	  Lists of the keys that node executions took in this transaction,
 *	  while the transaction holds the key's row: the keyed locks'
 *	  (store_locks.c) and the limits' (store_limits.c), so that a release
 *	  in the same transaction can skip locking the row again.
 *
 * A list lives in its owner's static memory; its strings are in
 * TopTransactionContext, so a list seen in a later transaction (its
 * local transaction id differs) is empty.  The owner empties it when a
 * subtransaction rolls back (what it took is undone).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/proc.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "engine/store_stmt.h"

static void
xact_keys_current(PgdXactKeys *l)
{
	if (l->lxid == PGD_MY_LXID)
		return;
	l->lxid = PGD_MY_LXID;
	l->n = 0; /* their strings went with the last transaction's memory */
}

void
store_xact_keys_add(PgdXactKeys *l, const char *instance_id,
					const char *node_id, const char *scope, const char *key)
{
	PgdXactKey *k;

	xact_keys_current(l);
	if (l->n == PGD_XACT_KEYS_MAX || !store_held_fits(instance_id, node_id))
		return; /* released the general way */
	k = &l->keys[l->n++];
	strlcpy(k->instance_id, instance_id, sizeof(k->instance_id));
	strlcpy(k->node_id, node_id, sizeof(k->node_id));
	k->scope = MemoryContextStrdup(TopTransactionContext, scope);
	k->key = MemoryContextStrdup(TopTransactionContext, key);
}

/* The key a node execution took in this transaction, off the list; or NULL. */
char *
store_xact_keys_take(PgdXactKeys *l, const char *instance_id,
					 const char *node_id, const char *scope)
{
	xact_keys_current(l);
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->keys[i].instance_id, instance_id) == 0 &&
			strcmp(l->keys[i].node_id, node_id) == 0 &&
			strcmp(l->keys[i].scope, scope) == 0)
		{
			char *key = l->keys[i].key;

			l->keys[i] = l->keys[--l->n];
			return key;
		}
	return NULL;
}

/* The instance's keys are released another way: off the list. */
void
store_xact_keys_forget(PgdXactKeys *l, const char *instance_id)
{
	xact_keys_current(l);
	for (int i = l->n - 1; i >= 0; i--)
		if (strcmp(l->keys[i].instance_id, instance_id) == 0)
			l->keys[i] = l->keys[--l->n];
}

void
store_xact_keys_clear(PgdXactKeys *l)
{
	l->n = 0;
}
