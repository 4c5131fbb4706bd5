/*-------------------------------------------------------------------------
 *
 * row_layouts.c
 *	  The columns of every table the store writes without a statement, as
 *	  the C code knows them: df.instances and df_internal.runs (start_rows.c),
 *	  df.nodes (start_rows.c, node_rows.c), df_internal.events
 *	  (node_rows.c), df_internal.tasks and df_internal.joins (task_rows.c).
 *
 * A direct write fills the columns it knows and leaves the others to a
 * default or to NULL, so a column added to one of these tables in the
 * install script and not here (or here and not there) would be written
 * wrong without an error: a NULL where the statement would put its
 * default, or a statement instead of the direct write.  The layouts are
 * the one list both sides are compared against: task_rows.c writes a row
 * without a statement only when the table's columns are those of its
 * layout, and df_internal.row_layouts() returns them for the regression
 * test row_layouts, which compares them with pg_attribute of the installed
 * tables.  A column added on either side fails that test until the other
 * side knows it.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "store/store_internal.h"

static const char *const instances_columns[] = {
	"id",		  "label",			 "root_node",		   "status",
	"submitted_by", "database",		 "created_at",		   "updated_at",
	"completed_at", "idempotency_key", "idempotency_digest", "trace_id",
	"traceparent",	"tracestate"};

static const char *const nodes_columns[] = {
	"id",	  "instance_id",  "node_type",	"query",	  "result_name",
	"left_node", "right_node",	  "status",		"result",	  "error",
	"submitted_by", "database", "created_at", "updated_at", "status_details"};

static const char *const events_columns[] = {
	"id",		   "instance_id", "at",			 "kind",
	"node_id",	   "scope",		  "attempt",	 "duration_ms",
	"detail",	   "started_at",  "ended_id",	 "instance_started_at",
	"instance_completed_at",	  "instance_duration_ms"};

static const char *const runs_columns[] = {
	"instance_id", "submitted_by", "label",		 "database",
	"vars",		   "status",	   "created_at", "start_snapshot"};

static const char *const tasks_columns[] = {
	"id",		   "instance_id",	"node_id",	 "scope",
	"kind",		   "run_at",		"attempts",	 "lease_until",
	"lease_token", "engine_errors", "last_engine_error"};

static const char *const joins_columns[] = {"instance_id", "node_id", "scope",
											"remaining"};

#define LAYOUT(schema, table, cols) {schema, table, cols, lengthof(cols)}

static const PgdRowLayout layouts[] = {
	LAYOUT("df", "instances", instances_columns),
	LAYOUT("df", "nodes", nodes_columns),
	LAYOUT("df_internal", "events", events_columns),
	LAYOUT("df_internal", "runs", runs_columns),
	LAYOUT("df_internal", "tasks", tasks_columns),
	LAYOUT("df_internal", "joins", joins_columns),
};

const PgdRowLayout *
store_row_layout(PgdRowTable table)
{
	Assert(table >= 0 && table < (int) lengthof(layouts));
	return &layouts[table];
}

/*
 * df_internal.row_layouts(): one row (table_name, column_name) for each
 * column of each layout, the table schema-qualified.
 */
PG_FUNCTION_INFO_V1(pgd_row_layouts);
Datum
pgd_row_layouts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int t = 0; t < (int) lengthof(layouts); t++)
	{
		char *name = psprintf("%s.%s", layouts[t].schema, layouts[t].table);

		for (int c = 0; c < layouts[t].ncolumns; c++)
		{
			Datum values[2];
			bool  nulls[2] = {false, false};

			values[0] = CStringGetTextDatum(name);
			values[1] = CStringGetTextDatum(layouts[t].columns[c]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
								 nulls);
		}
	}
	return (Datum) 0;
}
