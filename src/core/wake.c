/*-------------------------------------------------------------------------
 *
 * wake.c
 *	  Wake-ups at commit: whatever makes a task runnable (df.start, a step
 *	  that enqueues its successors, df.cancel) wakes idle executors when its
 *	  transaction commits, and whatever finishes an instance wakes the
 *	  sessions sleeping in df.await_instance.  No polling on the hot path.
 *
 * Why no wake-up is lost: an executor marks itself idle *before* it looks
 * for work for the last time and then sleeps on its latch; a committer
 * looks at the idle marks *after* its commit is visible.  Both go through
 * the same spinlock, so either the committer sees the mark and sets the
 * latch, or the executor's look for work comes after the commit and finds
 * the task.
 *
 * The same hook publishes the ids of the tasks the transaction made ready in
 * a ring in shared memory.  An executor takes the oldest id and claims that
 * task by its primary key.  This is only a hint: an id may be gone or
 * claimed already, and a task that is not in the ring (the ring was full,
 * a timer fell due, the server restarted) is found by a scan of the queue
 * ordered by run_at.  That scan walks over the index entries of every task
 * deleted since the last VACUUM that some open snapshot may still see (a
 * session waiting in df.await_instance holds one), which costs more than
 * the step itself under load, so executors scan only when they may find
 * something the ring does not hold: when a commit made a task ready
 * without publishing its id (the ring was full, reconciliation, ...) or
 * after a restart (scan_needed), when the earliest future task a commit
 * announced falls due (next_due), and at the safety poll.
 *
 * A start is published as a marker, not a task id (PgdTaskRef,
 * task_ref.h): in the ring, an int64 from START_MARKER up, the instance's
 * id read as a number, which no task id reaches.  Its instance's pending runs row is the queued work, so a marker
 * the ring cannot hold, or that a failed unit took, or that a crash lost,
 * is made good by the start sweep (start_sweep, store/tasks.c), not
 * by a scan of the queue.
 *
 * The same commit-time hook interrupts executors whose running step was
 * just cancelled or lost a RACE, so they stop early instead of finishing
 * work that will be rolled back.
 *
 * Locks: the pgd_shared spinlock, briefly.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "core/shmem.h"
#include "core/wake.h"

#define MAX_PENDING_INTERRUPTS 16
/*
 * A commit publishes the ids of every task it made ready, up to what the
 * ring holds: a batch takes its later tasks from the ring only, so the
 * branches of a wide fan-out whose ids were not published were found by
 * queue scans one at a time, each leading a batch of its own.
 */
#define MAX_PENDING_READY PGD_READY_RING

typedef struct PendingInterrupt
{
	char instance[9];
	char scope[256];
} PendingInterrupt;

static int	 pending_tasks = 0; /* tasks this transaction made runnable */
static int64 pending_ready[MAX_PENDING_READY]; /* as the ring holds them */
static int	 npending_ready = 0;
static bool pending_scan = false; /* some ready task is not in pending_ready */
static bool pending_start_sweep = false; /* a start's marker did not fit */
/*
 * How the ring holds a task reference: a row by its id, a start's marker
 * from START_MARKER up (no task id reaches it).  Held tasks never enter it.
 */
#define START_MARKER ((int64) 1 << 62)

static int64
ring_value(PgdTaskRef r)
{
	Assert(r.kind == PGD_TASK_REF_ROW || r.kind == PGD_TASK_REF_START);
	return r.kind == PGD_TASK_REF_START ? START_MARKER + r.id : r.id;
}

static PgdTaskRef
ring_ref(int64 v)
{
	return v >= START_MARKER ? pgd_task_ref(PGD_TASK_REF_START, v - START_MARKER) :
							   pgd_task_ref(PGD_TASK_REF_ROW, v);
}

static bool took_marker = false; /* pgd_ready_pop gave a start's marker */
static void (*prepare_hook)(const char *instance_id) = NULL;
static TimestampTz pending_due = DT_NOEND;	  /* earliest future task made */
static bool		   pending_http = false;	  /* ... of which HTTP calls */
static bool		   pending_bus_sweep = false; /* an event or an EVENT wait */
static PendingInterrupt pending_interrupts[MAX_PENDING_INTERRUPTS];
static int				npending_interrupts = 0;
#define MAX_PENDING_FINISHED 32

/* the instance whose step this executor runs now, or "" (process-local) */
static char running_instance[9] = "";
/* ... and that step's scope, whole (shared memory keeps it truncated) */
static char *running_scope = NULL;

