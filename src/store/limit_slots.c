/*-------------------------------------------------------------------------
 *
 * limit_slots.c
 *	  The engine store's functions for limits (df.limit, node LIMIT,
 *	  docs/design/locks-and-limits.md §4): entering a key, a LIMIT node's
 *	  timer, and the release of the slots and queue places of LIMIT node
 *	  executions that ended.
 *
 * The decisions are made by the install script's df_internal.limit_pump under
 * the key's row lock (df_internal.limits, FOR UPDATE): it counts the key's
 * holders (never a queue position) before it admits anybody, so a key never
 * has more than max_concurrent holders, and takes a token of the key's bucket
 * for each admission.  A waiter admitted by another instance's transaction
 * (the one that freed the slot) gets its slot at once (a holder row, started =
 * false) and a timer task now on its LIMIT node: that is the registered wait's
 * wake-up, committed with the release (docs/design/architecture.md §5 rule 2:
 * a row for the other instance, no lock on it).  The head of a queue that
 * waits for a token gets a timer at the time the token is there.
 *
 * The release runs in the transaction that ends the holder: its LIMIT
 * node finishing (orchestration/limits.c), its scope abandoned
 * (pgd_store_drop_scope: a TIMEOUT fired, a RACE lost, a BREAK, a retried
 * subtree) or its instance ending (pgd_store_end_instance: completed,
 * failed, cancelled).  A crash rolls both back together.
 *
 * In an executor's batch, a slot of a key whose row the batch holds is
 * given in memory (below, "Slots given in memory"): no holder row is
 * written unless the batch commits with the slot still held.
 *
 * Locks: the caller holds the instance's runs row; then the rows of
 * df_internal.limits of the keys concerned, one at a time, or in key
 * order when an abandoned scope or an ended instance held several.
 * These are waited for (a transition holds one only until its commit) in
 * the one order of the key rows (lock_keys.c): an executor waits only
 * for a row after every lock key and limit key row it holds, takes an
 * earlier one with a short lock_timeout and runs again when it is busy; a
 * later step of a batch waits at most its lock_timeout and gives way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

/* The statements of limits (statements.c runs them: store_exec). */
#define T TEXTOID

enum
{
	LIMIT_SLOT_WRITE,
	LIMIT_KEY_LOCK_PLAIN,
	LIMIT_KEY_MAKE,
	LIMIT_KEY_COUNT,
	LIMIT_HOLDER_ADD,
	LIMIT_KEY_QUEUED,
	LIMIT_PUMP,
	LIMIT_KEY_LOCK,
	LIMIT_TIMER,
	LIMIT_RELEASE_HELD,
	LIMIT_RELEASE_NODE,
	LIMIT_RELEASE_NODE_LOCK,
	LIMIT_RELEASE_SCOPE,
	LIMIT_REPAIR_NODE,
	LIMIT_WAITER_KEY,
	LIMIT_FORGET_IDLE,
	LIMIT_ENTER,
	LIMIT_STMTS
};

