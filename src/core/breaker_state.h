/*-------------------------------------------------------------------------
 *
 * breaker_state.h
 *	  The circuit breakers' state machine in shared memory (breaker_state.c,
 *	  docs/design/breakers.md): one fixed-size table of breakers
 *	  shared by every process, each with its count window, its state and its
 *	  half-open permits.
 *
 *	 CLOSED	   calls go through; each outcome enters the window (the last
 *			   window_size calls).  With at least minimum_calls in it and the
 *			   failure rate (or the slow-call rate) at its threshold -> OPEN.
 *	 OPEN	   calls are refused (not made, not recorded) until open_until;
 *			   the first call after it -> HALF_OPEN.
 *	 HALF_OPEN half_open_calls permits, each expiring after wait_duration
 *			   (a lost probe counts as failed): all succeed -> CLOSED with
 *			   an empty window; one fails, is slow or expires -> OPEN.
 *
 * Nothing here touches a table: each change of state is returned as a
 * PgdBreakerTransition, which the caller persists (engine/breaker_admission.c); a
 * breaker not in the table is installed from what the caller read.  The
 * table is the truth for the state across a restart, shared memory for the
 * window (lost on a restart, or when the slot is reused: past
 * PGD_MAX_BREAKERS breakers in use the least recently used slot is given to
 * the newcomer, and the evicted breaker comes back from its persisted state
 * with an empty window).
 *
 * Locks: one LWLock (tranche "pg_durable breakers") over the whole table,
 * held exclusively for the few stores of an admission or a record, shared
 * to read; never across anything that can throw or wait.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_CORE_BREAKER_STATE_H
#define PG_DURABLE_CORE_BREAKER_STATE_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "graph/orch_config.h"

#define PGD_MAX_BREAKERS		  64
#define PGD_BREAKER_WINDOW_MAX	  1000 /* window_size's maximum */
#define PGD_BREAKER_PROBES_MAX	  100  /* half_open_calls' maximum */
#define PGD_BREAKER_NAME_LEN	  (DF_BREAKER_NAME_MAX + 1)
#define PGD_BREAKER_RECORD_ON_LEN 512

typedef enum PgdBreakerState
{
	PGD_BREAKER_CLOSED = 0,
	PGD_BREAKER_OPEN,
	PGD_BREAKER_HALF_OPEN
} PgdBreakerState;

/* A breaker's definition, as df.create_circuit_breaker stored it. */
typedef struct PgdBreakerSettings
{
	int	  failure_rate_threshold; /* percent, 1..100 */
	int	  minimum_calls;
	int	  window_size;
	int64 wait_ms;
	int	  half_open_calls;
	int64 slow_call_ms; /* -1: no slow-call rule */
	int	  slow_call_rate_threshold;
	char  record_on[PGD_BREAKER_RECORD_ON_LEN]; /* patterns, comma-separated */
} PgdBreakerSettings;

/* What an admitted call carries until its outcome is recorded. */
typedef struct PgdBreakerTicket
{
	bool		active; /* false: no breaker (nothing to record) */
	int			slot;
	uint64		epoch; /* the slot's state when admitted */
	bool		probe;
	uint64		probe_id;
	TimestampTz started;
	Oid			role; /* whose call: the instance's submitter */
	char		name[PGD_BREAKER_NAME_LEN];
} PgdBreakerTicket;

/* A change of state, for the caller to persist. */
typedef struct PgdBreakerTransition
{
	PgdBreakerState from;
	PgdBreakerState to;
	TimestampTz		at;
	TimestampTz		opened_at; /* 0 when not open */
	TimestampTz		open_until;
	double			failure_rate; /* percent of the window, -1: none */
	int				calls;
	const char	   *reason; /* a static string */
} PgdBreakerTransition;

/* The changes one call made, oldest first (OPEN, then HALF_OPEN ...). */
#define PGD_BREAKER_MAX_CHANGES 4
typedef struct PgdBreakerChanges
{
	int					 n;
	PgdBreakerTransition t[PGD_BREAKER_MAX_CHANGES];
} PgdBreakerChanges;

typedef enum PgdBreakerAdmit
{
	PGD_BREAKER_ADMITTED,
	PGD_BREAKER_REFUSED,   /* open: *until says till when */
	PGD_BREAKER_NOT_LOADED /* not in shared memory: install it first */
} PgdBreakerAdmit;

/* What df.circuit_breakers shows of one breaker. */
typedef struct PgdBreakerView
{
	PgdBreakerState state;
	double			failure_rate; /* -1: no call in the window */
	double			slow_rate;
	int				calls;
	TimestampTz		opened_at; /* 0: none */
	TimestampTz		open_until;
	int				permits_left; /* -1 unless half-open */
} PgdBreakerView;

extern Size pgd_breaker_shmem_size(void);
extern void pgd_breaker_shmem_request(void);
extern void pgd_breaker_shmem_startup(void);

extern const char *pgd_breaker_state_name(PgdBreakerState s);
extern bool pgd_breaker_state_from_name(const char *name, PgdBreakerState *s);

/* The slot of breaker name of database db, or -1. */
extern int pgd_breaker_find(Oid db, const char *name);

/*
 * Install breaker name with its definition and persisted state (a slot
 * already holding it is kept as it is); returns its slot.
 */
extern int pgd_breaker_install(Oid db, const char *name,
							   const PgdBreakerSettings *s,
							   PgdBreakerState state, TimestampTz opened_at,
							   TimestampTz open_until);

/* The definition of the breaker in slot (it must be name's). */
extern bool pgd_breaker_settings(int slot, const char *name,
								 PgdBreakerSettings *s);

/* May a call go through breaker name in slot at now? */
extern PgdBreakerAdmit pgd_breaker_admit(int slot, Oid db, const char *name,
										 TimestampTz now, PgdBreakerTicket *t,
										 PgdBreakerChanges *ch,
										 TimestampTz	   *until);

/*
 * The admitted call of t ended at now: failed (its code matched record_on)
 * or slow.  An outcome of an earlier state (the breaker changed since the
 * admission) is not counted.
 */
extern void pgd_breaker_record(const PgdBreakerTicket *t, bool failed,
							   bool slow, TimestampTz now,
							   PgdBreakerChanges *ch);

/*
 * The transaction that admitted probe t rolled back: its permit goes back
 * (nothing when t is no probe or its state is over).
 */
extern void pgd_breaker_release(const PgdBreakerTicket *t);

/* df.reset_circuit_breaker: CLOSED with an empty window (if installed). */
extern void pgd_breaker_reset(Oid db, const char *name, TimestampTz now,
							  PgdBreakerChanges *ch);

/* df.drop_circuit_breaker: the slot is freed. */
extern void pgd_breaker_forget(Oid db, const char *name);

/* The state the next call would find at now; false when not installed. */
extern bool pgd_breaker_view(Oid db, const char *name, TimestampTz now,
							 PgdBreakerView *v);

#endif /* PG_DURABLE_CORE_BREAKER_STATE_H */
