/*-------------------------------------------------------------------------
 *
 * signals.c
 *	  The store's functions for signals (df_internal.signals, the mailbox,
 *	  FIFO per name) and the waits of SIGNAL nodes (df_internal.waits).
 *
 * Locks: df.signal inserts a signal without locking the instance; the
 * rest runs under the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

/* ---------------------------------------------------------------------
 * Signals and waits
 * ---------------------------------------------------------------------
 */

/* Take the oldest buffered signal of this name; *payload is its JSON text. */
bool
pgd_store_signal_take(const char *instance_id, const char *name,
					  char **payload)
{
	if (RUN(STMT_SIGNAL_TAKE, instance_id, name) == 0)
		return false;
	*payload = store_get_string(0, 1);
	return true;
}

/*
 * A signal into the instance's mailbox and a deliver task, in the caller's
 * transaction; nothing of the instance is locked
 * (docs/design/architecture.md §5 rule 2).
 */
void
pgd_store_signal_send(const char *instance_id, const char *name,
					  const char *data, bool is_json)
{
	Datum values[4];

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(name);
	values[2] = pgd_text_datum(data);
	values[3] = BoolGetDatum(is_json);
	store_run(STMT_SIGNAL_SEND, values, NULL);
	pgd_store_task_add(instance_id, NULL, instance_id, PGD_TASK_DELIVER);
}

void
pgd_store_wait_add(const char *instance_id, const char *node_id,
				   const char *scope, const char *name)
{
	RUN(STMT_WAIT_ADD, instance_id, node_id, scope, name);
}

/* Remove a wait; false when it was not there (delivered meanwhile). */
bool
pgd_store_wait_remove(const char *instance_id, const char *node_id,
					  const char *scope)
{
	return RUN(STMT_WAIT_REMOVE, instance_id, node_id, scope) > 0;
}

/* The oldest registered wait for which a signal of its name is buffered. */
bool
pgd_store_wait_matched(const char *instance_id, char **node_id, char **scope,
					   char **name)
{
	if (RUN(STMT_WAIT_MATCHED, instance_id) == 0)
		return false;
	*node_id = store_get_string(0, 1);
	*scope = store_get_string(0, 2);
	*name = store_get_string(0, 3);
	return true;
}
