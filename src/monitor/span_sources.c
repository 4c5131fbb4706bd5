/*-------------------------------------------------------------------------
 *
 * span_sources.c
 *	  The OTLP exporter's sources of spans: for every instance it
 *	  is exporting, the graph and the history read so far, kept between its
 *	  scans, fed by one read of the new history events per scan.
 *
 * A scan reads the events after the cursor in one statement, by the index
 * on df_internal.events (id), and hands each to its instance's source.  An
 * instance seen for the first time gets its graph (all of the scan's new
 * instances in two statements, monitor_load.c), its trace columns (one
 * more) and, unless its first event in the scan is its start, its earlier
 * history (one more); a source whose graph grew (a node the graph does not
 * have: df.map's copies) or whose HTTP step completed (the status code is
 * in the node's result) reloads its graph, again all of them together.
 * So a scan takes at most seven statements, however many instances it sees.
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
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "common/spi.h"
#include "monitor/monitor.h"
#include "monitor/span_sources.h"

#define ID_KEY_LEN 16 /* instance ids are 8 characters */

typedef struct Source
{
	char			 id[ID_KEY_LEN]; /* the hash key */
	MemoryContext	 cxt;			 /* the history and the trace columns */
	MemoryContext	 view_cxt;		 /* the graph (replaced on a reload) */
	PgdInstanceView *view;
	HTAB			*rows; /* node id -> row of view, to see new nodes */
	HistRead		 h;
	bool			 gone;		  /* the instance is not there */
	bool			 reload;	  /* the graph must be read again */
	bool			 touched;	  /* (during a read) among its events */
	bool			 fresh;		  /* (during a read) new in it */
	bool			 starts_here; /* (during a read) its start is in it */
} Source;

typedef struct RowKey
{
	char id[ID_KEY_LEN];
	int	 row;
} RowKey;

struct PgdSpanSources
{
	MemoryContext cxt;
	HTAB		 *sources;
};

