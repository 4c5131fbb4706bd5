/*-------------------------------------------------------------------------
 *
 * txn_buffer.c
 *	  The transaction buffer: everything the store holds in memory instead
 *	  of rows, the one pair of transaction callbacks that keeps it right
 *	  across subtransactions and commits, and the one order in which its
 *	  writes become rows.
 *
 * An executor's batch runs many steps in one transaction; what a row
 * would only have recorded until the batch's own commit is held here and
 * written when the batch ends, or earlier when a statement needs the rows
 * (the statement table names what each one needs: statements.c).  Each
 * kind of held write belongs to the file of its rows, which gives this
 * buffer its operations (txn_kinds.c): write what is held, refuse a commit
 * with something unwritten, undo what a rolled-back subtransaction held,
 * forget it all at the transaction's end.  The kinds are written in the
 * order of PgdHeldKind.
 *
 * The entries of keyed locks, limit slots, JOIN counts and MAP counters
 * are kept in lists of one shape (PgdHeldList), here, so that any file of
 * the store may ask whether an instance holds one; the keys node
 * executions took in this transaction too (PgdXactKeys).  An entry records the
 * subtransaction that made it and the one that released it (or wrote it
 * as rows: either way it is no longer held here).  A rolled-back
 * subtransaction's entries are gone and its releases undone:
 * subtransaction ids only grow, and every id above a rolled-back one
 * belongs to it or below.  The entries live in TopTransactionContext, so a
 * list seen in a later transaction (its local transaction id differs) is
 * empty.
 *
 * Locks: none; the kinds' writes run statements of their own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "store/store.h"
#include "store/store_internal.h"

PgdHeldList store_held_locks;		/* keyed locks a batch took (lock_keys.c) */
PgdHeldList store_held_slots;		/* limit slots it gave (limit_slots.c) */
PgdHeldList store_held_join_counts; /* JOIN counts (joins_loops.c) */
PgdHeldList store_held_map_counts;	/* MAP counters (map_items.c) */
PgdXactKeys store_fresh_lock_keys;	/* lock keys taken here (lock_keys.c) */
PgdXactKeys store_entered_limit_keys; /* limit keys entered here (limit_slots.c) */

static const PgdHeldOps *kinds[HELD_KINDS];
static bool				 hold_writes = false;

/* ---------------------------------------------------------------------
 * The kinds of held writes and their transaction callbacks
 * ---------------------------------------------------------------------
 */

/*
 * Write what the kinds in mask (HELD_MASK of each) hold, in the kinds'
 * order.
 */
void
store_txn_write(int mask)
{
	for (int k = 0; k < HELD_KINDS; k++)
		if ((mask & HELD_MASK(k)) && kinds[k]->write != NULL)
			kinds[k]->write();
}

/*
 * The executor runs a batch: may node writes stay buffered from one
 * transition to the next until the batch ends (or a statement of the
 * store needs them)?  A chain step's start and end are then one update of
 * its row instead of two, and the other kinds hold what a batch would only
 * write to remove again.  The executor writes them before its commit with
 * pgd_store_write_node_writes.
 */
void
pgd_store_hold_writes(bool hold)
{
	hold_writes = hold;
}

bool
store_writes_held(void)
{
	return hold_writes;
}

/* The batch ends: everything but its step tasks is written, and no longer held. */
void
pgd_store_write_node_writes(void)
{
	store_txn_write(HELD_ALL & ~HELD_MASK(HELD_TASKS));
	hold_writes = false;
}

/*
 * All of it, step tasks included, written now, the batch holding on from
 * here: df.check() called by a step reads the engine's rows as the
 * batch's commit would leave them (df_internal.write_held).  Outside a
 * batch there is nothing to write.
 */
void
pgd_store_write_held_all(void)
{
	store_txn_write(HELD_ALL);
}

static void
txn_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* a transaction whose held writes were never written must not commit */
			for (int k = 0; k < HELD_KINDS; k++)
				if (kinds[k]->check_written != NULL)
					kinds[k]->check_written();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			for (int k = 0; k < HELD_KINDS; k++)
				if (kinds[k]->forget != NULL)
					kinds[k]->forget();
			hold_writes = false;
			break;
		default:
			break;
	}
}

static void
subtxn_callback(SubXactEvent event, SubTransactionId mySubid,
				SubTransactionId parentSubid, void *arg)
{
	for (int k = 0; k < HELD_KINDS; k++)
	{
		if (event == SUBXACT_EVENT_ABORT_SUB &&
			kinds[k]->subxact_abort != NULL)
			kinds[k]->subxact_abort(mySubid);
		else if (event == SUBXACT_EVENT_COMMIT_SUB &&
				 kinds[k]->subxact_commit != NULL)
			kinds[k]->subxact_commit(mySubid, parentSubid);
	}
}

/* Install the kinds' operations and the callbacks (from _PG_init, once). */
void
store_txn_buffer_init(const PgdHeldOps *const ops[HELD_KINDS])
{
	for (int k = 0; k < HELD_KINDS; k++)
	{
		Assert(ops[k] != NULL);
		kinds[k] = ops[k];
	}
	RegisterXactCallback(txn_callback, NULL);
	RegisterSubXactCallback(subtxn_callback, NULL);
}

/* Has the instance a keyed lock, a limit slot or a JOIN count held here? */
bool
store_locks_held_by(const char *instance_id)
{
	return store_held_by(&store_held_locks, instance_id);
}

bool
store_slots_held_by(const char *instance_id)
{
	return store_held_by(&store_held_slots, instance_id);
}

bool
store_join_counts_held(const char *instance_id)
{
	return store_held_by(&store_held_join_counts, instance_id);
}

/* ---------------------------------------------------------------------
 * Lists of held entries
 * ---------------------------------------------------------------------
 */

static void
held_current(PgdHeldList *l)
{
	if (l->lxid == PGD_MY_LXID)
		return;
	l->lxid = PGD_MY_LXID;
	l->e = NULL; /* in the last transaction's TopTransactionContext */
	l->n = l->max = l->nlive = 0;
}

/* Do the ids fit an entry's fields (of a held entry or a transaction key)? */
bool
store_held_fits(const char *instance_id, const char *node_id)
{
	return strlen(instance_id) <= PGD_ID_LEN && strlen(node_id) <= PGD_ID_LEN;
}

/*
 * A new entry of the node execution (instance_id, node_id, scope) for
 * key, held from now on; since (NULL: none) is copied.  The caller sets
 * the entry's other fields.
 */
PgdHeldEntry *
store_held_add(PgdHeldList *l, const char *instance_id, const char *node_id,
			   const char *scope, const char *key, const char *since)
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
	h->since = since ? pstrdup(since) : NULL;
	h->token = 0;
	h->remaining = 0;
	memset(h->counts, 0, sizeof(h->counts));
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

/* ---------------------------------------------------------------------
 * The keys node executions took in this transaction
 *
 * While the transaction holds a key's row, a release in the same
 * transaction can skip locking the row again: the keyed locks'
 * (lock_keys.c) and the limits' (limit_slots.c).  The owner empties its
 * list when a subtransaction rolls back (what it took is undone).
 * ---------------------------------------------------------------------
 */

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
