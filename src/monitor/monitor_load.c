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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/spi.h"
#include "graph/persisted.h"
#include "monitor/monitor.h"

/*
 * The rows sorted by id (strcmp), so that a link is found by binary search:
 * linking is O(n log n), not quadratic (a fan-out has 10,000 rows).
 */
typedef struct RowIndex
{
	const PgdInstanceView *v;
	int					  *sorted;
} RowIndex;

static const PgdInstanceView *sort_view; /* (qsort has no argument) */

static int
cmp_rows(const void *a, const void *b)
{
	return strcmp(sort_view->nodes[*(const int *) a].id,
				  sort_view->nodes[*(const int *) b].id);
}

static void
index_rows(RowIndex *ix, const PgdInstanceView *v)
{
	ix->v = v;
	ix->sorted = palloc(sizeof(int) * Max(v->nnodes, 1));
	for (int i = 0; i < v->nnodes; i++)
		ix->sorted[i] = i;
	sort_view = v;
	qsort(ix->sorted, v->nnodes, sizeof(int), cmp_rows);
	sort_view = NULL;
}

/* Index of the row with this id, or -1. */
static int
find_row(const RowIndex *ix, const char *id)
{
	int lo = 0, hi = ix->v->nnodes - 1;

	if (id == NULL)
		return -1;
	while (lo <= hi)
	{
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(ix->v->nodes[ix->sorted[mid]].id, id);

		if (c == 0)
			return ix->sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static void
link_rows(PgdInstanceView *v)
{
	RowIndex ix;
	int		 i;

	index_rows(&ix, v);
	for (i = 0; i < v->nnodes; i++)
	{
		PgdNodeRow	 *r = &v->nodes[i];
		DfConfigLinks links;
		int			  k;

		r->left = find_row(&ix, r->left_id);
		r->right = find_row(&ix, r->right_id);
		df_config_links(r->type, r->query, &links);
		r->condition = find_row(&ix, links.condition_id);
		r->nextras = 0;
		r->extras =
			links.nextras > 0 ? palloc(sizeof(int) * links.nextras) : NULL;
		for (k = 0; k < links.nextras; k++)
		{
			int e = find_row(&ix, links.extra_ids[k]);

			if (e >= 0)
				r->extras[r->nextras++] = e;
		}
	}
	v->root = find_row(&ix, v->root_id);
	pfree(ix.sorted);
}

static char *
copy_value(MemoryContext cxt, int row, int col)
{
	char *s =
		SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return s ? MemoryContextStrdup(cxt, s) : NULL;
}

#define SQL_NODE_COLUMNS \
	"id, node_type, query, result_name, left_node, right_node, status, " \
	"result::text, status_details::text, " \
	"status_details OPERATOR(pg_catalog.->>) 'execution_id', updated_at"

/*
 * The columns the spans need (pgd_load_instance_views): the graph, and the
 * result of an HTTP step only (its status code).
 */
#define SQL_NODE_LINK_COLUMNS \
	"id, node_type, query, result_name, left_node, right_node, NULL, " \
	"CASE WHEN node_type OPERATOR(pg_catalog.=) ANY ('{HTTP,HTTP_MULTIPART}'::text[]) " \
	"THEN result::text END, NULL, NULL, NULL::timestamptz"

/* Row r from columns col .. col + 10 of SPI row i. */
static void
fill_row(PgdNodeRow *r, MemoryContext cxt, int i, int col)
{
	bool  isnull;
	Datum d;

	r->id = copy_value(cxt, i, col);
	r->node_type = copy_value(cxt, i, col + 1);
	if (r->node_type == NULL ||
		!df_node_type_from_name(r->node_type, &r->type))
		r->type =
			DF_NODE_SQL; /* a row CHECKs would reject: show it as a leaf */
	r->query = copy_value(cxt, i, col + 2);
	r->result_name = copy_value(cxt, i, col + 3);
	r->left_id = copy_value(cxt, i, col + 4);
	r->right_id = copy_value(cxt, i, col + 5);
	r->status = copy_value(cxt, i, col + 6);
	r->result = copy_value(cxt, i, col + 7);
	r->status_details = copy_value(cxt, i, col + 8);
	r->stamp = copy_value(cxt, i, col + 9);
	d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col + 10,
					  &isnull);
	r->updated_at = isnull ? 0 : DatumGetTimestampTz(d);
	r->updated_at_null = isnull;
}

/* The instance columns of SPI row i, in a new view. */
static PgdInstanceView *
new_view(MemoryContext cxt, int i)
{
	PgdInstanceView *v = MemoryContextAllocZero(cxt, sizeof(PgdInstanceView));

	v->id = copy_value(cxt, i, 1);
	v->label = copy_value(cxt, i, 2);
	v->status = copy_value(cxt, i, 3);
	v->root_id = copy_value(cxt, i, 4);
	v->output = copy_value(cxt, i, 5);
	v->root = -1;
	return v;
}

#define SQL_VIEW_INSTANCE \
	"SELECT i.id, i.label, i.status, i.root_node, " PGD_SQL_OUTPUT \
	" FROM " PGD_SQL_ROOT_JOIN " WHERE i.id OPERATOR(pg_catalog.=) "

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

	if (pgd_spi_exec(SQL_VIEW_INSTANCE "$1", 1, types, values, NULL, false) ==
		0)
	{
		SPI_finish();
		return NULL;
	}
	v = new_view(outer, 0);
	n = pgd_spi_exec("SELECT " SQL_NODE_COLUMNS " FROM df.nodes "
					 "WHERE instance_id OPERATOR(pg_catalog.=) $1 ORDER BY id",
					 1, types, values, NULL, false);
	v->nnodes = n;
	v->nodes = MemoryContextAllocZero(outer, sizeof(PgdNodeRow) * Max(n, 1));
	for (i = 0; i < n; i++)
		fill_row(&v->nodes[i], outer, i, 1);
	SPI_finish();

	{
		MemoryContext old = MemoryContextSwitchTo(outer);

		link_rows(v);
		pgd_infer_statuses(v);
		MemoryContextSwitchTo(old);
	}
	return v;
}