static const PgdStmtDef limit_stmts[LIMIT_STMTS] = {
	[LIMIT_SLOT_WRITE] =
		{"a slot given in memory, as its holder row",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.limit_holders "
		 "(instance_id, node_id, scope, key, submitted_by, since, started) "
		 "SELECT $2, $3, $4, $1, r.submitted_by, $5::pg_catalog.timestamptz, true "
		 "FROM df_internal.runs r WHERE r.instance_id OPERATOR(pg_catalog.=) $2",
		 5,
		 {T, T, T, T, T}},
	[LIMIT_KEY_LOCK_PLAIN] =
		{"a key's row with these settings and a concurrency limit only, locked",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.limits "
		 "WHERE key OPERATOR(pg_catalog.=) $1 "
		 "AND max_concurrent OPERATOR(pg_catalog.=) $2::int "
		 "AND rate IS NULL AND burst IS NULL FOR UPDATE",
		 2,
		 {T, T}},
	[LIMIT_KEY_MAKE] =
		{"a key's row made, with a concurrency limit only",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.limits (key, max_concurrent, tokens_at) "
		 "VALUES ($1, $2::int, pg_catalog.clock_timestamp()) "
		 "ON CONFLICT (key) DO NOTHING",
		 2,
		 {T, T}},
	[LIMIT_KEY_COUNT] =
		{"a key's holders and whether it has waiters",
		 0, REACH_ALL,
		 "SELECT (SELECT pg_catalog.count(*) FROM df_internal.limit_holders h "
		 " WHERE h.key OPERATOR(pg_catalog.=) $1), "
		 "EXISTS (SELECT 1 FROM df_internal.limit_waiters w "
		 " WHERE w.key OPERATOR(pg_catalog.=) $1)",
		 1,
		 {T}},
	[LIMIT_HOLDER_ADD] =
		{"a holder of a key with a free slot and nobody queued",
		 FLUSH_LIMIT_SLOTS, REACH_ALL,
		 "INSERT INTO df_internal.limit_holders "
		 "(instance_id, node_id, scope, key, submitted_by, started) "
		 "SELECT $2, $3, $4, $1, r.submitted_by, true FROM df_internal.runs r "
		 "WHERE r.instance_id OPERATOR(pg_catalog.=) $2 "
		 "AND NOT EXISTS (SELECT 1 FROM df_internal.limit_waiters w "
		 "  WHERE w.key OPERATOR(pg_catalog.=) $1) "
		 "AND (SELECT pg_catalog.count(*) FROM df_internal.limit_holders h "
		 "  WHERE h.key OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.<) $5::int",
		 5,
		 {T, T, T, T, T}},
	[LIMIT_KEY_QUEUED] =
		{"whether anybody waits for a key",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.limit_waiters "
		 "WHERE key OPERATOR(pg_catalog.=) $1 LIMIT 1",
		 1,
		 {T}},
	[LIMIT_PUMP] =
		{"a freed slot of a key handed to the head of its queue",
		 FLUSH_LIMIT_SLOTS, REACH_ALL,
		 "SELECT action, instance_id, node_id, scope, at "
		 "FROM df_internal.limit_pump($1, NULL, NULL, NULL)",
		 1,
		 {T}},
	[LIMIT_KEY_LOCK] =
		{"a key's row, locked",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.limits "
		 "WHERE key OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		 1,
		 {T}},
	[LIMIT_TIMER] =
		{"a LIMIT node's timer",
		 FLUSH_LIMIT_SLOTS, REACH_INSTANCE,
		 "SELECT action, instance_id, node_id, scope, at "
		 "FROM df_internal.limit_timer($1, $2, $3)",
		 3,
		 {T, T, T}},
	[LIMIT_RELEASE_HELD] =
		{"a slot of a key whose row the transaction holds, released, and whether anybody waits",
		 0, REACH_INSTANCE,
		 "WITH h AS (DELETE FROM df_internal.limit_holders "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		 " RETURNING key) "
		 "SELECT h.key, EXISTS (SELECT 1 FROM df_internal.limit_waiters w "
		 " WHERE w.key OPERATOR(pg_catalog.=) h.key) FROM h",
		 3,
		 {T, T, T}},
	[LIMIT_RELEASE_NODE] =
		{"a node execution's slot released",
		 0, REACH_INSTANCE,
		 "DELETE FROM df_internal.limit_holders "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		 "RETURNING key",
		 3,
		 {T, T, T}},
	[LIMIT_RELEASE_NODE_LOCK] =
		{"a node execution's slot released, its key's row locked",
		 0, REACH_INSTANCE,
		 "WITH h AS (DELETE FROM df_internal.limit_holders "
		 " WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 " AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
		 " RETURNING key) "
		 "SELECT l.key FROM df_internal.limits l "
		 "WHERE l.key IN (SELECT key FROM h) FOR UPDATE OF l",
		 3,
		 {T, T, T}},
	[LIMIT_RELEASE_SCOPE] =
		{"the slots and queue places of a scope or an instance released",
		 0, REACH_INSTANCE,
		 "WITH h AS (DELETE FROM df_internal.limit_holders x "
		 " WHERE x.instance_id OPERATOR(pg_catalog.=) $1 AND ($2::text IS NULL "
		 "  OR x.scope OPERATOR(pg_catalog.=) $2 "
		 "  OR pg_catalog.starts_with(x.scope, $2 OPERATOR(pg_catalog.||) '::')) "
		 " RETURNING x.key), "
		 "w AS (DELETE FROM df_internal.limit_waiters y "
		 " WHERE y.instance_id OPERATOR(pg_catalog.=) $1 AND ($2::text IS NULL "
		 "  OR y.scope OPERATOR(pg_catalog.=) $2 "
		 "  OR pg_catalog.starts_with(y.scope, $2 OPERATOR(pg_catalog.||) '::')) "
		 " RETURNING y.key) "
		 "SELECT DISTINCT u.key FROM (SELECT key FROM h UNION ALL SELECT key FROM w) u "
		 "ORDER BY 1",
		 2,
		 {T, T}},
	[LIMIT_REPAIR_NODE] =
		{"the slot and queue place of an ended node execution dropped",
		 FLUSH_LIMIT_SLOTS, REACH_INSTANCE,
		 "WITH h AS (DELETE FROM df_internal.limit_holders x "
		 "  WHERE x.instance_id OPERATOR(pg_catalog.=) $1 "
		 "  AND x.node_id OPERATOR(pg_catalog.=) $2 "
		 "  AND x.scope OPERATOR(pg_catalog.=) $3 RETURNING x.key), "
		 "w AS (DELETE FROM df_internal.limit_waiters y "
		 "  WHERE y.instance_id OPERATOR(pg_catalog.=) $1 "
		 "  AND y.node_id OPERATOR(pg_catalog.=) $2 "
		 "  AND y.scope OPERATOR(pg_catalog.=) $3 RETURNING y.key) "
		 "SELECT key FROM h UNION SELECT key FROM w",
		 3,
		 {T, T, T}},
	[LIMIT_WAITER_KEY] =
		{"the key a node execution waits for",
		 0, REACH_INSTANCE,
		 "SELECT key FROM df_internal.limit_waiters "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
		 3,
		 {T, T, T}},
	[LIMIT_FORGET_IDLE] =
		{"the rows of idle keys dropped",
		 FLUSH_LIMIT_SLOTS, REACH_ALL,
		 "SELECT df_internal.limit_forget_idle($1::int)",
		 1,
		 {T}},
	[LIMIT_ENTER] =
		{"a node execution enters a key: admitted, queued or timed out",
		 FLUSH_LIMIT_SLOTS, REACH_ALL,
		 "SELECT action, instance_id, node_id, scope, at "
		 "FROM df_internal.limit_enter($1, $2, $3, $4, $5, $6, $7, $8)",
		 8,
		 {T, INT4OID, FLOAT8OID, INT4OID, T, T, T, TIMESTAMPTZOID}},
};

