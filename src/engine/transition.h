/*-------------------------------------------------------------------------
 *
 * transition.h
 *	  The pure part of the state machine (transition.c): given a node, what
 *	  happened to it and the states of its children, what happens next.
 *
 * Nothing here reads or writes a table: the driver (apply.c) reads what a
 * decision needs through the store, calls these functions, and writes what
 * they decided through the store.  So each rule of docs/design/architecture.md
 * §6 is a function of its inputs that can be read, and tested, on its own:
 *
 *	 THEN	left ok -> start right; left failed or right done -> THEN done
 *	 IF		condition ok -> start the arm its truthiness picks; arm done ->
 *			IF done; condition failed -> IF failed
 *	 JOIN	one fewer branch running; the last one finishes the JOIN:
 *			failed with "JOIN branch <i> failed: ..." if any branch failed
 *			(the first in branch order), else the array of branch results
 *	 RACE	the first finisher decides; the other branch is abandoned
 *	 LOOP	body ok -> while-condition, or the next iteration; condition
 *			true -> next iteration, false -> LOOP done with the last body
 *			result; a failure fails the LOOP, except a body's with an error
 *			code under continue_on_failure: the next iteration, without the
 *			condition; df.break() inside ends it
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_TRANSITION_H
#define PG_DURABLE_TRANSITION_H

#include "postgres.h"

#include "common/json.h"
#include "engine/graph_cache.h"
#include "store/types.h"

/* What starting a node does, besides marking it running. */
typedef enum PgdStartAction
{
	PGD_START_STEP,		 /* a SQL leaf: a step task */
	PGD_START_HTTP,		 /* an HTTP leaf: a task for the HTTP worker */
	PGD_START_TIMER,	 /* SLEEP, WAIT_SCHEDULE, SIGNAL: timers.c */
	PGD_START_LEFT,		 /* THEN: its left child, in its scope */
	PGD_START_CONDITION, /* IF: its condition node, in its scope */
	PGD_START_IF_ROWS,	 /* IF without a condition node: df.if_rows */
	PGD_START_BRANCHES,	 /* JOIN: a counter, then every branch in a
								 * scope of its own */
	PGD_START_RACE,		 /* RACE: the left branch, then the right one
								 * unless the left decided the race */
	PGD_START_LOOP,		 /* LOOP: its state, then its body */
	PGD_START_BREAK,	 /* BREAK: unwind to the nearest loop */
	PGD_START_WRAPPER, /* RETRY, TIMEOUT, CATCH, FAIL, COMPENSATED: the wrapper
								 * hooks (orchestration/) */
	PGD_START_UNSUPPORTED /* a type this engine cannot run: it fails */
} PgdStartAction;

extern PgdStartAction pgd_start_action(const PgdNode *node);

/* RETRY, TIMEOUT, CATCH, FAIL: the nodes the wrapper hooks run. */
extern bool pgd_is_wrapper(const PgdNode *node);

/* SQL, HTTP, HTTP_MULTIPART, TASK: the steps a retry policy covers. */
extern bool pgd_is_step(const PgdNode *node);

/*
 * The attempt_timeout of the nearest df.retry above step n, in
 * milliseconds, or 0 when it has none (each attempt of the step is bounded:
 * statement_timeout for SQL, the transfer's timeout for HTTP).
 */
extern int64 pgd_attempt_timeout_ms(const PgdGraph *g, int n);

/* How a parent reacts when one of its children finished. */
typedef enum PgdReactionKind
{
	PGD_REACT_START,		  /* start node `next` in the parent's scope */
	PGD_REACT_COMPLETE,		  /* the parent completes with `outcome` */
	PGD_REACT_JOIN_COUNT,	  /* one JOIN branch fewer running */
	PGD_REACT_RACE_DECIDED,	  /* the child decided the RACE */
	PGD_REACT_LOOP_CONDITION, /* run the while-condition `next` in the
								 * body's scope */
	PGD_REACT_LOOP_AGAIN,	  /* the loop's next iteration */
	PGD_REACT_LOOP_END,		  /* the loop ends with `outcome` */
	PGD_REACT_LOOP_END_LAST,  /* the loop ends with its last body result */
	PGD_REACT_WRAPPER,		  /* a wrapper's child: the wrapper hooks */
	PGD_REACT_INVALID		  /* the parent cannot have children */
} PgdReactionKind;

typedef struct PgdReaction
{
	PgdReactionKind kind;
	int				next;	 /* START, LOOP_CONDITION */
	PgdOutcome		outcome; /* COMPLETE, LOOP_END */
} PgdReaction;

extern PgdReaction pgd_react(const PgdGraph *g, int parent, int child,
							 PgdOutcome outcome);

/* Truthiness of a condition's result (reference §1.7), JSON or plain text. */
extern bool pgd_result_truthy(const char *result);

/* df.if_rows: does the named result have rows?  Sets *error when it cannot tell. */
extern bool pgd_if_rows_decide(const PgdNode *node,
							   const DfJson *visible_results, char **error);

/* JOIN branches: how many, and the node of branch i (0-based). */
extern int pgd_join_width(const PgdNode *join);
extern int pgd_join_branch(const PgdNode *join, int i);

/*
 * The outcome of a JOIN whose branches have all finished, from their
 * statuses and results (arrays in branch order).
 */
extern PgdOutcome pgd_join_outcome(const PgdNode *join,
								   const PgdNodeStatus *statuses,
								   char *const *results);

/* RACE: the branch that did not win, and the race's outcome. */
extern int		  pgd_race_loser(const PgdNode *race, int winner);
extern PgdOutcome pgd_race_outcome(const PgdNode *race, int winner,
								   PgdOutcome outcome);

/* When the next loop iteration may begin. */
typedef enum PgdLoopPace
{
	PGD_LOOP_NOW,	  /* at once */
	PGD_LOOP_LATER,	  /* at *due (a timer) */
	PGD_LOOP_TOO_MANY /* never: the loop fails */
} PgdLoopPace;

/*
 * The backstop of a loop scope's iterations: 2^23, about eighty years of
 * five-minute ticks (the reference's since 0.2.8).
 */
#define PGD_MAX_LOOP_ITERATIONS 8388608

extern PgdLoopPace pgd_loop_pace(int64 iterations, TimestampTz started,
								 TimestampTz now, int floor_ms,
								 TimestampTz *due);
extern PgdOutcome  pgd_loop_limit_failure(void);

/* Does a continue_on_failure loop go on after its body failed so? */
extern bool pgd_loop_consumes_failure(PgdOutcome outcome);

/* The nearest LOOP above node n, or -1; and the failure of a break outside any. */
extern int		  pgd_enclosing_loop(const PgdGraph *g, int n);
extern PgdOutcome pgd_break_outside_loop(void);

/* A node type the engine cannot run. */
extern PgdOutcome pgd_unsupported_node(const PgdNode *node);

/*
 * Is node n, run in scope, still wanted, given the rows (id, status,
 * stamp) of n and its ancestors?  It must be running with the stamp of
 * this scope, no ancestor may have finished (a decided RACE above it, a
 * failed instance), and every ancestor must be stamped with this scope or
 * one enclosing it: an ancestor stamped otherwise has moved on to another
 * execution (the next generation of a loop around it), and n's is stale.
 */
extern bool pgd_live(const PgdGraph *g, int n, const char *scope, int rows,
					 char *const *ids, const PgdNodeStatus *statuses,
					 char *const *stamps);

#endif /* PG_DURABLE_TRANSITION_H */
