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

typedef struct PgdShared
{
	slock_t		mutex;			/* protects the fields below */
	pid_t		launcher_pid;	/* 0 when no launcher runs */
	Latch	   *launcher_latch; /* the launcher's process latch, or NULL */
} PgdShared;

extern PgdShared *pgd_shared;

#endif							/* PG_DURABLE_SHMEM_H */
