/*-------------------------------------------------------------------------
 *
 * results.c
 *	  The store's functions for named results (df_internal.results): a
 *	  step's result saved under its name in its scope, merged into an
 *	  enclosing scope, moved to a loop's next generation, dropped.
 *
 * Locks: the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/settings.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "core/wake.h"

/* ---------------------------------------------------------------------
 * Named results
 * ---------------------------------------------------------------------
 */

void
pgd_store_result_save(const char *instance_id, const char *scope,
					  const char *name, const char *value)
{
	RUN(STMT_RESULT_SAVE, instance_id, scope, name, value);
}

/*
 * A branch scope's named results join to_scope (later wins) when keep,
 * then the branch's (and those below it) are dropped.
 */
void
pgd_store_results_merge(const char *instance_id, const char *from_scope,
						const char *to_scope, bool keep)
{
	if (keep)
		RUN(STMT_RESULTS_COPY, instance_id, from_scope, to_scope);
	RUN(STMT_RESULTS_DROP_SCOPE, instance_id, from_scope);
}

/*
 * Has the instance a named result in any scope?  When it has none, a
 * JOIN's branches have none to merge (pgd_apply's join_branch_done skips
 * their two statements each).
 */
bool
pgd_store_has_results(const char *instance_id)
{
	/*
	 * by the primary key's first column, without a statement (5 us a JOIN
	 * in fan-outs, perf); only the holder of the runs row
	 * writes them, so what is being written elsewhere is nothing
	 */
	return pgd_internal_index_has("results_pkey", 1,
								  (const char *const[]){instance_id});
}

/* A scope's named results move to another scope (a loop's next generation). */
void
pgd_store_results_move(const char *instance_id, const char *from_scope,
					   const char *to_scope)
{
	RUN(STMT_RESULTS_MOVE, instance_id, from_scope, to_scope);
}

/* The named results of the scopes below 'scope' are dropped (its own stay). */
void
pgd_store_results_drop_below(const char *instance_id, const char *scope)
{
	RUN(STMT_RESULTS_DROP_BELOW, instance_id, scope);
}

/* Names and values (JSON text) of the named results of these scopes, outermost first. */
int
pgd_store_results_in(const char *instance_id, const char *const *scopes,
					 int nscopes, char ***names, char ***values)
{
	Datum args[2];
	int	  n;

	args[0] = pgd_text_datum(instance_id);
	args[1] = store_text_array(nscopes, scopes);
	n = store_run(STMT_RESULTS_IN, args, NULL);
	*names = pgd_spi_column(n, 1);
	*values = pgd_spi_column(n, 2);
	return n;
}
