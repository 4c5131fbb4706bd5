/*-------------------------------------------------------------------------
 *
 * spi.h
 *	  Small SPI helpers (spi.c): run a statement with $n parameters from a
 *	  plan prepared once per process, read a column as text, and recover
 *	  from an error in an internal subtransaction.
 *
 * Locks: none of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SPI_H
#define PG_DURABLE_SPI_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/resowner.h"

/*
 * Run one statement; returns SPI_processed.  Every statement gets a fresh
 * snapshot (read committed): a read that reused the transaction's first
 * snapshot could miss what committed just before a task was claimed, and
 * call a live step dead.  read_only is accepted for documentation only.
 */
extern int pgd_spi_exec(const char *sql, int nargs, const Oid *types,
						const Datum *values, const char *nulls,
						bool read_only);
extern int pgd_exec(const char *sql, int nargs, const char *const *args);

/*
 * Is df_internal.name (a table or a view) there?  Until ALTER EXTENSION
 * ... UPDATE has run, a database created with an older script lacks the
 * newer ones (and no node can have used them).  Catalog cache lookups, so
 * an update is seen at once.
 */
extern bool pgd_internal_relation_exists(const char *name);
extern Oid	pgd_df_relid(const char *name);
extern Oid	pgd_internal_relid(const char *name);
extern bool pgd_internal_index_has(const char *index, int nkeys,
								   const char *const *values);
extern bool pgd_index_has(Oid indexoid, int nkeys, const char *const *values);
extern bool pgd_internal_index_has_where(const char *index, const char *value,
										 const char *column,
										 const char *equals);

/*
 * Execute a kept plan (SPI_execute_plan, not read-only).  When it is about
 * to be planned, at its first execution (*planned false) or again after an
 * invalidation, it is planned with enable_seqscan and jit off: see spi.c.
 */
extern int pgd_spi_run_kept(SPIPlanPtr plan, bool *planned,
							const Datum *values, const char *nulls);

extern char *pgd_spi_getstring(int row, int col);
/* Column col of the n rows SPI returned, as palloc'd strings (NULL: SQL NULL). */
extern char **pgd_spi_column(int n, int col);

/* Run a statement whose parameters $1..$n are all text (a NULL pointer is SQL NULL). */
#define PGD_EXEC(sql, ...) \
	pgd_exec((sql), \
			 (int) (sizeof((const char *[]){__VA_ARGS__}) / \
					sizeof(const char *)), \
			 (const char *[]){__VA_ARGS__})
extern Datum pgd_text_datum(const char *s);

/*
 * In the PG_CATCH of a PG_TRY around an internal subtransaction begun in
 * oldcxt with oldowner: the error (copied into oldcxt), the subtransaction
 * rolled back, the caller's memory context and resource owner restored.
 */
extern ErrorData *pgd_subxact_caught(MemoryContext oldcxt,
									 ResourceOwner oldowner);

/*
 * Run one statement (text parameters) as role, with the caller's security
 * context plus sec_flags, in a subtransaction: column 1 of its first row
 * (NULL when none), or NULL with *error set to the error's message, the
 * subtransaction rolled back.  Cancels and shutdowns are raised again.
 */
extern char *pgd_exec_as(Oid role, int sec_flags, char **error,
						 const char *sql, int nargs, const char *const *args);
#define PGD_EXEC_AS(role, sec_flags, error, sql, ...) \
	pgd_exec_as((role), (sec_flags), (error), (sql), \
				(int) (sizeof((const char *[]){__VA_ARGS__}) / \
					   sizeof(const char *)), \
				(const char *[]){__VA_ARGS__})

/*
 * The engine's own statements, run from a function a user calls (df.cancel,
 * df.signal, df.start, ...): SPI connected, the bootstrap superuser as the
 * current user, and without the security restriction a workflow step runs
 * under.  Inside that restriction PostgreSQL refuses to queue a deferred
 * trigger event, and the engine's writes queue some: a df.nodes row written
 * again in the transaction that wrote it (a batch that started an instance,
 * then ran a step that cancels it) queues its deferred foreign-key checks.
 * Only fixed statements run this way, no user code; what they queue fires
 * at the caller's commit.  pgd_caller_again() finishes SPI and restores the
 * caller's user and security context.
 */
typedef struct PgdCaller
{
	Oid			userid;
	int			sec;
} PgdCaller;

extern void pgd_engine_rights(PgdCaller *caller);
extern void pgd_caller_again(const PgdCaller *caller);

#endif /* PG_DURABLE_SPI_H */
