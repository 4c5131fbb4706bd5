/*-------------------------------------------------------------------------
 *
 * inbox_apply.c
 *	  The apply task of the inbox (docs/design/batches-and-inbox.md §4): the
 *	  completions of an instance that were committed while another
 *	  transaction held its runs row are applied, in the order they were
 *	  inserted, through the path a direct completion takes.
 *
 * Each completion goes through pgd_lock_target (the instance must still
 * be running and the node still live in the completion's scope), then
 * pgd_apply_complete with the attempt number set for the status_details
 * stamps, exactly as the step's own transaction would have done it: JOIN
 * counting, RACE decisions, loop generations and the wrapper hooks do not
 * know where a completion came from.  A completion whose node is no
 * longer live (its RACE lost, its scope abandoned by a TIMEOUT or a failed
 * JOIN or df.map, its instance ended, perhaps by an earlier row) changes
 * nothing but its node: its step's effects are committed, so the node
 * shows completed, or failed, with its result (inbox_record.c).
 * The rows are deleted by the transaction that applies them, so a crash
 * applies all of them or none.
 *
 * Locks: the instance's runs row, taken with SKIP LOCKED (never waits: a
 * row held elsewhere is reported, and the caller puts its task back or
 * leaves the work to another apply task of the instance); then rows of
 * that instance only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/apply.h"
#include "engine/inbox_apply.h"
#include "engine/inbox_record.h"
#include "store/store.h"

int
pgd_apply_inbox(const char *instance_id, bool *held)
{
	PgdRunInfo	   run;
	PgdInboxEntry *rows;
	bool		   locked;
	int			   n;
	int			   applied = 0;
	int			   recorded = 0;

	*held = false;
	/* an apply task whose rows another applier took: nothing to lock */
	if (!pgd_store_inbox_pending(instance_id))
		return 0;
	if (pgd_store_load_run(instance_id, &run))
	{
		pgd_store_set_run_skip(true);
		locked = pgd_store_lock_run(instance_id, NULL);
		pgd_store_set_run_skip(false);
		*held = !locked && pgd_store_run_held();
	}
	else
		locked = false;
	if (!locked)
	{
		/*
		 * held: not now; gone: the instance ended, nothing will apply them,
		 * but their nodes record them
		 */
		if (!*held)
			(void) pgd_inbox_record_ended(instance_id);
		return 0;
	}
	n = pgd_store_inbox_take(instance_id, &rows);
	for (int i = 0; i < n; i++)
	{
		PgdGraph *g;
		int		  node;

		if (!pgd_lock_target(instance_id, &run, PGD_INSTANCE_RUNNING,
							 rows[i].node_id, rows[i].scope, &g, &node))
		{
			/*
			 * its scope was abandoned, or the instance ended (perhaps by
			 * an earlier row): nothing follows from it, but its effects
			 * committed, so its node says so
			 */
			if (pgd_inbox_record(instance_id, &rows[i]))
				recorded++;
			else
				ereport(DEBUG1,
						(errmsg_internal("inbox: node %s of instance %s in scope %s is not live any more; its completion is dropped",
										 rows[i].node_id, instance_id,
										 rows[i].scope)));
			continue;
		}
		pgd_store_set_attempt(rows[i].node_id, rows[i].attempt);
		pgd_apply_complete(g, node, rows[i].scope, rows[i].outcome);
		pgd_store_set_attempt(NULL, 0);
		applied++;
	}
	if (recorded > 0)
		pgd_store_flush();
	return applied;
}
