/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  pg_durable's shared-memory segment.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SHMEM_H
#define PG_DURABLE_SHMEM_H

#include "postgres.h"
#include "storage/latch.h"
#include "storage/spin.h"

#define PGD_MAX_EXECUTORS 64
#define PGD_MAX_AWAITERS 128

typedef struct PgdExecutorSlot
{
	pid_t		pid;			/* 0 when the slot is free */
	Latch	   *latch;
	bool		idle;			/* waiting for work */
	char		instance[9];	/* instance whose user SQL runs now, or "" */
	char		scope[256];		/* its execution scope (truncated) */
} PgdExecutorSlot;

/* A session waiting in df.await_instance for one instance to end. */
typedef struct PgdAwaiter
{
	Latch	   *latch;			/* NULL when the slot is free */
	char		instance[9];
} PgdAwaiter;

/* What the HTTP worker runs with, published after each (re)load of its settings. */
#define PGD_HTTP_SETTINGS_LEN 1024

typedef struct PgdShared
{
	slock_t		mutex;			/* protects everything but the CV */
	pid_t		launcher_pid;	/* 0 when no launcher runs */
	Latch	   *launcher_latch; /* the launcher's process latch, or NULL */
	PgdExecutorSlot executors[PGD_MAX_EXECUTORS];
	PgdAwaiter	awaiters[PGD_MAX_AWAITERS]; /* sessions in df.await_instance */
	pid_t		http_pid;		/* the HTTP worker, 0 when none runs */
	Latch	   *http_latch;
	char		http_settings[PGD_HTTP_SETTINGS_LEN];	/* "" when none runs */
} PgdShared;

extern PgdShared *pgd_shared;

#endif							/* PG_DURABLE_SHMEM_H */
