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
#else
#define pgd_database_aclcheck(dboid, roleid, mode) \
	pg_database_aclcheck((dboid), (roleid), (mode))
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

#endif /* PG_DURABLE_COMPAT_H */
