/*-------------------------------------------------------------------------
 *
 * span_sources.h
 *	  The OTLP exporter's sources of spans, kept between its scans
 *	  (span_sources.c).
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SPAN_SOURCES_H
#define PG_DURABLE_SPAN_SOURCES_H

#include "postgres.h"

#include "monitor/spans.h"

typedef struct PgdSpanSources PgdSpanSources;

/* An empty set, in a memory context of its own under parent. */
extern PgdSpanSources *pgd_span_sources_create(MemoryContext parent);
extern void			   pgd_span_sources_destroy(PgdSpanSources *all);
extern long			   pgd_span_sources_count(PgdSpanSources *all);

/*
 * (inside SPI, as the engine) the history events after after, up to bound,
 * at most limit of them, each given to its instance's source; *through:
 * the last event id read (bound when fewer than limit).  Returns the ids
 * of the instances they belong to (*ntouched of them, palloc'd), or NULL.
 */
extern char **pgd_span_sources_read(PgdSpanSources *all, int64 after,
									int64 bound, int limit, int64 *through,
									int *ntouched);

/* The spans of an instance from what its source read; NULL if it is gone. */
extern PgdSpanSet *pgd_span_sources_spans(PgdSpanSources *all,
										  const char	 *instance_id);

/* Drop an instance's source (its end was exported). */
extern void pgd_span_sources_forget(PgdSpanSources *all,
									const char	   *instance_id);

#endif /* PG_DURABLE_SPAN_SOURCES_H */
