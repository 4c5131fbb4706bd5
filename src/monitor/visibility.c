/*-------------------------------------------------------------------------
 *
 * visibility.c
 *	  The one prologue of the monitoring functions that read the engine's
 *	  private tables for one instance (df.history, df.compensations,
 *	  df.instance_spans, df.timeline): the instance must be visible to the
 *	  caller in df.instances (row-level security decides), and only then
 *	  are df_internal's rows read, with the bootstrap superuser's
 *	  privileges, since users have none there.
 *
 * An instance the caller may not see reads exactly like one that does not
 * exist: no rows.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "common/spi.h"
#include "monitor/monitor.h"

bool
pgd_read_as_engine(const char *instance_id, PgdEngineRead read, void *arg)
{
	Oid	  types[1] = {TEXTOID};
	Datum values[1];
	Oid	  save_userid;
	int	  save_sec;

	values[0] = CStringGetTextDatum(instance_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* visibility as the caller */
	if (pgd_spi_exec("SELECT 1 FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) == 0)
	{
		SPI_finish();
		return false;
	}

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		read(instance_id, arg);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	SPI_finish();
	return true;
}

void
pgd_spi_rows_to_srf(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		  *out = palloc(sizeof(Datum) * ncols);
	bool		  *outnull = palloc(sizeof(bool) * ncols);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		for (int c = 0; c < ncols; c++)
			out[c] = SPI_getbinval(SPI_tuptable->vals[i],
								   SPI_tuptable->tupdesc, c + 1, &outnull[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
}
