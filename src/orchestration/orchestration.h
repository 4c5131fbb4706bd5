/*-------------------------------------------------------------------------
 *
 * orchestration.h
 *	  The failure-handling wrapper nodes (docs/design/failure-handling.md): the
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
#include "store/types.h"
#include "graph/orch_config.h"
#include "steps/step_sql.h"

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

/* --- dispatch.c: the engine's wrapper hooks, by node type --- */

/* Install the engine's wrapper hooks (from _PG_init). */
extern void pgd_orchestration_init(void);

/* --- wrappers.c: FAIL, TIMEOUT, RETRY and CATCH --- */
extern void pgd_fail_start(PgdGraph *g, int n, const char *scope);
extern void pgd_timeout_start(PgdGraph *g, int n, const char *scope);
extern void pgd_timeout_child_done(PgdGraph *g, int n, int child,
								   const char *scope, PgdOutcome outcome);
extern void pgd_timeout_fired(PgdGraph *g, int n, const char *scope);
extern void pgd_retry_start(PgdGraph *g, int n, const char *scope);
extern void pgd_retry_child_done(PgdGraph *g, int n, int child,
								 const char *scope, PgdOutcome outcome);
extern void pgd_retry_timer(PgdGraph *g, int n, const char *scope);
extern void pgd_catch_child_done(PgdGraph *g, int n, int child,
								 const char *scope, PgdOutcome outcome);

/*
 * The HTTP worker, after completing task_id: did a retry keep the task
 * row for the next attempt (then it must not be deleted)?  Forgets it.
 */
extern bool pgd_retry_kept_task(int64 task_id);

/* --- saga.c --- */

/* The forward step of COMPENSATED node n completed in scope: register its undo. */
extern void pgd_saga_register(PgdGraph *g, int n, const char *scope);

/* The root failed: true when undos are registered and compensation began. */
extern bool pgd_saga_instance_failed(PgdGraph *g, const char *scope,
									 PgdOutcome outcome);

/* The undo of COMPENSATED node n ended in its scope uscope. */
extern void pgd_saga_undo_done(PgdGraph *g, int n, const char *uscope,
							   PgdOutcome outcome);

/*
 * The body of SAGA saga (run in scope) failed with outcome: true when its
 * compensation began (undos were registered in it, or it has an
 * on_compensated); false: the SAGA fails with outcome.
 */
extern bool pgd_saga_body_failed(PgdGraph *g, int saga, const char *scope,
								 PgdOutcome outcome);

/* The on_compensated step of SAGA saga ended: so does the SAGA. */
extern void pgd_saga_compensated_done(PgdGraph *g, int saga, const char *scope,
									  PgdOutcome outcome);

/* The operations of COMPENSATED and SAGA nodes (dispatch.c's table). */
extern void pgd_saga_start(PgdGraph *g, int n, const char *scope);
extern void pgd_compensated_child_done(PgdGraph *g, int n, int child,
									   const char *scope, PgdOutcome outcome);
extern void pgd_saga_child_done(PgdGraph *g, int n, int child,
								const char *scope, PgdOutcome outcome);

/* The branch_lost hook: the undos of a losing RACE branch run. */
extern bool pgd_saga_branch_lost(PgdGraph *g, int race, int loser,
								 const char *loser_scope);

/*
 * The join_fails_fast hook: in a graph with sagas (a COMPENSATED or SAGA
 * node), a failing JOIN branch cancels the others at once.
 */
extern bool pgd_saga_join_fails_fast(PgdGraph *g, int join);

/* df.compensate: a compensation stopped by a failed undo goes on (saga_resume.c). */
extern void pgd_saga_resume(const char *instance_id);
/* The same, false with *problem when the instance has nothing to resume. */
extern bool pgd_saga_try_resume(const char *instance_id, char **problem);

/*
 * A failure of wrapper or step n in scope that the nearest df.retry may
 * take over (wrappers.c): true when the next attempt is scheduled.
 */
extern bool pgd_wrapper_retry_failed(PgdGraph *g, int n, const char *scope,
									 PgdOutcome *outcome);

/* --- breaker_node.c: the BREAKER node --- */
extern void pgd_breaker_node_start(PgdGraph *g, int n, const char *scope);
extern void pgd_breaker_node_done(PgdGraph *g, int n, const char *scope,
								  PgdOutcome outcome);

/* --- map.c: node MAP, df.map --- */

/* MAP node n starts in scope: its query runs. */
extern void pgd_map_start(PgdGraph *g, int n, const char *scope);

/* The query or a child of MAP node n (running in scope) ended with outcome. */
extern void pgd_map_child_done(PgdGraph *g, int n, int child,
							   const char *scope, PgdOutcome outcome);

/*
 * Step n, run in scope, is the query of a MAP in lanes mode: *sink is where
 * its rows go (df_internal.map_rows), for pgd_set_row_sink.
 */
extern bool pgd_map_row_sink(const PgdGraph *g, int n, const char *scope,
							 PgdRowSink *sink);

/* --- limits.c: node LIMIT --- */
extern void pgd_limit_start(PgdGraph *g, int n, const char *scope);
extern void pgd_limit_timer(PgdGraph *g, int n, const char *scope);
extern void pgd_limit_child_done(PgdGraph *g, int n, const char *scope,
								 PgdOutcome outcome);

/* --- events.c --- */

/* PUBLISH or EVENT node n starts in scope. */
extern void pgd_events_start(PgdGraph *g, int n, const char *scope);

/* The timeout of EVENT node n fell due. */
extern void pgd_events_timer(PgdGraph *g, int n, const char *scope);

/* A deliver task: hand the instance's EVENT waits the events they match. */
extern void pgd_events_deliver(PgdGraph *g);
/* --- lock.c: node LOCK --- */
extern void pgd_lock_start(PgdGraph *g, int n, const char *scope);
extern void pgd_lock_child_done(PgdGraph *g, int n, int child,
								const char *scope, PgdOutcome outcome);
extern void pgd_lock_timer(PgdGraph *g, int n, const char *scope);

/* task_node.c: node TASK, a step run by an external worker */
#define PGD_TASK_MAX_PAYLOAD	(1024 * 1024)
#define PGD_TASK_MAX_RESULT		(1024 * 1024)
#define PGD_TASK_LEASE_ATTEMPTS 3

typedef enum PgdTaskEnd
{
	PGD_TASK_END_DONE,	 /* the node completed or failed for good */
	PGD_TASK_END_RETRY,	 /* a df.retry keeps the task for its next attempt */
	PGD_TASK_END_NOT_LIVE /* the node was no longer wanted */
} PgdTaskEnd;

struct PgdExternalTask;
extern void		  pgd_task_node_start(PgdGraph *g, int n, const char *scope);
/* the end of a locked external task, through the engine */
extern PgdTaskEnd pgd_task_node_end(const struct PgdExternalTask *t,
									PgdOutcome outcome);
/* up to max expired leases (of queue, or of all when NULL); how many seen */
extern int		  pgd_task_sweep(const char *queue, int max);

#endif /* PG_DURABLE_ORCHESTRATION_H */
