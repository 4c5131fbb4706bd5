/*-------------------------------------------------------------------------
 *
 * batch_stats.c
 *	  How many tasks the executors' committed transactions held (batches,
 *	  docs/design/batches-and-inbox.md §2): a count per size in shared memory,
 *	  read by df_internal.batch_sizes() (bench/run reports their mean and p99).
 *	  The counts start at zero with the server.
 *
 * Locks: the batch spinlock of shared memory, for a few instructions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "storage/spin.h"
#include "utils/tuplestore.h"

#include "core/shmem.h"
#include "worker/worker.h"

/* An executor committed a transaction that ran this many tasks. */
void
pgd_batch_committed(int tasks)
{
	if (tasks < 1)
		return;
	if (tasks > PGD_BATCH_SIZES)
		tasks = PGD_BATCH_SIZES;
	SpinLockAcquire(&pgd_shared->batch_mutex);
	pgd_shared->batch_sizes[tasks]++;
	SpinLockRelease(&pgd_shared->batch_mutex);
}

/* df_internal.batch_sizes(): (tasks, batches) for every size seen. */
PG_FUNCTION_INFO_V1(pgd_batch_sizes);
Datum
pgd_batch_sizes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		  *counts = palloc(sizeof(uint64) * (PGD_BATCH_SIZES + 1));

	InitMaterializedSRF(fcinfo, 0);
	SpinLockAcquire(&pgd_shared->batch_mutex);
	memcpy(counts, pgd_shared->batch_sizes,
		   sizeof(uint64) * (PGD_BATCH_SIZES + 1));
	SpinLockRelease(&pgd_shared->batch_mutex);

	for (int i = 1; i <= PGD_BATCH_SIZES; i++)
	{
		Datum values[2];
		bool  nulls[2] = {false, false};

		if (counts[i] == 0)
			continue;
		values[0] = Int32GetDatum(i);
		values[1] = Int64GetDatum((int64) counts[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
							 nulls);
	}
	return (Datum) 0;
}
