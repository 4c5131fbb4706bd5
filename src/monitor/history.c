/*-------------------------------------------------------------------------
 *
 * history.c
 *	  df.history: the event history of an instance (df_internal.events, as
 *	  the view df_internal.history_events shows it: a start written in its
 *	  end's row comes as a row of its own).
 *
 * The events are written by the engine's transitions (store/statements.c).
 * df.history reads as the caller: the instance must be visible to it in
 * df.instances (row-level security decides); the events themselves are
 * read with the bootstrap superuser's privileges, since users have none on
 * df_internal (pgd_read_as_engine, visibility.c).
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

#define HISTORY_COLUMNS 8

const char *
pgd_history_events(void)
{
	if (pgd_internal_relation_exists("history_events"))
		return "df_internal.history_events";
	return "(SELECT o.*, 1 AS sub, o.id AS row_id FROM df_internal.events o)";
}

/*
 * The condition on the rows of pgd_history_events() that a reader of the
 * events with ids in ($n, $m] adds (n and m: its parameters), so that the
 * BRIN indexes on df_internal.events find the rows: an event's id is its
 * row's, or for the end of a start and end written in one row with
 * events between, its ended_id.
 */
char *
pgd_history_window(int n, int m)
{
	if (pgd_internal_relation_exists("events_ended_id_idx"))
		return psprintf("((row_id OPERATOR(pg_catalog.>) $%d AND row_id OPERATOR(pg_catalog.<=) $%d) "
						"OR (ended_id OPERATOR(pg_catalog.>) $%d AND ended_id OPERATOR(pg_catalog.<=) $%d))",
						n, m, n, m);
	return psprintf("row_id OPERATOR(pg_catalog.>) $%d AND row_id OPERATOR(pg_catalog.<=) $%d",
					n, m);
}

static void
read_history(const char *instance_id, void *arg)
{
	Oid	  types[1] = {TEXTOID};
	Datum values[1];

	values[0] = CStringGetTextDatum(instance_id);
	pgd_spi_exec(psprintf("SELECT e.at, e.kind, e.node_id::text, n.node_type, e.scope, "
						  "e.attempt, e.duration_ms, e.detail "
						  "FROM %s e LEFT JOIN df.nodes n "
						  "ON n.instance_id OPERATOR(pg_catalog.=) e.instance_id "
						  "AND n.id OPERATOR(pg_catalog.=) e.node_id "
						  "WHERE e.instance_id OPERATOR(pg_catalog.=) $1 ORDER BY e.id, e.sub",
						  pgd_history_events()),
				 1, types, values, NULL, false);
	pgd_spi_rows_to_srf((FunctionCallInfo) arg, HISTORY_COLUMNS);
}

PG_FUNCTION_INFO_V1(pgd_history);
Datum
pgd_history(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	(void) pgd_read_as_engine(text_to_cstring(PG_GETARG_TEXT_PP(0)),
							  read_history, fcinfo);
	return (Datum) 0;
}
