/*-------------------------------------------------------------------------
 *
 * vars.c
 *	  Workflow variables: df.setvar, df.getvar, df.unsetvar, df.clearvars.
 *
 * Each role has its own namespace in df.vars (row owner = the current user,
 * also enforced by row-level security).  df.start snapshots the submitter's
 * variables; a workflow sees that snapshot, so changing variables from
 * inside a workflow is refused (pgd_in_workflow: the executor's own flag,
 * which a step cannot clear, or df.in_workflow = 'true').
 *
 * The helpers return 'OK'; because that text is also valid input to the DSL
 * composers, each call is noted (dsl_guard.c) so that passing it into a
 * composer in the same statement is reported instead of running 'OK' as SQL.
 *
 * Locks: row locks on df.vars taken by the INSERT ... ON CONFLICT and DELETE
 * statements; nothing else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "common/messages.h"
#include "core/standby.h"
#include "core/settings.h"
#include "steps/step_sql.h"
#include "dsl/dsl.h"

static void
refuse_inside_workflow(const char *fn)
{
	if (pgd_in_workflow())
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg(PGD_MSG_VARS_IN_WORKFLOW, fn),
				 errhint("Call %s() before df.start(), or pass values between steps with named results ($name).",
						 fn)));
}

static void
check_name(text *name)
{
	if (VARSIZE_ANY_EXHDR(name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("variable name cannot be empty")));
}

/* Run one statement with (owner, name[, value]) parameters; returns SPI_processed. */
static uint64
vars_exec(const char *sql, int nargs, Datum name, Datum value, bool read_only)
{
	Oid	   argtypes[3] = {OIDOID, TEXTOID, TEXTOID};
	Datum  values[3];
	uint64 processed;
	int	   rc;

	values[0] = ObjectIdGetDatum(GetUserId());
	values[1] = name;
	values[2] = value;

	SPI_connect();
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, read_only,
							   0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed for \"%s\": %s", sql,
			 SPI_result_code_string(rc));
	processed = SPI_processed;
	return processed; /* caller finishes SPI */
}

PG_FUNCTION_INFO_V1(pgd_setvar);
Datum
pgd_setvar(PG_FUNCTION_ARGS)
{
	pgd_refuse_on_standby("df.setvar", "change workflow variables");
	refuse_inside_workflow("df.setvar");
	check_name(PG_GETARG_TEXT_PP(0));

	vars_exec("INSERT INTO df.vars (owner, name, value) VALUES ($1::pg_catalog.regrole, $2, $3) "
			  "ON CONFLICT (owner, name) DO UPDATE SET value = EXCLUDED.value",
			  3, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), false);
	SPI_finish();

	pgd_note_helper_result("df.setvar", "OK");
	PG_RETURN_TEXT_P(cstring_to_text("OK"));
}

PG_FUNCTION_INFO_V1(pgd_getvar);
Datum
pgd_getvar(PG_FUNCTION_ARGS)
{
	text *result = NULL;

	if (vars_exec("SELECT value FROM df.vars "
				  "WHERE owner OPERATOR(pg_catalog.=) $1::pg_catalog.regrole "
				  "AND name OPERATOR(pg_catalog.=) $2",
				  2, PG_GETARG_DATUM(0), (Datum) 0, true) > 0)
	{
		bool  isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								1, &isnull);

		if (!isnull)
			result = (text *) SPI_datumTransfer(d, false, -1);
	}
	SPI_finish();

	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

PG_FUNCTION_INFO_V1(pgd_unsetvar);
Datum
pgd_unsetvar(PG_FUNCTION_ARGS)
{
	pgd_refuse_on_standby("df.unsetvar", "change workflow variables");
	refuse_inside_workflow("df.unsetvar");

	vars_exec("DELETE FROM df.vars "
			  "WHERE owner OPERATOR(pg_catalog.=) $1::pg_catalog.regrole "
			  "AND name OPERATOR(pg_catalog.=) $2",
			  2, PG_GETARG_DATUM(0), (Datum) 0, false);
	SPI_finish();

	pgd_note_helper_result("df.unsetvar", "OK");
	PG_RETURN_TEXT_P(cstring_to_text("OK"));
}

PG_FUNCTION_INFO_V1(pgd_clearvars);
Datum
pgd_clearvars(PG_FUNCTION_ARGS)
{
	pgd_refuse_on_standby("df.clearvars", "change workflow variables");
	refuse_inside_workflow("df.clearvars");

	vars_exec("DELETE FROM df.vars WHERE owner OPERATOR(pg_catalog.=) $1::pg_catalog.regrole",
			  1, (Datum) 0, (Datum) 0, false);
	SPI_finish();

	pgd_note_helper_result("df.clearvars", "OK");
	PG_RETURN_TEXT_P(cstring_to_text("OK"));
}
