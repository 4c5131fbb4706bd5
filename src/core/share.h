/*-------------------------------------------------------------------------
 *
 * share.h
 *	  The per-role share of the executors (share.c):
 *	  pg_durable.max_executors_per_role.
 *
 * Locks: the registry's spinlock (shmem.h), for a few loads and stores.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SHARE_H
#define PG_DURABLE_SHARE_H

#include "postgres.h"

#include "core/shmem.h"

/*
 * Take one of role's executors for a SQL step in executor slot 'slot'.
 * False when the role already runs its share in other executors: the step
 * must not run now (the caller rolls its claim back).
 */
extern bool pgd_share_take(int slot, Oid role);

/*
 * The step of executor slot 'slot' is over.  True when a step was left in
 * the queue for its role's share since the last such release: the caller
 * asks for a queue scan and wakes an idle executor.
 */
extern bool pgd_share_release(int slot);

/*
 * The roles that hold their whole share now (at most PGD_MAX_EXECUTORS):
 * a scan of the queue passes over their steps.  Returns how many.
 */
extern int pgd_share_full_roles(Oid *roles);

#endif /* PG_DURABLE_SHARE_H */