static int	npending_finished = 0; /* instances this transaction ended */
static char pending_finished[MAX_PENDING_FINISHED][9]; /* (all awaiters
														 * when it overflows) */
static int	my_slot = -1; /* executor slot of this process */

static void wake_at_commit(int ntasks);

/* Set a request flag of pgd_shared (under ready_mutex; take_request takes it). */
static void
set_request(bool *flag)
{
	SpinLockAcquire(&pgd_shared->ready_mutex);
	*flag = true;
	SpinLockRelease(&pgd_shared->ready_mutex);
}

static void
wake_executors(int ntasks)
{
	Latch *latches[PGD_MAX_EXECUTORS];
	int	   n = 0;
	int	   i;

	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_EXECUTORS && n < ntasks; i++)
	{
		PgdExecutorSlot *slot = &pgd_shared->executors[i];

		if (slot->pid != 0 && slot->idle && i != my_slot)
		{
			latches[n++] = slot->latch;
			slot->idle = false; /* it will look for work: one wake-up each */
		}
	}
	SpinLockRelease(&pgd_shared->mutex);

	for (i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/* Publish the ids of the tasks this transaction made ready; drop them when full. */
static void
publish_ready(void)
{
	int i;

	SpinLockAcquire(&pgd_shared->ready_mutex);
	for (i = 0; i < npending_ready; i++)
	{
		uint32 at = (pgd_shared->ready_head + pgd_shared->ready_count) %
			PGD_READY_RING;

		if (pgd_shared->ready_count == PGD_READY_RING)
		{
			pgd_shared->scan_needed = true; /* full: the scan finds the rest */
			/* and the sweep the starts whose markers are left out */
			for (; i < npending_ready; i++)
				if (ring_ref(pending_ready[i]).kind == PGD_TASK_REF_START)
					pgd_shared->start_sweep = true;
			break;
		}
		pgd_shared->ready[at] = pending_ready[i];
		pgd_shared->ready_count++;
	}
	if (pending_scan)
		pgd_shared->scan_needed = true;
	if (pending_start_sweep)
		pgd_shared->start_sweep = true;
	/*
	 * A scan under way may have read the queue before this commit: its
	 * answer must not replace next_due, even when this task is due after
	 * the time next_due says now (that task may be claimed already, and
	 * the scan would report only what it saw).
	 */
	if (pending_due != DT_NOEND)
	{
		if (pending_due < pgd_shared->next_due)
			pgd_shared->next_due = pending_due;
		pgd_shared->due_gen++;
	}
	SpinLockRelease(&pgd_shared->ready_mutex);
}

/*
 * Should an executor scan the queue?  Yes when a task may be ready that the
 * ring does not hold, or the earliest announced future task is due.  Else
 * *sleep_ms is the time until that task is due (when one is announced).
 */
bool
pgd_queue_scan_due(TimestampTz now, long *sleep_ms)
{
	bool scan;

	SpinLockAcquire(&pgd_shared->ready_mutex);
	scan = pgd_shared->scan_needed || pgd_shared->next_due <= now;
	if (!scan && pgd_shared->next_due != DT_NOEND)
		*sleep_ms =
			Min(*sleep_ms,
				Max(1L, (long) ((pgd_shared->next_due - now) / 1000) + 1));
	SpinLockRelease(&pgd_shared->ready_mutex);
	return scan;
}

/* A task may be back in the queue without anyone saying so (a rollback). */
void
pgd_queue_rescan(void)
{
	set_request(&pgd_shared->scan_needed);
}

/*
 * A step was left in the queue for its role's share, and that role just got
 * a share back (core/share.c): have the queue scanned, by this executor and
 * by one idle one, since the ring no longer holds the step's id.
 */
void
pgd_queue_rescan_wake(void)
{
	pgd_queue_rescan();
	wake_executors(1);
}

/* A scan begins: it answers for the state of this generation. */
uint64
pgd_queue_scan_begin(void)
{
	uint64 gen;

	SpinLockAcquire(&pgd_shared->ready_mutex);
	pgd_shared->scan_needed = false; /* a later commit sets it again */
	gen = pgd_shared->due_gen;
	SpinLockRelease(&pgd_shared->ready_mutex);
	return gen;
}

/*
 * A scan found earliest (DT_NOEND: nothing; a time not after now: a task it
 * is about to run, after which another may be due at once) as the queue's
 * earliest task.  Unless a commit announced a future task since the scan
 * began, that is the next time to look; if one did, the scan may not have
 * seen it, and may only bring next_due forward.
 */
void
pgd_queue_scanned(uint64 gen, TimestampTz earliest)
{
	SpinLockAcquire(&pgd_shared->ready_mutex);
	if (pgd_shared->due_gen == gen || earliest < pgd_shared->next_due)
		pgd_shared->next_due = earliest;
	SpinLockRelease(&pgd_shared->ready_mutex);
}

/* The oldest published task id, if any. */
bool
pgd_ready_pop(PgdTaskRef *task)
{
	bool found = false;

	SpinLockAcquire(&pgd_shared->ready_mutex);
	if (pgd_shared->ready_count > 0)
	{
		*task = ring_ref(pgd_shared->ready[pgd_shared->ready_head]);
		pgd_shared->ready_head = (pgd_shared->ready_head + 1) % PGD_READY_RING;
		pgd_shared->ready_count--;
		found = true;
	}
	SpinLockRelease(&pgd_shared->ready_mutex);
	if (found && task->kind == PGD_TASK_REF_START)
		took_marker = true;
	return found;
}

/*
 * Did this process take a start's marker from the ring since the last
 * reset?  A unit that rolls back after taking one has lost it: the
 * executor then asks for the start sweep.
 */
bool
pgd_ready_took_marker(bool reset)
{
	bool took = took_marker;

	if (reset)
		took_marker = false;
	return took;
}

/*
 * The instance (9 bytes with its NUL) of a start's marker; false for any
 * other id.
 */
bool
pgd_start_marker_instance(PgdTaskRef task, char *instance_id)
{
	if (task.kind != PGD_TASK_REF_START || task.id < 0 ||
		task.id > PG_UINT32_MAX)
		return false;
	snprintf(instance_id, 9, "%08x", (uint32) task.id);
	return true;
}

/*
 * df.start's instance (its id: eight hex digits) is ready at commit: its
 * marker goes into the ring, as a task's id does; when there is no room,
 * the commit asks for the start sweep instead.
 */
void
pgd_start_ready_at_commit(const char *instance_id)
{
	uint64 n;

	if (strlen(instance_id) != 8 ||
		strspn(instance_id, "0123456789abcdef") != 8)
		elog(ERROR, "instance id \"%s\" has no marker", instance_id);
	n = strtoul(instance_id, NULL, 16);
	if (npending_ready < MAX_PENDING_READY)
		pending_ready[npending_ready++] =
			ring_value(pgd_task_ref(PGD_TASK_REF_START, (int64) n));
	else
		pending_start_sweep = true;
	wake_at_commit(1);
}

/* A start's marker may be lost: an executor runs the start sweep. */
void
pgd_start_sweep_request(void)
{
	set_request(&pgd_shared->start_sweep);
}

/* Take a request flag of pgd_shared (under ready_mutex): true when it was set. */
static bool
take_request(bool *flag)
{
	bool take;

	SpinLockAcquire(&pgd_shared->ready_mutex);
	take = *flag;
	*flag = false;
	SpinLockRelease(&pgd_shared->ready_mutex);
	return take;
}

/* Take the request for the start sweep (true: run it now). */
bool
pgd_start_sweep_take(void)
{
	return take_request(&pgd_shared->start_sweep);
}

/*
 * What a transaction that is prepared (PREPARE TRANSACTION) does with the
 * markers of its starts: its commit happens in another session, which
 * publishes nothing, so each becomes a start task in the transaction
 * itself (hook(instance_id); hook(NULL) for all of them, when some did not
 * fit), which the queue's scans find.  Set by the store.
 */
void
pgd_wake_set_prepare_hook(void (*hook)(const char *instance_id))
{
	prepare_hook = hook;
}

static void
starts_before_prepare(void)
{
	char instance[9];
	int	 k = 0;

	for (int i = 0; i < npending_ready; i++)
	{
		if (pgd_start_marker_instance(ring_ref(pending_ready[i]), instance))
		{
			if (prepare_hook != NULL && !pending_start_sweep)
				prepare_hook(instance);
		}
		else
			pending_ready[k++] = pending_ready[i];
	}
	npending_ready = k;
	if (pending_start_sweep && prepare_hook != NULL)
		prepare_hook(NULL);
	pending_start_sweep = false;
}

/*
 * Interrupt (SIGINT, a query cancel) the executors whose user SQL belongs
 * to a scope that was just cancelled or lost its RACE.  A step interrupted
 * this way finds out under the runs lock that it is no longer wanted and
 * rolls back.  The executor may have moved on to another step by the time
 * the signal arrives: step_sql.c treats a cancel "due to user request" as
 * retryable, and the executor's loop runs a unit cancelled in the engine's
 * own statements again, as after a lost lock race, so such a stray
 * interrupt costs a retry, never a failure.
 */
static void
interrupt_executors(void)
{
	pid_t pids[PGD_MAX_EXECUTORS];
	int	  n = 0;
	int	  i, j;

	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_EXECUTORS; i++)
	{
		PgdExecutorSlot *slot = &pgd_shared->executors[i];

		if (slot->pid == 0 || slot->instance[0] == '\0' || i == my_slot)
			continue;
		for (j = 0; j < npending_interrupts; j++)
		{
			PendingInterrupt *p = &pending_interrupts[j];
			size_t			  len = strlen(p->scope);

			if (strcmp(slot->instance, p->instance) == 0 &&
				strncmp(slot->scope, p->scope, len) == 0 &&
				(slot->scope[len] == '\0' || slot->scope[len] == ':' ||
				 len >= sizeof(slot->scope) - 1))
			{
				pids[n++] = slot->pid;
				break;
			}
		}
	}
	SpinLockRelease(&pgd_shared->mutex);

	for (i = 0; i < n; i++)
		kill(pids[i], SIGINT);
}

