/*-------------------------------------------------------------------------
 *
 * inbox_record.c
 *	  The completions in the inbox of an instance that ends
 *	  (docs/design/batches-and-inbox.md §4).
 *
 * A step's completion goes to the inbox when another transaction holds
 * its instance's runs row; the step's effects are committed with it.
 * When that other transaction ends the instance (a failing branch, a
 * cancel), the completion is never applied: no transition follows it.
 * Its node's record must still say what happened, so the instance's end
 * takes the inbox rows and records each on its node (completed, or
 * failed, with its result, as the step's own transaction would have),
 * when the node still runs in the completion's scope; and an apply task
 * that finds its instance ended does the same with the rows committed
 * after the end.  Nothing else follows from them, so an ended instance
 * keeps no inbox row and shows every step whose effects committed as
 * completed.
 *
 * Locks: the caller holds the instance's runs row, or the instance has
 * ended (its runs row is gone) and nothing but another apply task of it
 * touches its node rows; the rows taken are deleted by this transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/inbox_record.h"
#include "store/store.h"

/*
 * Record one committed completion on its node, when the node still shows
 * running (or cancelled, by its instance's end) in the completion's
 * scope; true when it did.
 */
bool
pgd_inbox_record(const char *instance_id, const PgdInboxEntry *row)
{
	const char	  *id = row->node_id;
	char		 **ids;
	PgdNodeStatus *statuses;
	char		 **stamps;

	if (pgd_store_node_stamps(instance_id, &id, 1, &ids, &statuses,
							  &stamps) != 1 ||
		(statuses[0] != PGD_NODE_RUNNING &&
		 statuses[0] != PGD_NODE_CANCELLED) ||
		stamps[0] == NULL || strcmp(stamps[0], row->scope) != 0)
		return false;
	pgd_store_set_attempt(id, row->attempt);
	pgd_store_node_done(instance_id, id, row->scope, row->outcome);
	pgd_store_set_attempt(NULL, 0);
	return true;
}

int
pgd_inbox_record_ended(const char *instance_id)
{
	PgdInboxEntry *rows;
	int			   n = pgd_store_inbox_take(instance_id, &rows);
	int			   recorded = 0;

	for (int i = 0; i < n; i++)
		if (pgd_inbox_record(instance_id, &rows[i]))
			recorded++;
	if (recorded > 0)
		pgd_store_flush();
	return recorded;
}
