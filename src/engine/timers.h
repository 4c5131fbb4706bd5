/*-------------------------------------------------------------------------
 *
 * timers.h
 *	  Nodes that wait (timers.c): SLEEP, WAIT_SCHEDULE and SIGNAL.
 *
 * Starting such a node registers what it waits for (a timer task, a
 * signal wait) or finds that it is done at once; a timer falling due says
 * how the node ends.  Neither calls the transition code: they return the
 * outcome and the driver (apply.c) completes the node.
 *
 * Locks: the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_TIMERS_H
#define PG_DURABLE_TIMERS_H

#include "postgres.h"

#include "engine/graph_cache.h"
#include "store/types.h"

/*
 * Start a SLEEP, WAIT_SCHEDULE or SIGNAL node in scope.  Returns true when
 * the node is done at once (a signal was buffered, the config is bad) with
 * *outcome; else it now waits.
 */
extern bool pgd_timer_start(const PgdGraph *g, int n, const char *scope,
							PgdOutcome *outcome);

/*
 * A timer of node n fell due (the caller checked that n is live in scope).
 * Returns true when the node is done with *outcome; false when there is
 * nothing to do (its signal was delivered meanwhile).
 */
extern bool pgd_timer_fired(const PgdGraph *g, int n, const char *scope,
							PgdOutcome *outcome);

/* The result of a SIGNAL node: {"signal_name":..,"timed_out":..,"data":..}. */
extern char *pgd_signal_result(const char *name, bool timed_out,
							   const char *payload);

#endif /* PG_DURABLE_TIMERS_H */
