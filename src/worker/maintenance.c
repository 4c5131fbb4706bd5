/*-------------------------------------------------------------------------
 *
 * check.c
 *	  Retention and reconciliation, run by executor 0 every
 *	  pg_durable.reconcile_interval seconds (0 = never), and the rate limit
 *	  of the executors' log lines.
 *
 * Retention removes finished instances (df.instances, df.nodes and their
 * events) that finished more than pg_durable.retention_days ago, or that
 * rank beyond the newest PGD_KEEP_FINISHED finished ones (ranked by
 * COALESCE(completed_at, created_at), as the reference does), in batches of
 * PGD_RETENTION_BATCH instances per transaction, so that no lock is held
 * for long.  Live instances are never touched.
 *
 * Reconciliation reads df_internal.check_rows() (the body of df.check(),
 * see the install script) and repairs what is safe to repair, each repair
 * in its own transaction under the instance's runs lock, after checking
 * again under that lock that the problem is still there:
 *	 stranded_step			  a running SQL/HTTP leaf without a task gets a new
 *							  step task (as if its predecessor had just
 *							  enqueued it);
 *	 missing_timer			  a running SLEEP gets its timer back, due when the
 *							  node started plus its seconds; a WAIT_SCHEDULE
 *							  the next cron tick after it started;
 *	 task_of_finished_instance tasks of a finished or missing instance are
 *							  deleted (SKIP LOCKED: a claimed one is left to
 *							  the step that holds it, which discards it);
 *	 orphan_run				  the engine state of a finished or missing
 *							  instance is removed.
 * Everything else is logged (LOG, at most PGD_RECONCILE_LOG_MAX lines per
 * pass, no step results: the details name nodes, scopes and counts only).
 *
 * Locks: retention locks the df.instances rows it deletes (SKIP LOCKED);
 * each repair locks one runs row (DESIGN.md §5 rule 1) and, for deleted
 * tasks, only unclaimed task rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "engine/engine.h"
#include "core/settings.h"
#include "worker/worker.h"

#define PGD_KEEP_FINISHED 10000
#define PGD_RETENTION_BATCH 500
#define PGD_RETENTION_MAX_BATCHES 40	/* per pass: the executor has steps to run */
#define PGD_RECONCILE_LOG_MAX 10

/* Log rate limit: at most LOG_BURST lines per LOG_WINDOW_MS, per process. */
#define LOG_BURST 10
#define LOG_WINDOW_MS 60000L

static TimestampTz last_reconcile = 0;
static TimestampTz log_window_start = 0;
static int	log_count = 0;
static int	log_suppressed = 0;

/*
 * May the caller write one more LOG line?  When a new window opens after
 * lines were suppressed, says how many.
 */
bool
pgd_log_allowed(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (log_window_start == 0 ||
		TimestampDifferenceExceeds(log_window_start, now, LOG_WINDOW_MS))
	{
		if (log_suppressed > 0)
			ereport(LOG,
					(errmsg("pg_durable: %d log lines suppressed in the last minute", log_suppressed)));
		log_window_start = now;
		log_count = 0;
		log_suppressed = 0;
	}
	if (log_count < LOG_BURST)
	{
		log_count++;
		return true;
	}
	log_suppressed++;
	return false;
}

