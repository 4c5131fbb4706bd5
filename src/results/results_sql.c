/*-------------------------------------------------------------------------
 *
 * results_sql.c
 *	  SQL entry points in df_internal that expose the results_* functions
 *	  to the regression tests: step_result, substitute, truthy and
 *	  is_whole_value_reference.
 *
 * They are not part of the compatible surface and are not granted to
 * anyone.  step_result runs the query with SPI in the caller's transaction
 * and as the caller (no role switch, no subtransaction): the engine's step
 * transaction does those things; here only the conversion is under test.
 * substitute takes its maps as jsonb, so the keys of the result rows it is
 * given are in jsonb's order (shorter keys first), not as written.
 *
 * Locks: whatever the query given to step_result takes; nothing else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "results/results.h"

PG_FUNCTION_INFO_V1(pgd_step_result);
PG_FUNCTION_INFO_V1(pgd_substitute_sql);
PG_FUNCTION_INFO_V1(pgd_truthy_sql);
PG_FUNCTION_INFO_V1(pgd_is_whole_value_reference_sql);

Datum
pgd_step_result(PG_FUNCTION_ARGS)
{
	char		 *query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	MemoryContext callercxt = CurrentMemoryContext;
	char		 *json;
	char		 *err = NULL;
	int			  rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute(query, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(rc));
	/* the JSON must outlive SPI_finish: build it in the caller's context */
	MemoryContextSwitchTo(callercxt);
	json = pgd_spi_result_to_json(SPI_tuptable,
								  SPI_tuptable ? SPI_processed : 0, &err);
	SPI_finish();
	if (json == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s", err)));
	PG_RETURN_TEXT_P(cstring_to_text(json));
}

/* A jsonb argument as our DOM. */
static DfJson *
jsonb_arg(Jsonb *jb)
{
	char   *text = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	char   *err = NULL;
	DfJson *doc = dfjson_parse(text, strlen(text), &err);

	if (doc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot read jsonb argument: %s", err)));
	return doc;
}

Datum
pgd_substitute_sql(PG_FUNCTION_ARGS)
{
	char *template = text_to_cstring(PG_GETARG_TEXT_PP(0));
	DfJson *vars = jsonb_arg(PG_GETARG_JSONB_P(1));
	DfJson *results = jsonb_arg(PG_GETARG_JSONB_P(2));
	bool	raw = PG_GETARG_BOOL(3);
	char   *err = NULL;
	char   *out;

	out = pgd_substitute(template, vars, results,
						 raw ? PGD_SUBST_RAW : PGD_SUBST_SQL, &err);
	if (out == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", err)));
	PG_RETURN_TEXT_P(cstring_to_text(out));
}

Datum
pgd_truthy_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pgd_truthy_text(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}

Datum
pgd_is_whole_value_reference_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pgd_is_whole_value_reference(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