#undef T

static PgdStmtPlan limit_plans[LIMIT_STMTS];

typedef struct LimitRow
{
	char	   *action;
	char	   *instance_id;
	char	   *node_id;
	char	   *scope;
	TimestampTz at;
} LimitRow;

/*
 * The rows of a limit function (action, instance_id, node_id, scope, at):
 * the timers they owe to other executions are added; what they say of the
 * execution (instance_id, node_id, scope) is returned.
 */
static PgdLimitVerdict
limit_rows(int n, const char *instance_id, const char *node_id,
		   const char *scope)
{
	LimitRow	   *rows = palloc(sizeof(LimitRow) * Max(n, 1));
	PgdLimitVerdict verdict = PGD_LIMIT_WAIT;

	for (int i = 0; i < n; i++)
	{
		bool isnull;

		rows[i].action = pgd_spi_getstring(i, 1);
		rows[i].instance_id = pgd_spi_getstring(i, 2);
		rows[i].node_id = pgd_spi_getstring(i, 3);
		rows[i].scope = pgd_spi_getstring(i, 4);
		rows[i].at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc,
													   5, &isnull));
		if (isnull)
			rows[i].at = GetCurrentTimestamp();
	}
	for (int i = 0; i < n; i++)
	{
		LimitRow *r = &rows[i];
		bool	  self = instance_id != NULL &&
			strcmp(r->instance_id, instance_id) == 0 &&
			strcmp(r->node_id, node_id) == 0 && strcmp(r->scope, scope) == 0;

		if (strcmp(r->action, "start") == 0)
			verdict = PGD_LIMIT_START;
		else if (strcmp(r->action, "timeout") == 0)
			verdict = PGD_LIMIT_TIMEOUT;
		else if (self && strcmp(r->action, "admit") == 0)
			verdict = PGD_LIMIT_START; /* cannot happen: pump names itself */
		else
			pgd_store_timer_add(r->instance_id, r->node_id, r->scope, r->at);
	}
	return verdict;
}

