/*-------------------------------------------------------------------------
 *
 * spans.c
 *	  The spans of an instance, derived from its history.
 *
 * Nothing is written for tracing: the spans are a reading of
 * df_internal.events with the graph of df.nodes.
 *	 - root (SERVER): instance_started to the instance's end; its parent is
 *	   the span of df.start(traceparent) when one was given;
 *	 - a node execution (INTERNAL): node_started to node_completed or
 *	   node_failed of that node in that scope; its parent is the execution
 *	   of the node's nearest ancestor in the graph that has one, whose
 *	   scope is the longest prefix of its own (a branch, a loop body, a
 *	   retried subtree and an undo run in scopes below their parent's),
 *	   else the root.  A THEN inside a THEN has no span of its own, so the
 *	   steps of a sequence are siblings under it, not a staircase;
 *	 - an attempt of a SQL or HTTP step (INTERNAL, CLIENT for HTTP): the
 *	   first from node_started, each later one from the retry_scheduled
 *	   event of the one before plus its delay, to the next retry_scheduled
 *	   or the node's end.  The HTTP worker sends the same attempt's span id
 *	   in traceparent (steps/step_http.c).
 * Spans still open when the instance ended end with it (cancelled, a lost
 * RACE branch).  A span of a running instance has no end yet.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "common/json.h"
#include "common/spi.h"
#include "common/trace.h"
#include "graph/graph.h"
#include "monitor/monitor.h"
#include "monitor/spans.h"

/* room for a node id as a hash key (ids are 8 hex digits) */
#define NODE_KEY_LEN 64

/* db.query.text is cut at this many bytes */
#define QUERY_TEXT_MAX 1024

/* An entry of the (scope, node) index: the latest execution with that hash. */
typedef struct ExecEntry
{
	uint64 key;
	int	   latest;
} ExecEntry;

/* A node id and its row in the view. */
typedef struct RowEntry
{
	char id[NODE_KEY_LEN];
	int	 row;
} RowEntry;

/*
 * While building: indexes so that the work is linear in the history, not
 * quadratic (a fan-out of 10,000 branches is one instance).
 */
typedef struct Builder
{
	PgdSpanSet		*set;
	PgdInstanceView *view;
	int				 cap;
	int				*parent_row; /* graph parent of every view row, -1 */
	int				*row_first;	 /* first execution of every view row, -1 */
	HTAB			*rows;		 /* node id -> row */
	HTAB			*execs; /* hash of (scope, node) -> latest execution */
} Builder;

const char *
pgd_span_kind_name(PgdSpanKind kind)
{
	switch (kind)
	{
		case PGD_SPAN_SERVER:
			return "SERVER";
		case PGD_SPAN_CLIENT:
			return "CLIENT";
		case PGD_SPAN_PRODUCER:
			return "PRODUCER";
		case PGD_SPAN_CONSUMER:
			return "CONSUMER";
		case PGD_SPAN_INTERNAL:
			break;
	}
	return "INTERNAL";
}

const char *
pgd_span_status_name(PgdSpanStatus status)
{
	switch (status)
	{
		case PGD_SPAN_OK:
			return "OK";
		case PGD_SPAN_ERROR:
			return "ERROR";
		case PGD_SPAN_UNSET:
			break;
	}
	return "UNSET";
}

static char *
copy_value(MemoryContext cxt, HeapTuple tup, TupleDesc desc, int col)
{
	char *s = SPI_getvalue(tup, desc, col);

	return s ? MemoryContextStrdup(cxt, s) : NULL;
}

static char *
copy_col(MemoryContext cxt, int row, int col)
{
	char *s =
		SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return s ? MemoryContextStrdup(cxt, s) : NULL;
}

