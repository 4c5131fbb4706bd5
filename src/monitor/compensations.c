/*-------------------------------------------------------------------------
 *
 * compensations.c
 *	  df.compensations: the undos registered for an instance
 *	  (df_internal.compensations), in the completion order of
 *	  their forward steps.
 *
 * Visibility as df.history's: the instance must be visible to the caller
 * in df.instances (row-level security decides); the rows are then read
 * with the bootstrap superuser's privileges, since users have none on
 * df_internal (pgd_read_as_engine, visibility.c).
 *
 * attempts: the undo's runs, every retry of its steps included: the times
 * the undo was started (df_internal.compensations.attempts, which also
 * names the scope of a start after the first, saga.c) and the retries
 * in the history within the scopes of its starts.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "common/spi.h"
#include "monitor/monitor.h"

#define COMPENSATION_COLUMNS 7

static void
read_compensations(const char *instance_id, void *arg)
{
	Oid	  types[1] = {TEXTOID};
	Datum values[1];

	values[0] = CStringGetTextDatum(instance_id);
	pgd_spi_exec("SELECT c.node_id::text, n.right_node::text, c.registered_at, c.state, "
				 "CASE WHEN c.attempts OPERATOR(pg_catalog.=) 0 THEN 0 "
				 "ELSE c.attempts OPERATOR(pg_catalog.+) "
				 "(SELECT pg_catalog.count(*) FROM df_internal.history_events e "
				 " WHERE e.instance_id OPERATOR(pg_catalog.=) c.instance_id "
				 " AND e.kind OPERATOR(pg_catalog.=) ANY ('{retry_scheduled,step_retried}') "
				 " AND (e.scope OPERATOR(pg_catalog.=) u.scope "
				 "  OR pg_catalog.starts_with(e.scope, u.scope OPERATOR(pg_catalog.||) '::')))::int END, "
				 "c.error, c.scope "
				 "FROM df_internal.compensations c "
				 "CROSS JOIN LATERAL (SELECT c.scope OPERATOR(pg_catalog.||) '::' "
				 " OPERATOR(pg_catalog.||) c.node_id OPERATOR(pg_catalog.||) '::' "
				 " OPERATOR(pg_catalog.||) c.seq::text AS scope) u "
				 "LEFT JOIN df.nodes n "
				 "ON n.instance_id OPERATOR(pg_catalog.=) c.instance_id "
				 "AND n.id OPERATOR(pg_catalog.=) c.node_id "
				 "WHERE c.instance_id OPERATOR(pg_catalog.=) $1 ORDER BY c.seq",
				 1, types, values, NULL, false);
	pgd_spi_rows_to_srf((FunctionCallInfo) arg, COMPENSATION_COLUMNS);
}

PG_FUNCTION_INFO_V1(pgd_compensations);
Datum
pgd_compensations(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	(void) pgd_read_as_engine(text_to_cstring(PG_GETARG_TEXT_PP(0)),
							  read_compensations, fcinfo);
	return (Datum) 0;
}