PgdSpanSources *
pgd_span_sources_create(MemoryContext parent)
{
	MemoryContext cxt =
		AllocSetContextCreate(parent, "pg_durable span sources",
							  ALLOCSET_DEFAULT_SIZES);
	PgdSpanSources *all = MemoryContextAllocZero(cxt, sizeof(PgdSpanSources));
	HASHCTL			ctl;

	all->cxt = cxt;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = ID_KEY_LEN;
	ctl.entrysize = sizeof(Source);
	ctl.hcxt = cxt;
	all->sources = hash_create("pg_durable span sources", 1024, &ctl,
							   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	return all;
}

void
pgd_span_sources_destroy(PgdSpanSources *all)
{
	if (all != NULL)
		MemoryContextDelete(all->cxt);
}

long
pgd_span_sources_count(PgdSpanSources *all)
{
	return hash_get_num_entries(all->sources);
}

static Source *
lookup(PgdSpanSources *all, const char *id, bool create)
{
	char	key[ID_KEY_LEN] = {0};
	bool	found;
	Source *s;

	if (strlen(id) >= ID_KEY_LEN)
		return NULL; /* not an instance id */
	strlcpy(key, id, sizeof(key));
	s = hash_search(all->sources, key, create ? HASH_ENTER : HASH_FIND,
					&found);
	if (s != NULL && create && !found)
	{
		s->cxt = AllocSetContextCreate(all->cxt, "pg_durable span source",
									   ALLOCSET_SMALL_SIZES);
		s->view_cxt = NULL;
		s->view = NULL;
		s->rows = NULL;
		memset(&s->h, 0, sizeof(s->h));
		s->h.cxt = s->cxt;
		s->gone = false;
		s->reload = true;
		s->touched = s->fresh = s->starts_here = false;
	}
	return s;
}

void
pgd_span_sources_forget(PgdSpanSources *all, const char *instance_id)
{
	Source *s = lookup(all, instance_id, false);

	if (s == NULL)
		return;
	MemoryContextDelete(s->cxt); /* (the graph's context is a child) */
	hash_search(all->sources, s->id, HASH_REMOVE, NULL);
}

/* The node ids of a freshly loaded graph, to tell a node it lacks. */
static void
index_view(Source *s)
{
	HASHCTL ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = ID_KEY_LEN;
	ctl.entrysize = sizeof(RowKey);
	ctl.hcxt = s->view_cxt;
	s->rows =
		hash_create("pg_durable span source rows", Max(s->view->nnodes, 16),
					&ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	for (int i = 0; i < s->view->nnodes; i++)
	{
		char	key[ID_KEY_LEN] = {0};
		RowKey *r;

		if (strlen(s->view->nodes[i].id) >= ID_KEY_LEN)
			continue;
		strlcpy(key, s->view->nodes[i].id, sizeof(key));
		r = hash_search(s->rows, key, HASH_ENTER, NULL);
		r->row = i;
	}
}

static const PgdNodeRow *
node_of(Source *s, const char *node_id)
{
	char	key[ID_KEY_LEN] = {0};
	RowKey *r;

	if (s->rows == NULL || strlen(node_id) >= ID_KEY_LEN)
		return NULL;
	strlcpy(key, node_id, sizeof(key));
	r = hash_search(s->rows, key, HASH_FIND, NULL);
	return r ? &s->view->nodes[r->row] : NULL;
}

static Datum
text_array(int n, char **ids)
{
	Datum *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = pgd_text_datum(ids[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false,
										   TYPALIGN_INT));
}

/* (inside SPI) the graphs of the sources marked for a reload */
static void
reload_views(Source **list, int n)
{
	char			**ids = palloc(sizeof(char *) * Max(n, 1));
	PgdInstanceView **views = palloc(sizeof(PgdInstanceView *) * Max(n, 1));
	MemoryContext	 *cxts = palloc(sizeof(MemoryContext) * Max(n, 1));
	int				  k = 0;

	for (int i = 0; i < n; i++)
		if (list[i]->reload && !list[i]->gone)
		{
			ids[k] = list[i]->id;
			/* (a child of the source's context: it goes with the source) */
			cxts[k++] = AllocSetContextCreate(list[i]->cxt,
											  "pg_durable span source graph",
											  ALLOCSET_SMALL_SIZES);
		}
	if (k == 0)
		return;
	pgd_load_instance_views(k, (const char *const *) ids, views, cxts);
	k = 0;
	for (int i = 0; i < n; i++)
	{
		Source *s = list[i];

		if (!s->reload || s->gone)
			continue;
		if (s->view_cxt != NULL)
			MemoryContextDelete(s->view_cxt);
		s->view_cxt = cxts[k];
		s->view = views[k];
		s->reload = false;
		s->rows = NULL;
		if (s->view == NULL)
			s->gone = true;
		else
			index_view(s);
		k++;
	}
}

/*
 * (inside SPI) the trace columns of the new sources, and the history up to
 * after of those whose start is not among the scan's events.
 */
static void
read_new(PgdSpanSources *all, Source **list, int n, int64 after)
{
	char **ids = palloc(sizeof(char *) * Max(n, 1));
	char **prior = palloc(sizeof(char *) * Max(n, 1));
	int	   k = 0, np = 0;
	Oid	   types[2] = {TEXTARRAYOID, INT8OID};
	Datum  values[2];
	int	   rows;

	for (int i = 0; i < n; i++)
	{
		if (list[i]->gone)
			continue;
		ids[k++] = list[i]->id;
		if (!list[i]->starts_here)
			prior[np++] = list[i]->id;
	}
	if (k == 0)
		return;
	/* to_jsonb: a schema not yet updated to 0.4.0 has no trace columns */
	values[0] = text_array(k, ids);
	rows =
		pgd_spi_exec("SELECT i.id, pg_catalog.to_jsonb(i) OPERATOR(pg_catalog.->>) 'trace_id', "
					 "pg_catalog.to_jsonb(i) OPERATOR(pg_catalog.->>) 'traceparent' "
					 "FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) ANY ($1)",
					 1, types, values, NULL, false);
	for (int r = 0; r < rows; r++)
	{
		Source *s = lookup(all, pgd_spi_getstring(r, 1), false);
		char   *tid = pgd_spi_getstring(r, 2);
		char   *tp = pgd_spi_getstring(r, 3);

		if (s == NULL)
			continue;
		s->h.trace_id = tid ? MemoryContextStrdup(s->cxt, tid) : NULL;
		s->h.traceparent = tp ? MemoryContextStrdup(s->cxt, tp) : NULL;
	}
	if (np == 0)
		return;

	/* the events up to the cursor: the sources are empty, so they come first */
	values[0] = text_array(np, prior);
	values[1] = Int64GetDatum(after);
	rows =
		pgd_spi_exec(psprintf("SELECT instance_id, " PGD_SQL_SPAN_EVENT_COLUMNS
							  " FROM %s h "
							  "WHERE instance_id OPERATOR(pg_catalog.=) ANY ($1) "
							  "AND id OPERATOR(pg_catalog.<=) $2 ORDER BY id, sub",
							  pgd_history_events()),
					 2, types, values, NULL, false);
	for (int r = 0; r < rows; r++)
	{
		Source *s = lookup(all, pgd_spi_getstring(r, 1), false);

		if (s == NULL || s->gone)
			continue;
		pgd_hist_reserve(&s->h, 1);
		pgd_hist_event_from_spi(&s->h, &s->h.events[s->h.nevents++],
								SPI_tuptable, r, 2);
	}
}

/* After an event of an earlier source: must its graph be read again? */
static void
check_graph(Source *s, const HistEvent *e)
{
	const PgdNodeRow *row;

	if (e->node_id == NULL || s->fresh || s->reload)
		return;
	row = node_of(s, e->node_id);
	if (row == NULL)
		s->reload = true; /* a node added since (df.map's copies) */
	else if ((row->type == DF_NODE_HTTP ||
			  row->type == DF_NODE_HTTP_MULTIPART) &&
			 strcmp(e->kind, "node_completed") == 0)
		s->reload = true; /* its status code is in the node's result */
}

char **
pgd_span_sources_read(PgdSpanSources *all, int64 after, int64 bound, int limit,
					  int64 *through, int *ntouched)
{
	Oid			   types[3] = {INT8OID, INT8OID, INT4OID};
	Datum		   values[3];
	int			   n;
	SPITupleTable *tt;
	char		 **inst;
	Source		 **touched;
	Source		 **fresh;
	int			   nt = 0, nf = 0;
	char		 **ids;

	values[0] = Int64GetDatum(after);
	values[1] = Int64GetDatum(bound);
	values[2] = Int32GetDatum(limit);
	n = pgd_spi_exec(psprintf("SELECT instance_id, " PGD_SQL_SPAN_EVENT_COLUMNS
							  " FROM %s h "
							  "WHERE id OPERATOR(pg_catalog.>) $1 AND id OPERATOR(pg_catalog.<=) $2 "
							  "AND %s ORDER BY id, sub LIMIT $3",
							  pgd_history_events(), pgd_history_window(1, 2)),
					 3, types, values, NULL, false);
	*through = bound;
	if (n == limit && n > 0)
	{
		bool  isnull;
		int64 last =
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[n - 1],
										SPI_tuptable->tupdesc, 2, &isnull));

		/*
		 * The limit may have left out later events of the last id (a
		 * start's end, sub 1; a one-step instance's end, sub 2): its events
		 * are read again by the next batch.  There are others before them:
		 * an id has at most four events, and the limit is at least four.
		 */
		if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[n - 1],
										SPI_tuptable->tupdesc, 9, &isnull)) <
			2)
		{
			while (n > 0 &&
				   DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[n - 1],
											   SPI_tuptable->tupdesc, 2,
											   &isnull)) == last)
				n--;
			last--;
		}
		*through = last;
	}
	*ntouched = 0;
	if (n == 0)
		return NULL;
	/* (the later statements leave this result alone until SPI_finish) */
	tt = SPI_tuptable;
	inst = pgd_spi_column(n, 1);
	touched = palloc(sizeof(Source *) * n);
	fresh = palloc(sizeof(Source *) * n);

	for (int i = 0; i < n; i++)
	{
		Source *s = lookup(all, inst[i], true);

		if (s == NULL)
			continue;
		if (s->view == NULL && !s->gone && !s->touched)
		{
			char *kind = SPI_getvalue(tt->vals[i], tt->tupdesc, 4);

			s->fresh = true;
			s->starts_here = kind && strcmp(kind, "instance_started") == 0;
			fresh[nf++] = s;
		}
		if (!s->touched)
		{
			s->touched = true;
			touched[nt++] = s;
		}
	}
	reload_views(fresh, nf);
	read_new(all, fresh, nf, after);

	for (int i = 0; i < n; i++)
	{
		Source	  *s = lookup(all, inst[i], false);
		HistEvent *e;

		if (s == NULL || s->gone)
			continue;
		/* a batch read again (its post failed): the events are there */
		if (s->h.nevents > 0)
		{
			const HistEvent *last = &s->h.events[s->h.nevents - 1];
			bool			 isnull;
			int64 id = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 2,
												   &isnull));
			int sub = DatumGetInt32(SPI_getbinval(tt->vals[i], tt->tupdesc, 9,
												  &isnull));

			if (id < last->id || (id == last->id && sub <= last->sub))
				continue;
		}
		pgd_hist_reserve(&s->h, 1);
		e = &s->h.events[s->h.nevents++];
		pgd_hist_event_from_spi(&s->h, e, tt, i, 2);
		check_graph(s, e);
	}
	reload_views(touched, nt);

	ids = palloc(sizeof(char *) * nt);
	for (int i = 0; i < nt; i++)
	{
		touched[i]->touched = false;
		touched[i]->fresh = false;
		if (!touched[i]->gone)
			ids[(*ntouched)++] = pstrdup(touched[i]->id);
	}
	return ids;
}

PgdSpanSet *
pgd_span_sources_spans(PgdSpanSources *all, const char *instance_id)
{
	Source *s = lookup(all, instance_id, false);

	if (s == NULL || s->gone || s->view == NULL)
		return NULL;
	return pgd_spans_build(s->id, s->view, &s->h);
}
