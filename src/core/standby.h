/*-------------------------------------------------------------------------
 *
 * standby.h
 *	  The refusal of pg_durable's writing functions on a standby
 *	  (standby.c).
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STANDBY_H
#define PG_DURABLE_STANDBY_H

/*
 * Raise the one error of a writing function called on a standby (a server
 * in recovery): "cannot <action> on a standby server", naming <function> in
 * the detail.  Returns when the server is a primary.
 */
extern void pgd_refuse_on_standby(const char *function, const char *action);

#endif /* PG_DURABLE_STANDBY_H */