/* ---------------------------------------------------------------------
 * Key rows this transaction holds
 *
 * enter_at_once locks a key's row and admits; the row stays locked to the
 * end of the transaction.  While it is, no other transaction changes the
 * key's holders or queue, and this one's changes are seen by its next
 * statement: so the next entry of that key in the same transaction (the
 * next step of a chain that a batch runs, under a key of its instance)
 * need not lock the row again, and the release of a slot taken in it
 * deletes the holder and looks at the queue in one statement, not two.
 * Kept: the key with the max_concurrent its row was found
 * with, and the node executions that entered it.  Forgotten with the
 * transaction, at the rollback of any subtransaction, and when one of the
 * install script's limit functions ran (they may change the key's row).
 * ---------------------------------------------------------------------
 */
#define MAX_HELD 32

typedef struct HeldKey
{
	char *key;
	int	  max_concurrent;
	int	  holders; /* its holder rows, counted once the row was locked */
	bool  queued;  /* ... and whether it had waiters then */
} HeldKey;

static LocalTransactionId held_lxid = InvalidLocalTransactionId;
static HeldKey			  held[MAX_HELD];
static int				  nheld = 0;

static void
held_current(void)
{
	if (held_lxid == PGD_MY_LXID)
		return;
	held_lxid = PGD_MY_LXID;
	nheld = 0; /* their strings went with the transaction */
}

/*
 * What this transaction knows of its key rows, forgotten before one of the
 * install script's limit functions runs (its statement writes the slots
 * given in memory first: FLUSH_LIMIT_SLOTS).
 */
static void
held_forget(void)
{
	held_current();
	nheld = 0;
	store_xact_keys_clear(&store_entered_limit_keys);
}

/* Is key's row locked by this transaction, found with max_concurrent (-1: any)? */
static HeldKey *
key_held(const char *key, int max_concurrent)
{
	held_current();
	for (int i = 0; i < nheld; i++)
		if (strcmp(held[i].key, key) == 0)
			return max_concurrent < 0 ||
					held[i].max_concurrent == max_concurrent ?
				&held[i] :
				NULL;
	return NULL;
}

static HeldKey *
key_hold(const char *key, int max_concurrent, int holders, bool queued)
{
	HeldKey *h = key_held(key, -1);

	if (h == NULL)
	{
		if (nheld == MAX_HELD)
			return NULL;
		h = &held[nheld++];
		h->key = MemoryContextStrdup(TopTransactionContext, key);
	}
	h->max_concurrent = max_concurrent;
	h->holders = holders;
	h->queued = queued;
	return h;
}

/*
 * A rolled-back subtransaction may have taken a key's row lock: forget
 * them all (without writing anything: no statement runs here), and the
 * slots it gave.
 */
static void
limit_slots_subxact_abort(SubTransactionId mySubid)
{
	held_current();
	nheld = 0;
	store_xact_keys_clear(&store_entered_limit_keys);
	store_held_subxact_abort(&store_held_slots, mySubid);
}

/* ---------------------------------------------------------------------
 * Slots given in memory
 *
 * While this transaction holds a key's row, nobody else admits anyone to
 * the key or queues for it (both need the row), and a holder of another
 * transaction can only go.  So in an executor's batch
 * (store_writes_held), a key that had no waiters when its row was
 * locked gives a slot without writing a holder row: the holders counted
 * then, plus the slots given here that are still held, stay under
 * max_concurrent.  A release in the same batch only marks the slot
 * released (nobody is queued to hand it to).  A slot still held when the
 * batch ends is written as its holder row before the commit
 * (slots_write_all, from pgd_store_write_node_writes); a
 * commit with one unwritten is refused.  Whatever else counts or changes
 * holders (the install script's limit functions, a release the general
 * way) writes them first (held_forget, slots_write_all).
 *
 * The list (txn_buffer.c) undoes what a rolled-back subtransaction gave
 * or released.
 * ---------------------------------------------------------------------
 */
