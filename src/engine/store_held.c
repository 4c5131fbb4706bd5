/*-------------------------------------------------------------------------
 *
 * store_held.c
 *	  Lists of what an executor's batch holds in memory instead of rows: the
 *	  keyed locks of store_locks.c and the limit slots of store_limits.c, the
 *	  JOIN counts of store_state.c.  Each entry belongs to one node execution
 *	  (instance, node, scope) and names a key, with two texts its owner writes
 *	  into its row if the batch ends with it still held.
 *
 * An entry records the subtransaction that made it and the one that
 * released it (or wrote it as rows: either way it is no longer held here).
 * A rolled-back subtransaction's entries are gone and its releases undone:
 * subtransaction ids only grow, and every id above a rolled-back one
 * belongs to it or below.  A list lives in its owner's static memory, its
 * entries in TopTransactionContext, so a list seen in a later transaction
 * (its local transaction id differs) is empty.
 *
 * Locks: none; the owners run the statements.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "engine/store_stmt.h"

static void
held_current(PgdHeldList *l)
{
	if (l->lxid == PGD_MY_LXID)
		return;
	l->lxid = PGD_MY_LXID;
	l->e = NULL; /* in the last transaction's TopTransactionContext */
	l->n = l->max = l->nlive = 0;
}

/* Do the ids fit an entry's fields (here and in store_xact_keys.c)? */
bool
store_held_fits(const char *instance_id, const char *node_id)
{
	return strlen(instance_id) <= PGD_ID_LEN && strlen(node_id) <= PGD_ID_LEN;
}

PgdHeldEntry *
store_held_add(PgdHeldList *l, const char *instance_id, const char *node_id,
			   const char *scope, const char *key, const char *a,
			   const char *b)
{
	PgdHeldEntry *h;
	MemoryContext old;

	held_current(l);
	if (l->n == l->max)
	{
		l->max = Max(8, l->max * 2);
		l->e = l->e == NULL ?
			MemoryContextAlloc(TopTransactionContext,
							   sizeof(PgdHeldEntry) * l->max) :
			repalloc(l->e, sizeof(PgdHeldEntry) * l->max);
	}
	h = &l->e[l->n++];
	old = MemoryContextSwitchTo(TopTransactionContext);
	strlcpy(h->instance_id, instance_id, sizeof(h->instance_id));
	strlcpy(h->node_id, node_id, sizeof(h->node_id));
	h->scope = pstrdup(scope);
	h->key = pstrdup(key);
	h->a = a ? pstrdup(a) : NULL;
	h->b = b ? pstrdup(b) : NULL;
	MemoryContextSwitchTo(old);
	h->made = GetCurrentSubTransactionId();
	h->released = 0;
	l->nlive++;
	return h;
}

void
store_held_release(PgdHeldList *l, PgdHeldEntry *h)
{
	h->released = GetCurrentSubTransactionId();
	l->nlive--;
}

/* The entry of one node execution still held; or NULL. */
PgdHeldEntry *
store_held_find(PgdHeldList *l, const char *instance_id, const char *node_id,
				const char *scope)
{
	held_current(l);
	for (int i = 0; i < l->n; i++)
		if (l->e[i].released == 0 &&
			strcmp(l->e[i].instance_id, instance_id) == 0 &&
			strcmp(l->e[i].node_id, node_id) == 0 &&
			strcmp(l->e[i].scope, scope) == 0)
			return &l->e[i];
	return NULL;
}

/* The next entry still held from *i on (start at 0), key's only unless NULL. */
PgdHeldEntry *
store_held_next(PgdHeldList *l, const char *key, int *i)
{
	held_current(l);
	for (; *i < l->n && l->nlive > 0; (*i)++)
		if (l->e[*i].released == 0 &&
			(key == NULL || strcmp(l->e[*i].key, key) == 0))
			return &l->e[(*i)++];
	return NULL;
}

/* Has the instance an entry still held? */
bool
store_held_by(PgdHeldList *l, const char *instance_id)
{
	int			  i = 0;
	PgdHeldEntry *h;

	while ((h = store_held_next(l, NULL, &i)) != NULL)
		if (strcmp(h->instance_id, instance_id) == 0)
			return true;
	return false;
}

int
store_held_count(PgdHeldList *l, const char *key)
{
	int i = 0;
	int n = 0;

	while (store_held_next(l, key, &i) != NULL)
		n++;
	return n;
}

/*
 * Release the instance's entries: of node_id in exactly scope (scope NULL:
 * any), or of every node in scope and below (node_id NULL), or all (both
 * NULL), as the owners' releases of rows name them.
 */
void
store_held_drop(PgdHeldList *l, const char *instance_id, const char *node_id,
				const char *scope)
{
	size_t		  sl = scope ? strlen(scope) : 0;
	int			  i = 0;
	PgdHeldEntry *h;

	while ((h = store_held_next(l, NULL, &i)) != NULL)
	{
		if (strcmp(h->instance_id, instance_id) != 0)
			continue;
		if (node_id != NULL ?
				(strcmp(h->node_id, node_id) == 0 &&
				 (scope == NULL || strcmp(h->scope, scope) == 0)) :
				(scope == NULL || strcmp(h->scope, scope) == 0 ||
				 (strncmp(h->scope, scope, sl) == 0 &&
				  strncmp(h->scope + sl, "::", 2) == 0)))
			store_held_release(l, h);
	}
}

void
store_held_subxact_abort(PgdHeldList *l, SubTransactionId subid)
{
	int k = 0;

	if (l->lxid != PGD_MY_LXID)
		return;
	for (int i = 0; i < l->n; i++)
	{
		PgdHeldEntry *h = &l->e[i];

		if (h->made >= subid)
		{
			if (h->released == 0)
				l->nlive--;
			continue;
		}
		if (h->released >= subid)
		{
			h->released = 0;
			l->nlive++;
		}
		l->e[k++] = *h;
	}
	l->n = k;
}

/* At PRE_COMMIT: an entry still held was never written; the commit is refused. */
void
store_held_check_written(PgdHeldList *l, const char *what)
{
	if (l->lxid == PGD_MY_LXID && l->nlive > 0)
		elog(ERROR, "%s held in memory were not written before commit", what);
}
