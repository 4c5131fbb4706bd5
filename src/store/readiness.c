/*-------------------------------------------------------------------------
 *
 * readiness.c
 *	  The engine's own rows: the readiness row that says the executors
 *	  run (df_internal._worker_ready) and executor 0's heartbeat
 *	  (df._worker_epoch).
 *
 * Locks: the heartbeat updates the one epoch row.
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
 * Executor 0: readiness and heartbeat
 * ---------------------------------------------------------------------
 */

/* Mark the engine ready and begin a new worker epoch; returns its id. */
char *
pgd_store_announce_ready(void)
{
	Datum version = Int32GetDatum(PGD_ENGINE_SCHEMA_VERSION);

	store_run(STMT_READY_ANNOUNCE, &version, NULL);
	store_run(STMT_EPOCH_CLEAR, NULL, NULL);
	store_run(STMT_EPOCH_NEW, NULL, NULL);
	return store_get_string(0, 1);
}

/*
 * The schema_version of the readiness row; false when there is no row (no
 * executor has started since CREATE EXTENSION).
 */
bool
pgd_store_ready_version(int *version)
{
	bool isnull;

	if (store_run(STMT_READY_VERSION, NULL, NULL) == 0)
		return false;
	*version = DatumGetInt32(store_get_datum(0, 1, &isnull));
	return !isnull;
}

/* Refresh the heartbeat; false when the epoch is gone (the extension was recreated). */
bool
pgd_store_heartbeat(const char *epoch_id)
{
	return RUN(STMT_HEARTBEAT, epoch_id) > 0;
}

/*
 * A scope is abandoned (a lost RACE branch, a loop body that broke or
 * moved to its next generation): remove the pending tasks of the scope and
 * everything below it (running ones are skipped) and its registered signal
 * waits, which would otherwise stay until the instance ends, one more per
 * loop iteration.
 */