static void
limit_slots_check_written(void)
{
	store_held_check_written(&store_held_slots, "limit slots");
}

static void
slots_write_all(void)
{
	int			  i = 0;
	PgdHeldEntry *m;

	while ((m = store_held_next(&store_held_slots, NULL, &i)) != NULL)
	{
		if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_SLOT_WRITE, m->key, m->instance_id, m->node_id, m->scope, m->since) != 1)
			elog(ERROR,
				 "the slot of limit key \"%s\" given in memory was not written",
				 m->key);
		store_held_release(&store_held_slots, m);
	}
}

const PgdHeldOps store_limit_slots_ops = {
	.write = slots_write_all,
	.check_written = limit_slots_check_written,
	.subxact_abort = limit_slots_subxact_abort,
};

/*
 * The common case in plain statements: a key that exists with these
 * settings, a concurrency limit only, nobody queued and a slot free.  The
 * second statement starts after the first has the key's row lock, so it
 * sees every holder and waiter committed before (a statement's snapshot
 * is taken when it starts, READ COMMITTED): counting them in the locking
 * statement itself could miss those committed while it waited.
 */
static bool
enter_at_once(const char *instance_id, const char *node_id, const char *scope,
			  const char *key, int max_concurrent)
{
	char		 max_text[16];
	volatile int n = 0;
	bool		 in_memory =
		store_writes_held() && store_held_fits(instance_id, node_id);
	HeldKey *h;

	snprintf(max_text, sizeof(max_text), "%d", max_concurrent);
	if ((h = key_held(key, max_concurrent)) == NULL)
	{
		volatile bool fresh = false;

		STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", key,
					   n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_KEY_LOCK_PLAIN, key, max_text));
		if (n == 0)
		{
			/*
			 * A key without a row (never used, or forgotten as idle) gets
			 * its row here, as limit_enter makes it.  The row is this
			 * transaction's, and a holder or a waiter is only ever written
			 * under its key's row, which limit_forget_idle deletes only
			 * when it has neither: nobody holds or waits for a slot of it.
			 * A key made meanwhile by another transaction (the insert
			 * waits for it) goes the general way.  Before, limit_enter
			 * made it, queued the node and pumped it in: 280 us per
			 * instance of a key per instance (pg_stat_statements).
			 */
			STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", key,
						   n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_KEY_MAKE, key, max_text));
			if (n == 0)
				return false;
			fresh = true;
		}
		store_keys_locked(PGD_KEYS_LIMIT, key);
		/* counted after the lock: every holder and waiter committed before it */
		if (in_memory && !fresh)
			STORE_EXEC(limit_stmts, limit_plans, LIMIT_KEY_COUNT, key);
		if (fresh)
			h = key_hold(key, max_concurrent, 0, !in_memory);
		else
			h = key_hold(key, max_concurrent,
						 in_memory ? atoi(pgd_spi_getstring(0, 1)) : 0,
						 !in_memory ||
							 strcmp(pgd_spi_getstring(0, 2), "t") == 0);
	}
	if (in_memory && h != NULL && !h->queued)
	{
		if (h->holders + store_held_count(&store_held_slots, key) >= max_concurrent)
			return false;
		store_held_add(&store_held_slots, instance_id, node_id, scope, key,
					   timestamptz_to_str(GetCurrentTimestamp()));
		return true;
	}
	/* the holder rows are counted below: none of this key may be in memory (FLUSH_LIMIT_SLOTS) */
	if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_HOLDER_ADD, key, instance_id, node_id, scope, max_text) != 1)
		return false;
	store_xact_keys_add(&store_entered_limit_keys, instance_id, node_id, scope, key);
	return true;
}

/*
 * The key's row is locked: hand its freed slot on if anybody is queued.
 * The look at the queue is a statement of its own, for the reason above:
 * a waiter that queued while this transaction's holder was still visible
 * has committed by then, or is waiting for the lock and will count the
 * holders without it.
 */