void
pgd_hist_event_from_spi(HistRead *h, HistEvent *e, SPITupleTable *tt, int row,
						int col)
{
	HeapTuple	  tup = tt->vals[row];
	TupleDesc	  desc = tt->tupdesc;
	bool		  isnull;
	char		 *detail;
	MemoryContext old;

	memset(e, 0, sizeof(*e));
	e->id = DatumGetInt64(SPI_getbinval(tup, desc, col, &isnull));
	e->at = DatumGetTimestampTz(SPI_getbinval(tup, desc, col + 1, &isnull));
	e->kind = copy_value(h->cxt, tup, desc, col + 2);
	e->node_id = copy_value(h->cxt, tup, desc, col + 3);
	e->scope = copy_value(h->cxt, tup, desc, col + 4);
	if (e->scope == NULL)
		e->scope = "";
	e->attempt = DatumGetInt32(SPI_getbinval(tup, desc, col + 5, &isnull));
	e->has_attempt = !isnull;
	e->sub = DatumGetInt32(SPI_getbinval(tup, desc, col + 7, &isnull));
	detail = SPI_getvalue(tup, desc, col + 6);
	if (detail != NULL)
	{
		char *err = NULL;

		old = MemoryContextSwitchTo(h->cxt);
		e->detail = dfjson_parse(detail, strlen(detail), &err);
		MemoryContextSwitchTo(old);
	}
}

void
pgd_hist_reserve(HistRead *h, int more)
{
	if (h->nevents + more <= h->cap)
		return;
	h->cap = Max(h->cap * 2, h->nevents + more);
	if (h->events == NULL)
		h->events = MemoryContextAlloc(h->cxt, sizeof(HistEvent) * h->cap);
	else
		h->events = repalloc(h->events, sizeof(HistEvent) * h->cap);
}

/* (as the engine, inside SPI) the events of an instance, appended */
static void
read_events(HistRead *h, const char *instance_id)
{
	Oid	  types[1] = {TEXTOID};
	Datum values[1];
	int	  n;

	values[0] = CStringGetTextDatum(instance_id);
	n = pgd_spi_exec(psprintf("SELECT " PGD_SQL_SPAN_EVENT_COLUMNS
							  " FROM %s h WHERE instance_id OPERATOR(pg_catalog.=) $1 "
							  "ORDER BY id, sub",
							  pgd_history_events()),
					 1, types, values, NULL, false);
	pgd_hist_reserve(h, n);
	for (int i = 0; i < n; i++)
		pgd_hist_event_from_spi(h, &h->events[h->nevents++], SPI_tuptable, i,
								1);
}

