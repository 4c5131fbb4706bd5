/*-------------------------------------------------------------------------
 *
 * stamps.c
 *	  The status and stamp (execution_id) of the nodes of the instances
 *	  whose runs row this transaction holds, kept for the rest of the
 *	  transaction, so that the liveness check of every step of a batch
 *	  need not read them again.
 *
 * Every transition asks whether its node and the ancestors of it are live in
 * its scope (pgd_node_is_live), one statement per step: a sixth of an
 * executor's time in 20-step chains (perf, bench/run's chains), for rows that
 * nobody else can change meanwhile.  A node's row changes only under its
 * instance's runs row (docs/design/architecture.md §5), and while this
 * transaction holds that row, only by this transaction's node writes
 * (node_writes.c), which come here as they are written.  So for such an
 * instance the rows read once are kept, with each write's state on top, and a
 * later question about nodes that are all known here (or in the buffer not
 * written yet, which node_writes.c lays over the answer either way) is
 * answered without a statement.
 *
 * What is kept is forgotten with the transaction, and at the rollback of
 * any subtransaction (its writes and its runs row locks are undone).  The
 * nodes' rows are forgotten too when a statement changes status_details
 * another way (pgd_store_node_details_merge, wrapper_state.c), though the keys it adds
 * are never execution_id, and when one changes their status (an ending
 * instance's nodes cancelled, a resumed one's running again: instances.c,
 * sagas.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "common/compat.h"
#include "store/store.h"
#include "store/store_internal.h"

typedef struct StampKey
{
	char instance_id[PGD_ID_LEN + 1];
	char id[PGD_ID_LEN + 1];
} StampKey;

typedef struct StampEntry
{
	StampKey key;
	char	*status;
	char	*stamp;
} StampEntry;

typedef struct LockedEntry
{
	char instance_id[PGD_ID_LEN + 1];
} LockedEntry;

/* both in TopTransactionContext; NULL: nothing kept in this transaction */
static LocalTransactionId stamps_lxid = InvalidLocalTransactionId;
static HTAB				 *stamps = NULL;
static HTAB				 *locked = NULL;

static void
stamps_current(void)
{
	if (stamps_lxid == PGD_MY_LXID)
		return;
	stamps_lxid = PGD_MY_LXID;
	stamps = locked = NULL; /* gone with the last transaction's memory */
}

static HTAB *
make_table(const char *name, Size keysize, Size entrysize)
{
	HASHCTL ctl;

	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = TopTransactionContext;
	return hash_create(name, 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static void
make_key(StampKey *key, const char *instance_id, const char *id)
{
	memset(key, 0, sizeof(*key));
	strlcpy(key->instance_id, instance_id, sizeof(key->instance_id));
	strlcpy(key->id, id, sizeof(key->id));
}

/* This transaction holds the instance's runs row (pgd_store_lock_run). */
void
store_stamps_locked(const char *instance_id)
{
	LockedEntry key;

	if (strlen(instance_id) > PGD_ID_LEN)
		return;
	stamps_current();
	if (locked == NULL)
		locked =
			make_table("pg_durable locked runs", sizeof(key), sizeof(key));
	memset(&key, 0, sizeof(key));
	strlcpy(key.instance_id, instance_id, sizeof(key.instance_id));
	(void) hash_search(locked, &key, HASH_ENTER, NULL);
}

static bool
is_locked(const char *instance_id)
{
	LockedEntry key;

	stamps_current();
	if (locked == NULL || strlen(instance_id) > PGD_ID_LEN)
		return false;
	memset(&key, 0, sizeof(key));
	strlcpy(key.instance_id, instance_id, sizeof(key.instance_id));
	return hash_search(locked, &key, HASH_FIND, NULL) != NULL;
}

/* Forget the rows kept (not which runs rows are held). */
void
store_stamps_forget(void)
{
	stamps_current();
	if (stamps != NULL)
		hash_destroy(stamps);
	stamps = NULL;
}

/*
 * Node id of the instance is now as status and stamp say in its row (read,
 * or written by this transaction): kept when the instance's runs row is
 * held.
 */
void
store_stamps_put(const char *instance_id, const char *id, const char *status,
				 const char *stamp)
{
	StampKey	key;
	StampEntry *e;
	bool		found;

	if (id == NULL || strlen(id) > PGD_ID_LEN || !is_locked(instance_id))
		return;
	if (stamps == NULL)
		stamps = make_table("pg_durable node stamps", sizeof(StampKey),
							sizeof(StampEntry));
	make_key(&key, instance_id, id);
	e = hash_search(stamps, &key, HASH_ENTER, &found);
	if (found)
	{
		if (e->status)
			pfree(e->status);
		if (e->stamp)
			pfree(e->stamp);
	}
	e->status =
		status ? MemoryContextStrdup(TopTransactionContext, status) : NULL;
	e->stamp =
		stamp ? MemoryContextStrdup(TopTransactionContext, stamp) : NULL;
}

/*
 * Node id of the instance as kept here (its status and stamp, either may be
 * NULL), if it is; else false, and the caller reads its row.
 */
bool
store_stamps_find(const char *instance_id, const char *id, char **status,
				  char **stamp)
{
	StampKey	key;
	StampEntry *e;

	if (stamps == NULL || id == NULL || strlen(id) > PGD_ID_LEN ||
		!is_locked(instance_id))
		return false;
	make_key(&key, instance_id, id);
	if ((e = hash_search(stamps, &key, HASH_FIND, NULL)) == NULL)
		return false;
	*status = e->status ? pstrdup(e->status) : NULL;
	*stamp = e->stamp ? pstrdup(e->stamp) : NULL;
	return true;
}

/* A rolled-back subtransaction: the stamps are read again. */
static void
stamps_subxact_abort(SubTransactionId mySubid)
{
	/* the memory is the top transaction's: only the tables are dropped */
	stamps_current();
	stamps = locked = NULL;
}

const PgdHeldOps store_stamps_ops = {
	.subxact_abort = stamps_subxact_abort,
};
