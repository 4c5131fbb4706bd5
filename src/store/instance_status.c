/*-------------------------------------------------------------------------
 *
 * instance_status.c
 *	  The one writer of an instance's status (df.instances, and the runs
 *	  row at the start), which asserts in a cassert build that the
 *	  previous status is one the change allows: pending -> running (a
 *	  start, held_start.c), pending or running -> an end
 *	  (pgd_store_instance_finished, instances.c), failed -> running
 *	  (df.compensate's resume, sagas.c).  A file of its own, so that the
 *	  files that change a status call it without calling each other.
 *
 * Locks: the caller holds the instance's runs row (or, for a resume, its
 * df.instances row); the rows are updated by their keys.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/store.h"
#include "store/store_internal.h"

/*
 * The status the engine's own state gives the instance: its runs row's, as
 * written (a start held in a batch is still pending there); without a
 * runs row, ended (as completed).
 */
#ifdef USE_ASSERT_CHECKING
static PgdInstanceStatus
engine_status(const char *instance_id)
{
	PgdRunInfo run;

	if (!store_read_run_row(instance_id, &run))
		return PGD_INSTANCE_COMPLETED;
	return run.status;
}
#endif

/*
 * The one writer of an instance's status.  An instance goes pending ->
 * running (held_start.c) -> an end (pgd_store_instance_finished); an ended
 * one runs again only when df.compensate resumes it (sagas.c).  The runs
 * row says running from the start on and is deleted at the end, so only
 * the start writes it here.
 */
bool
pgd_store_set_instance_status(const char *instance_id, int from_mask,
							  PgdInstanceStatus to)
{
	const char *name = pgd_instance_status_name(to);
	int			done;

#ifdef USE_ASSERT_CHECKING
	{
		PgdInstanceStatus from = engine_status(instance_id);

		Assert((from_mask & PGD_STATUS_MASK(from)) != 0 ||
			   ((PGD_INSTANCE_ENDED & PGD_STATUS_MASK(from)) != 0 &&
				(from_mask & PGD_INSTANCE_ENDED) != 0));
	}
#endif
	if (to == PGD_INSTANCE_RUNNING)
	{
		bool found = RUN(STMT_INSTANCE_STARTED, instance_id) > 0;

		if ((from_mask & PGD_STATUS_MASK(PGD_INSTANCE_PENDING)) != 0)
			RUN(STMT_RUN_STARTED, instance_id);
		return found;
	}
	done = store_finish_instance_row(instance_id, name);
	if (done >= 0)
		return done > 0;
	return RUN(STMT_INSTANCE_FINISHED, instance_id, name) > 0;
}
