/*-------------------------------------------------------------------------
 *
 * lock_keys.c
 *	  The engine store's functions for keyed locks (df.with_lock, node
 *	  LOCK; docs/design/locks-and-limits.md §1): taking a key, the entries
 *	  of one LOCK execution, and the release that hands a key to its next
 *	  waiters (store.h).
 *
 * df_internal.locks has one row per key a LOCK node execution holds or
 * waits for; seq is the order of the requests.  df_internal.lock_keys has
 * one row per key that has entries: the row every change of the key's
 * entries locks first, so that the decisions "may I have it" and "who is
 * next" are made one at a time per key.  A LOCK node takes its keys one
 * after the other in their canonical order (byte order), each one only
 * once it holds the ones before: a request waits for one key at a time,
 * behind the holders and the earlier waiters of that key (FIFO), and
 * every instance's nested locks follow the same order (the lock order
 * check of orchestration/lock.c), so no cycle of waits can form.
 *
 * A key is granted to a waiter by the transaction that releases it: the entry
 * becomes held there and a timer task due now is queued for the waiter's LOCK
 * node (a row inserted into the other instance's queue,
 * docs/design/architecture.md §5 rule 2), which takes its next keys or starts
 * its child.  Fencing tokens come from one sequence: every grant gets a larger
 * one, so each key's tokens only grow, whatever happens to its rows.
 *
 * None of these statements reads df.nodes or the history, so they leave
 * the store's buffered node writes to go out with the rest of the
 * transition (node_writes.c).
 *
 * In an executor's batch, an exclusive key nobody has is held in memory
 * (below, "Keys held in memory"): no row is written unless the batch
 * commits with the key still held.
 *
 * Locks: the lock_keys row of each key touched, taken in key order within
 * one call and held to the end of the transaction, in the one order of the
 * key rows below (an executor waits only for a row after every one it
 * holds); rows of df_internal.locks of that key.  Before a key's row is
 * made, and for a key held in memory, the key's advisory lock (an
 * ExclusiveLock on an advisory tag of the key's hash, field4
 * PGD_KEY_ADVISORY_TAG), in the same order, to the end of the transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

#define EQ " OPERATOR(pg_catalog.=) "

/*
 * The entries of one node execution (node $n in exactly scope $s), of a
 * scope and below ($n NULL), or all ($s NULL too).
 */
#define LOCK_FILTER(n, s) \
	"AND (" n "::text IS NULL OR node_id" EQ n ") " \
	"AND (" s "::text IS NULL OR scope" EQ s " OR (" n "::text IS NULL " \
	" AND pg_catalog.starts_with(scope, " s \
	" OPERATOR(pg_catalog.||) '::')))"

/* The statements of keyed locks (statements.c runs them: store_exec). */
#define T TEXTOID

enum
{
	LOCK_KEY_ROW,
	LOCK_TAKE_FRESH,
	LOCK_HELD_WRITE,
	LOCK_ENTRY_ADD,
	LOCK_ENTRIES,
	LOCK_MAX_HELD,
	LOCK_QUEUE,
	LOCK_GRANT,
	LOCK_RELEASE_LOCKED,
	LOCK_RELEASE_KEYS,
	LOCK_RESULT_FORGET,
	LOCK_STMTS
};

