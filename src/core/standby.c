/*-------------------------------------------------------------------------
 *
 * standby.c
 *	  One check at the entry of every function of pg_durable that writes:
 *	  on a standby it fails with one error that says so.
 *
 * A hot standby serves pg_durable's reads (df.status, df.list_instances,
 * df.history, the views ...) from the replicated tables, while its workers
 * are not running: the launcher is a background worker that starts when
 * recovery ends (docs/operations/high-availability.md).  A writing function
 * called there would fail somewhere inside, with PostgreSQL's "cannot
 * execute INSERT in a read-only transaction" or worse; it fails first,
 * here, with the SQLSTATE of a read-only transaction (25006), which
 * drivers and poolers recognise, and a hint to connect to the primary.
 * The SQL functions of the install script reach it through
 * df_internal.refuse_on_standby(function, action).
 *
 * Locks: none (RecoveryInProgress reads shared memory).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "core/standby.h"

void
pgd_refuse_on_standby(const char *function, const char *action)
{
	if (!RecoveryInProgress())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("cannot %s on a standby server", action),
			 errdetail("%s writes to the database, and this server is a standby in recovery: "
					   "pg_durable's workflows are started, changed and run on the primary only.",
					   function),
			 errhint("Connect to the primary, for example with target_session_attrs=read-write "
					 "in the connection string.")));
}

/* df_internal.refuse_on_standby(function, action): the check for SQL functions. */
PG_FUNCTION_INFO_V1(pgd_refuse_on_standby_sql);
Datum
pgd_refuse_on_standby_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		elog(ERROR, "df_internal.refuse_on_standby: NULL argument");
	pgd_refuse_on_standby(text_to_cstring(PG_GETARG_TEXT_PP(0)),
						  text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}