/* (as the engine) the instance's trace columns and its history */
static void
read_history(const char *instance_id, void *arg)
{
	HistRead *h = arg;
	Oid		  types[1] = {TEXTOID};
	Datum	  values[1];

	values[0] = CStringGetTextDatum(instance_id);
	/* to_jsonb: a schema not yet updated to 0.4.0 has no trace columns */
	if (pgd_spi_exec("SELECT pg_catalog.to_jsonb(i) OPERATOR(pg_catalog.->>) 'trace_id', "
					 "pg_catalog.to_jsonb(i) OPERATOR(pg_catalog.->>) 'traceparent' "
					 "FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) == 1)
	{
		h->trace_id = copy_col(h->cxt, 0, 1);
		h->traceparent = copy_col(h->cxt, 0, 2);
	}
	read_events(h, instance_id);
}

static const char *
json_str(const DfJson *obj, const char *key)
{
	DfJson *v = obj ? dfjson_get(obj, key) : NULL;

	return v && v->type == DFJ_STRING ? v->str : NULL;
}

static void
attr_str(PgdSpan *s, const char *key, const char *value)
{
	if (value != NULL)
		dfjson_object_add(s->attrs, key, dfjson_make_string(value));
}

/*
 * The messaging attributes of a PUBLISH or EVENT span: the bus and the
 * topic (the node's settings, {"topic": ...}).
 */
static void
messaging_attrs(PgdSpan *s, const PgdNodeRow *r)
{
	char   *err = NULL;
	DfJson *cfg =
		r->query ? dfjson_parse(r->query, strlen(r->query), &err) : NULL;
	DfJson *topic = cfg ? dfjson_get(cfg, "topic") : NULL;

	attr_str(s, "messaging.system", "pg_durable");
	attr_str(s, "messaging.operation.type",
			 s->kind == PGD_SPAN_PRODUCER ? "send" : "receive");
	if (topic != NULL && topic->type == DFJ_STRING)
		attr_str(s, "messaging.destination.name", topic->str);
}

static void
attr_int(PgdSpan *s, const char *key, int64 value)
{
	dfjson_object_add(s->attrs, key,
					  dfjson_make_number(psprintf(INT64_FORMAT, value)));
}

static int
new_span(Builder *b)
{
	PgdSpanSet *set = b->set;
	PgdSpan	   *s;

	if (set->nspans == b->cap)
	{
		b->cap *= 2;
		set->spans = repalloc(set->spans, sizeof(PgdSpan) * b->cap);
	}
	s = &set->spans[set->nspans];
	memset(s, 0, sizeof(*s));
	s->parent = -1;
	s->node = -1;
	s->open_attempt = -1;
	s->prev_exec = -1;
	s->next_of_row = -1;
	s->attrs = dfjson_make_object();
	return set->nspans++;
}

static bool
is_step(DfNodeType type)
{
	return type == DF_NODE_SQL || type == DF_NODE_HTTP ||
		type == DF_NODE_HTTP_MULTIPART;
}

static bool
is_http(DfNodeType type)
{
	return type == DF_NODE_HTTP || type == DF_NODE_HTTP_MULTIPART;
}

/* The HTTP semantic-convention attributes of a node's config. */
static void
http_attrs(PgdSpan *s, const PgdNodeRow *row)
{
	char   *err = NULL;
	DfJson *cfg =
		row->query ? dfjson_parse(row->query, strlen(row->query), &err) : NULL;
	const char *method = json_str(cfg, "method");

	attr_str(s, "http.request.method", method ? method : "POST");
	attr_str(s, "url.full", json_str(cfg, "url"));
}

/* "http:503" -> 503; "sql:22012" -> the SQLSTATE as db.response.status_code */
static void
error_attrs(PgdSpan *s, const PgdNodeRow *row, const DfJson *detail)
{
	const char *code = json_str(detail, "code");
	const char *msg = json_str(detail, "error");

	if (msg != NULL)
		s->status_message = pstrdup(msg);
	if (code == NULL)
		return;
	attr_str(s, "error.type", code);
	if (strncmp(code, "http:", 5) == 0 && row && is_http(row->type))
		attr_int(s, "http.response.status_code", strtol(code + 5, NULL, 10));
	else if (strncmp(code, "sql:", 4) == 0)
		attr_str(s, "db.response.status_code", code + 4);
}

static int
open_attempt(Builder *b, int node_span, TimestampTz start)
{
	int				  a = new_span(b);
	PgdSpan			 *s = &b->set->spans[a];
	PgdSpan			 *ns = &b->set->spans[node_span];
	const PgdNodeRow *row = &b->view->nodes[ns->node];

	ns->nattempts++;
	s->attempt = ns->nattempts;
	s->parent = node_span;
	s->start = start;
	s->scope = ns->scope;
	s->node_id = ns->node_id;
	pgd_trace_span_id(b->set->trace_id, ns->scope, ns->node_id, s->attempt,
					  s->span_id);
	attr_str(s, "pg_durable.node_id", ns->node_id);
	attr_int(s, "pg_durable.attempt", s->attempt);
	if (is_http(row->type))
	{
		s->kind = PGD_SPAN_CLIENT;
		http_attrs(s, row);
		s->name = pstrdup(json_str(s->attrs, "http.request.method"));
	}
	else
	{
		s->kind = PGD_SPAN_INTERNAL;
		attr_str(s, "db.system.name", "postgresql");
		s->name = psprintf("attempt %d", s->attempt);
	}
	ns = &b->set->spans[node_span]; /* (new_span may have moved it) */
	ns->open_attempt = a;
	return a;
}

static void
end_span(PgdSpan *s, const HistEvent *e, PgdSpanStatus status)
{
	if (s->ended)
		return;
	s->end = Max(e->at, s->start);
	s->ended = true;
	s->end_event = e->id;
	s->status = status;
}

static uint64
exec_key(const char *scope, const char *node_id)
{
	uint64 h =
		hash_bytes_extended((const unsigned char *) scope, strlen(scope), 0);

	return hash_bytes_extended((const unsigned char *) node_id,
							   strlen(node_id), h);
}

static int
row_of(Builder *b, const char *node_id)
{
	RowEntry *r;
	char	  key[NODE_KEY_LEN] = {0};

	strlcpy(key, node_id, sizeof(key));
	r = hash_search(b->rows, key, HASH_FIND, NULL);
	return r ? r->row : -1;
}

/* The latest execution of node_id in scope, or -1. */
static int
latest_exec(Builder *b, const char *scope, const char *node_id)
{
	uint64	   key = exec_key(scope, node_id);
	ExecEntry *x = hash_search(b->execs, &key, HASH_FIND, NULL);

	for (int i = x ? x->latest : -1; i >= 0; i = b->set->spans[i].prev_exec)
	{
		PgdSpan *s = &b->set->spans[i];

		if (strcmp(s->scope, scope) == 0 && strcmp(s->node_id, node_id) == 0)
			return i;
	}
	return -1;
}

/*
 * A THEN inside a THEN has no span: a sequence a ~> b ~> c is nested THENs
 * in the graph, and its steps are siblings under the outermost one's span,
 * as the user wrote them (parent_of skips the rows without spans).
 */
static bool
folded_into_parent(Builder *b, int row)
{
	int p = b->parent_row[row];

	return b->view->nodes[row].type == DF_NODE_THEN && p >= 0 &&
		b->view->nodes[p].type == DF_NODE_THEN;
}

/* node_started: a new execution of the node in that scope */
static void
node_started(Builder *b, const HistEvent *e)
{
	PgdSpanSet		 *set = b->set;
	int				  row = row_of(b, e->node_id);
	int				  i;
	int				  nexec = 1;
	PgdSpan			 *s;
	const PgdNodeRow *r;
	uint64			  key;
	ExecEntry		 *x;
	bool			  found;

	if (row < 0 || folded_into_parent(b, row))
		return;
	for (i = latest_exec(b, e->scope, e->node_id); i >= 0;
		 i = set->spans[i].prev_exec)
	{
		if (strcmp(set->spans[i].scope, e->scope) != 0 ||
			strcmp(set->spans[i].node_id, e->node_id) != 0)
			continue;
		if (!set->spans[i].ended)
			return; /* started twice: one execution */
		nexec++;
	}
	i = new_span(b);
	s = &set->spans[i];
	r = &b->view->nodes[row];
	s->node = row;
	s->scope = e->scope;
	s->node_id = e->node_id;
	s->start = e->at;
	/* the event nodes are messaging spans */
	s->kind = r->type == DF_NODE_PUBLISH ? PGD_SPAN_PRODUCER :
		r->type == DF_NODE_EVENT		 ? PGD_SPAN_CONSUMER :
										   PGD_SPAN_INTERNAL;
	key = exec_key(e->scope, e->node_id);
	x = hash_search(b->execs, &key, HASH_ENTER, &found);
	s->prev_exec = found ? x->latest : -1;
	x->latest = i;
	s->next_of_row = b->row_first[row];
	b->row_first[row] = i;
	/* a later execution in the same scope (rare): ids of its own */
	pgd_trace_span_id(set->trace_id, e->scope, e->node_id,
					  nexec == 1 ? 0 : -nexec, s->span_id);
	s->name = r->result_name ?
		psprintf("%s %s", r->node_type, r->result_name) :
		psprintf("%s %s", r->node_type, r->id);
	attr_str(s, "pg_durable.node_id", r->id);
	attr_str(s, "pg_durable.node_type", r->node_type);
	if (s->kind == PGD_SPAN_PRODUCER || s->kind == PGD_SPAN_CONSUMER)
		messaging_attrs(s, r);
	attr_str(s, "pg_durable.execution_id", e->scope);
	attr_str(s, "pg_durable.result_name", r->result_name);
	if (r->type == DF_NODE_SQL && r->query)
	{
		char *q = pstrdup(r->query);

		if (strlen(q) > QUERY_TEXT_MAX)
			q[pg_mbcliplen(q, strlen(q), QUERY_TEXT_MAX)] = '\0';
		attr_str(s, "db.system.name", "postgresql");
		attr_str(s, "db.query.text", q);
	}
	else if (is_http(r->type))
		http_attrs(s, r);
	if (is_step(r->type))
		open_attempt(b, i, e->at);
}

/* The running execution of the event's node in its scope, or -1. */
static int
find_open(Builder *b, const HistEvent *e)
{
	int i = latest_exec(b, e->scope, e->node_id);

	return i >= 0 && !b->set->spans[i].ended ? i : -1;
}

/* The status code of a completed HTTP call, from the node's result envelope. */
static void
http_result_attrs(PgdSpan *s, const PgdNodeRow *row)
{
	char   *err = NULL;
	DfJson *res = row->result ?
		dfjson_parse(row->result, strlen(row->result), &err) :
		NULL;
	DfJson *status =
		res && res->type == DFJ_OBJECT ? dfjson_get(res, "status") : NULL;

	if (status && status->type == DFJ_NUMBER)
		dfjson_object_add(s->attrs, "http.response.status_code",
						  dfjson_make_number(status->str));
}

static void
node_ended(Builder *b, const HistEvent *e, bool ok)
{
	int				  i = find_open(b, e);
	PgdSpan			 *s;
	const PgdNodeRow *row;

	if (i < 0)
		return;
	s = &b->set->spans[i];
	row = &b->view->nodes[s->node];
	if (s->open_attempt >= 0)
	{
		PgdSpan *a = &b->set->spans[s->open_attempt];

		end_span(a, e, ok ? PGD_SPAN_OK : PGD_SPAN_ERROR);
		if (!ok)
			error_attrs(a, row, e->detail);
		else if (is_http(row->type))
			http_result_attrs(a, row);
		s->open_attempt = -1;
	}
	end_span(s, e, ok ? PGD_SPAN_OK : PGD_SPAN_ERROR);
	if (!ok)
		error_attrs(s, NULL, e->detail);
	if (s->nattempts > 0)
		attr_int(s, "pg_durable.attempts", s->nattempts);
}

static void
retry_scheduled(Builder *b, const HistEvent *e)
{
	int		 i = find_open(b, e);
	PgdSpan *s;
	DfJson	*delay;
	int64	 delay_ms = 0;

	if (i < 0 || b->set->spans[i].open_attempt < 0)
		return;
	s = &b->set->spans[i];
	{
		PgdSpan *a = &b->set->spans[s->open_attempt];

		end_span(a, e, PGD_SPAN_ERROR);
		error_attrs(a, &b->view->nodes[s->node], e->detail);
	}
	delay = e->detail ? dfjson_get(e->detail, "delay_ms") : NULL;
	if (delay)
		(void) dfjson_get_int64(delay, &delay_ms);
	open_attempt(b, i, e->at + delay_ms * 1000);
}

static void
instance_ended(Builder *b, const HistEvent *e)
{
	PgdSpanSet *set = b->set;
	bool		ok = strcmp(e->kind, "instance_completed") == 0;

	for (int i = set->nspans - 1; i >= 0; i--)
	{
		PgdSpan *s = &set->spans[i];

		if (s->ended)
			continue;
		/* what was still running ended with the instance */
		end_span(s, e,
				 i == 0 ? (ok ? PGD_SPAN_OK : PGD_SPAN_ERROR) :
						  PGD_SPAN_UNSET);
		if (i > 0)
			attr_str(s, "pg_durable.ended_by", e->kind);
	}
	attr_str(&set->spans[0], "pg_durable.status",
			 e->kind + strlen("instance_"));
	if (!ok)
	{
		const char *msg = json_str(e->detail, "error");

		set->spans[0].status_message =
			pstrdup(msg ? msg : e->kind + strlen("instance_"));
	}
}

static bool
scope_within(const char *inner, const char *outer)
{
	size_t n = strlen(outer);

	return strncmp(inner, outer, n) == 0 &&
		(inner[n] == '\0' || strncmp(inner + n, "::", 2) == 0);
}

/* The parent of a node execution: see the file's comment. */
static int
parent_of(Builder *b, int i)
{
	PgdSpanSet *set = b->set;
	PgdSpan	   *s = &set->spans[i];

	for (int p = b->parent_row[s->node]; p >= 0; p = b->parent_row[p])
	{
		int	   best = -1;
		size_t best_len = 0;

		for (int j = b->row_first[p]; j >= 0; j = set->spans[j].next_of_row)
		{
			PgdSpan *c = &set->spans[j];

			if (scope_within(s->scope, c->scope) && c->start <= s->start &&
				(best < 0 || strlen(c->scope) > best_len ||
				 (strlen(c->scope) == best_len && j > best)))
			{
				best = j;
				best_len = strlen(c->scope);
			}
		}
		if (best >= 0)
			return best;
	}
	return 0;
}

static void
link_parents(Builder *b)
{
	PgdInstanceView *v = b->view;

	HASHCTL ctl;

	b->parent_row = palloc(sizeof(int) * Max(v->nnodes, 1));
	b->row_first = palloc(sizeof(int) * Max(v->nnodes, 1));
	for (int i = 0; i < v->nnodes; i++)
		b->parent_row[i] = b->row_first[i] = -1;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NODE_KEY_LEN;
	ctl.entrysize = sizeof(RowEntry);
	ctl.hcxt = CurrentMemoryContext;
	b->rows = hash_create("pg_durable span rows", Max(v->nnodes, 16), &ctl,
						  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	for (int i = 0; i < v->nnodes; i++)
	{
		char	  key[NODE_KEY_LEN] = {0};
		RowEntry *r;

		strlcpy(key, v->nodes[i].id, sizeof(key));
		r = hash_search(b->rows, key, HASH_ENTER, NULL);
		r->row = i;
	}
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(ExecEntry);
	ctl.hcxt = CurrentMemoryContext;
	b->execs = hash_create("pg_durable span executions", Max(v->nnodes, 16),
						   &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int i = 0; i < v->nnodes; i++)
	{
		PgdNodeRow *r = &v->nodes[i];

		if (r->left >= 0)
			b->parent_row[r->left] = i;
		if (r->right >= 0)
			b->parent_row[r->right] = i;
		if (r->condition >= 0)
			b->parent_row[r->condition] = i;
		for (int k = 0; k < r->nextras; k++)
			b->parent_row[r->extras[k]] = i;
	}
}

/* Parents, depths and the tree order (pre-order, children by start). */
static void
finish(Builder *b)
{
	PgdSpanSet *set = b->set;
	PgdSpan	   *sorted = palloc(sizeof(PgdSpan) * set->nspans);
	int		   *stack = palloc(sizeof(int) * set->nspans);
	int		   *newpos = palloc(sizeof(int) * set->nspans);
	bool	   *done = palloc0(sizeof(bool) * set->nspans);
	int		   *last_child = palloc(sizeof(int) * set->nspans);
	int		   *prev_sibling = palloc(sizeof(int) * set->nspans);
	int			top = 0, n = 0;

	for (int i = 1; i < set->nspans; i++)
		if (set->spans[i].attempt == 0)
			set->spans[i].parent = parent_of(b, i);
	/* the children of every span, as a list from the last one back */
	for (int i = 0; i < set->nspans; i++)
		last_child[i] = prev_sibling[i] = -1;
	for (int j = 1; j < set->nspans; j++)
	{
		int p = set->spans[j].parent;

		if (p >= 0)
		{
			prev_sibling[j] = last_child[p];
			last_child[p] = j;
		}
	}
	stack[top++] = 0;
	while (top > 0)
	{
		int i = stack[--top];

		if (done[i])
			continue;
		done[i] = true;
		newpos[i] = n;
		sorted[n] = set->spans[i];
		sorted[n].depth =
			i == 0 ? 0 : sorted[newpos[set->spans[i].parent]].depth + 1;
		n++;
		/* children, latest pushed first so the earliest comes out first */
		for (int j = last_child[i]; j >= 0; j = prev_sibling[j])
			if (!done[j])
				stack[top++] = j;
	}
	for (int k = 0; k < n; k++)
	{
		int p = sorted[k].parent;

		if (p >= 0)
		{
			strlcpy(sorted[k].parent_id, set->spans[p].span_id,
					sizeof(sorted[k].parent_id));
			sorted[k].parent = newpos[p];
		}
	}
	set->spans = sorted;
	set->nspans = n;
}

/* The spans from a view and a history read. */
PgdSpanSet *
pgd_spans_build(const char *instance_id, PgdInstanceView *view,
				const HistRead *hp)
{
	const HistRead h = *hp;
	Builder		   b;
	PgdSpanSet	  *set;
	PgdSpan		  *root;

	set = palloc0(sizeof(PgdSpanSet));
	set->instance_id = pstrdup(instance_id);
	if (h.trace_id != NULL && strlen(h.trace_id) == PGD_TRACE_ID_LEN)
		strlcpy(set->trace_id, h.trace_id, sizeof(set->trace_id));
	else
		pgd_trace_fallback_id(instance_id, set->trace_id);
	b.set = set;
	b.view = view;
	b.cap = 16;
	set->spans = palloc(sizeof(PgdSpan) * b.cap);
	link_parents(&b);

	root = &set->spans[new_span(&b)];
	root->kind = PGD_SPAN_SERVER;
	root->name = view->label ? psprintf("workflow %s", view->label) :
							   psprintf("workflow %s", instance_id);
	pgd_trace_span_id(set->trace_id, NULL, NULL, 0, root->span_id);
	attr_str(root, "pg_durable.instance_id", instance_id);
	attr_str(root, "pg_durable.label", view->label);
	if (h.traceparent != NULL)
	{
		PgdTraceParent tp;

		if (pgd_trace_parse(h.traceparent, &tp) == NULL)
			strlcpy(root->parent_id, tp.span_id, sizeof(root->parent_id));
	}

	if (h.nevents > 0)
		root->start = h.events[0].at;
	for (int i = 0; i < h.nevents; i++)
	{
		const HistEvent *e = &h.events[i];

		if (strcmp(e->kind, "instance_started") == 0)
			set->spans[0].start = e->at;
		else if (e->node_id == NULL && strncmp(e->kind, "instance_", 9) == 0)
			instance_ended(&b, e);
		else if (e->node_id == NULL)
			continue;
		else if (strcmp(e->kind, "node_started") == 0)
			node_started(&b, e);
		else if (strcmp(e->kind, "node_completed") == 0)
			node_ended(&b, e, true);
		else if (strcmp(e->kind, "node_failed") == 0)
			node_ended(&b, e, false);
		else if (strcmp(e->kind, "retry_scheduled") == 0)
			retry_scheduled(&b, e);
	}
	finish(&b);
	return set;
}

PgdSpanSet *
pgd_spans_load(const char *instance_id, bool as_engine)
{
	PgdInstanceView *view = pgd_load_instance_view(instance_id);
	HistRead		 h;

	if (view == NULL)
		return NULL;
	memset(&h, 0, sizeof(h));
	h.cxt = CurrentMemoryContext;
	if (as_engine)
	{
		/* the exporter, a superuser: no visibility to check */
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		read_history(instance_id, &h);
		SPI_finish();
	}
	else if (!pgd_read_as_engine(instance_id, read_history, &h))
		return NULL;
	return pgd_spans_build(instance_id, view, &h);
}
