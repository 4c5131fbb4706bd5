/*-------------------------------------------------------------------------
 *
 * orchestration.h
 *	  The failure-handling wrapper nodes (orchestration-api.md §1): the
 *	  pure retry decisions (retry.c) and the wrappers' part of a transition
 *	  (wrappers.c), which the engine calls through its wrapper hooks.
 *
 * Locks: retry.c none (pure); wrappers.c runs inside a transition, under
 * the instance's runs row, like apply.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_ORCHESTRATION_H
#define PG_DURABLE_ORCHESTRATION_H

#include "postgres.h"

#include "engine/graph_cache.h"
#include "engine/types.h"
#include "graph/orch_config.h"

/* --- retry.c: what becomes of a failed attempt --- */
typedef enum PgdRetryVerdict
{
	PGD_RETRY_AGAIN,		 /* the next attempt after *delay_ms */
	PGD_RETRY_NOT_RETRYABLE, /* the error is not retried: fail now */
	PGD_RETRY_EXHAUSTED,	 /* max_attempts reached */
	PGD_RETRY_OUT_OF_TIME	 /* the next attempt would pass max_duration */
} PgdRetryVerdict;

/*
 * Attempt 'attempt' (1 = the first try) failed with code (retryable_fail:
 * a df.fail(retryable => true), retried unless non_retryable names fail); elapsed_ms since
 * the first try began; retry_after_ms the server's Retry-After (0: none);
 * draw a uniform number in [0, 1) for the jitter.
 */
extern PgdRetryVerdict pgd_retry_decide(const DfRetryPolicy *p, int attempt,
										const char *code, bool retryable_fail,
										int64 retry_after_ms, int64 elapsed_ms,
										double draw, int64 *delay_ms);

/* Is code retried under p (retry_on / non_retryable / the default set)? */
extern bool pgd_retry_classify(const DfRetryPolicy *p, const char *code);

/* The delay before attempt n+1, jitter applied. */
extern int64 pgd_retry_delay_ms(const DfRetryPolicy *p, int attempt,
								double draw);

/* --- wrappers.c --- */

/* Install the engine's wrapper hooks (from _PG_init). */
extern void pgd_orchestration_init(void);

/*
 * The HTTP worker, after completing task_id: did a retry keep the task
 * row for the next attempt (then it must not be deleted)?  Forgets it.
 */
extern bool pgd_retry_kept_task(int64 task_id);

/* --- saga.c (issue 16) --- */

/* The forward step of COMPENSATED node n completed in scope: register its undo. */
extern void pgd_saga_register(PgdGraph *g, int n, const char *scope);

/* The root failed: true when undos are registered and compensation began. */
extern bool pgd_saga_instance_failed(PgdGraph *g, const char *scope,
									 PgdOutcome outcome);

/* The undo of COMPENSATED node n ended in its scope uscope. */
extern void pgd_saga_undo_done(PgdGraph *g, int n, const char *uscope,
							   PgdOutcome outcome);

/* --- lock.c: node LOCK (issue 17) --- */
extern void pgd_lock_start(PgdGraph *g, int n, const char *scope);
extern void pgd_lock_child_done(PgdGraph *g, int n, int child,
								const char *scope, PgdOutcome outcome);
extern void pgd_lock_timer(PgdGraph *g, int n, const char *scope);

#endif /* PG_DURABLE_ORCHESTRATION_H */