static void
pump_locked(const char *key)
{
	int n;

	if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_KEY_QUEUED, key) == 0)
		return;
	/* it counts the holders: the slots in memory are written first */
	n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_PUMP, key);
	held_forget(); /* it may change the key's row */
	(void) limit_rows(n, NULL, NULL, NULL);
}

/* A slot of key was freed: the key's row lock, then pump_locked. */
static void
pump_if_queued(const char *key)
{
	/*
	 * The executors run in READ COMMITTED; df.cancel runs in its caller's
	 * transaction, whose snapshot could hide a holder or a waiter committed
	 * since it was taken.
	 */
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot release a df.limit slot in a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("The instance holds or waits for a slot of the key \"%s\"; handing it on must see the latest commits.",
						   pgd_space_display(key)),
				 errhint("Cancel the instance in a READ COMMITTED transaction.")));

	STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", key,
				   (void)
					   STORE_EXEC(limit_stmts, limit_plans, LIMIT_KEY_LOCK, key));
	store_keys_locked(PGD_KEYS_LIMIT, key);
	pump_locked(key);
}

PgdLimitVerdict
pgd_store_limit_enter(const char *instance_id, const char *node_id,
					  const char *scope, const char *key, int max_concurrent,
					  double rate, int burst, TimestampTz deadline)
{
	Datum			 values[8];
	char			 nulls[8] = "        ";
	volatile int	 n = 0;

	if (rate <= 0 && max_concurrent > 0 &&
		enter_at_once(instance_id, node_id, scope, key, max_concurrent))
		return PGD_LIMIT_START;
	values[0] = pgd_text_datum(key);
	values[1] = Int32GetDatum(max_concurrent);
	nulls[1] = max_concurrent > 0 ? ' ' : 'n';
	values[2] = Float8GetDatum(rate);
	nulls[2] = rate > 0 ? ' ' : 'n';
	values[3] = Int32GetDatum(burst);
	nulls[3] = rate > 0 ? ' ' : 'n';
	values[4] = pgd_text_datum(instance_id);
	values[5] = pgd_text_datum(node_id);
	values[6] = pgd_text_datum(scope);
	values[7] = TimestampTzGetDatum(deadline);
	nulls[7] = deadline != 0 ? ' ' : 'n';
	held_forget(); /* the function may change the key's row */
	STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", key,
				   n = store_exec(&limit_stmts[LIMIT_ENTER],
								  &limit_plans[LIMIT_ENTER], values, nulls));
	store_keys_locked(PGD_KEYS_LIMIT, key);
	return limit_rows(n, instance_id, node_id, scope);
}

PgdLimitVerdict
pgd_store_limit_timer(const char *instance_id, const char *node_id,
					  const char *scope)
{
	volatile int n = 0;

	held_forget(); /* the function may change the key's row */
	/* the key is the node's: it locks a row not known here */
	STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", NULL,
				   n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_TIMER, instance_id, node_id, scope));
	store_keys_locked(PGD_KEYS_LIMIT, NULL);
	return limit_rows(n, instance_id, node_id, scope);
}

/*
 * The release of a slot that this transaction gave (enter_at_once) while it
 * still holds the key's row: the holder goes and the queue is looked at in
 * one statement, and the slot is handed on only when somebody is queued.
 * False when the slot was not given so (the caller releases it).
 */
static bool
release_held(const char *instance_id, const char *node_id, const char *scope)
{
	char *key = store_xact_keys_take(&store_entered_limit_keys, instance_id, node_id, scope);
	char *gone;
	int	  n;

	if (key == NULL || !key_held(key, -1))
		return false;
	n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_RELEASE_HELD, instance_id, node_id, scope);
	if (n == 0)
		return true; /* nothing was held */
	gone = pgd_spi_getstring(0, 1);
	if (strcmp(gone, key) != 0)
	{
		/* not the key it entered: hand it on the general way */
		pump_if_queued(gone);
		return true;
	}
	if (strcmp(pgd_spi_getstring(0, 2), "t") == 0)
		pump_locked(key);
	return true;
}