static const PgdStmtDef lock_stmts[LOCK_STMTS] = {
	[LOCK_KEY_ROW] =
		{"a key's row, made when it has none, locked",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.lock_keys AS k (key) VALUES ($1) "
		 "ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key",
		 1,
		 {T}},
	[LOCK_TAKE_FRESH] =
		{"a key nobody has: its row made and the entry held",
		 0, REACH_ALL,
		 "WITH k AS (INSERT INTO df_internal.lock_keys (key) VALUES ($1) "
		 " ON CONFLICT (key) DO NOTHING RETURNING key) "
		 "INSERT INTO df_internal.locks "
		 "(key, instance_id, node_id, scope, mode, held, token, since) "
		 "SELECT k.key, $2, $3, $4, $5, true, "
		 "pg_catalog.nextval('df_internal.lock_tokens'), "
		 "pg_catalog.clock_timestamp() FROM k RETURNING token",
		 5,
		 {T, T, T, T, T}},
	[LOCK_HELD_WRITE] =
		{"a key taken in memory, as its row and its held entry",
		 0, REACH_ALL,
		 "WITH k AS (INSERT INTO df_internal.lock_keys (key) VALUES ($1) RETURNING key) "
		 "INSERT INTO df_internal.locks "
		 "(key, instance_id, node_id, scope, mode, held, token, since) "
		 "SELECT k.key, $2, $3, $4, 'exclusive', true, $5::pg_catalog.int8, "
		 "$6::pg_catalog.timestamptz FROM k",
		 6,
		 {T, T, T, T, T, T}},
	[LOCK_ENTRY_ADD] =
		{"an entry of a key whose row is locked, held or queued",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.locks "
		 "(key, instance_id, node_id, scope, mode, held, token, since) "
		 "SELECT $1, $2, $3, $4, $5, s.free, "
		 "CASE WHEN s.free THEN pg_catalog.nextval('df_internal.lock_tokens') END, "
		 "CASE WHEN s.free THEN pg_catalog.clock_timestamp() END "
		 "FROM (SELECT NOT EXISTS (SELECT 1 FROM df_internal.locks x "
		 " WHERE x.key" EQ "$1 AND (x.mode" EQ "'exclusive' OR $5" EQ
		 "'exclusive'))"
		 " AS free) s RETURNING held, token",
		 5,
		 {T, T, T, T, T}},
	[LOCK_ENTRIES] =
		{"the entries of one node execution",
		 FLUSH_LOCK_KEYS, REACH_INSTANCE,
		 "SELECT key, held, token FROM df_internal.locks "
		 "WHERE instance_id" EQ "$1 AND node_id" EQ "$2 AND scope" EQ
		 "$3 ORDER BY key",
		 3,
		 {T, T, T}},
	[LOCK_MAX_HELD] =
		{"the largest key some nodes of an instance hold",
		 FLUSH_LOCK_KEYS, REACH_INSTANCE,
		 "SELECT pg_catalog.max(key) FROM df_internal.locks "
		 "WHERE instance_id" EQ "$1 AND held AND node_id" EQ
		 "ANY (pg_catalog.string_to_array($2, ','))",
		 2,
		 {T, T}},
	[LOCK_QUEUE] =
		{"a key's entries in queue order",
		 0, REACH_ALL,
		 "SELECT seq, instance_id, node_id, scope, mode, held "
		 "FROM df_internal.locks WHERE key" EQ "$1 ORDER BY seq",
		 1,
		 {T}},
	[LOCK_GRANT] =
		{"a queued entry of a key granted",
		 0, REACH_ALL,
		 "UPDATE df_internal.locks SET held = true, "
		 "token = pg_catalog.nextval('df_internal.lock_tokens'), "
		 "since = pg_catalog.clock_timestamp() "
		 "WHERE key" EQ "$1 AND seq" EQ "$2::pg_catalog.int8",
		 2,
		 {T, T}},
	[LOCK_RELEASE_LOCKED] =
		{"the entries of a key whose row is locked released, the row too when nothing is left on it",
		 0, REACH_ALL,
		 "WITH d AS (DELETE FROM df_internal.locks WHERE key" EQ
		 "$1 AND instance_id" EQ "$2 " LOCK_FILTER("$3", "$4")
		 " RETURNING seq) "
		 "DELETE FROM df_internal.lock_keys k WHERE k.key" EQ "$1 "
		 "AND NOT EXISTS (SELECT 1 FROM df_internal.locks x "
		 " WHERE x.key" EQ "$1 AND x.seq OPERATOR(pg_catalog.<>) ALL "
		 " (SELECT seq FROM d))",
		 4,
		 {T, T, T, T}},
	[LOCK_RELEASE_KEYS] =
		{"the keys of an instance's entries, their rows locked in key order",
		 0, REACH_INSTANCE,
		 "SELECT e.key, k.key IS NOT NULL FROM "
		 "(SELECT DISTINCT key FROM df_internal.locks "
		 " WHERE instance_id" EQ "$1 " LOCK_FILTER("$2", "$3")
		 " ORDER BY key) e "
		 "LEFT JOIN LATERAL (SELECT key FROM df_internal.lock_keys y "
		 " WHERE y.key" EQ "e.key FOR UPDATE) k ON true "
		 "ORDER BY e.key",
		 3,
		 {T, T, T}},
	[LOCK_RESULT_FORGET] =
		{"the named result lock of a scope dropped",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.results WHERE instance_id" EQ
		 "$1 AND scope" EQ "$2 AND name" EQ "'lock'",
		 2,
		 {T, T}},
};

