/*-------------------------------------------------------------------------
 *
 * compensations.c
 *	  df.compensations: the undos registered for an instance
 *	  (df_internal.compensations, issue 16), in the completion order of
 *	  their forward steps.
 *
 * Visibility as df.history's: the instance must be visible to the caller
 * in df.instances (row-level security decides); the rows are then read
 * with the bootstrap superuser's privileges, since users have none on
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

#define COMPENSATION_COLUMNS 7

PG_FUNCTION_INFO_V1(pgd_compensations);
Datum
pgd_compensations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			   types[1] = {TEXTOID};
	Datum		   values[1];
	Oid			   save_userid;
	int			   save_sec;
	int			   n;

	values[0] = PG_GETARG_DATUM(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

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
		n = pgd_spi_exec("SELECT c.node_id::text, n.right_node::text, c.registered_at, c.state, "
						 "c.attempts, c.error, c.scope "
						 "FROM df_internal.compensations c LEFT JOIN df.nodes n "
						 "ON n.instance_id OPERATOR(pg_catalog.=) c.instance_id "
						 "AND n.id OPERATOR(pg_catalog.=) c.node_id "
						 "WHERE c.instance_id OPERATOR(pg_catalog.=) $1 ORDER BY c.seq",
						 1, types, values, NULL, false);
		for (int i = 0; i < n; i++)
		{
			Datum out[COMPENSATION_COLUMNS];
			bool  outnull[COMPENSATION_COLUMNS];

			for (int c = 0; c < COMPENSATION_COLUMNS; c++)
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
