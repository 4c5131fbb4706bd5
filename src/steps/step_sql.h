/*-------------------------------------------------------------------------
 *
 * step_sql.h
 *	  Running a SQL step's statement as its submitter (step_sql.c).
 *
 * Locks: whatever the user's statement takes, inside its subtransaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STEP_SQL_H
#define PG_DURABLE_STEP_SQL_H

#include "postgres.h"

#include "store/types.h"

/* true inside a workflow step (or with df.in_workflow = 'true') */
extern bool pgd_in_workflow(void);

/*
 * Run query as submitter in a subtransaction, contained (role, GUC nest
 * level, security context).  *retry is set for a deadlock, serialization
 * failure or lock timeout, which re-queue the step instead of failing it;
 * *sqlstate is the error's code.
 */
/*
 * The statement_timeout (ms, 0: none) of the statements pgd_run_user_sql
 * runs from now on: a df.retry's attempt_timeout (the executor sets it per
 * step).
 */
extern void pgd_set_attempt_timeout(int64 ms);

/*
 * A deadlock, serialization failure or lock timeout: a lost race for a lock,
 * after which the statement runs again
 * (docs/design/architecture.md §5 rule 5): a user's step re-queued, an engine
 * unit run again (worker/executor.c).
 */
extern bool pgd_lost_lock_race(int sqlerrcode);

/* The error code of a failed statement ("sql:<SQLSTATE>", "timeout"). */
extern char *pgd_sql_error_code(const ErrorData *edata);

extern PgdOutcome pgd_run_user_sql(const char *query, Oid submitter,
								   bool *retry, int *sqlstate);

/*
 * Where the rows of the next pgd_run_user_sql go instead of its result
 * (df.map in lanes mode): flush is called with each chunk of rows as a
 * result's JSON ({"rows": [...]}) and the number of its first row, as the
 * engine's own role, inside the statement's subtransaction; the result is
 * then {"items": <rows in all>}.  NULL: the rows are the result, as
 * always.  It holds for one call only.
 */
typedef struct PgdRowSink
{
	void (*flush)(void *arg, int64 first, const char *chunk);
	void *arg;
} PgdRowSink;

extern void pgd_set_row_sink(const PgdRowSink *sink);

/*
 * pg_durable.log_workflow_sql.  On, a step's statement is the activity of
 * the process that runs it (pg_stat_activity, and the server log's "failed
 * process was running" if it crashes).  Off, the activity names the step
 * instead, the log lines of a failed step give its error code instead of
 * its message (which can quote the statement), and the server log lines
 * written while a statement runs (a NOTICE or WARNING it raises, a FATAL)
 * lose their context and internal query, which hold its text.
 */
extern void pgd_report_step_activity(const char *query, const char *what);
extern char *pgd_step_error_for_log(const char *message, const char *code);

#endif /* PG_DURABLE_STEP_SQL_H */
