/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the files of the SQL interface share: df.start in a new
 *	  transaction (new_txn.c), used by df.start (start.c).
 *
 * Locks: see each file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_API_H
#define PG_DURABLE_API_H

#include "postgres.h"

/* new_txn.c: df.start(..., transaction_mode => 'new'); returns the instance id */
extern char *pgd_start_in_new_transaction(const char *fut, const char *label,
										  const char *database);

/* new_txn.c: the entry point of the start sessions */
PGDLLEXPORT void pgd_start_session_main(Datum main_arg);

#endif /* PG_DURABLE_API_H */
