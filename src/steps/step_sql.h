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

#endif /* PG_DURABLE_STEP_SQL_H */
