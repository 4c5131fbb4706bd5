/*-------------------------------------------------------------------------
 *
 * trace.h
 *	  W3C trace context (trace.c): parsing and checking a traceparent,
 *	  new trace ids, and the span ids the engine derives from (trace id,
 *	  scope, node, attempt) so that tracing needs no writes of its own
 *	  (docs/design/tracing.md).
 *
 * Locks: none (pure functions).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_TRACE_H
#define PG_DURABLE_TRACE_H

#include "postgres.h"

#define PGD_TRACE_ID_LEN 32 /* hex digits of a trace id */
#define PGD_SPAN_ID_LEN	 16 /* hex digits of a span id */

/*
 * The flags of a trace that pg_durable begins (df.start without a
 * traceparent): sampled.
 */
#define PGD_TRACE_FLAGS_SAMPLED "01"

/* A parsed traceparent ("00-<trace id>-<parent span id>-<flags>"). */
typedef struct PgdTraceParent
{
	char trace_id[PGD_TRACE_ID_LEN + 1];
	char span_id[PGD_SPAN_ID_LEN + 1];
	char flags[3];
} PgdTraceParent;

/*
 * Are the n bytes at s lower-case hexadecimal digits?  (Trace and span ids;
 * also instances' and nodes' ids, df_internal.id_ok.)
 */
extern bool pgd_is_lower_hex(const char *s, int n);

/* NULL when s is a valid traceparent (filling *out), else what is wrong with it. */
extern const char *pgd_trace_parse(const char *s, PgdTraceParent *out);

/* A new random trace id (lower-case hex). */
extern void pgd_trace_new_id(char *out);

/* The trace id of an instance that has none stored (started before 0.4.0). */
extern void pgd_trace_fallback_id(const char *instance_id, char *out);

/*
 * The span id of a node execution (attempt 0) or of one attempt (1, 2, …)
 * of node_id in scope; the instance's root span when node_id is NULL.
 */
struct DfJson;

/*
 * The W3C traceparent of an attempt of a node: the instance's trace (its
 * variable sys_trace_id, or the fallback id of an instance of an older
 * schema), the attempt's span, the instance's flags (sys_trace_flags).
 */
extern char *pgd_trace_parent_of(struct DfJson *vars, const char *instance_id,
								 const char *scope, const char *node_id,
								 int attempt);
extern void pgd_trace_span_id(const char *trace_id, const char *scope,
							  const char *node_id, int attempt, char *out);

#endif /* PG_DURABLE_TRACE_H */
