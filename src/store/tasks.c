/*-------------------------------------------------------------------------
 *
 * tasks.c
 *	  The engine store's functions for the queue (store.h; the statements
 *	  are in statements.c's table): tasks and timers made ready, requeued
 *	  and deleted, the step tasks a batch holds, starts by marker, and the
 *	  claim of a task, a held task or a marker (pgd_store_claim), the
 *	  executors' scan for the oldest ready task and the next one due.  The
 *	  HTTP worker's leases are http_leases.c's, the start sweep and the
 *	  repairs maintenance.c's.
 *
 * Locks: claims and deletes of tasks that others may hold use SKIP LOCKED
 * (docs/design/architecture.md §5 rule 1).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

static bool claim_start_marker(PgdTaskRef task, PgdClaim *c);
static void start_tasks_before_prepare(const char *instance_id);

/* ---------------------------------------------------------------------
 * Tasks
 * ---------------------------------------------------------------------
 */

static bool hold_step_task(const char *instance_id, const char *node_id,
						   const char *scope);

/*
 * Insert a ready task row (a step's, or with node_id NULL the instance's
 * start task in its root scope), published at commit; returns its id.
 * By the statement when the row cannot be made without one.
 */
static int64
insert_ready_task(const char *instance_id, const char *node_id,
				  const char *scope)
{
	int64 id = store_insert_task_row(instance_id, node_id, scope,
									 node_id ? "step" : "start");

	if (id < 0)
	{
		if (node_id)
			RUN(STMT_TASK_STEP, instance_id, node_id, scope);
		else
			RUN(STMT_TASK_START, instance_id);
		id = strtoll(store_get_string(0, 1), NULL, 10);
	}
	pgd_task_ready_at_commit(id);
	return id;
}

/*
 * A task that is ready now, with the wake-up its commit owes: an executor
 * for start and step tasks (by id), the HTTP worker for http tasks, a
 * queue scan for deliver tasks.  Timers go through pgd_store_timer_add.
 */
void
pgd_store_task_add(const char *instance_id, const char *node_id,
				   const char *scope, PgdTaskKind kind)
{
	switch (kind)
	{
		case PGD_TASK_START:
			(void) insert_ready_task(instance_id, NULL, instance_id);
			break;
		case PGD_TASK_STEP:
			if (!hold_step_task(instance_id, node_id, scope))
				(void) insert_ready_task(instance_id, node_id, scope);
			break;
		case PGD_TASK_HTTP:
			RUN(STMT_TASK_HTTP, instance_id, node_id, scope);
			pgd_http_wake_at_commit();
			break;
		case PGD_TASK_DELIVER:
			RUN(STMT_TASK_DELIVER, instance_id);
			pgd_wake_at_commit(1);
			break;
		case PGD_TASK_TIMER:
			elog(ERROR, "a timer needs its time: use pgd_store_timer_add");
			break;
		case PGD_TASK_APPLY:
			elog(ERROR,
				 "an apply task comes with its inbox row: use pgd_store_inbox_add");
			break;
	}
}

/* ---------------------------------------------------------------------
 * Step tasks a batch holds (docs/design/batches-and-inbox.md §2)
 *
 * While an executor runs a batch, a step task its transitions make ready
 * is first only held here, under a negative id: the batch runs its next
 * step at once (a chain goes on in the batch that made its next step
 * ready), and a task it ran never needs its row, its three index entries,
 * its claim and its delete.  A held task becomes a row (is written) when
 * anything of the engine could look for it: before a statement of the
 * store that reads the queue (df.check() included, even called by a
 * step), when its step gives way to lead the next batch, and at the end of
 * the batch for those it did not run.  A step's own statement sees the
 * queue as the batch's last write left it, as it sees its instance's node
 * rows (node_writes.c): the branches of a fan-out the batch runs itself
 * are no rows either.  Those of an instance that ends are dropped.  A
 * subtransaction's rollback takes back what it held, claimed or wrote; the
 * commit hook refuses a commit with a task still held.
 * ---------------------------------------------------------------------
 */

/*
 * At most this many held in one transaction; past it, step tasks are
 * written at once (the held ones first, keeping the queue's order).  A
 * batch of pg_durable.batch_max_steps chain steps holds one task a step,
 * so this must be well above that setting's default (32).
 */
#define MAX_HELD 1024

