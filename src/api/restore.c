/*-------------------------------------------------------------------------
 *
 * restore.c
 *	  The triggers of a restore's loads into the engine's tables
 *	  (docs/design/restores.md): df_internal.restore_loading() lets a load
 *	  through without its foreign key checks, and
 *	  df_internal.restore_arrived() holds the workers.
 *
 * It fires after every INSERT or COPY statement into df.instances,
 * df_internal.runs and df_internal.tasks.  A load is a COPY ... FROM into
 * this very table that the client sent itself, at the top of the portal
 * being run, as pg_restore and psql -f of a plain dump send it.  The
 * engine never copies: it writes these tables from inside a df function
 * (whose portal runs a SELECT, a CALL, or the user's own statement), from
 * a worker (no portal), or without a statement at all, and is let through.
 * So are INSERTs a client sends by hand (a repair, a test's fixture); a
 * dump made with --inserts is not held (docs/operations/backups.md).  A
 * load records a hold row in its own transaction and logs it once per
 * table.
 *
 * A load's rows are not checked against the tables they reference: a
 * parallel restore (pg_restore -j) loads df.nodes while df.instances is
 * still loading, in transactions of their own.  restore_loading(), before
 * the COPY statement, sets session_replication_role = replica for it, so
 * that the foreign keys' and the root node's triggers are not queued for
 * its rows; restore_arrived(), after it, sets it back.  df.resume_restored()
 * checks what they would have, over every table, once the restore is
 * complete.
 *
 * Locks: the hold row's key (store/restore_hold.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/rel.h"

#include "api/api.h"
#include "store/store.h"

/* Is the portal being run a COPY ... FROM into relid itself? */
static bool
client_loads(Oid relid)
{
	ListCell   *lc;

	if (ActivePortal == NULL)
		return false;
	foreach(lc, ActivePortal->stmts)
	{
		PlannedStmt *ps = lfirst_node(PlannedStmt, lc);

		if (ps->commandType == CMD_UTILITY && ps->utilityStmt != NULL &&
			IsA(ps->utilityStmt, CopyStmt))
		{
			CopyStmt   *copy = (CopyStmt *) ps->utilityStmt;

			if (copy->is_from && copy->relation != NULL &&
				RangeVarGetRelid(copy->relation, NoLock, true) == relid)
				return true;
		}
	}
	return false;
}

/* the session_replication_role a load's COPY found, set back after it */
static char *role_before_load = NULL;

static TriggerData *
trigger_data(FunctionCallInfo fcinfo, const char *name)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("df_internal.%s() may only be called as a trigger", name)));
	return (TriggerData *) fcinfo->context;
}

static void
set_replication_role(const char *value)
{
	(void) set_config_option("session_replication_role", value, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

PG_FUNCTION_INFO_V1(pgd_restore_loading);
Datum
pgd_restore_loading(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = trigger_data(fcinfo, "restore_loading");

	if (!client_loads(RelationGetRelid(trigdata->tg_relation)))
		return PointerGetDatum(NULL);
	if (role_before_load != NULL)
		pfree(role_before_load);
	role_before_load =
		MemoryContextStrdup(TopMemoryContext,
							GetConfigOption("session_replication_role", false, false));
	set_replication_role("replica");
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(pgd_restore_arrived);
Datum
pgd_restore_arrived(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = trigger_data(fcinfo, "restore_arrived");
	Relation	rel = trigdata->tg_relation;
	char	   *name;

	if (!client_loads(RelationGetRelid(rel)))
		return PointerGetDatum(NULL);
	if (role_before_load != NULL)
	{
		set_replication_role(role_before_load);
		pfree(role_before_load);
		role_before_load = NULL;
	}

	name = psprintf("%s.%s", get_namespace_name(RelationGetNamespace(rel)),
					RelationGetRelationName(rel));
	SPI_connect();
	if (pgd_store_restore_hold_add(name))
		ereport(LOG,
				(errmsg("rows were loaded into %s: pg_durable holds the workflows of database \"%s\"",
						name, get_database_name(MyDatabaseId)),
				 errhint("When the restore is complete, run SELECT df.resume_restored().")));
	SPI_finish();
	return PointerGetDatum(NULL);
}
