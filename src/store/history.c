/*-------------------------------------------------------------------------
 *
 * history.c
 *	  The events of an instance's history other than its nodes' starts and
 *	  ends, which go with the node writes (node_writes.c): retries,
 *	  signals, the instance's start and end, cancels.
 *
 * Events are written by the transitions themselves, in the transaction
 * that applies them: a rolled-back step leaves no event, and a committed
 * transition always has its events.  An instance's end whose
 * instance_started is still held in memory (held_start.c) becomes one row
 * with it.
 *
 * Locks: none of its own; the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/store.h"
#include "store/store_internal.h"

/* The kinds whose row has a duration (STMT_EVENT_ADD's pattern) */
static bool
is_instance_end(const char *kind)
{
	return strcmp(kind, "instance_completed") == 0 ||
		strcmp(kind, "instance_failed") == 0 ||
		strcmp(kind, "instance_cancelled") == 0 ||
		strcmp(kind, "instance_compensated") == 0;
}

/*
 * detail is a JSON object as text, or NULL; node_id and scope may be
 * NULL; attempt 0 records NULL.  The duration of an instance's end is
 * computed from the instance's creation.
 */
void
pgd_store_event_add(const char *instance_id, const char *kind,
					const char *node_id, const char *scope, int attempt,
					const char *detail)
{
	if (node_id == NULL &&
		store_held_start_end_event(instance_id, kind, scope, detail))
		return;
	if (node_id == NULL && is_instance_end(kind))
	{
		/* after every node event written so far, as the statement's would be */
		store_txn_write(FLUSH_NODE_WRITES);
		if (store_instance_event_row(0, instance_id, 0, kind, scope, detail))
			return;
	}
	store_history_insert(instance_id, kind, node_id, scope, attempt, detail);
}
