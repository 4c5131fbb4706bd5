/*-------------------------------------------------------------------------
 *
 * saga_resume.c
 *	  df.compensate(id) (docs/design/sagas.md §7): an instance
 *	  whose compensation an undo failing for good stopped (on_undo_failure
 *	  'stop': the instance 'failed', the remaining undos registered) runs
 *	  again once the cause is fixed; an instance a plain df.cancel ended
 *	  runs the undos it had registered (also df.cancel(id, compensate =>
 *	  true) of an instance that had ended so).
 *
 * In one transaction: the instance's df.instances row is locked and must
 * be 'failed' or 'cancelled' without a runs row, with an undo that failed
 * or is left to run; it becomes
 * 'running' with a new runs row (the submitter, label, database and
 * idempotency key of df.instances, the owner's df.vars as they are now: a
 * variable may have been the cause); the undos that failed, and those the
 * end of the instance interrupted, are registered again; an
 * instance_resumed event goes to the history; and each compensation they
 * belonged to goes on, the failed undo first (it is the latest
 * registered).  The instance then ends as its compensation ends.
 *
 * Locks: the df.instances row, then the new runs row
 * (docs/design/architecture.md §5: the runs row is the instance's lock; nobody
 * else holds a new one).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/identity.h"
#include "engine/apply.h"
#include "engine/scope.h"
#include "store/store.h"
#include "orchestration/orchestration.h"
#include "orchestration/saga_internal.h"

void
pgd_saga_resume(const char *instance_id)
{
	char *problem;

	if (!pgd_saga_try_resume(instance_id, &problem))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("df.compensate: %s", problem)));
}

bool
pgd_saga_try_resume(const char *instance_id, char **problem)
{
	PgdGraph  *g;
	PgdRunInfo run;
	char	 **owners;
	char	  *refused = NULL;
	int		   n;

	if ((*problem = pgd_store_instance_resume(instance_id)) != NULL)
		return false;
	if (!pgd_store_load_run(instance_id, &run) ||
		(refused = pgd_identity_problem(run.submitted_by)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("df.compensate: instance %s cannot run again",
						instance_id),
				 errdetail("%s",
						   refused ? refused : "its runs row is missing")));
	if (!pgd_lock_target(instance_id, &run, PGD_INSTANCE_RUNNING, NULL, NULL,
						 &g, NULL))
		elog(ERROR, "df.compensate: instance %s did not resume", instance_id);
	n = pgd_store_undo_requeue(instance_id, instance_id, true, &owners);
	if (n == 0)
	{
		/*
		 * Nothing was interrupted or failed: a cancel ended the instance
		 * before any compensation began.  The instance's own compensation
		 * takes its registered undos.
		 */
		owners[0] = NULL;
		n = 1;
	}
	pgd_store_event_add(instance_id, "instance_resumed", NULL,
						pgd_root_scope(instance_id, 1), 0,
						pgd_event_detail("undos", psprintf("%d", n)));
	for (int i = 0; i < n; i++)
	{
		const char *owner = owners[i];
		bool		seen = false;
		PgdComp		c;

		for (int j = 0; j < i; j++)
			if ((owners[j] == NULL) == (owner == NULL) &&
				(owner == NULL || strcmp(owners[j], owner) == 0))
				seen = true;
		if (seen)
			continue;
		pgd_saga_comp_of(g, owner ? owner : pgd_root_scope(instance_id, 1),
						 &c);
		pgd_saga_advance(g, &c);
	}
	pgd_store_flush();
	return true;
}
