/*-------------------------------------------------------------------------
 *
 * share.c
 *	  The per-role share of the executors: while a role runs
 *	  pg_durable.max_executors_per_role SQL steps at once, its other ready
 *	  steps wait in the queue and the remaining executors serve the other
 *	  roles, so that one tenant's long steps cannot occupy every executor.
 *
 * Each executor publishes in its registry slot the role whose SQL step it
 * runs (step_role), from just before the user's statement until the step's
 * transaction has ended.  Taking that mark is the admission: it is counted
 * and set under one spinlock, so two executors cannot both take the last
 * share of a role.
 *
 * A step over its role's share is never run and never lost:
 *	 - a scan of the queue passes over the steps of the roles that hold
 *	   their whole share (store: the oldest ready task of the other roles);
 *	 - a step claimed by its id (the ring, or a scan that raced with
 *	   another executor) whose role turns out to be full is not run: the
 *	   executor rolls its claim back, which puts the task row back as it
 *	   was (same id, same attempts, no event, no retry);
 *	 - either way share_deferred is set, under the same spinlock, and the
 *	   next executor that gives a share back asks for a queue scan and
 *	   wakes an idle executor; the scan finds the waiting step once its role
 *	   is below its share again.  The 5-second safety poll covers an
 *	   executor that exits without giving its share back (its slot no longer
 *	   counts once its pid is cleared).
 * Nothing here busy-loops: a full role's steps are excluded from scans, and
 * an executor that finds only such steps sleeps as it would on an empty
 * queue.
 *
 * The share applies whether or not other roles wait.  A step cannot be
 * preempted, so a share that let a lone role take every executor could not
 * give one back when another role's work arrives during a long step, which
 * is the starvation the share exists to prevent.
 *
 * pg_durable.max_user_connections bounds the SQL steps of all roles
 * together the same way: while that many run, a scan passes over every
 * step (the role list is then the single InvalidOid, "every role") and a
 * step claimed by its id is rolled back, as above.
 *
 * Only SQL steps count (in this database or another): start, timer and
 * deliver tasks are short engine transitions, and HTTP calls run in the HTTP
 * worker.  pg_durable.workers and the admission slots of transaction_mode
 * => 'new' are not affected.
 *
 * Locks: the registry's spinlock (pgd_shared->mutex), for a loop over the
 * executor slots.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/settings.h"
#include "core/share.h"
#include "core/shmem.h"

/* The share in force now; 0 when there is none. */
static int
current_share(void)
{
	if (pgd_max_executors_per_role <= 0 ||
		pgd_max_executors_per_role >= PGD_MAX_EXECUTORS)
		return 0;
	return pgd_max_executors_per_role;
}

bool
pgd_share_take(int slot, Oid role)
{
	int	 share = current_share();
	int	 held = 0;
	int	 total = 0;
	bool ok;
	int	 i;

	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_EXECUTORS; i++)
	{
		PgdExecutorSlot *s = &pgd_shared->executors[i];

		if (i != slot && s->pid != 0 && OidIsValid(s->step_role))
		{
			total++;
			held += (s->step_role == role);
		}
	}
	ok = (share == 0 || held < share) && total < pgd_max_user_connections;
	if (ok)
		pgd_shared->executors[slot].step_role = role;
	else
		pgd_shared->share_deferred = true;
	SpinLockRelease(&pgd_shared->mutex);
	return ok;
}

bool
pgd_share_release(int slot)
{
	bool rescan = false;

	SpinLockAcquire(&pgd_shared->mutex);
	if (OidIsValid(pgd_shared->executors[slot].step_role))
	{
		pgd_shared->executors[slot].step_role = InvalidOid;
		rescan = pgd_shared->share_deferred;
		pgd_shared->share_deferred = false;
	}
	SpinLockRelease(&pgd_shared->mutex);
	return rescan;
}

int
pgd_share_full_roles(Oid *roles)
{
	int share = current_share();
	Oid held[PGD_MAX_EXECUTORS];
	int nheld = 0;
	int nfull = 0;
	int i, j;

	if (share == 0 && pgd_max_user_connections >= PGD_MAX_EXECUTORS)
		return 0;

	/*
	 * The flag is set in the same critical section that reads the marks: a
	 * share given back after it is read is given back after the flag is
	 * set, and asks for the scan that finds what this one passes over.
	 */
	SpinLockAcquire(&pgd_shared->mutex);
	for (i = 0; i < PGD_MAX_EXECUTORS; i++)
	{
		PgdExecutorSlot *s = &pgd_shared->executors[i];

		if (s->pid != 0 && OidIsValid(s->step_role))
			held[nheld++] = s->step_role;
	}
	if ((share > 0 && nheld >= share) || nheld >= pgd_max_user_connections)
		pgd_shared->share_deferred = true; /* the scan may pass over some */
	SpinLockRelease(&pgd_shared->mutex);

	/* max_user_connections SQL steps run: every role's steps wait */
	if (nheld >= pgd_max_user_connections)
	{
		roles[0] = InvalidOid;
		return 1;
	}
	if (share == 0)
		return 0;

	/* a role is full when it holds share marks; count each at its first */
	for (i = 0; i < nheld; i++)
	{
		int	 count = 0;
		bool first = true;

		for (j = 0; j < nheld; j++)
		{
			if (held[j] != held[i])
				continue;
			if (j < i)
				first = false;
			count++;
		}
		if (first && count >= share)
			roles[nfull++] = held[i];
	}
	return nfull;
}
