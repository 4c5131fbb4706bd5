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

/*
 * Take the instance's committed completions out of the inbox and record
 * each on its node, when the node still runs in the completion's scope.
 * Returns how many were recorded.
 */
extern int pgd_inbox_record_ended(const char *instance_id);

#endif /* PG_DURABLE_INBOX_RECORD_H */
