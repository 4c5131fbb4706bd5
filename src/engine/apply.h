/*-------------------------------------------------------------------------
 *
 * apply.h
 *	  The driver of the state machine (apply.c): it reads what a decision
 *	  of transition.c needs through the store, takes the decision, and
 *	  writes it through the store, recursively up and down the graph.
 *
 * Everything here runs inside SPI, in the transaction that consumed the
 * triggering input (a claimed task, df.cancel), with the instance's
 * df_internal.runs row locked.  A transition therefore commits together with
 * the step that caused it: there is no second transaction that could fail
 * after the first one committed (docs/design/architecture.md §5 rule 3).  Each
 * entry point writes the buffered node updates before it returns.
 *
 * Locks: only rows of the instance whose runs row the caller holds; tasks
 * claimed by others are skipped (SKIP LOCKED), never waited for.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_APPLY_H
#define PG_DURABLE_APPLY_H

#include "postgres.h"

#include "common/json.h"
#include "engine/graph_cache.h"
#include "store/store.h"
#include "store/types.h"

/*
 * The prologue of every transition on a task: lock the instance's runs
 * row, check the instance has the status 'want', load its graph and, when
 * node_id is given, find the node and check it is still live in scope.
 * run is the runs row as the claim read it (NULL: read it now).  False,
 * having changed nothing, when any of this does not hold.
 */
extern bool pgd_lock_target(const char *instance_id, const PgdRunInfo *run,
							PgdInstanceStatus want, const char *node_id,
							const char *scope, PgdGraph **g, int *n);

/* Is node n, run in scope, still wanted?  (The caller checks the instance's status.) */
extern bool pgd_node_is_live(const PgdGraph *g, int n, const char *scope);

/*
 * An instance's start (a marker or a start task), first: the submitter must
 * still be the one df.instances records and still be allowed; else the
 * instance fails before any step runs (and this returns false).
 */
extern bool pgd_submitter_still_allowed(const char *instance_id,
										Oid			submitter);

/* An instance's start, then: it is running, and so is its root. */
extern void pgd_apply_start(PgdGraph *g);

/* Node n finished in scope with outcome: record it and let its parents react. */
extern void pgd_apply_complete(PgdGraph *g, int n, const char *scope,
							   PgdOutcome outcome);

/* A timer of node n fell due: a wait ends, or a loop's next iteration begins. */
extern void pgd_apply_timer(PgdGraph *g, int n, const char *scope);

/* Signals arrived: hand them to the instance's waits. */
extern void pgd_apply_deliver(PgdGraph *g);

/*
 * df.cancel: the instance becomes cancelled (unless it has ended) and its
 * engine state goes.  With compensate, a running instance with undos
 * registered compensates instead: its body is abandoned, its
 * undos run and it ends 'compensated'.  The caller has not locked
 * anything; false when the instance has no runs row any more.
 */
extern bool pgd_apply_cancel(const char *instance_id, const char *reason,
							 bool compensate);

/*
 * An instance has ended (the caller set its status and holds its runs
 * lock): remove its engine state, interrupt whatever of it still runs, and
 * wake df.await_instance at commit.
 */
extern void pgd_apply_end_instance(const char *instance_id);

/*
 * The wrapper nodes RETRY, TIMEOUT, CATCH and FAIL are run by
 * orchestration/, which sits below the engine in the layer order: it
 * installs these hooks when the library loads, and the driver calls them
 * in the transition, under the runs lock.
 *	 start		 wrapper n starts in scope (it is marked running)
 *	 child_done	 a child of wrapper n finished; scope is n's
 *	 step_failed a SQL or HTTP step failed: true when a policy took the
 *				 failure over (a retry is scheduled, the node stays
 *				 running); else the failure goes on with *outcome, which
 *				 the hook may have changed
 *	 timer		 a timer of wrapper n fell due
 */
typedef struct PgdWrapperHooks
{
	void (*start)(PgdGraph *g, int n, const char *scope);
	void (*child_done)(PgdGraph *g, int n, int child, const char *scope,
					   PgdOutcome outcome);
	bool (*step_failed)(PgdGraph *g, int n, const char *scope,
						PgdOutcome *outcome);
	void (*timer)(PgdGraph *g, int n, const char *scope);
	/*
	 * instance_failed: the root failed in scope with outcome; true when
	 * the hook took the end of the instance over (a saga compensates:
	 * the instance stays running while its undos run)
	 */
	bool (*instance_failed)(PgdGraph *g, const char *scope,
							PgdOutcome outcome);
	/*
	 * branch_lost: branch loser of RACE race lost in loser_scope (already
	 * abandoned); true when the hook compensates it first (undos were
	 * registered there), the race then ending by pgd_apply_race_finish
	 */
	bool (*branch_lost)(PgdGraph *g, int race, int loser,
						const char *loser_scope);
	/*
	 * join_fails_fast: does a failing branch of JOIN join cancel the
	 * others at once (in a saga), rather than the JOIN waiting for them?
	 */
	bool (*join_fails_fast)(PgdGraph *g, int join);
	/* deliver: a deliver task, after the signals: the EVENT waits */
	void (*deliver)(PgdGraph *g);
} PgdWrapperHooks;

extern void pgd_set_wrapper_hooks(const PgdWrapperHooks *hooks);

/* For the hooks: start node n, or end it with outcome, inside a transition. */
extern void pgd_apply_start_node(PgdGraph *g, int n, const char *scope);
extern void pgd_apply_finish_node(PgdGraph *g, int n, const char *scope,
								  PgdOutcome outcome);

/*
 * For the hooks: the instance ends with status, and an event of kind with
 * detail (NULL: none) goes to its history; its engine state goes.
 */
extern void pgd_apply_end_with(PgdGraph *g, const char *scope,
							   PgdInstanceStatus status, const char *kind,
							   const char *detail);

/*
 * For the hooks: RACE race, whose branch loser lost and was compensated,
 * ends with its winner's outcome (as its winner's end would have ended it).
 */
extern void pgd_apply_race_finish(PgdGraph *g, int race, int loser,
								  const char *pscope);

/* A scope is abandoned: its tasks and waits go, its running steps are interrupted. */
extern void pgd_apply_abandon_scope(PgdGraph *g, const char *scope);

/* The named results a node in scope sees: its own scope's, then each enclosing scope's. */
extern DfJson *pgd_visible_results(const char *instance_id, const char *scope);

/* The variables a step sees: the captured ones plus sys_instance_id and sys_label. */
extern DfJson *pgd_step_vars(const char *instance_id, const PgdRunInfo *run);

#endif /* PG_DURABLE_APPLY_H */
