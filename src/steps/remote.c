/*-------------------------------------------------------------------------
 *
 * remote.c
 *	  Steps of instances started with database => 'x': their SQL runs in x.
 *
 * The engine (instances, tasks, transitions) lives in pg_durable.database;
 * an executor is bound to that database and cannot touch x.  For a SQL
 * step of such an instance the executor substitutes the step's text as
 * usual, then hands it to its background session connected to x (bgsql.c:
 * started on demand, kept while steps keep coming, gone after 2 s idle),
 * which runs it exactly as the executor would run a local step
 * (pgd_run_user_sql: as the submitter, security-restricted, its own GUC
 * nest level, df.in_workflow on, rows turned into the result JSON there),
 * commits in x and returns the JSON or the error.  The executor then
 * applies the transition in its own step transaction.
 *
 * At-least-once.  Two databases cannot commit together: if the executor
 * stops between the commit in x and the commit of the transition (crash,
 * restart, the step's RACE lost or its instance cancelled meanwhile), the
 * task is claimed again and the step runs again in x.  The README says so,
 * and df.start says so in a NOTICE.  Steps in the extension's own database
 * stay exactly-once.
 *
 * Before each step the database is looked up again: dropped, not
 * accepting connections, or the submitter lost CONNECT — the node fails
 * with a message naming the database (and so the instance, unless the
 * workflow handles the failure); the executor goes on.  A session that
 * ends without answering (it could not connect, or was terminated by
 * DROP DATABASE ... WITH (FORCE)) re-queues the step, within the
 * executor's retry limit.  When no background
 * worker slot is free the step is re-queued with back-off (sqlstate
 * 53400), however long that lasts: not a failure of the instance.  An
 * interrupt of the executor while it waits (wake.c cancels a step that is
 * no longer wanted) terminates the session and re-queues the step, which
 * then finds out under the runs lock that it is not wanted.
 *
 * Locks: none besides what the step's session takes in x.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "pgstat.h"

#include "common/messages.h"
#include "common/compat.h"
#include "common/spi.h"
#include "core/bgsql.h"
#include "core/settings.h"
#include "core/unit.h"
#include "steps/remote.h"
#include "steps/step_sql.h"

#define REMOTE_SESSION_ENTRY "pgd_remote_session_main"
#define REMOTE_SESSION_NAME	 "pg_durable step session"

/*
 * Why the steps of an instance of this submitter cannot run in database,
 * or NULL.  df.start checks the same (its own message); the engine checks
 * before every step, since the database or the grant may go away.
 */
char *
pgd_database_problem(const char *database, Oid submitter)
{
	Oid		  dboid = get_database_oid(database, true);
	HeapTuple tup;
	bool	  allowconn;

	if (!OidIsValid(dboid))
		return psprintf("database \"%s\" of this instance does not exist; "
						"its steps cannot run",
						database);
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (!HeapTupleIsValid(tup))
		return psprintf("database \"%s\" of this instance does not exist; "
						"its steps cannot run",
						database);
	allowconn = ((Form_pg_database) GETSTRUCT(tup))->datallowconn;
	ReleaseSysCache(tup);
	if (!allowconn)
		return psprintf("database \"%s\" of this instance is not accepting connections; "
						"its steps cannot run",
						database);
	if (pgd_database_aclcheck(dboid, submitter, ACL_CONNECT) != ACLCHECK_OK)
		return psprintf("permission denied for database \"%s\": the role that submitted "
						"this instance does not have CONNECT privilege; its steps cannot run",
						database);
	return NULL;
}

PgdBgsqlStatus
pgd_remote_step(const char *database, const char *query, Oid submitter,
				char **text, int *sqlstate)
{
	MemoryContext  oldcxt = CurrentMemoryContext;
	ResourceOwner  oldowner = CurrentResourceOwner;
	PgdBgsqlResult res;
	PgdBgsqlStatus status;
	bool		   ran = false;
	char		  *problem;

	*sqlstate = 0;
	*text = NULL;
	problem = pgd_database_problem(database, submitter);
	if (problem != NULL)
	{
		*text = problem;
		return PGD_BGSQL_FAILED;
	}

	/* a subtransaction, so that an interrupt while waiting can be caught */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		ran = pgd_bgsql_call_kept(REMOTE_SESSION_ENTRY, REMOTE_SESSION_NAME,
								  get_database_oid(database, false),
								  GetAuthenticatedUserId(), submitter, 1,
								  &query, &res);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData *edata = pgd_subxact_caught(oldcxt, oldowner);

		*sqlstate = edata->sqlerrcode;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		{
			/* wake.c: the step is probably no longer wanted; see under the runs lock */
			*text = psprintf(PGD_MSG_SQL_EXECUTION_FAILED, edata->message);
			return PGD_BGSQL_RETRY;
		}
		*text = psprintf("could not run the step in database \"%s\": %s",
						 database, edata->message);
		return PGD_BGSQL_FAILED;
	}
	PG_END_TRY();

	if (!ran)
	{
		*sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		*text =
			psprintf("no free background worker slot to run the step in database \"%s\"",
					 database);
		return PGD_BGSQL_RETRY;
	}

	status = res.status;
	*sqlstate = res.sqlstate;
	switch (status)
	{
		case PGD_BGSQL_OK:
		case PGD_BGSQL_FAILED:
		case PGD_BGSQL_RETRY:
			*text = res.text;
			break;
		case PGD_BGSQL_ERROR:
			/* outside the statement: e.g. a deferred constraint failing at commit */
			*text = psprintf(PGD_MSG_SQL_EXECUTION_FAILED,
							 res.text ? res.text : "unknown error");
			status = PGD_BGSQL_FAILED;
			break;
		default:

			/*
			 * It could not connect (too many connections, the database
			 * going away) or stopped.  Try again later: the check above
			 * then fails the node if the database is gone, and the
			 * executor's retry limit ends the rest.
			 */
			*sqlstate = ERRCODE_CONNECTION_FAILURE;
			*text =
				psprintf("could not run the step in database \"%s\": the session there "
						 "ended without an answer (the server log says why)",
						 database);
			status = PGD_BGSQL_RETRY;
			break;
	}
	return status;
}

/*
 * The session's side: a step's SQL as the submitter, contained as in the
 * executor (step_sql.c), committed before the answer goes back.
 */
static void
remote_step_handler(const PgdBgsqlRequest *req, PgdBgsqlResult *result)
{
	const char *query = req->args[0] ? req->args[0] : "";
	PgdOutcome	outcome = {0};
	bool		retry;
	int			sqlstate;

	pgd_begin_unit("pg_durable: workflow step");
	pgd_report_step_activity(query, "pg_durable: workflow step");
	outcome = pgd_run_user_sql(query, req->run_as, &retry, &sqlstate);
	/* SPI_finish frees what was allocated since pgd_begin_unit */
	if (outcome.result != NULL)
		outcome.result = MemoryContextStrdup(req->cxt, outcome.result);
	pgd_end_unit();

	result->status = retry ? PGD_BGSQL_RETRY :
		outcome.ok		   ? PGD_BGSQL_OK :
							 PGD_BGSQL_FAILED;
	result->sqlstate = sqlstate;
	result->text = outcome.result;
}

void
pgd_remote_session_main(Datum main_arg)
{
	pgd_bgsql_serve(main_arg, remote_step_handler);
}