void
pgd_interrupt_at_commit(const char *instance_id, const char *scope)
{
	if (npending_interrupts >= MAX_PENDING_INTERRUPTS)
		return; /* the steps will still find out at their end */
	strlcpy(pending_interrupts[npending_interrupts].instance, instance_id,
			sizeof(pending_interrupts[0].instance));
	strlcpy(pending_interrupts[npending_interrupts].scope, scope,
			sizeof(pending_interrupts[0].scope));
	npending_interrupts++;
}

void
pgd_executor_set_running(const char *instance_id, const char *scope)
{
	strlcpy(running_instance, instance_id ? instance_id : "",
			sizeof(running_instance));
	if (running_scope != NULL)
		pfree(running_scope);
	running_scope = instance_id != NULL && scope != NULL ?
		MemoryContextStrdup(TopMemoryContext, scope) :
		NULL;
	SpinLockAcquire(&pgd_shared->mutex);
	strlcpy(pgd_shared->executors[my_slot].instance,
			instance_id ? instance_id : "",
			sizeof(pgd_shared->executors[my_slot].instance));
	strlcpy(pgd_shared->executors[my_slot].scope, scope ? scope : "",
			sizeof(pgd_shared->executors[my_slot].scope));
	SpinLockRelease(&pgd_shared->mutex);
}

