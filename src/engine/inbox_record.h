/*-------------------------------------------------------------------------
 *
 * inbox_record.h
 *	  The completions in the inbox of an instance that ends, recorded on
 *	  their nodes (inbox_record.c; docs/design/batches-and-inbox.md §4).
 *
 * Locks: see inbox_record.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_INBOX_RECORD_H
#define PG_DURABLE_INBOX_RECORD_H

#include "postgres.h"

#include "store/store.h"

/*
 * Take the instance's committed completions out of the inbox and record
 * each on its node, when the node still runs in the completion's scope.
 * Returns how many were recorded.
 */
extern int pgd_inbox_record_ended(const char *instance_id);

/*
 * Record one completion on its node, when the node still runs (or was
 * cancelled by its instance's end) in the completion's scope: its effects
 * committed, though nothing follows from it.
 */
extern bool pgd_inbox_record(const char *instance_id,
							 const PgdInboxEntry *row);


#endif /* PG_DURABLE_INBOX_RECORD_H */
