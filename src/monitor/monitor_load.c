/*-------------------------------------------------------------------------
 *
 * monitor_load.c
 *	  Load an instance and its node rows as the calling role sees them, and
 *	  link the rows into the graph they form.
 *
 * The persisted form keeps the children of a node in left_node/right_node
 * and, for IF and LOOP conditions and JOIN extras, in the query config
 * ({"condition_node": "<id>"}, {"extra_nodes": ["<id>", ...]}); this file
 * turns both into row indexes.  It trusts nothing about the rows: a link
 * to a node that does not exist is left out, and the inference walk visits
 * each row once, so rows written by hand cannot make it loop.
 *
 * Both statements read under row-level security as the caller, on fresh
 * snapshots: the instance row first (no row: the caller may not see it),
 * then its nodes.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/spi.h"
#include "graph/persisted.h"
#include "monitor/monitor.h"

/* Index of the row with this id, or -1 (rows are few per instance on average). */
static int
find_row(const PgdInstanceView *v, const char *id)
{
	int i;

	if (id == NULL)
		return -1;
	for (i = 0; i < v->nnodes; i++)
		if (strcmp(v->nodes[i].id, id) == 0)
			return i;
	return -1;
}

static void
link_rows(PgdInstanceView *v)
{
	int i;

	for (i = 0; i < v->nnodes; i++)
	{
		PgdNodeRow	 *r = &v->nodes[i];
		DfConfigLinks links;
		int			  k;

		r->left = find_row(v, r->left_id);
		r->right = find_row(v, r->right_id);
		df_config_links(r->type, r->query, &links);
		r->condition = find_row(v, links.condition_id);
		r->nextras = 0;
		r->extras =
			links.nextras > 0 ? palloc(sizeof(int) * links.nextras) : NULL;
		for (k = 0; k < links.nextras; k++)
		{
			int e = find_row(v, links.extra_ids[k]);

			if (e >= 0)
				r->extras[r->nextras++] = e;
		}
	}
}

static char *
copy_value(MemoryContext cxt, int row, int col)
{
	char *s =
		SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return s ? MemoryContextStrdup(cxt, s) : NULL;
}

PgdInstanceView *
pgd_load_instance_view(const char *instance_id)
{
	MemoryContext	 outer = CurrentMemoryContext;
	Oid				 types[1] = {TEXTOID};
	Datum			 values[1];
	PgdInstanceView *v;
	int				 n, i;

	values[0] = pgd_text_datum(instance_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	if (pgd_spi_exec("SELECT i.id, i.label, i.status, i.root_node, " PGD_SQL_OUTPUT
					 " "
					 "FROM " PGD_SQL_ROOT_JOIN
					 " WHERE i.id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) == 0)
	{
		SPI_finish();
		return NULL;
	}
	v = MemoryContextAllocZero(outer, sizeof(PgdInstanceView));
	v->id = copy_value(outer, 0, 1);
	v->label = copy_value(outer, 0, 2);
	v->status = copy_value(outer, 0, 3);
	v->root_id = copy_value(outer, 0, 4);
	v->output = copy_value(outer, 0, 5);

	n = pgd_spi_exec("SELECT id, node_type, query, result_name, left_node, right_node, "
					 "status, result::text, status_details::text, "
					 "status_details OPERATOR(pg_catalog.->>) 'execution_id', updated_at "
					 "FROM df.nodes WHERE instance_id OPERATOR(pg_catalog.=) $1 ORDER BY id",
					 1, types, values, NULL, false);
	v->nnodes = n;
	v->nodes = MemoryContextAllocZero(outer, sizeof(PgdNodeRow) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		PgdNodeRow *r = &v->nodes[i];
		bool		isnull;
		Datum		d;

		r->id = copy_value(outer, i, 1);
		r->node_type = copy_value(outer, i, 2);
		if (r->node_type == NULL ||
			!df_node_type_from_name(r->node_type, &r->type))
			r->type =
				DF_NODE_SQL; /* a row CHECKs would reject: show it as a leaf */
		r->query = copy_value(outer, i, 3);
		r->result_name = copy_value(outer, i, 4);
		r->left_id = copy_value(outer, i, 5);
		r->right_id = copy_value(outer, i, 6);
		r->status = copy_value(outer, i, 7);
		r->result = copy_value(outer, i, 8);
		r->status_details = copy_value(outer, i, 9);
		r->stamp = copy_value(outer, i, 10);
		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 11,
						  &isnull);
		r->updated_at = isnull ? 0 : DatumGetTimestampTz(d);
		r->updated_at_null = isnull;
	}
	SPI_finish();

	{
		MemoryContext old = MemoryContextSwitchTo(outer);

		link_rows(v);
		v->root = find_row(v, v->root_id);
		pgd_infer_statuses(v);
		MemoryContextSwitchTo(old);
	}
	return v;
}