#undef T

static PgdStmtPlan lock_plans[LOCK_STMTS];

/* ---------------------------------------------------------------------
 * One order for the key rows (docs/design/architecture.md §5 rule 1)
 *
 * An executor's transaction locks the key rows of several nodes: a chain
 * step releases its LOCK's key and takes the next LOCK's, a batch runs the
 * steps of several instances, and limits (df_internal.limits, limit_slots.c)
 * have key rows too.  Two transactions could each hold a row the other
 * waits for: b ~> a against a ~> b deadlocked 5 times in 400 instances.  So
 * the rows have one order, lock keys before limit keys, each by key, and an
 * executor's transaction waits only for a row after every row it holds.
 * A row before one it holds is taken with a lock_timeout of KEY_WAIT: when
 * another transaction holds it, the unit rolls back and runs again at once
 * (worker/executor.c; a later step of a batch gives way), which no other
 * transaction can be waiting for.  A user's session (df.cancel) waits, as
 * PostgreSQL's deadlock detection serves it.
 * ---------------------------------------------------------------------
 */
#define KEY_WAIT "1ms"

/* The largest key of each space whose row this transaction locked. */
static LocalTransactionId keys_lxid = InvalidLocalTransactionId;
static char				 *keys_max[PGD_KEY_SPACES];
static const char		  keys_all[] = "\377"; /* after every key: not known */

static void
keys_current(void)
{
	if (keys_lxid == PGD_MY_LXID)
		return;
	keys_lxid = PGD_MY_LXID;
	for (int i = 0; i < PGD_KEY_SPACES; i++)
	{
		if (keys_max[i] != NULL && keys_max[i] != keys_all)
			pfree(keys_max[i]);
		keys_max[i] = NULL;
	}
}

void
store_keys_locked(PgdKeySpace space, const char *key)
{
	keys_current();
	if (key == NULL)
		keys_max[space] = (char *) keys_all;
	else if (keys_max[space] == NULL || strcmp(key, keys_max[space]) > 0)
	{
		if (keys_max[space] != NULL && keys_max[space] != keys_all)
			pfree(keys_max[space]);
		keys_max[space] = MemoryContextStrdup(TopMemoryContext, key);
	}
}

bool
store_keys_may_wait(PgdKeySpace space, const char *first)
{
	if (MyBackendType != B_BG_WORKER)
		return true;
	keys_current();
	for (int i = space + 1; i < PGD_KEY_SPACES; i++)
		if (keys_max[i] != NULL)
			return false;
	return keys_max[space] == NULL ||
		(first != NULL && keys_max[space] != keys_all &&
		 strcmp(first, keys_max[space]) >= 0);
}