/* One batch of retention; returns the number of instances removed. */
static int
retention_batch(void)
{
	Oid			types[3] = {INT4OID, INT4OID, INT4OID};
	Datum		values[3];
	int			n;

	values[0] = Int32GetDatum(pgd_retention_days);
	values[1] = Int32GetDatum(PGD_KEEP_FINISHED);
	values[2] = Int32GetDatum(PGD_RETENTION_BATCH);
	pgd_begin_unit("pg_durable: retention");
	n = pgd_spi_exec("WITH ranked AS ("
					 " SELECT id, COALESCE(completed_at, created_at) AS t, "
					 " pg_catalog.row_number() OVER (ORDER BY COALESCE(completed_at, created_at) DESC, id) AS rn "
					 " FROM df.instances WHERE status IN ('completed', 'failed', 'cancelled')), "
					 "victims AS ("
					 " SELECT i.id FROM df.instances i JOIN ranked r ON r.id OPERATOR(pg_catalog.=) i.id "
					 " WHERE (r.rn OPERATOR(pg_catalog.>) $2 OR r.t OPERATOR(pg_catalog.<) "
					 "  (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(days => $1))) "
					 " AND i.status IN ('completed', 'failed', 'cancelled') "
					 " LIMIT $3 FOR UPDATE OF i SKIP LOCKED), "
					 "ev AS (DELETE FROM df_internal.events e USING victims v "
					 " WHERE e.instance_id OPERATOR(pg_catalog.=) v.id), "
					 "nd AS (DELETE FROM df.nodes d USING victims v "
					 " WHERE d.instance_id OPERATOR(pg_catalog.=) v.id) "
					 "DELETE FROM df.instances i USING victims v "
					 "WHERE i.id OPERATOR(pg_catalog.=) v.id",
					 3, types, values, NULL, false);
	pgd_end_unit();
	return n;
}

static void
run_retention(void)
{
	int			total = 0;
	int			b;

	for (b = 0; b < PGD_RETENTION_MAX_BATCHES; b++)
	{
		int			n;

		CHECK_FOR_INTERRUPTS();
		n = retention_batch();
		total += n;
		if (n < PGD_RETENTION_BATCH)
			break;
	}
	if (total > 0)
		ereport(LOG, (errmsg("pg_durable: retention removed %d finished instances", total)));
}

/* Is the problem still there?  Asked under the instance's runs lock. */
static bool
still_there(const char *instance_id, const char *problem, const char *node_id)
{
	return PGD_EXEC("SELECT 1 FROM df_internal.check_rows() c "
					"WHERE c.instance_id OPERATOR(pg_catalog.=) $1 "
					"AND c.problem OPERATOR(pg_catalog.=) $2 "
					"AND c.node_id IS NOT DISTINCT FROM $3",
					instance_id, problem, node_id) > 0;
}

/* Repair one problem; returns true if it was repaired. */
static bool
repair(const char *instance_id, const char *problem, const char *node_id, const char *scope)
{
	char	   *status;

	if (strcmp(problem, "task_of_finished_instance") == 0)
	{
		PGD_EXEC("DELETE FROM df_internal.tasks WHERE id IN ("
				 " SELECT t.id FROM df_internal.tasks t "
				 " WHERE t.instance_id OPERATOR(pg_catalog.=) $1 AND NOT EXISTS ("
				 "  SELECT 1 FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) t.instance_id "
				 "  AND i.status IN ('pending', 'running')) "
				 " FOR UPDATE SKIP LOCKED)",
				 instance_id);
		return true;
	}
	if (strcmp(problem, "orphan_run") == 0)
	{
		if (!pgd_lock_run(instance_id, &status) || !still_there(instance_id, problem, NULL))
			return false;
		pgd_end_instance(instance_id);
		return true;
	}
	if (strcmp(problem, "stranded_step") == 0 || strcmp(problem, "missing_timer") == 0)
	{
		if (node_id == NULL || scope == NULL ||
			!pgd_lock_run(instance_id, &status) || !still_there(instance_id, problem, node_id))
			return false;
		if (strcmp(problem, "stranded_step") == 0)
		{
			if (PGD_EXEC("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind) "
						 "SELECT n.instance_id, n.id, $3, "
						 "CASE WHEN n.node_type IN ('HTTP', 'HTTP_MULTIPART') THEN 'http' ELSE 'step' END "
						 "FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
						 "AND n.id OPERATOR(pg_catalog.=) $2 RETURNING kind",
						 instance_id, node_id, scope) == 0)
				return false;
			if (strcmp(pgd_spi_getstring(0, 1), "http") == 0)
				pgd_http_wake_at_commit();
		}
		else if (PGD_EXEC("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
						  "SELECT n.instance_id, n.id, $3, 'timer', "
						  "CASE n.node_type WHEN 'SLEEP' THEN n.updated_at OPERATOR(pg_catalog.+) "
						  " pg_catalog.make_interval(secs => n.query::pg_catalog.float8) "
						  "ELSE df_internal.cron_next(n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'cron_expr', "
						  " n.updated_at) END "
						  "FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) $1 "
						  "AND n.id OPERATOR(pg_catalog.=) $2",
						  instance_id, node_id, scope) == 0)
			return false;
		pgd_wake_at_commit(1);
		return true;
	}
	return false;
}

