/*-------------------------------------------------------------------------
 *
 * spans.h
 *	  The spans of an instance, derived from its history (spans.c) and
 *	  shown by df.instance_spans and df.timeline (spans_sql.c) and exported
 *	  over OTLP by the HTTP worker (worker/otel.c):
 *	  docs/design/tracing.md.
 *
 * The tree: the instance's root span (SERVER), a span per node execution
 * (INTERNAL) under the span of the node's parent, and under a SQL or HTTP
 * node's span one span per attempt (INTERNAL for SQL, CLIENT for HTTP, the
 * span an HTTP call names as its parent in traceparent).  Span ids come
 * from common/trace.c, so nothing is stored for them.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SPANS_H
#define PG_DURABLE_SPANS_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/trace.h"
#include "monitor/monitor.h"

typedef enum PgdSpanKind
{
	PGD_SPAN_INTERNAL,
	PGD_SPAN_SERVER,
	PGD_SPAN_CLIENT,
	PGD_SPAN_PRODUCER, /* a PUBLISH node */
	PGD_SPAN_CONSUMER  /* an EVENT node */
} PgdSpanKind;

typedef enum PgdSpanStatus
{
	PGD_SPAN_UNSET,
	PGD_SPAN_OK,
	PGD_SPAN_ERROR
} PgdSpanStatus;

typedef struct PgdSpan
{
	char		  span_id[PGD_SPAN_ID_LEN + 1];
	char		  parent_id[PGD_SPAN_ID_LEN + 1]; /* "" for none */
	char		 *name;
	PgdSpanKind	  kind;
	TimestampTz	  start;
	TimestampTz	  end;
	bool		  ended;
	PgdSpanStatus status;
	char		 *status_message; /* NULL if none */
	DfJson		 *attrs;		  /* an object */
	int			  depth;		  /* 0 for the root */
	int			  attempt;		  /* 0: a node execution or the root */
	int64		  end_event; /* the history event that ended it, 0 if open */

	/* while building */
	int	  parent; /* index in the set, -1 for the root */
	int	  node;	  /* row in the view, -1 for the root and attempts */
	char *scope;
	char *node_id;
	int	  open_attempt; /* index of the attempt running now, -1 */
	int	  nattempts;
	int	  prev_exec;   /* the previous execution with the same key hash, -1 */
	int	  next_of_row; /* the next execution of the same node, -1 */
} PgdSpan;

typedef struct PgdSpanSet
{
	char	 trace_id[PGD_TRACE_ID_LEN + 1];
	char	*instance_id;
	int		 nspans;
	PgdSpan *spans; /* the root first, then in tree order */
} PgdSpanSet;

/*
 * spans.c: the spans of an instance the caller can see, allocated in
 * CurrentMemoryContext; NULL if it cannot see it.  Opens its own SPI
 * connections.  as_engine (the exporter, connected as a superuser) skips
 * the visibility check of df.history's readers.
 */
extern PgdSpanSet *pgd_spans_load(const char *instance_id, bool as_engine);

/*
 * spans.c: a source of the spans of one instance for the exporter (a
 * superuser, inside a unit of work), kept between its scans in its own
 * memory context under parent: _new reads the instance (NULL if it is
 * gone), _refresh reads what happened since, _spans builds the spans in
 * CurrentMemoryContext, _free drops it.
 */
typedef struct PgdSpanSource PgdSpanSource;
extern PgdSpanSource		*pgd_span_source_new(const char	  *instance_id,
												 MemoryContext parent);
extern void					 pgd_span_source_refresh(PgdSpanSource *src);
extern PgdSpanSet			*pgd_span_source_spans(PgdSpanSource *src);
extern void					 pgd_span_source_free(PgdSpanSource *src);

extern const char *pgd_span_kind_name(PgdSpanKind kind);
extern const char *pgd_span_status_name(PgdSpanStatus status);

/*
 * The history read spans are derived from (spans.c), shared with the OTLP
 * exporter's sources (span_sources.c), which keep it between scans.
 */
typedef struct HistEvent
{
	int64		id;
	int			sub; /* 0: a start written in its end's row (id) */
	TimestampTz at;
	char	   *kind;
	char	   *node_id; /* NULL for instance events */
	char	   *scope;
	bool		has_attempt;
	int			attempt;
	DfJson	   *detail; /* NULL if none (or not needed) */
} HistEvent;

typedef struct HistRead
{
	MemoryContext cxt; /* where the events are */
	char		 *trace_id;
	char		 *traceparent;
	int			  nevents;
	int			  cap;
	HistEvent	 *events;
} HistRead;

/*
 * The columns of an event of df_internal.history_events, as
 * pgd_hist_event_from_spi reads them from column col on; the detail only
 * of the events whose spans use it (errors, retry delays, the instance's
 * end).
 */
#define PGD_SQL_SPAN_EVENT_COLUMNS \
	"id, at, kind, node_id, scope, attempt, " \
	"CASE WHEN kind OPERATOR(pg_catalog.=) ANY ('{node_failed,retry_scheduled}'::text[]) " \
	"OR (node_id IS NULL AND kind OPERATOR(pg_catalog.<>) 'instance_started') " \
	"THEN detail::text END, sub"

extern void pgd_hist_event_from_spi(HistRead *h, HistEvent *e,
									SPITupleTable *tt, int row, int col);
/* room for more events after the nevents there are */
extern void pgd_hist_reserve(HistRead *h, int more);

/* The spans of an instance from its view and its history. */
extern PgdSpanSet *pgd_spans_build(const char	   *instance_id,
								   PgdInstanceView *view, const HistRead *h);

#endif /* PG_DURABLE_SPANS_H */