static const char *const *sort_ids; /* (qsort has no argument) */

static int
cmp_ids(const void *a, const void *b)
{
	return strcmp(sort_ids[*(const int *) a], sort_ids[*(const int *) b]);
}

/* The position in order (ids sorted) of id, or -1. */
static int
find_id(const char *const *ids, const int *order, int n, const char *id)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi)
	{
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(ids[order[mid]], id);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

void
pgd_load_instance_views(int n, const char *const *ids, PgdInstanceView **views,
						MemoryContext *cxts)
{
	MemoryContext old = CurrentMemoryContext;
	Oid			  types[1] = {TEXTARRAYOID};
	Datum		 *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			 *order = palloc(sizeof(int) * Max(n, 1));
	Datum		  values[1];
	int			  ni, nn, row = 0;
	char		**inst;

	for (int k = 0; k < n; k++)
	{
		views[k] = NULL;
		elems[k] = pgd_text_datum(ids[k]);
		order[k] = k;
	}
	if (n == 0)
		return;
	values[0] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false,
												TYPALIGN_INT));
	sort_ids = ids;
	qsort(order, n, sizeof(int), cmp_ids);
	sort_ids = NULL;

	ni =
		pgd_spi_exec("SELECT id, label, status, root_node, NULL FROM df.instances "
					 "WHERE id OPERATOR(pg_catalog.=) ANY ($1)",
					 1, types, values, NULL, false);
	for (int i = 0; i < ni; i++)
	{
		int o = find_id(ids, order, n,
						SPI_getvalue(SPI_tuptable->vals[i],
									 SPI_tuptable->tupdesc, 1));

		if (o >= 0 && views[order[o]] == NULL)
			views[order[o]] = new_view(cxts[order[o]], i);
	}
	/* the rows of every instance, grouped by instance id in strcmp order */
	nn = pgd_spi_exec("SELECT instance_id, " SQL_NODE_LINK_COLUMNS
					  " FROM df.nodes "
					  "WHERE instance_id OPERATOR(pg_catalog.=) ANY ($1) "
					  "ORDER BY instance_id COLLATE \"C\", id",
					  1, types, values, NULL, false);
	inst = pgd_spi_column(nn, 1);
	for (int o = 0; o < n; o++)
	{
		int				 k = order[o];
		PgdInstanceView *v = views[k];
		int				 count = 0;

		while (row < nn && strcmp(inst[row], ids[k]) < 0)
			row++;
		while (row + count < nn && strcmp(inst[row + count], ids[k]) == 0)
			count++;
		if (v == NULL)
			continue;
		v->nnodes = count;
		v->nodes = MemoryContextAllocZero(cxts[k],
										  sizeof(PgdNodeRow) * Max(count, 1));
		for (int i = 0; i < count; i++)
			fill_row(&v->nodes[i], cxts[k], row + i, 2);
		row += count;
		MemoryContextSwitchTo(cxts[k]);
		link_rows(v);
		MemoryContextSwitchTo(old);
	}
	pfree(elems);
	pfree(order);
}
