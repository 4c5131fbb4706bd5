/*-------------------------------------------------------------------------
 *
 * breaker_admission.h
 *	  The circuit breakers as the engine uses them (breaker_admission.c): admit a
 *	  call, record its outcome, and persist every change of state, around
 *	  the shared-memory machine of core/breaker_state.h
 *	  (docs/design/breakers.md).
 *
 * Everything here runs inside SPI, in the transaction of the claim, the
 * completion or the transition that admits or records the call.
 *
 * Locks: the breakers' LWLock (core/breaker_state.c), never held across SPI;
 * the persisted transitions are inserts only (no row is locked).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_ENGINE_BREAKER_ADMISSION_H
#define PG_DURABLE_ENGINE_BREAKER_ADMISSION_H

#include "postgres.h"

#include "core/breaker_state.h"
#include "store/types.h"

/*
 * May a call go through breaker name now?  True with *t filled when it
 * may; false with *refusal the step's failure (kind circuit_open, its
 * retry_after_ms the time until the breaker can let a call through; or
 * the breaker does not exist).
 */
extern bool pgd_breaker_admit_call(const char *name, Oid role,
								   PgdBreakerTicket *t, PgdOutcome *refusal);

/*
 * The call admitted with t ended with outcome: it counts as failed when
 * its code matches the breaker's record_on (for a completed HTTP step,
 * "http:<status>" of its envelope), and as slow past slow_call_duration.
 */
extern void pgd_breaker_record_call(const PgdBreakerTicket *t,
									const PgdOutcome	   *outcome);

#endif /* PG_DURABLE_ENGINE_BREAKER_ADMISSION_H */