int
store_keys_wait_begin(bool may_wait)
{
	int nest;

	if (may_wait)
		return -1;
	nest = NewGUCNestLevel();
	(void) set_config_option("lock_timeout", KEY_WAIT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

void
store_keys_wait_end(int nest)
{
	if (nest >= 0)
		AtEOXact_GUC(true, nest);
}

void
store_keys_wait_failed(MemoryContext cxt, int nest, const char *what,
					   const char *key)
{
	ErrorData *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (nest < 0 || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		PG_RE_THROW();
	FlushErrorState();
	store_keys_busy(what, key);
}

void
store_keys_busy(const char *what, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("the row of %s key %s%s%s is held by another transaction",
					what, key ? "\"" : "", key ? key : "(one of a release)",
					key ? "\"" : ""),
			 errdetail("An engine transaction that holds the row of a later key does not wait for an earlier one, "
					   "so that two transactions never wait for each other; it runs again.")));
}

/* ---------------------------------------------------------------------
 * Keys this transaction made its own
 *
 * A key taken by take_fresh_key has its row made by this transaction,
 * locked for it until it ends: no other transaction has changed the key's
 * entries since, and this one's own changes are seen by its next
 * statement.  So the release of that entry in the same transaction need
 * not lock the row and look again (pgd_store_lock_release_one): a LOCK
 * around a step that a batch runs costs one statement to take its key and
 * one to give it back.  What a rolled-back subtransaction took is gone
 * with it: any abort of one forgets them all (the release then takes the
 * general way).
 * ---------------------------------------------------------------------
 */
/*
 * The keys of this file in the transaction buffer (txn_buffer.c): those
 * taken fresh here (store_fresh_lock_keys) and those held in memory,
 * below (store_held_locks).
 */
static void
lock_keys_subxact_abort(SubTransactionId mySubid)
{
	store_xact_keys_clear(&store_fresh_lock_keys);
	store_held_subxact_abort(&store_held_locks, mySubid);
}

static void
lock_keys_check_written(void)
{
	store_held_check_written(&store_held_locks, "keyed locks");
}

static void held_write_all(const char *key);

static void
lock_keys_write_held(void)
{
	held_write_all(NULL);
}

const PgdHeldOps store_lock_keys_ops = {
	.write = lock_keys_write_held,
	.check_written = lock_keys_check_written,
	.subxact_abort = lock_keys_subxact_abort,
};

/*
 * The key's advisory lock, taken before its row is made and held to the
 * end of the transaction: a transaction that holds a key in memory (no
 * row) holds it too, so whoever would make the key's row meanwhile waits
 * for that transaction's end, as it would for a row being made.  Keys
 * whose hashes collide only share a lock.  Inside STORE_KEY_ROWS: its
 * lock_timeout applies to the wait.
 */
/* "pd": not 1 or 2, the field4 of the SQL advisory lock functions */
#define PGD_KEY_ADVISORY_TAG 0x7064

static bool key_advisory_lock_if(const char *key, bool dont_wait);

static void
key_advisory_lock(const char *key)
{
	(void) key_advisory_lock_if(key, false);
}

/* The same, or false at once if another transaction has it and dont_wait. */
static bool
key_advisory_lock_if(const char *key, bool dont_wait)
{
	LOCKTAG tag;
	uint64	h =
		hash_bytes_extended((const unsigned char *) key, strlen(key), 0);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 PGD_KEY_ADVISORY_TAG);
	return LockAcquire(&tag, ExclusiveLock, false, dont_wait) !=
		LOCKACQUIRE_NOT_AVAIL;
}

/* Lock key's row, making it when the key has none. */
static void
lock_key(const char *key)
{
	STORE_KEY_ROWS(PGD_KEYS_LOCK, "lock", key, {
		key_advisory_lock(key);
		STORE_EXEC(lock_stmts, lock_plans, LOCK_KEY_ROW, key);
	});
	store_keys_locked(PGD_KEYS_LOCK, key);
}

/*
 * The common case in one statement: a key nobody has, whose row this
 * statement makes (a key's row exists while it has entries, and every
 * change of its entries is made under it), so the key is free and the
 * entry is held at once.  Inserting the row waits, like locking it, for a
 * transaction that is making it or deleting it; then the row is there (or
 * gone and made again) and the statement returns nothing, or its entry.
 */
