/*-------------------------------------------------------------------------
 *
 * http_leases.c
 *	  The store's functions for the HTTP worker's tasks (store.h; the
 *	  statements are in statements.c's table): the due HTTP tasks whose
 *	  lease is free, a task leased for some seconds under a new token, the
 *	  check that a lease is still the worker's before its outcome is
 *	  applied, and when the next HTTP task or lease falls due.  An HTTP
 *	  task is a df_internal.tasks row of kind 'http' that no executor claims
 *	  (the claim by id leaves it: task_rows.c); its lease is its
 *	  lease_token and lease_until.
 *
 * Locks: the due tasks and the lease check lock the task rows with SKIP
 * LOCKED (a row another worker holds is not this one's); the due scan
 * names the queue before the runs rows and takes df_internal.runs first
 * (runs_first, docs/design/store.md §7).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/store.h"
#include "store/store_internal.h"

/* Up to max due HTTP tasks whose lease is free, locked (SKIP LOCKED). */
int
pgd_store_http_due(int max, PgdHttpDue **rows)
{
	Datum values[1];
	int	  n, i;

	values[0] = Int64GetDatum(max);
	n = store_run(STMT_HTTP_DUE, values, NULL);
	*rows = palloc(sizeof(PgdHttpDue) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		(*rows)[i].id = strtoll(store_get_string(i, 1), NULL, 10);
		(*rows)[i].instance_id = store_get_string(i, 2);
		(*rows)[i].node_id = store_get_string(i, 3);
		(*rows)[i].scope = store_get_string(i, 4);
		(*rows)[i].attempts = atoi(store_get_string(i, 5));
	}
	return n;
}

/* Lease a task for 'seconds': returns the new lease token. */
char *
pgd_store_http_lease(int64 task_id, int seconds)
{
	Datum values[2];

	values[0] = Int64GetDatum(task_id);
	values[1] = Int32GetDatum(seconds);
	store_run(STMT_HTTP_LEASE, values, NULL);
	return store_get_string(0, 1);
}

/*
 * Is the lease this token names still held?  Locks the task row (SKIP
 * LOCKED: a row another worker holds is not ours any more).
 */
bool
pgd_store_http_lease_held(int64 task_id, const char *token)
{
	Datum values[1];
	char *held;

	values[0] = Int64GetDatum(task_id);
	return store_run(STMT_HTTP_LEASE_TOKEN, values, NULL) > 0 &&
		(held = store_get_string(0, 1)) != NULL && strcmp(held, token) == 0;
}

/*
 * Make every HTTP lease expire now: for the HTTP worker at its start when
 * no other one runs, so the calls the lost worker (or the lost primary)
 * had in flight are made again at once.  Returns how many.
 */
int
pgd_store_http_leases_void(void)
{
	return store_run(STMT_HTTP_LEASES_VOID, NULL, NULL);
}

/* Milliseconds until the next HTTP task or lease falls due; false when none. */
bool
pgd_store_http_next_due(long *ms)
{
	char *v;

	if (store_run(STMT_HTTP_NEXT_DUE, NULL, NULL) == 0 ||
		(v = store_get_string(0, 1)) == NULL)
		return false;
	*ms = strtol(v, NULL, 10);
	return true;
}

