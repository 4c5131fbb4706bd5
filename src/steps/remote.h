/*-------------------------------------------------------------------------
 *
 * remote.h
 *	  Steps of instances started with database => 'x' (remote.c): run in x
 *	  by a background session, at least once.
 *
 * Locks: none besides what the step's session takes in x.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_REMOTE_H
#define PG_DURABLE_REMOTE_H

#include "postgres.h"

#include "core/bgsql.h"

/* Why the steps of this submitter cannot run in database, or NULL. */
extern char *pgd_database_problem(const char *database, Oid submitter);

/*
 * Run a step's SQL in database as submitter.  OK: *text is the result;
 * FAILED: *text is the node's failure; RETRY: re-queue the step, *sqlstate
 * says why.
 */
extern PgdBgsqlStatus pgd_remote_step(const char *database, const char *query,
									  Oid submitter, char **text,
									  int *sqlstate);

/* The entry point of the step sessions. */
PGDLLEXPORT void pgd_remote_session_main(Datum main_arg);

#endif /* PG_DURABLE_REMOTE_H */