static bool
take_fresh_key(const char *instance_id, const char *node_id, const char *scope,
			   const char *key, bool shared, int64 *token)
{
	volatile int n = 0;

	STORE_KEY_ROWS(PGD_KEYS_LOCK, "lock", key, {
		key_advisory_lock(key);
		n = STORE_EXEC(lock_stmts, lock_plans, LOCK_TAKE_FRESH, key, instance_id, node_id, scope, shared ? "shared" : "exclusive");
	});
	if (n == 0)
		return false;
	store_keys_locked(PGD_KEYS_LOCK, key);
	store_xact_keys_add(&store_fresh_lock_keys, instance_id, node_id, scope, key);
	*token = strtoll(pgd_spi_getstring(0, 1), NULL, 10);
	return true;
}

/* ---------------------------------------------------------------------
 * Keys held in memory
 *
 * In an executor's batch (store_writes_held), an exclusive key
 * nobody has is taken without writing a row: the transaction takes the
 * key's advisory lock, looks that the key has no row (no committed holder
 * or waiter: a row being made would have made it wait for the advisory
 * lock), draws a token and keeps the entry here.  A release in the same
 * transaction only marks it released, so a LOCK around a step that the
 * batch runs to its end writes nothing of its lock; other transactions
 * could never have seen rows made and deleted in one transaction anyway.
 * The advisory lock stays to the end of the transaction, as the rows'
 * locks did.
 *
 * What is still held when the batch ends is written as rows before its
 * commit (lock_keys_write_held, from pgd_store_write_node_writes);
 * a commit with one left unwritten is refused.  Every other function of
 * this file that reads or changes entries writes the held ones first
 * (held_write_all), or drops the ones it releases, so that only these
 * two functions ever see an entry in memory.  A second take of a key held
 * here writes it first and takes the general way.
 *
 * The list (txn_buffer.c) undoes what a rolled-back subtransaction took
 * or released; its advisory locks go with its resource owner.
 * ---------------------------------------------------------------------
 */
/* Write entry h as rows (the key has none: this transaction holds its advisory lock). */
static void
held_write(PgdHeldEntry *h)
{
	if (STORE_EXEC(lock_stmts, lock_plans, LOCK_HELD_WRITE, h->key, h->instance_id, h->node_id, h->scope, psprintf(INT64_FORMAT, h->token), h->since) != 1)
		elog(ERROR,
			 "the lock entry of key \"%s\" held in memory was not written",
			 h->key);
	store_keys_locked(PGD_KEYS_LOCK, h->key);
	store_xact_keys_add(&store_fresh_lock_keys, h->instance_id, h->node_id, h->scope, h->key);
	store_held_release(&store_held_locks, h);
}

/* Write the entries of key (NULL: all) still held in memory. */
static void
held_write_all(const char *key)
{
	int			  i = 0;
	PgdHeldEntry *h;

	while ((h = store_held_next(&store_held_locks, key, &i)) != NULL)
		held_write(h);
}

/*
 * Take key in memory; false: take it the general way (not in a batch, a
 * long id, the key has rows, or this transaction holds it here already:
 * then that entry is written first).
 */
static bool
held_take(const char *instance_id, const char *node_id, const char *scope,
		  const char *key, int64 *token)
{
	PgdHeldEntry *h;

	if (!store_writes_held() || !store_held_fits(instance_id, node_id))
		return false;
	if (store_held_count(&store_held_locks, key) > 0)
	{
		held_write_all(key);
		return false;
	}
	/*
	 * The key's advisory lock, without waiting where the transaction may
	 * not (store_keys_may_wait): no statement waits here, so no
	 * lock_timeout is set for one
	 */
	if (!key_advisory_lock_if(key, !store_keys_may_wait(PGD_KEYS_LOCK, key)))
		store_keys_busy("lock", key);
	store_keys_locked(PGD_KEYS_LOCK, key);
	if (pgd_internal_index_has("lock_keys_pkey", 1,
							   (const char *const[]){key}))
		return false;
	*token = nextval_internal(pgd_internal_relid("lock_tokens"), false);
	h = store_held_add(&store_held_locks, instance_id, node_id, scope, key,
					   timestamptz_to_str(GetCurrentTimestamp()));
	h->token = *token;
	return true;
}