static void
run_reconcile(void)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_durable reconcile",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			n,
				i;
	char	  **ids,
			  **problems,
			  **nodes,
			  **scopes,
			  **details;
	int			repaired = 0;
	int			logged = 0;

	pgd_begin_unit("pg_durable: reconciliation");
	n = PGD_EXEC("SELECT instance_id, problem, node_id, scope, detail "
				 "FROM df_internal.check_rows() ORDER BY 1, 2, 3");
	ids = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	problems = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	nodes = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	scopes = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	details = MemoryContextAlloc(cxt, sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		ids[i] = MemoryContextStrdup(cxt, pgd_spi_getstring(i, 1));
		problems[i] = MemoryContextStrdup(cxt, pgd_spi_getstring(i, 2));
		nodes[i] = pgd_spi_getstring(i, 3) ? MemoryContextStrdup(cxt, pgd_spi_getstring(i, 3)) : NULL;
		scopes[i] = pgd_spi_getstring(i, 4) ? MemoryContextStrdup(cxt, pgd_spi_getstring(i, 4)) : NULL;
		details[i] = MemoryContextStrdup(cxt, pgd_spi_getstring(i, 5));
	}
	pgd_end_unit();

	for (i = 0; i < n; i++)
	{
		bool		done = false;

		CHECK_FOR_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		pgd_begin_unit("pg_durable: reconciliation repair");
		done = repair(ids[i], problems[i], nodes[i], scopes[i]);
		pgd_end_unit();
		MemoryContextSwitchTo(cxt);
		if (done)
		{
			repaired++;
			ereport(LOG,
					(errmsg("pg_durable: reconciliation repaired instance %s: %s (%s)",
							ids[i], problems[i], details[i])));
		}
		else if (logged++ < PGD_RECONCILE_LOG_MAX)
			ereport(LOG,
					(errmsg("pg_durable: reconciliation found instance %s: %s (%s)",
							ids[i], problems[i], details[i])));
	}
	if (n > repaired + PGD_RECONCILE_LOG_MAX)
		ereport(LOG,
				(errmsg("pg_durable: reconciliation found %d problems, repaired %d, logged %d",
						n, repaired, PGD_RECONCILE_LOG_MAX)));
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * Executor 0, between tasks: run a pass when one is due, and shorten the
 * coming sleep to the next pass.  An error is logged and the pass
 * abandoned; the next one tries again.
 */
void
pgd_reconcile_maybe(long *sleep_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	long		interval_ms = (long) pgd_reconcile_interval * 1000L;
	long		left;

	if (pgd_reconcile_interval <= 0)
		return;
	if (last_reconcile == 0)
		last_reconcile = now;	/* the first pass one interval after start-up */
	else if (TimestampDifferenceExceeds(last_reconcile, now, interval_ms))
	{
		MemoryContext old = CurrentMemoryContext;

		last_reconcile = now;
		PG_TRY();
		{
			run_retention();
			run_reconcile();
		}
		PG_CATCH();
		{
			/* log it and go on: the next pass tries again */
			MemoryContextSwitchTo(old);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			SPI_finish();		/* harmless when not connected */
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		now = GetCurrentTimestamp();
	}
	left = interval_ms - (long) ((now - last_reconcile) / 1000);
	if (sleep_ms && left < *sleep_ms)
		*sleep_ms = Max(1L, left);
}