/*
 * The instance whose step this process runs now, or NULL: df.cancel refuses
 * to end it from inside the step (status.c).
 */
const char *
pgd_executor_running_instance(void)
{
	return running_instance[0] != '\0' ? running_instance : NULL;
}

/* The scope of that step, or NULL (df.check() called by it, status.c). */
const char *
pgd_executor_running_scope(void)
{
	return running_instance[0] != '\0' ? running_scope : NULL;
}

/* Wake the sessions awaiting an instance this transaction ended. */
static void
wake_awaiters(void)
{
	Latch *latches[PGD_MAX_AWAITERS];
	int	   n = 0;
	int	   i, j;
	bool   all = npending_finished > MAX_PENDING_FINISHED;

	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_AWAITERS; i++)
	{
		PgdAwaiter *a = &pgd_shared->awaiters[i];

		if (a->latch == NULL)
			continue;
		for (j = 0; j < Min(npending_finished, MAX_PENDING_FINISHED) || all;
			 j++)
			if (all || strcmp(a->instance, pending_finished[j]) == 0)
			{
				latches[n++] = a->latch;
				break;
			}
	}
	SpinLockRelease(&pgd_shared->mutex);
	for (i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/* The HTTP worker has one latch; setting it when it is busy costs nothing. */
static void
wake_http_worker(void)
{
	Latch *latch;

	SpinLockAcquire(&pgd_shared->mutex);
	latch = pgd_shared->http_latch;
	SpinLockRelease(&pgd_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * The bus sweep (store/event_bus.c) must run in a transaction that
 * begins after this commit: the flag is set now, after the commit is
 * visible and before any executor is woken, and an executor looks at it
 * after each task, before it sleeps.  An executor committing looks at it
 * itself; anyone else needs one executor woken, which the tasks of the
 * commit (a subscriber's start) may already do.
 */
static void
ask_bus_sweep(void)
{
	set_request(&pgd_shared->bus_sweep);
	if (my_slot < 0 && pending_tasks <= 0)
		pending_tasks = 1;
}

static void
pgd_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if ((npending_ready > 0 || pending_scan || pending_start_sweep ||
				 pending_due != DT_NOEND) &&
				pgd_shared != NULL)
				publish_ready();
			/* an executor runs one of the tasks it made itself */
			if (my_slot >= 0)
				pending_tasks--;
			if (pending_bus_sweep && pgd_shared != NULL)
				ask_bus_sweep();
			if (pending_tasks > 0 && pgd_shared != NULL)
				wake_executors(pending_tasks);
			if (npending_interrupts > 0 && pgd_shared != NULL)
				interrupt_executors();
			if (npending_finished > 0 && pgd_shared != NULL)
				wake_awaiters();
			if (pending_http && pgd_shared != NULL)
				wake_http_worker();
			pending_bus_sweep = false;
			pending_tasks = 0;
			npending_ready = 0;
			pending_scan = false;
			pending_start_sweep = false;
			pending_due = DT_NOEND;
			pending_http = false;
			npending_finished = 0;
			npending_interrupts = 0;
			break;
		case XACT_EVENT_PRE_PREPARE:
			starts_before_prepare();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending_bus_sweep = false;
			pending_tasks = 0;
			npending_ready = 0;
			pending_scan = false;
			pending_start_sweep = false;
			pending_due = DT_NOEND;
			pending_http = false;
			npending_finished = 0;
			npending_interrupts = 0;
			break;
		default:
			break;
	}
}

void
pgd_wake_register_xact_callback(void)
{
	RegisterXactCallback(pgd_xact_callback, NULL);
}

/*
 * ntasks tasks become ready at commit without their ids: wake executors,
 * and make them scan the queue.
 */
void
pgd_wake_at_commit(int ntasks)
{
	pending_scan = true;
	wake_at_commit(ntasks);
}

/* A task falls due at a later time: an idle executor must sleep less. */
void
pgd_task_due_at_commit(TimestampTz due)
{
	if (due < pending_due)
		pending_due = due;
	wake_at_commit(1);
}

static void
wake_at_commit(int ntasks)
{
	pending_tasks = Min(pending_tasks + ntasks, PGD_MAX_EXECUTORS + 1);
}

/* A task that is ready now (not a timer): wake an executor and publish its id. */
void
pgd_task_ready_at_commit(int64 task_id)
{
	if (npending_ready < MAX_PENDING_READY)
		pending_ready[npending_ready++] = task_id;
	else
		pending_scan = true;
	wake_at_commit(1);
}

/*
 * The ids of tasks this transaction made ready so far, oldest first (some
 * of them, when there were many): a batch runs the successors it made
 * ready itself.  Returns how many were copied into ids.
 */
int
pgd_ready_made_here(PgdTaskRef *tasks, int max)
{
	int n = Min(max, npending_ready);

	for (int i = 0; i < n; i++)
		tasks[i] = ring_ref(pending_ready[i]);
	return n;
}

/*
 * A batch ran a task this transaction had made ready: it is not to be
 * published at commit, and wakes no other executor for it.
 */
void
pgd_ready_consumed(PgdTaskRef task)
{
	if (task.kind != PGD_TASK_REF_ROW && task.kind != PGD_TASK_REF_START)
		return;
	for (int i = 0; i < npending_ready; i++)
		if (pending_ready[i] == ring_value(task))
		{
			memmove(&pending_ready[i], &pending_ready[i + 1],
					(npending_ready - i - 1) * sizeof(int64));
			npending_ready--;
			if (pending_tasks > 0 && pending_tasks <= PGD_MAX_EXECUTORS)
				pending_tasks--;
			return;
		}
}

/* An HTTP task became runnable: wake the HTTP worker at commit (not the executors). */
void
pgd_bus_sweep_at_commit(void)
{
	pending_bus_sweep = true;
}

bool
pgd_bus_sweep_take(void)
{
	return take_request(&pgd_shared->bus_sweep);
}

void
pgd_http_wake_at_commit(void)
{
	pending_http = true;
}

static void
http_worker_detach(int code, Datum arg)
{
	SpinLockAcquire(&pgd_shared->mutex);
	if (pgd_shared->http_pid == MyProcPid)
	{
		pgd_shared->http_pid = 0;
		pgd_shared->http_latch = NULL;
		pgd_shared->http_settings[0] = '\0';
	}
	SpinLockRelease(&pgd_shared->mutex);
}

/*
 * Register the HTTP worker.  Returns whether it is alone: no other HTTP
 * worker was registered (one that exits, even by an error, deregisters;
 * a crash restart of the server clears shared memory).
 */
bool
pgd_http_worker_attach(void)
{
	bool		alone;

	SpinLockAcquire(&pgd_shared->mutex);
	alone = (pgd_shared->http_pid == 0);
	pgd_shared->http_pid = MyProcPid;
	pgd_shared->http_latch = MyLatch;
	SpinLockRelease(&pgd_shared->mutex);
	before_shmem_exit(http_worker_detach, (Datum) 0);
	return alone;
}

void
pgd_instance_finished_at_commit(const char *instance_id)
{
	if (npending_finished < MAX_PENDING_FINISHED)
		strlcpy(pending_finished[npending_finished], instance_id,
				sizeof(pending_finished[0]));
	if (npending_finished <= MAX_PENDING_FINISHED)
		npending_finished++;
}

static void
executor_detach(int code, Datum arg)
{
	SpinLockAcquire(&pgd_shared->mutex);
	if (my_slot >= 0 && pgd_shared->executors[my_slot].pid == MyProcPid)
	{
		pgd_shared->executors[my_slot].pid = 0;
		pgd_shared->executors[my_slot].latch = NULL;
		pgd_shared->executors[my_slot].idle = false;
		pgd_shared->executors[my_slot].instance[0] = '\0';
		pgd_shared->executors[my_slot].step_role = InvalidOid;
	}
	SpinLockRelease(&pgd_shared->mutex);
}

void
pgd_executor_attach(int slot)
{
	if (slot < 0 || slot >= PGD_MAX_EXECUTORS)
		elog(FATAL, "executor slot %d out of range", slot);

	SpinLockAcquire(&pgd_shared->mutex);
	pgd_shared->executors[slot].pid = MyProcPid;
	pgd_shared->executors[slot].latch = MyLatch;
	pgd_shared->executors[slot].idle = false;
	pgd_shared->executors[slot].step_role = InvalidOid;
	SpinLockRelease(&pgd_shared->mutex);
	my_slot = slot;
	before_shmem_exit(executor_detach, (Datum) 0);
	/* the one it replaces may have held a start's marker when it ended */
	pgd_start_sweep_request();
}

void
pgd_executor_set_idle(bool idle)
{
	SpinLockAcquire(&pgd_shared->mutex);
	pgd_shared->executors[my_slot].idle = idle;
	SpinLockRelease(&pgd_shared->mutex);
}

/*
 * df.await_instance: a session registers its latch and the instance it waits
 * for, then checks the status, then sleeps; the transaction that ends that
 * instance sets the latch at commit, so the wake-up cannot be lost and other
 * instances ending do not wake it.  When every slot is taken the session still
 * waits correctly, on its timeout-bounded poll.
 */
static int my_awaiter_slot = -1;

void
pgd_await_prepare(const char *instance_id)
{
	int i;

	if (my_awaiter_slot >= 0)
		return;
	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_AWAITERS; i++)
		if (pgd_shared->awaiters[i].latch == NULL)
		{
			pgd_shared->awaiters[i].latch = MyLatch;
			strlcpy(pgd_shared->awaiters[i].instance, instance_id,
					sizeof(pgd_shared->awaiters[i].instance));
			my_awaiter_slot = i;
			break;
		}
	SpinLockRelease(&pgd_shared->mutex);
}

void
pgd_await_wait(long timeout_ms)
{
	/* without a slot, poll */
	if (my_awaiter_slot < 0)
		timeout_ms = Min(timeout_ms, 100L);
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 timeout_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

void
pgd_await_cancel(void)
{
	if (my_awaiter_slot < 0)
		return;
	SpinLockAcquire(&pgd_shared->mutex);
	if (pgd_shared->awaiters[my_awaiter_slot].latch == MyLatch)
		pgd_shared->awaiters[my_awaiter_slot].latch = NULL;
	SpinLockRelease(&pgd_shared->mutex);
	my_awaiter_slot = -1;
}