bool
pgd_store_lock_take(const char *instance_id, const char *node_id,
					const char *scope, const char *key, bool shared,
					int64 *token)
{
	char *tok;

	if (!shared && held_take(instance_id, node_id, scope, key, token))
		return true;
	if (take_fresh_key(instance_id, node_id, scope, key, shared, token))
		return true;
	lock_key(key);
	if (STORE_EXEC(lock_stmts, lock_plans, LOCK_ENTRY_ADD, key, instance_id, node_id, scope, shared ? "shared" : "exclusive") != 1)
		elog(ERROR, "the lock entry of key \"%s\" was not written", key);
	tok = pgd_spi_getstring(0, 2);
	*token = tok ? strtoll(tok, NULL, 10) : 0;
	return strcmp(pgd_spi_getstring(0, 1), "t") == 0;
}

int
pgd_store_lock_entries(const char *instance_id, const char *node_id,
					   const char *scope, PgdLockEntry **entries)
{
	int n;

	n = STORE_EXEC(lock_stmts, lock_plans, LOCK_ENTRIES, instance_id, node_id, scope);
	*entries = palloc0(sizeof(PgdLockEntry) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char *tok = pgd_spi_getstring(i, 3);

		(*entries)[i].key = pgd_spi_getstring(i, 1);
		(*entries)[i].held = strcmp(pgd_spi_getstring(i, 2), "t") == 0;
		(*entries)[i].token = tok ? strtoll(tok, NULL, 10) : 0;
	}
	return n;
}

char *
pgd_store_lock_max_held(const char *instance_id, const char *node_ids)
{
	STORE_EXEC(lock_stmts, lock_plans, LOCK_MAX_HELD, instance_id, node_ids);
	return pgd_spi_getstring(0, 1);
}

/*
 * Key's entries changed and some are left: grant it to the waiters at the
 * head of its queue that its holders allow (one exclusive, or shared ones
 * up to the first exclusive), and wake their LOCK nodes.  The caller holds
 * the key's row.
 */
static void
grant_next(const char *key)
{
	int	   n;
	int	   nheld_shared = 0;
	bool   held_exclusive = false;
	char **seqs;
	char **insts;
	char **nodes;
	char **scopes;
	bool  *shared;
	bool  *held;
	int	   i;

	n = STORE_EXEC(lock_stmts, lock_plans, LOCK_QUEUE, key);
	if (n == 0)
		return;
	seqs = palloc(sizeof(char *) * n);
	insts = palloc(sizeof(char *) * n);
	nodes = palloc(sizeof(char *) * n);
	scopes = palloc(sizeof(char *) * n);
	shared = palloc(sizeof(bool) * n);
	held = palloc(sizeof(bool) * n);
	for (i = 0; i < n; i++)
	{
		seqs[i] = pgd_spi_getstring(i, 1);
		insts[i] = pgd_spi_getstring(i, 2);
		nodes[i] = pgd_spi_getstring(i, 3);
		scopes[i] = pgd_spi_getstring(i, 4);
		shared[i] = strcmp(pgd_spi_getstring(i, 5), "shared") == 0;
		held[i] = strcmp(pgd_spi_getstring(i, 6), "t") == 0;
		if (held[i] && shared[i])
			nheld_shared++;
		else if (held[i])
			held_exclusive = true;
	}
	for (i = 0; i < n && !held_exclusive; i++)
	{
		if (held[i])
			continue;
		if (!shared[i] && nheld_shared > 0)
			break; /* FIFO: nobody passes a waiting exclusive request */
		STORE_EXEC(lock_stmts, lock_plans, LOCK_GRANT, key, seqs[i]);
		pgd_store_timer_add(insts[i], nodes[i], scopes[i],
							GetCurrentTimestamp());
		if (shared[i])
			nheld_shared++;
		else
			held_exclusive = true;
	}
}

