/*-------------------------------------------------------------------------
 *
 * restore_hold.c
 *	  The hold of a restore (docs/design/restores.md): whether the workers
 *	  must leave this database alone because a restore loaded rows into the
 *	  engine's tables, and the record of such a load.
 *
 * A restore's rows and their hold row commit in one transaction (the
 * trigger df_internal.restore_arrived() inserts the hold in the loading
 * statement's transaction), so a worker whose claim saw a restored row
 * sees the hold in any later snapshot: a worker checks after it claimed
 * and before it commits.  The check costs a block count while the table
 * has never had a row, one statement after that.
 *
 * Locks: AccessShareLock on df_internal.restore_hold for the block count;
 * the insert takes the row's key, waiting only for another load of the
 * same table in flight.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

bool
pgd_store_restore_held(void)
{
	Relation	rel;
	BlockNumber nblocks;

	if (!pgd_internal_relation_exists("restore_hold"))
		return false;			/* before ALTER EXTENSION ... UPDATE */
	rel = table_open(pgd_internal_relid("restore_hold"), AccessShareLock);
	nblocks = RelationGetNumberOfBlocks(rel);
	table_close(rel, AccessShareLock);
	if (nblocks == 0)
		return false;
	return store_run(STMT_RESTORE_HELD, NULL, NULL) > 0;
}

bool
pgd_store_restore_hold_add(const char *table_name)
{
	return RUN(STMT_RESTORE_HOLD_ADD, table_name) > 0;
}