typedef struct HeldTask
{
	int64			 number; /* its PgdTaskRef id: 1, 2, ... in the batch */
	char			 instance_id[PGD_ID_LEN + 1];
	char			 node_id[PGD_ID_LEN + 1];
	char			*scope;
	SubTransactionId made;	  /* the subtransaction that made it ready */
	SubTransactionId taken;	  /* claimed by a step of the batch in; or 0 */
	SubTransactionId written; /* written as a row in; or 0 */
	int64			 row_id;  /* its row's id, once written */
} HeldTask;

static HeldTask *held; /* TopTransactionContext */
static int		 nheld = 0;
static int		 maxheld = 0;
static int64	 last_number = 0;
static bool		 hold_steps = false;

/* Neither claimed by a step of the batch nor written as a row. */
static inline bool
pending(const HeldTask *h)
{
	return h->taken == 0 && h->written == 0;
}

static void
write_held(HeldTask *h)
{
	h->row_id = insert_ready_task(h->instance_id, h->node_id, h->scope);
	h->written = GetCurrentSubTransactionId();
}

/* The executor runs a batch: may step tasks be held until its transaction ends? */
void
pgd_store_hold_step_tasks(bool hold)
{
	hold_steps = hold;
}

/* Write every held task nobody claimed, oldest first. */
void
pgd_store_write_held_tasks(void)
{
	for (int i = 0; i < nheld; i++)
		if (pending(&held[i]))
			write_held(&held[i]);
}

/*
 * An instance ended: its held tasks not run nor written are not wanted (a
 * JOIN that failed fast, a RACE decided).  They count as taken by the
 * subtransaction that ended it, whose rollback holds them again.
 */
void
pgd_store_forget_held_tasks(const char *instance_id)
{
	for (int i = 0; i < nheld; i++)
		if (pending(&held[i]) && strcmp(held[i].instance_id, instance_id) == 0)
			held[i].taken = GetCurrentSubTransactionId();
}

/* Has the instance another held task nobody claimed or wrote than held[i]? */
static bool
sibling_pending(int i)
{
	for (int j = 0; j < nheld; j++)
		if (j != i && pending(&held[j]) &&
			strcmp(held[j].instance_id, held[i].instance_id) == 0)
			return true;
	return false;
}

/*
 * The newest held task nobody claimed or wrote whose instance the batch is
 * in the middle of: a branch of a fan-out (its instance has another one,
 * or a JOIN count held in memory), or a step of an instance holding a
 * keyed lock or a limit slot in memory, which would otherwise be written
 * as rows at the batch's end and released by statements in the next one
 * (0: none).  A plain chain's next step is none of these.
 */
PgdTaskRef
pgd_store_held_branch_next(void)
{
	for (int i = nheld - 1; i >= 0; i--)
	{
		const char *instance_id = held[i].instance_id;

		if (pending(&held[i]) &&
			(sibling_pending(i) || store_join_counts_held(instance_id) ||
			 store_locks_held_by(instance_id) ||
			 store_slots_held_by(instance_id)))
			return pgd_task_ref(PGD_TASK_REF_HELD, held[i].number);
	}
	return PGD_NO_TASK;
}

/* The newest held task nobody claimed or wrote (PGD_NO_TASK: none). */
PgdTaskRef
pgd_store_held_task_next(void)
{
	for (int i = nheld - 1; i >= 0; i--)
		if (pending(&held[i]))
			return pgd_task_ref(PGD_TASK_REF_HELD, held[i].number);
	return PGD_NO_TASK;
}

/*
 * The newest held task of instance_id that this subtransaction made ready
 * and nobody claimed or wrote (PGD_NO_TASK: none): a start's first step.
 */
PgdTaskRef
pgd_store_held_task_made_here(const char *instance_id)
{
	SubTransactionId here = GetCurrentSubTransactionId();

	for (int i = nheld - 1; i >= 0; i--)
		if (pending(&held[i]) && held[i].made == here &&
			strcmp(held[i].instance_id, instance_id) == 0)
			return pgd_task_ref(PGD_TASK_REF_HELD, held[i].number);
	return PGD_NO_TASK;
}

static HeldTask *
held_of(PgdTaskRef task)
{
	if (task.kind != PGD_TASK_REF_HELD)
		return NULL;
	for (int i = 0; i < nheld; i++)
		if (held[i].number == task.id)
			return &held[i];
	return NULL;
}

/*
 * A held task gives way to lead the next batch: write it (its claim was
 * rolled back) and return its row.
 */
