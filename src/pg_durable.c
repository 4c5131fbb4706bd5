/*-------------------------------------------------------------------------
 *
 * pg_durable.c
 *	  Module entry point: _PG_init, the pg_durable.* settings and the small
 *	  information functions (df.version, df.target_database).
 *
 * pg_durable must be loaded through shared_preload_libraries: it reserves
 * shared memory and registers the launcher background worker, which is only
 * possible while the postmaster starts.  Loading it any other way is an
 * error, so a misconfigured server says so instead of silently running no
 * workflows.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "common/messages.h"
#include "core/settings.h"
#include "store/store.h"
#include "core/wake.h"
#include "orchestration/orchestration.h"
#include "worker/worker.h"
#include "core/shmem.h"

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void pgd_shmem_request_hook(void);
static void pgd_shmem_startup_hook(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(PGD_MSG_NOT_PRELOADED),
				 errhint("Add pg_durable to shared_preload_libraries in postgresql.conf and restart the server.")));

	pgd_settings_define();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pgd_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pgd_shmem_startup_hook;

	pgd_register_launcher();
	pgd_wake_register_xact_callback();
	pgd_store_init();
	pgd_orchestration_init();
}


static void
pgd_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	pgd_shmem_request();
}

static void
pgd_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	pgd_shmem_startup();
}

PG_FUNCTION_INFO_V1(pgd_version);
Datum
pgd_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(PG_DURABLE_VERSION
									 " (built " PG_DURABLE_BUILT ")"));
}

PG_FUNCTION_INFO_V1(pgd_target_database);
Datum
pgd_target_database(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(pgd_database));
}
