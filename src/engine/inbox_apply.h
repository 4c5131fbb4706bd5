/*-------------------------------------------------------------------------
 *
 * inbox_apply.h
 *	  Applying the inbox (inbox.c; docs/design/batches-and-inbox.md §4).
 *
 * Locks: see inbox.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_INBOX_APPLY_H
#define PG_DURABLE_INBOX_APPLY_H

#include "postgres.h"

/*
 * An apply task: take the instance's runs row (SKIP LOCKED) and apply its
 * committed completions in order.  Returns how many were applied; *held
 * when the row was held elsewhere and nothing was done.
 */
extern int pgd_apply_inbox(const char *instance_id, bool *held);

#endif /* PG_DURABLE_INBOX_APPLY_H */