/*
 * Key's row is locked: the entries go (of the node execution, or the
 * scope, as pgd_store_lock_release), and the key's row too when nobody
 * else has one (the common case); else the key is handed on.
 */
static void
release_locked(const char *key, const char *instance_id, const char *node_id,
			   const char *scope)
{
	if (STORE_EXEC(lock_stmts, lock_plans, LOCK_RELEASE_LOCKED, key, instance_id, node_id, scope) == 0)
		grant_next(key);
}

/*
 * Release the entries of instance_id (held or waiting): of node_id in
 * exactly scope, or of every node in scope and below (node_id NULL), or
 * all of them (both NULL).  Each of their keys, in canonical order, is
 * locked first, then its entries go and it is handed on, or loses its row
 * when nothing is left on it.  Every change of a key's entries is made
 * under its row: a grant and a release of one key never meet on an entry
 * row (one waiting on the other's entry while holding the key's row would
 * deadlock).
 *
 * Two statements for a node holding one key (a step under
 * df.with_lock should cost little more than a plain step): the first
 * finds the keys and locks their rows, one after the other in key order
 * (a nested loop over the sorted keys, each row locked by the inner
 * side); the second deletes the entries and, when none of anybody else
 * is left, the key's row.  Both DELETEs of the second see the same
 * snapshot, taken after the key's row was locked, so the entries it
 * deletes itself are left out of the count by their seq.
 */
void
pgd_store_lock_release(const char *instance_id, const char *node_id,
					   const char *scope)
{
	volatile int n = 0;
	char	   **keys;
	char	   **locked;

	store_xact_keys_forget(&store_fresh_lock_keys, instance_id);
	store_held_drop(&store_held_locks, instance_id, node_id, scope);
	/*
	 * Most nodes and instances have no entries: looked up by the index
	 * first (the schema of 0.3.0 has none, and no LOCK node ran)
	 */
	if (!pgd_internal_index_has("locks_instance_idx", node_id ? 2 : 1,
								(const char *const[]){instance_id, node_id}))
		return;
	STORE_KEY_ROWS(PGD_KEYS_LOCK, "lock", NULL,
				   n = STORE_EXEC(lock_stmts, lock_plans, LOCK_RELEASE_KEYS, instance_id, node_id, scope));
	if (n == 0)
		return;
	keys = pgd_spi_column(n, 1);
	locked = pgd_spi_column(n, 2);
	for (int i = 0; i < n; i++)
	{
		/* the row exists while the entries above are on it */
		if (strcmp(locked[i], "t") == 0)
			store_keys_locked(PGD_KEYS_LOCK, keys[i]);
		else
			lock_key(keys[i]);
		release_locked(keys[i], instance_id, node_id, scope);
	}
}

/*
 * The release of a LOCK node execution that has one key: when this
 * transaction took it and made its row (take_fresh_key), one statement;
 * else pgd_store_lock_release.
 */
void
pgd_store_lock_release_one(const char *instance_id, const char *node_id,
						   const char *scope)
{
	PgdHeldEntry *h = store_held_find(&store_held_locks, instance_id, node_id, scope);
	char		 *key;

	if (h != NULL)
	{
		store_held_release(&store_held_locks, h);
		return;
	}
	key = store_xact_keys_take(&store_fresh_lock_keys, instance_id, node_id, scope);
	if (key != NULL)
		release_locked(key, instance_id, node_id, scope);
	else
		pgd_store_lock_release(instance_id, node_id, scope);
}

/* A LOCK node's $lock, which must not outlive it: gone from its child's scope. */
void
pgd_store_lock_result_forget(const char *instance_id, const char *scope)
{
	STORE_EXEC(lock_stmts, lock_plans, LOCK_RESULT_FORGET, instance_id, scope);
}
