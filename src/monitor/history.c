/*-------------------------------------------------------------------------
 *
 * history.c
 *	  df.history: the event history of an instance (df_internal.events).
 *
 * The events are written by the engine's transitions (engine/store.c).
 * df.history reads as the caller: the instance must be visible to it in
 * df.instances (row-level security decides); the events themselves are
 * read with the bootstrap superuser's privileges, since users have none on
 * df_internal.
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

PG_FUNCTION_INFO_V1(pgd_history);
Datum
pgd_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			   types[1] = {TEXTOID};
	Datum		   values[1];
	Oid			   save_userid;
	int			   save_sec;
	int			   n, i;

	values[0] = PG_GETARG_DATUM(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* visibility as the caller */
	if (pgd_spi_exec("SELECT 1 FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) == 0)
	{
		SPI_finish();
		return (Datum) 0;
	}

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		n = pgd_spi_exec("SELECT e.at, e.kind, e.node_id::text, n.node_type, e.scope, e.attempt, "
						 "e.duration_ms, e.detail "
						 "FROM df_internal.events e LEFT JOIN df.nodes n "
						 "ON n.instance_id OPERATOR(pg_catalog.=) e.instance_id "
						 "AND n.id OPERATOR(pg_catalog.=) e.node_id "
						 "WHERE e.instance_id OPERATOR(pg_catalog.=) $1 ORDER BY e.id",
						 1, types, values, NULL, false);
		for (i = 0; i < n; i++)
		{
			Datum out[8];
			bool  outnull[8];
			int	  c;

			for (c = 0; c < 8; c++)
				out[c] =
					SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
								  c + 1, &outnull[c]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out,
								 outnull);
		}
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	SPI_finish();
	return (Datum) 0;
}
