/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Differences between the PostgreSQL major versions pg_durable supports
 *	  (15 to 18).  Version checks live here and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_COMPAT_H
#define PG_DURABLE_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#error "pg_durable requires PostgreSQL 15 or later"
#endif

/* PG 17 moved the local transaction id into PGPROC.vxid. */
#if PG_VERSION_NUM >= 170000
#define PGD_MY_LXID (MyProc->vxid.lxid)
#else
#define PGD_MY_LXID (MyProc->lxid)
#endif

/* PG 17 added custom wait events registered by name. */
#if PG_VERSION_NUM >= 170000
#define PGD_HAVE_CUSTOM_WAIT_EVENTS 1
#endif

/* PG 16 replaced the per-object ACL checks by object_aclcheck. */
#if PG_VERSION_NUM >= 160000
#define pgd_database_aclcheck(dboid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dboid), (roleid), (mode))
#define pgd_proc_aclcheck(procoid, roleid, mode) \
	object_aclcheck(ProcedureRelationId, (procoid), (roleid), (mode))
#else
#define pgd_database_aclcheck(dboid, roleid, mode) \
	pg_database_aclcheck((dboid), (roleid), (mode))
#define pgd_proc_aclcheck(procoid, roleid, mode) \
	pg_proc_aclcheck((procoid), (roleid), (mode))
#endif

/*
 * PG 18 made the binary side of pg_b64_encode (its source) and pg_b64_decode
 * (its destination) uint8 * instead of char *: cast to PgdB64Byte *.
 */
#if PG_VERSION_NUM >= 180000
typedef uint8 PgdB64Byte;
#else
typedef char PgdB64Byte;
#endif

/*
 * PG 16 added onlySummarizing to ExecInsertIndexTuples: the index entries of
 * a new row (executor/executor.h), none of them deferred or speculative.
 */
#if PG_VERSION_NUM >= 160000
#define pgd_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, \
						  false)
#else
#define pgd_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/*
 * PG 16 made simple_heap_update say which index entries the new version
 * needs (TU_UpdateIndexes); before, a heap-only tuple needed none.
 * pgd_simple_heap_update returns 0 (none: a HOT update), 1 (all) or 2
 * (the summarizing indexes only), which pgd_insert_index_tuples_update
 * takes.
 */
#include "access/heapam.h"
#include "access/xact.h"

#if PG_VERSION_NUM >= 160000
static inline int
pgd_simple_heap_update(Relation rel, ItemPointer otid, HeapTuple tup)
{
	TU_UpdateIndexes which;

	simple_heap_update(rel, otid, tup, &which);
	return which == TU_None ? 0 : which == TU_All ? 1 : 2;
}
#define pgd_insert_index_tuples_update(rri, slot, estate, which) \
	ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL, \
						  (which) == 2)

/* heap_update waiting for a row lock, its result returned; *which as above */
static inline TM_Result
pgd_heap_update(Relation rel, ItemPointer otid, HeapTuple tup, int *which)
{
	TM_FailureData	 tmfd;
	LockTupleMode	 mode;
	TU_UpdateIndexes u = TU_None;
	TM_Result res = heap_update(rel, otid, tup, GetCurrentCommandId(true),
								InvalidSnapshot, true, &tmfd, &mode, &u);

	*which = u == TU_None ? 0 : u == TU_All ? 1 : 2;
	return res;
}
#else
static inline int
pgd_simple_heap_update(Relation rel, ItemPointer otid, HeapTuple tup)
{
	simple_heap_update(rel, otid, tup);
	return HeapTupleIsHeapOnly(tup) ? 0 : 1;
}
#define pgd_insert_index_tuples_update(rri, slot, estate, which) \
	ExecInsertIndexTuples((rri), (slot), (estate), true, false, NULL, NIL)

static inline TM_Result
pgd_heap_update(Relation rel, ItemPointer otid, HeapTuple tup, int *which)
{
	TM_FailureData tmfd;
	LockTupleMode  mode;
	TM_Result	   res = heap_update(rel, otid, tup, GetCurrentCommandId(true),
									 InvalidSnapshot, true, &tmfd, &mode);

	*which = HeapTupleIsHeapOnly(tup) ? 0 : 1;
	return res;
}
#endif

#endif /* PG_DURABLE_COMPAT_H */
