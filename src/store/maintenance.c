/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *	  The store's functions for maintenance (worker/maintenance.c) and
 *	  df.check() (store.h; the statements are in statements.c's table):
 *	  the start sweep that gives every pending instance without a start
 *	  task one (a lost marker made good: tasks.c, "Starts by marker"), the
 *	  count of ready work nobody takes, retention, and reconciliation: the
 *	  problems df.check() reports and their repairs.
 *
 * Locks: the sweep and the counts scan across instances without locking
 * rows (the stale-ready count takes df_internal.runs first: runs_first);
 * retention deletes ended instances' rows; each repair runs under its
 * instance's runs row, and the drop of a finished instance's tasks skips
 * rows another transaction holds (SKIP LOCKED).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/spi.h"
#include "core/wake.h"
#include "store/store.h"
#include "store/store_internal.h"

/* ---------------------------------------------------------------------
 * The start sweep and ready work nobody takes
 * ---------------------------------------------------------------------
 */

/*
 * One batch of the start sweep: the next max runs rows after the id after
 * (in id order, "" from the first), each pending one without a start task
 * given one, its id published at commit as any ready task's is.  Returns
 * how many tasks it made; *next is the last id it looked at, "" when it
 * reached the end.  A bounded range of runs_pkey, then a probe of
 * tasks_instance_idx per pending row made here, not by a plan: the cost
 * of a batch depends neither on how many instances there are nor on
 * statistics taken before the tables filled.
 */
int
pgd_store_start_sweep(const char *after, int max, char next[PGD_ID_LEN + 1])
{
	Datum	values[2];
	int		rows;
	Datum  *missing;
	int		nmissing = 0;
	int		made;

	values[0] = CStringGetTextDatum(after);
	values[1] = Int32GetDatum(max);
	rows = store_run(STMT_START_SWEEP, values, NULL);
	next[0] = '\0';
	/* a batch that found fewer rows than it could take reached the end */
	if (rows >= max)
		strlcpy(next, store_get_string(rows - 1, 1), PGD_ID_LEN + 1);
	missing = palloc(sizeof(Datum) * Max(rows, 1));
	for (int i = 0; i < rows; i++)
	{
		char *id = store_get_string(i, 1);
		char *status = store_get_string(i, 2);

		if (status != NULL && strcmp(status, "pending") == 0 &&
			!pgd_internal_index_has_where("tasks_instance_idx", id, "kind",
										  "start"))
			missing[nmissing++] = CStringGetTextDatum(id);
	}
	if (nmissing == 0)
		return 0;
	values[0] = PointerGetDatum(
		construct_array(missing, nmissing, TEXTOID, -1, false, TYPALIGN_INT));
	made = store_run(STMT_START_TASKS, values, NULL);
	/* published as any task made ready is, up to what the ring holds */
	for (int i = 0; i < made; i++)
		pgd_task_ready_at_commit(strtoll(store_get_string(i, 1), NULL, 10));
	return made;
}

/*
 * Work ready for longer than secs that no executor took: due tasks (not
 * HTTP calls, which the HTTP worker leases) and pending starts.  The
 * tasks through tasks_run_at_idx up to the cut-off; the runs rows of the
 * live instances in a scan (for df.check and reconciliation, not per task).
 */
void
pgd_store_stale_ready(int secs, int64 *tasks, int64 *starts)
{
	char s[16];

	snprintf(s, sizeof(s), "%d", secs);
	*tasks = *starts = 0;
	if (RUN(STMT_STALE_READY, s) > 0)
	{
		*tasks = strtoll(store_get_string(0, 1), NULL, 10);
		*starts = strtoll(store_get_string(0, 2), NULL, 10);
	}
}


/* ---------------------------------------------------------------------
 * Retention and repairs
 * ---------------------------------------------------------------------
 */

/* One batch of retention; returns the number of instances removed. */
int
pgd_store_retention_batch(int days, int keep, int batch)
{
	Datum values[3];

	values[0] = Int32GetDatum(days);
	values[1] = Int32GetDatum(keep);
	values[2] = Int32GetDatum(batch);
	return store_run(STMT_RETENTION_BATCH, values, NULL);
}

/*
 * What df.check() reports, allocated in cxt (it outlives the unit of
 * work: each problem is repaired in a transaction of its own).
 */
int
pgd_store_problems(MemoryContext cxt, PgdProblem **problems)
{
	int n = store_run(STMT_PROBLEMS, NULL, NULL);
	int i;

	*problems = MemoryContextAlloc(cxt, sizeof(PgdProblem) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		PgdProblem *p = &(*problems)[i];
		char	   *v;

		p->instance_id = MemoryContextStrdup(cxt, store_get_string(i, 1));
		p->problem = MemoryContextStrdup(cxt, store_get_string(i, 2));
		p->node_id =
			(v = store_get_string(i, 3)) ? MemoryContextStrdup(cxt, v) : NULL;
		p->scope =
			(v = store_get_string(i, 4)) ? MemoryContextStrdup(cxt, v) : NULL;
		p->detail = (v = store_get_string(i, 5)) ?
			MemoryContextStrdup(cxt, v) :
			MemoryContextStrdup(cxt, "");
	}
	return n;
}

/* Is the problem still there?  Asked under the instance's runs lock. */
bool
pgd_store_problem_still_there(const char *instance_id, const char *problem,
							  const char *node_id)
{
	return RUN(STMT_PROBLEM_STILL_THERE, instance_id, problem, node_id) > 0;
}

/* Tasks of a finished or missing instance (SKIP LOCKED: a claimed one is left to its holder). */
void
pgd_store_drop_tasks_of_finished(const char *instance_id)
{
	RUN(STMT_DROP_TASKS_OF_FINISHED, instance_id);
}

/* A running SQL/HTTP leaf without a task gets a new one, as if just enqueued. */
bool
pgd_store_restore_step_task(const char *instance_id, const char *node_id,
							const char *scope)
{
	if (RUN(STMT_RESTORE_STEP_TASK, instance_id, node_id, scope) == 0)
		return false;
	if (strcmp(store_get_string(0, 1), "http") == 0)
		pgd_http_wake_at_commit();
	pgd_wake_at_commit(1);
	return true;
}

/*
 * A running SLEEP gets its timer back, due when the node started plus its
 * seconds; a WAIT_SCHEDULE the next cron tick after it started.
 */
bool
pgd_store_restore_timer(const char *instance_id, const char *node_id,
						const char *scope)
{
	if (RUN(STMT_RESTORE_TIMER, instance_id, node_id, scope) == 0)
		return false;
	pgd_wake_at_commit(1);
	return true;
}