PgdTaskRef
pgd_store_write_held_task(PgdTaskRef task)
{
	HeldTask *h = held_of(task);

	if (h == NULL || h->taken != 0)
		elog(ERROR, "%s is not there to be written", pgd_task_ref_text(task));
	if (h->written == 0)
		write_held(h);
	return pgd_task_ref(PGD_TASK_REF_ROW, h->row_id);
}

/* Claim a held task: its runs row is read now. */
static bool
claim_held(PgdTaskRef task, PgdClaim *c)
{
	HeldTask *h = held_of(task);

	if (h == NULL || !pending(h))
		return false;
	h->taken = GetCurrentSubTransactionId();
	c->task = task;
	c->instance_id = pstrdup(h->instance_id);
	c->node_id = pstrdup(h->node_id);
	c->scope = pstrdup(h->scope);
	c->kind = PGD_TASK_STEP;
	c->attempts = 0;
	c->engine_errors = 0;
	c->last_engine_error = NULL;
	c->has_run = pgd_store_load_run(c->instance_id, &c->run);
	return true;
}

/* Hold a step task (false: the caller writes it). */
static bool
hold_step_task(const char *instance_id, const char *node_id, const char *scope)
{
	HeldTask *h;

	if (!hold_steps)
		return false;
	if (nheld == MAX_HELD)
	{
		/* keep the queue's order: the held ones go first */
		pgd_store_write_held_tasks();
		return false;
	}
	if (nheld == maxheld)
	{
		maxheld = Min(Max(32, maxheld * 2), MAX_HELD);
		held = held == NULL ? MemoryContextAlloc(TopTransactionContext,
												 sizeof(HeldTask) * maxheld) :
							  repalloc(held, sizeof(HeldTask) * maxheld);
	}
	h = &held[nheld++];
	h->number = ++last_number;
	strlcpy(h->instance_id, instance_id, sizeof(h->instance_id));
	strlcpy(h->node_id, node_id, sizeof(h->node_id));
	h->scope = MemoryContextStrdup(TopTransactionContext, scope);
	h->made = GetCurrentSubTransactionId();
	h->taken = h->written = 0;
	h->row_id = 0;
	return true;
}

static void
held_tasks_check_written(void)
{
	if (pgd_task_ref_is_task(pgd_store_held_task_next()))
		elog(ERROR, "step tasks were still held at commit");
}

static void
held_tasks_forget(void)
{
	held = NULL; /* in TopTransactionContext */
	nheld = maxheld = 0;
	last_number = 0;
	hold_steps = false;
}

/*
 * A subtransaction rolled back: what it (or one below it: their ids are
 * higher) held is gone, and what it claimed or wrote is held again.
 */
static void
held_tasks_subxact_abort(SubTransactionId mySubid)
{
	int k = 0;

	for (int i = 0; i < nheld; i++)
	{
		HeldTask *h = &held[i];

		if (h->made >= mySubid)
			continue;
		if (h->taken >= mySubid)
			h->taken = 0;
		if (h->written >= mySubid)
		{
			h->written = 0;
			h->row_id = 0;
		}
		held[k++] = *h;
	}
	nheld = k;
}

const PgdHeldOps store_held_tasks_ops = {
	.write = pgd_store_write_held_tasks,
	.check_written = held_tasks_check_written,
	.subxact_abort = held_tasks_subxact_abort,
	.forget = held_tasks_forget,
};

/* A transaction that is prepared turns its start markers into tasks. */
void
store_tasks_init(void)
{
	pgd_wake_set_prepare_hook(start_tasks_before_prepare);
}

/*
 * A task of a node due at 'at', inserted by statement s (its columns
 * instance_id, node_id, scope, run_at); an idle executor must recompute
 * how long to sleep.
 */
