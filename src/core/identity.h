/*-------------------------------------------------------------------------
 *
 * identity.h
 *	  Checks of the roles workflows run as (identity.c).
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_IDENTITY_H
#define PG_DURABLE_IDENTITY_H

#include "postgres.h"

/* LOGIN and the superuser guard, as df.start checks them: raises an ERROR. */
extern void pgd_check_start_identity(Oid userid);

/*
 * Why the engine must not act for a submitter any more (dropped, no LOGIN,
 * a superuser while superuser instances are off), or NULL.
 */
extern char *pgd_identity_problem(Oid roleid);

#endif /* PG_DURABLE_IDENTITY_H */