void
pgd_store_limit_release(const char *instance_id, const char *node_id,
						const char *scope)
{
	int			  n;
	char		**keys;
	PgdHeldEntry *m;

	if (node_id == NULL && !pgd_internal_relation_exists("limit_holders"))
		return;

	/* a slot given in memory: nobody is queued to hand it to */
	if (node_id != NULL &&
		(m = store_held_find(&store_held_slots, instance_id, node_id, scope)) != NULL)
	{
		store_held_release(&store_held_slots, m);
		return;
	}
	if (node_id != NULL)
	{
		/*
		 * One node's own slot, when it finished: its row goes and its
		 * key's row is locked in one statement (two statements
		 * for the release of a slot nobody waits for, not three); under a
		 * snapshot isolation, pump_if_queued refuses before any lock.
		 */
		if (IsolationUsesXactSnapshot())
		{
			if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_RELEASE_NODE, instance_id, node_id, scope) == 1)
				pump_if_queued(pgd_spi_getstring(0, 1));
		}
		else if (release_held(instance_id, node_id, scope))
			return;
		else
		{
			volatile int held = 0;

			STORE_KEY_ROWS(PGD_KEYS_LIMIT, "limit", NULL,
						   held =
							   STORE_EXEC(limit_stmts, limit_plans, LIMIT_RELEASE_NODE_LOCK, instance_id, node_id, scope));
			if (held == 1)
			{
				char *key = pgd_spi_getstring(0, 1);

				store_keys_locked(PGD_KEYS_LIMIT, key);
				pump_locked(key);
			}
		}
		return;
	}
	store_xact_keys_forget(&store_entered_limit_keys, instance_id);
	store_held_drop(&store_held_slots, instance_id, NULL, scope);
	/*
	 * An instance without slots or places (the common case) runs no
	 * statement: the indexes say so, with a dirty snapshot (a row being
	 * made counts).  Its rows are made by its own transitions, which this
	 * one holds off, or from its places by a hand-over, which leaves one
	 * or the other in sight.  The statement cost 26 us at every
	 * instance's end (perf).
	 */
	if (!pgd_internal_index_has("limit_holders_pkey", 1,
								(const char *const[]){instance_id}) &&
		!pgd_internal_index_has("limit_waiters_pkey", 1,
								(const char *const[]){instance_id}))
		return;
	/*
	 * A plain statement: a scope without limits costs one indexed delete
	 * on each table, nothing more.
	 */
	n = STORE_EXEC(limit_stmts, limit_plans, LIMIT_RELEASE_SCOPE, instance_id, scope);
	if (n == 0)
		return;
	keys = pgd_spi_column(n, 1);
	/* in key order: two releases of the same keys lock them in one order */
	for (int i = 0; i < n; i++)
		pump_if_queued(keys[i]);
}

bool
pgd_store_limit_repair(const char *instance_id, const char *node_id,
					   const char *scope, const char *problem)
{
	held_forget();
	if (strcmp(problem, "limit_slot_of_ended_node") == 0 ||
		strcmp(problem, "limit_wait_of_ended_node") == 0)
	{
		int n =
			STORE_EXEC(limit_stmts, limit_plans, LIMIT_REPAIR_NODE, instance_id, node_id, scope);
		char **keys = pgd_spi_column(n, 1);

		for (int i = 0; i < n; i++)
			pump_if_queued(keys[i]);
		return n > 0;
	}
	if (strcmp(problem, "limit_queue_stuck") == 0)
	{
		if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_WAITER_KEY, instance_id, node_id, scope) == 0)
			return false;
		pump_if_queued(pgd_spi_getstring(0, 1));
		return true;
	}
	if (strcmp(problem, "limit_admission_lost") == 0)
	{
		pgd_store_timer_add(instance_id, node_id, scope,
							GetCurrentTimestamp());
		return true;
	}
	return false;
}

int
pgd_store_limit_forget_idle(int max)
{
	char max_text[16];

	if (!pgd_internal_relation_exists("limit_holders"))
		return 0;
	snprintf(max_text, sizeof(max_text), "%d", max);
	held_forget(); /* it deletes key rows */
	if (STORE_EXEC(limit_stmts, limit_plans, LIMIT_FORGET_IDLE, max_text) !=
		1)
		return 0;
	return atoi(pgd_spi_getstring(0, 1));
}
