/*-------------------------------------------------------------------------
 *
 * external_tasks.h
 *	  The store of external tasks (external_tasks.c): the TASK steps that
 *	  workers outside the server claim over SQL, with leases
 *	  (docs/guides/external-workers.md).
 *
 * Locks: see external_tasks.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STORE_EXTERNAL_TASKS_H
#define PG_DURABLE_STORE_EXTERNAL_TASKS_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* the states of an external_tasks row: ready -> leased -> ready | ended */
typedef enum PgdExternalState
{
	PGD_EXT_READY,	   /* offered to the workers of its queue */
	PGD_EXT_LEASED,	   /* a worker holds it until lease_until */
	PGD_EXT_COMPLETED, /* ended: a worker completed it */
	PGD_EXT_FAILED,	   /* ended: its last attempt failed */
	PGD_EXT_CANCELLED  /* ended: its node was no longer wanted */
} PgdExternalState;

/* One external task, as locked by pgd_store_external_lock. */
typedef struct PgdExternalTask
{
	int64			 task_id;
	char			*queue;
	char			*instance_id;
	char			*node_id;
	char			*scope;
	PgdExternalState state;
	int				 attempt;
	char			*lease_token; /* NULL when not leased */
	bool			 lease_live;  /* lease_until is in the future */
	bool			 past_deadline;
	bool			 anchored; /* its df_internal.tasks row is there */
	int				 heartbeat_s; /* 0: none */
	int				 timeout_s;	  /* 0: none */
} PgdExternalTask;

/* One claimed task, as df.claim_tasks returns it (text columns). */
typedef struct PgdClaimedTask
{
	char *task_id;
	char *lease_token;
	char *attempt;
	char *instance_id;
	char *payload;
	char *deadline; /* NULL: none */
	char *idempotency_key;
	char *traceparent;
} PgdClaimedTask;

extern const char *pgd_external_state_name(PgdExternalState s);

/* A TASK node's execution becomes a ready task of its queue (NOTIFY at commit). */
extern int64 pgd_store_external_add(const char *instance_id,
									const char *node_id, const char *scope,
									Oid submitted_by, const char *queue,
									const char *payload, int timeout_s,
									int heartbeat_s,
									const char *idempotency_key,
									const char *traceparent);

/* Its next attempt, due at 'at' (df.retry): the task id, or 0 when none. */
extern int64 pgd_store_external_retry_at(const char *instance_id,
										 const char *node_id,
										 const char *scope, TimestampTz at);

/* Lease up to max ready tasks of queue to worker; returns how many. */
extern int pgd_store_external_claim(const char *queue, const char *worker,
									int max, double lease_s,
									PgdClaimedTask **out);

/* Lock one task's row (waiting); false when there is none. */
extern bool pgd_store_external_lock(int64 task_id, PgdExternalTask *t);

/* The lease of a locked task runs extend_s more seconds from now. */
extern void pgd_store_external_extend(int64 task_id, double extend_s);

/* A locked task ends in state s. */
extern void pgd_store_external_end(int64 task_id, PgdExternalState s);

/* A locked task is offered again (its lease expired, attempts remain). */
extern void pgd_store_external_reoffer(int64 task_id);

/*
 * Up to max leased tasks whose lease or deadline has passed (of one queue,
 * or of any when queue is NULL), locked with SKIP LOCKED; their ids.
 */
extern int pgd_store_external_expired(const char *queue, int max,
									  int64 **ids);

/* Ended rows older than keep_s, and rows whose node is gone; how many. */
extern int pgd_store_external_forget(double keep_s, int max);

/* May role claim and end tasks of queue (df.grant_worker)? */
extern bool pgd_store_worker_may(Oid role, const char *queue);

#endif
