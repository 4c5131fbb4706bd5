/*-------------------------------------------------------------------------
 *
 * bgsql.h
 *	  Run one piece of work in a separate backend: a dynamic background
 *	  worker connected to a given database as a given role, which does the
 *	  work in its own transaction, commits and hands back the result.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_BGSQL_H
#define PG_DURABLE_BGSQL_H

#include "postgres.h"

/* What the background session does. */
typedef enum PgdBgsqlKind
{
	PGD_BGSQL_START_NEW = 1,	/* SELECT df.start($1, $2, $3) as the role */
	PGD_BGSQL_STEP				/* a workflow step's SQL ($1) as the submitter */
} PgdBgsqlKind;

/* How it ended. */
typedef enum PgdBgsqlStatus
{
	PGD_BGSQL_OK = 1,			/* text: df.start's id, or the step's result JSON */
	PGD_BGSQL_FAILED,			/* the step failed; text: its error (the node's outcome) */
	PGD_BGSQL_RETRY,			/* the step should be re-queued; sqlstate says why */
	PGD_BGSQL_ERROR,			/* an error was raised: sqlstate, text, detail, hint */
	PGD_BGSQL_NO_ANSWER			/* the session ended without answering */
} PgdBgsqlStatus;

typedef struct PgdBgsqlResult
{
	PgdBgsqlStatus status;
	int			sqlstate;
	char	   *text;
	char	   *detail;			/* PGD_BGSQL_ERROR only, may be NULL */
	char	   *hint;
} PgdBgsqlResult;

/*
 * Start the session and wait for its answer.  Returns false, having done
 * nothing, when no background worker slot is free.  args are up to three
 * strings (NULL = SQL NULL).  An interrupt of the caller (cancel,
 * termination) terminates the session and propagates.
 */
extern bool pgd_bgsql_run(PgdBgsqlKind kind, Oid dboid, Oid connect_as, Oid run_as,
						  int nargs, const char *const *args, PgdBgsqlResult *result);

/* start.c: LOGIN and the superuser guard, as df.start checks them */
extern void pgd_check_start_identity(Oid userid);

/*
 * Run a step's SQL in database dboid as run_as, in this process's
 * persistent session for that database (started if needed, kept while
 * busy).  Returns false when no background worker slot is free.
 */
extern bool pgd_bgsql_step(Oid dboid, Oid connect_as, Oid run_as, const char *query,
						   PgdBgsqlResult *result);

/* new_txn.c */
extern char *pgd_start_in_new_transaction(const char *fut, const char *label,
										  const char *database);

/* remote.c */
extern char *pgd_database_problem(const char *database, Oid submitter);
extern PgdBgsqlStatus pgd_remote_step(const char *database, const char *query, Oid submitter,
									  char **text, int *sqlstate);

PGDLLEXPORT void pgd_bgsql_main(Datum main_arg);

#endif							/* PG_DURABLE_BGSQL_H */
