/*-------------------------------------------------------------------------
 *
 * executor.h
 *	  What the executor's files share (worker/ only): the state of the unit
 *	  under way, how a task ran, the task runner (task_run.c) and the
 *	  batch (batch.c) that the executor's loop (executor.c) calls.
 *
 * Locks: see executor.c and batch.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_WORKER_EXECUTOR_H
#define PG_DURABLE_WORKER_EXECUTOR_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "store/store.h"

/* the lock_timeout of the later steps of a batch (batch.c) */
#define PGD_BATCH_LOCK_TIMEOUT "5ms"

/* What became of a task (pgd_task_run). */
typedef enum StepRun
{
	STEP_RAN,	   /* *outcome is the node's outcome */
	STEP_REQUEUED, /* put back for a later attempt */
	STEP_UNWANTED, /* interrupted or retried, and no longer wanted */
	STEP_DEFER,	   /* a later step of a batch: would wait or ran long */
} StepRun;

/*
 * The unit under way.  claimed is the task of the unit (PGD_NO_TASK when
 * an error would not be its own).  Batches (docs/design/batches-and-inbox.md §2):
 * in_follower is set while a task after the batch's first runs; budget_ms
 * is its statement budget.  next_leader is the task a batch gave back (it
 * would have waited, or ran past its budget): the next batch claims it
 * first, where it may wait.  first_steps counts the steps the batch ran
 * with the starts that made them ready (pgd_run_start, batch.c).
 */
typedef struct PgdExecState
{
	PgdTaskRef claimed;
	bool	   in_follower;
	int64	   budget_ms;
	PgdTaskRef next_leader;
	int		   first_steps;
} PgdExecState;

extern PgdExecState pgd_unit_state;

/*
 * task_run.c: the task runner.  pgd_task_run runs a claimed task other
 * than a start; pgd_task_run_step a step task (what it returns: StepRun);
 * pgd_task_start_instance starts a start task's instance; a unit takes its
 * role's share of the executors for a step (false: none free) and gives it
 * back when it ends.
 */
extern void	   pgd_task_runner_init(int slot);
extern StepRun pgd_task_run(PgdClaim *t);
extern StepRun pgd_task_run_step(PgdClaim *t);
extern void	   pgd_task_start_instance(PgdClaim *t);
extern bool	   pgd_task_take_share(Oid role);
extern void	   pgd_task_give_share_back(void);
/* ... and the end of a unit an error interrupted: true when it runs again */
extern bool pgd_end_failed_unit(MemoryContext old, int code);

/* batch.c: the later tasks of a batch; returns how many tasks ran in all */
extern int pgd_run_batch(TimestampTz started);
/* lock_timeout PGD_BATCH_LOCK_TIMEOUT and runs rows NOWAIT: a nest level */
extern int pgd_no_wait_rules_on(void);
/* ... a start task with the first step it makes ready */
extern void pgd_run_start(PgdClaim *t);
/* ... and any claimed task: a start with its first step, else pgd_task_run */
extern StepRun pgd_run_claimed(PgdClaim *t);

#endif /* PG_DURABLE_WORKER_EXECUTOR_H */
