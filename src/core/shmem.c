/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared-memory segment: who the launcher and the executors are, so
 *	  that whoever makes work runnable can wake them, and the latches of the
 *	  sessions waiting in df.await_instance; and the circuit breakers'
 *	  table (core/breaker_state.c), which has a segment and an LWLock of its own.
 *
 * The segment is requested in the shmem_request hook and attached in the
 * shmem_startup hook under AddinShmemInitLock.  Its fields are protected by
 * the spinlock it contains; nobody holds that spinlock across anything but a
 * few loads and stores; latches are set after releasing it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "core/breaker_state.h"
#include "core/settings.h"
#include "core/shmem.h"

PgdShared *pgd_shared = NULL;

void
pgd_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(PgdShared)));
	pgd_breaker_shmem_request();
}

void
pgd_shmem_startup(void)
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	pgd_shared = ShmemInitStruct("pg_durable", sizeof(PgdShared), &found);
	if (!found)
	{
		memset(pgd_shared, 0, sizeof(PgdShared));
		SpinLockInit(&pgd_shared->mutex);
		SpinLockInit(&pgd_shared->ready_mutex);
		SpinLockInit(&pgd_shared->admission_mutex);
		SpinLockInit(&pgd_shared->batch_mutex);
		/* after a restart the ring is empty: look at the queue first */
		pgd_shared->scan_needed = true;
		pgd_shared->bus_sweep = true;
		pgd_shared->start_sweep = true;
		pgd_shared->next_due = DT_NOEND;
	}
	pgd_breaker_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}
