/*-------------------------------------------------------------------------
 *
 * bgsql.h
 *	  Run one piece of work in a separate backend (bgsql.c): a dynamic
 *	  background worker connected to a given database as a given role,
 *	  which does the work in its own transaction, commits and hands back
 *	  the result.
 *
 * bgsql is the transport; the work is a handler's.  A kind of session is
 * an entry point of its own (a PGDLLEXPORT function that calls
 * pgd_bgsql_serve with its handler); the caller names that entry point.
 *
 * Locks: none of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_BGSQL_H
#define PG_DURABLE_BGSQL_H

#include "postgres.h"

#define PGD_BGSQL_MAX_ARGS 4

/* How a request ended. */
typedef enum PgdBgsqlStatus
{
	PGD_BGSQL_OK = 1,	/* text: the handler's answer */
	PGD_BGSQL_FAILED,	/* the work failed; text: its error */
	PGD_BGSQL_RETRY,	/* the work should be tried again; sqlstate says why */
	PGD_BGSQL_ERROR,	/* an error was raised: sqlstate, text, detail, hint */
	PGD_BGSQL_NO_ANSWER /* the session ended without answering */
} PgdBgsqlStatus;

typedef struct PgdBgsqlResult
{
	PgdBgsqlStatus status;
	int			   sqlstate;
	char		  *text;
	char		  *detail; /* PGD_BGSQL_ERROR only, may be NULL */
	char		  *hint;
} PgdBgsqlResult;

/* A request as the session's handler receives it. */
typedef struct PgdBgsqlRequest
{
	Oid			  run_as; /* the role the work runs as */
	int			  nargs;
	char		 *args[PGD_BGSQL_MAX_ARGS]; /* NULL = SQL NULL */
	MemoryContext cxt; /* outlives the handler's transaction: put
								 * the answer's text here */
} PgdBgsqlRequest;

/*
 * Do the work of one request in a transaction of its own and commit it;
 * fill in status, sqlstate and text.  An error it raises becomes a
 * PGD_BGSQL_ERROR answer (the transaction is rolled back).
 */
typedef void (*PgdBgsqlHandler)(const PgdBgsqlRequest *req,
								PgdBgsqlResult		  *result);

/*
 * Start a one-shot session at entry point 'entry' (its application_name
 * 'name') and wait for its answer.  Returns false, having done nothing,
 * when no background worker slot is free.  args are up to
 * PGD_BGSQL_MAX_ARGS strings (NULL = SQL NULL).  An interrupt of the
 * caller (cancel, termination) terminates the session and propagates.
 */
extern bool pgd_bgsql_run(const char *entry, const char *name, Oid dboid,
						  Oid connect_as, Oid run_as, int nargs,
						  const char *const *args, PgdBgsqlResult *result);

/*
 * The same in this process's kept session for database dboid (started if
 * needed, kept while busy, ended after a short idle time).  One entry
 * point only uses kept sessions: the steps of remote.c.
 */
extern bool pgd_bgsql_call_kept(const char *entry, const char *name, Oid dboid,
								Oid connect_as, Oid run_as, int nargs,
								const char *const *args,
								PgdBgsqlResult	  *result);

/* The body of a session's entry point: serve requests with handler. */
extern void pgd_bgsql_serve(Datum main_arg, PgdBgsqlHandler handler);

#endif /* PG_DURABLE_BGSQL_H */
