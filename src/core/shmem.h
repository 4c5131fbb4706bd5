/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  pg_durable's shared-memory segment (shmem.c): the registry of the
 *	  launcher, the executors, the HTTP worker and the sessions waiting in
 *	  df.await_instance, the ring of task ids published at commit, and the
 *	  admission slots of transaction_mode => 'new'.
 *
 * Nothing in it is needed for correctness after a crash: the tables are
 * the truth, and every process registers itself again when it starts.
 *
 * Locks: mutex protects the registry (launcher, executors, awaiters, the
 * HTTP worker's fields); ready_mutex the ring and the scan hints;
 * admission_mutex the admission slots of transaction_mode => 'new'.  All
 * are spinlocks, held for a few instructions, never across a call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SHMEM_H
#define PG_DURABLE_SHMEM_H

#include "postgres.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#define PGD_MAX_EXECUTORS 64
#define PGD_MAX_AWAITERS  128
#define PGD_READY_RING	  16384
/* the largest pg_durable.max_new_transaction_starts */
#define PGD_MAX_NEW_STARTS 1000

/*
 * What the launcher is doing, for df.check() (worker/launcher.c) in any database.
 * ABSENT: no launcher has run since the server started; WAITING_DATABASE:
 * pg_durable.database does not exist (it looks again every 5 s);
 * ROLE_REFUSED: pg_durable.worker_role is missing or not a superuser, so
 * no worker is started (until a restart); RUNNING: the workers are started.
 */
typedef enum PgdLauncherState
{
	PGD_LAUNCHER_ABSENT = 0,
	PGD_LAUNCHER_WAITING_DATABASE,
	PGD_LAUNCHER_ROLE_REFUSED,
	PGD_LAUNCHER_RUNNING
} PgdLauncherState;

typedef struct PgdExecutorSlot
{
	pid_t  pid; /* 0 when the slot is free */
	Latch *latch;
	bool   idle;		/* waiting for work */
	char   instance[9]; /* instance whose user SQL runs now, or "" */
	char   scope[256];	/* its execution scope (truncated) */
	Oid	   step_role;	/* submitter of the SQL step it runs, or InvalidOid */
} PgdExecutorSlot;

/* A session waiting in df.await_instance for one instance to end. */
typedef struct PgdAwaiter
{
	Latch *latch; /* NULL when the slot is free */
	char   instance[9];
} PgdAwaiter;

/* What the HTTP worker runs with, published after each (re)load of its settings. */
#define PGD_HTTP_SETTINGS_LEN 1024

#define PGD_BATCH_SIZES 1000 /* pg_durable.batch_max_steps' maximum */

typedef struct PgdShared
{
	slock_t mutex;			/* protects the registry (all but the ring) */
	pid_t	launcher_pid;	/* 0 when no launcher runs */
	Latch  *launcher_latch; /* the launcher's process latch, or NULL */
	PgdLauncherState launcher_state;
	PgdExecutorSlot	 executors[PGD_MAX_EXECUTORS];
	PgdAwaiter awaiters[PGD_MAX_AWAITERS]; /* sessions in df.await_instance */

	/*
	 * Some ready step was left in the queue because its role held its share
	 * of the executors (share.c): the next executor to give a share back
	 * asks for a queue scan, which the ring would not cause.
	 */
	bool share_deferred;

	/*
	 * Ids of tasks that became ready at a commit, oldest first: a hint that
	 * lets an executor claim a task by its id instead of scanning the queue
	 * (see wake.c).  Lost on overflow or a crash; the queue is the truth.
	 */
	slock_t ready_mutex; /* protects the fields below */
	uint32	ready_head;	 /* index of the oldest id */
	uint32	ready_count;
	int64	ready[PGD_READY_RING];

	/*
	 * What the ring does not say: a task may be ready that is not in it
	 * (scan_needed), or a future task falls due at next_due.  due_gen
	 * counts the commits that announced a future task, so that an executor
	 * whose scan could not see such a commit does not replace next_due with
	 * a time that leaves that task out (wake.c, pgd_queue_scanned).
	 */
	bool		scan_needed;
	TimestampTz next_due;
	uint64		due_gen;

	/*
	 * An event was published or an EVENT wait registered: an
	 * executor runs the bus sweep (store/event_bus.c).  Set at start-up
	 * too, since a crash loses the flag.  Under ready_mutex.
	 */
	bool bus_sweep;

	/*
	 * A start's marker (wake.c) may be lost: the ring was full, an executor
	 * that held one failed or started again, the server restarted.  An
	 * executor then gives every pending runs row without a start task one
	 * (store/tasks.c, pgd_store_start_sweep).  Under ready_mutex.
	 */
	bool start_sweep;

	pid_t  http_pid; /* the HTTP worker, 0 when none runs */
	Latch *http_latch;
	char   http_settings[PGD_HTTP_SETTINGS_LEN]; /* "" when none runs */
	/* the launcher found no free worker slot for the HTTP worker (df.check()) */
	bool http_left_out;

	/*
	 * The admission slots of transaction_mode => 'new' (api/new_txn.c): the
	 * PID of the backend holding each, 0 when free.  Only the engine's code
	 * takes them, so no role can block them; their holder releases them,
	 * also when it exits.
	 */
	slock_t admission_mutex; /* protects admission[] */
	pid_t	admission[PGD_MAX_NEW_STARTS];

	/*
	 * Batches: how many committed batches held each number of
	 * tasks (index = tasks, the last one counts that many and more), for
	 * df_internal.batch_sizes() and bench/run.
	 */
	slock_t batch_mutex; /* protects batch_sizes[] */
	uint64	batch_sizes[PGD_BATCH_SIZES + 1];
} PgdShared;

extern PgdShared *pgd_shared;

/* shmem.c */
extern void pgd_shmem_request(void);
extern void pgd_shmem_startup(void);

#endif /* PG_DURABLE_SHMEM_H */