void
store_task_due_at(PgdStmt s, const char *instance_id, const char *node_id,
				  const char *scope, TimestampTz at)
{
	Datum values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(node_id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	store_run(s, values, NULL);
	pgd_task_due_at_commit(at);
}

/* A timer task due at 'at'. */
void
pgd_store_timer_add(const char *instance_id, const char *node_id,
					const char *scope, TimestampTz at)
{
	store_task_due_at(STMT_TASK_TIMER, instance_id, node_id, scope, at);
}

/* Put a claimed task back, one attempt further, due at 'at'. */
void
pgd_store_task_requeue(const PgdClaim *task, TimestampTz at)
{
	Datum values[6];
	char  nulls[6] = "      ";

	values[0] = pgd_text_datum(task->instance_id);
	if (task->node_id)
		values[1] = pgd_text_datum(task->node_id);
	else
		nulls[1] = 'n';
	values[2] = pgd_text_datum(task->scope);
	values[3] = pgd_text_datum(pgd_task_kind_name(task->kind));
	values[4] = Int32GetDatum(task->attempts + 1);
	values[5] = TimestampTzGetDatum(at);
	store_run(STMT_TASK_REQUEUE, values, nulls);
	pgd_task_due_at_commit(at);
}

void
pgd_store_task_delete(int64 task_id)
{
	Datum values[1];

	values[0] = Int64GetDatum(task_id);
	store_run(STMT_TASK_DELETE, values, NULL);
}

/* A wait got its signal: its timeout timer is not needed (one being fired finds the wait gone). */
void
pgd_store_drop_wait_timer(const char *instance_id, const char *node_id,
						  const char *scope)
{
	RUN(STMT_TASK_DROP_WAIT_TIMER, instance_id, node_id, scope);
}

/*
 * A delivery is about to look at the mailbox: every committed deliver task
 * of the instance is covered by it (a signal commits with its task, so the
 * mailbox read after this statement sees the signal of every task it
 * deleted; a pending instance's SIGNAL nodes read the mailbox when they
 * start).  Tasks claimed by others are skipped.
 */
void
pgd_store_deliver_tasks_drop(const char *instance_id)
{
	RUN(STMT_TASK_DELIVER_DROP, instance_id);
}

/* Claim the task if it is due and nobody holds it. */
bool
pgd_store_claim(PgdTaskRef task, PgdClaim *c)
{
	switch (task.kind)
	{
		case PGD_TASK_REF_HELD:
			return claim_held(task, c);
		case PGD_TASK_REF_START:
			return claim_start_marker(task, c);
		case PGD_TASK_REF_ROW:
			break;
		case PGD_TASK_REF_NONE:
			return false;
	}
	if (!store_claim_task_row(task.id, c))
		return false;
	if (c->has_run)
		store_overlay_held_start(c->instance_id, &c->run.status);
	return true;
}

/* ---------------------------------------------------------------------
 * Starts by marker
 *
 * df.start writes no start task: its pending runs row is the queued work,
 * and its commit publishes the instance as a marker in wake.c's ring, an
 * id no task has.  A one-step workflow wrote a task row, three index
 * entries and the row's delete for it, about 370 bytes of WAL.  A marker
 * that may be lost (the ring was full, an executor that held one failed or
 * started again, the server restarted) is made good by the start sweep,
 * which gives every pending runs row without a start task one; a start in
 * a transaction that is prepared becomes a task before the PREPARE.  An
 * older schema, whose df.check() knows no markers, keeps start tasks.
 * ---------------------------------------------------------------------
 */

/* Do starts go by marker (the schema's df.check() counts them as work)? */
static bool
start_markers_usable(void)
{
	Oid events = pgd_internal_relid("events");

	return OidIsValid(events) &&
		get_attnum(events, "instance_completed_at") != InvalidAttrNumber;
}

/* df.start's instance is ready to start at commit. */
void
pgd_store_start_ready(const char *instance_id)
{
	if (start_markers_usable())
		pgd_start_ready_at_commit(instance_id);
	else
		pgd_store_task_add(instance_id, NULL, instance_id, PGD_TASK_START);
}

/*
 * A marker claimed: its instance when its runs row is there and pending.
 * Nothing is locked or deleted: the start locks the runs row and starts a
 * pending instance only (pgd_executor_start_instance), so a marker claimed
 * twice, or a marker and a start task of one instance, start it once.
 */
static bool
claim_start_marker(PgdTaskRef task, PgdClaim *c)
{
	char instance[9];

	if (!pgd_start_marker_instance(task, instance))
		return false;
	/* a statement would see what this transaction wrote before it */
	CommandCounterIncrement();
	memset(c, 0, sizeof(*c));
	c->task = task;
	c->instance_id = pstrdup(instance);
	c->scope = pstrdup(instance);
	c->kind = PGD_TASK_START;
	c->has_run = pgd_store_load_run(c->instance_id, &c->run);
	return c->has_run && c->run.status == PGD_INSTANCE_PENDING;
}

/*
 * The starts of a transaction being prepared, as start tasks in it
 * (wake.c): one instance's, or (NULL) every pending one's.  The statements
 * run as df.start's own do, as the bootstrap superuser.
 */
static void
start_tasks_before_prepare(const char *instance_id)
{
	PgdCaller caller;

	/* (PREPARE TRANSACTION has no snapshot of its own set) */
	PushActiveSnapshot(GetTransactionSnapshot());
	pgd_engine_rights(&caller);
	if (instance_id != NULL)
		RUN(STMT_START_TASK_OF_MARKER, instance_id);
	else
	{
		char after[PGD_ID_LEN + 1] = "";

		do
			(void) pgd_store_start_sweep(after, PGD_START_SWEEP_BATCH, after);
		while (after[0] != '\0');
	}
	pgd_caller_again(&caller);
	PopActiveSnapshot();
}

/*
 * An unexpected error of the engine rolled back the claim of this task:
 * record it on the task row (in a transaction of the caller's own, after
 * the rollback) and delay the next claim.  df.check() reports a task whose
 * errors repeat.
 */
void
pgd_store_task_engine_error(PgdTaskRef task, const char *error)
{
	Datum values[2];
	bool  isnull;
	char  instance[9];

	/* a start's marker: a start task that counts it from now on */
	if (pgd_start_marker_instance(task, instance))
	{
		values[0] = pgd_text_datum(instance);
		values[1] = pgd_text_datum(error);
		if (store_run(STMT_START_MARKER_ERROR, values, NULL) == 1)
			pgd_task_due_at_commit(DatumGetTimestampTz(store_get_datum(0, 1,
																	   &isnull)));
		return;
	}
	/* a held task was never a row: its claim's rollback took it back */
	if (task.kind != PGD_TASK_REF_ROW)
		return;
	values[0] = Int64GetDatum(task.id);
	values[1] = pgd_text_datum(error);
	if (store_run(STMT_TASK_ENGINE_ERROR, values, NULL) == 1)
		pgd_task_due_at_commit(DatumGetTimestampTz(store_get_datum(0, 1,
																   &isnull)));
}

/* The id of the oldest task due at 'now' nobody holds (the caller claims it). */
bool
pgd_store_oldest_ready(TimestampTz now, int64 *task_id)
{
	Datum values[1];

	values[0] = TimestampTzGetDatum(now);
	if (store_run(STMT_TASK_OLDEST_READY, values, NULL) == 0)
		return false;
	*task_id = strtoll(store_get_string(0, 1), NULL, 10);
	return true;
}

/*
 * The same, passing over the steps of the nroles roles in roles[] (they
 * hold their share of the executors); nroles = 0 passes over none, and
 * InvalidOid among them passes over every step.
 */
bool
pgd_store_oldest_ready_except(const Oid *roles, int nroles, TimestampTz now,
							  int64 *task_id)
{
	Datum *elems;
	Datum  values[2];
	int	   i;

	if (nroles == 0)
		return pgd_store_oldest_ready(now, task_id);
	elems = palloc(sizeof(Datum) * nroles);
	for (i = 0; i < nroles; i++)
		elems[i] = ObjectIdGetDatum(roles[i]);
	values[0] =
		PointerGetDatum(construct_array(elems, nroles, OIDOID, sizeof(Oid),
										true, TYPALIGN_INT));
	values[1] = TimestampTzGetDatum(now);
	if (store_run(STMT_TASK_OLDEST_READY_SHARE, values, NULL) == 0)
		return false;
	*task_id = strtoll(store_get_string(0, 1), NULL, 10);
	return true;
}

/*
 * When the next task due after 'now' is due.  Read without locks: a scan
 * that skipped rows another executor held (with SKIP LOCKED) would report
 * a later time and hide a timer until the safety poll.  'now' must be the
 * time the scan's pgd_store_oldest_ready used: with a later one, a task
 * falling due between the two statements would be in neither answer, and
 * nobody would look for it until the safety poll.
 */
bool
pgd_store_next_due(TimestampTz now, TimestampTz *at)
{
	bool  isnull;
	Datum next;
	Datum values[1];

	values[0] = TimestampTzGetDatum(now);
	store_run(STMT_TASK_NEXT_DUE, values, NULL);
	next = store_get_datum(0, 1, &isnull);
	if (isnull)
		return false;
	*at = DatumGetTimestampTz(next);
	return true;
}
