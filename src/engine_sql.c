/*-------------------------------------------------------------------------
 *
 * engine_sql.c
 *	  Small SPI helpers for the engine's own statements.
 *
 * Every engine statement uses $n parameters and schema-qualified names with
 * OPERATOR(pg_catalog.x) where an operator is involved, so neither the
 * caller's search_path nor user data can change what it does.
 *
 * Locks: pgd_lock_run takes the instance's df_internal.runs row lock
 * (FOR UPDATE); see engine.h for the order rules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "engine.h"

/*
 * Run one statement.  Every statement gets a fresh snapshot (read_only is
 * accepted for documentation only): in read committed, a read that reused
 * the transaction's first snapshot could miss what committed just before a
 * task was claimed, and call a live step dead.
 */
int
pgd_spi_exec(const char *sql, int nargs, const Oid *types, const Datum *values,
			 const char *nulls, bool read_only)
{
	int			rc;

	rc = SPI_execute_with_args(sql, nargs, (Oid *) types, (Datum *) values,
							   nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "pg_durable: SPI failed (%s) for: %s", SPI_result_code_string(rc), sql);
	return (int) SPI_processed;
}

/* Column col (1-based) of row as a palloc'd C string in the caller's context, or NULL. */
char *
pgd_spi_getstring(int row, int col)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v;
}

Datum
pgd_text_datum(const char *s)
{
	return PointerGetDatum(cstring_to_text(s));
}

/*
 * Lock the instance's runs row.  Returns false when the instance has no
 * runs row (finished and cleaned up, or never existed); else sets *status.
 */
bool
pgd_lock_run(const char *instance_id, char **status)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	values[0] = pgd_text_datum(instance_id);
	if (pgd_spi_exec("SELECT status FROM df_internal.runs "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
					 1, types, values, NULL, false) == 0)
		return false;
	if (status)
		*status = pgd_spi_getstring(0, 1);
	return true;
}
