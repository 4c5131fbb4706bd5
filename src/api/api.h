/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the files of the SQL interface share: df.start and df.signal in
 *	  a new transaction (new_txn.c), used by df.start (start.c) and
 *	  df.signal (signal.c).
 *
 * Locks: see each file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_API_H
#define PG_DURABLE_API_H

#include "postgres.h"

#include "common/trace.h"

/* new_txn.c: df.start(..., transaction_mode => 'new'); returns the instance id */
/*
 * The longest label df.start accepts, in bytes: well under the btree limit
 * (about 2,700 bytes) of the index on df.instances (label, created_at, id),
 * which a longer label would break inside the engine's INSERT.
 */
#define PGD_MAX_LABEL_BYTES 1024

extern char *pgd_start_in_new_transaction(const char *fut, const char *label,
										  const char *database,
										  const char *idempotency_key);

/* new_txn.c: df.signal(..., transaction_mode => 'new'), committed before it returns */
extern void pgd_signal_in_new_transaction(const char *instance_id,
										  const char *name, const char *data);

/* The trace context of a new instance (df.start's traceparent, tracestate). */
typedef struct StartTrace
{
	char		trace_id[PGD_TRACE_ID_LEN + 1];
	char		flags[3];
	const char *traceparent; /* as given, or NULL: a new trace */
	const char *tracestate;	 /* as given, or NULL */
} StartTrace;

/* new_txn.c: the entry points of the start and signal sessions */
PGDLLEXPORT void pgd_start_session_main(Datum main_arg);
PGDLLEXPORT void pgd_signal_session_main(Datum main_arg);

#endif /* PG_DURABLE_API_H */
