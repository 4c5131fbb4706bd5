/*-------------------------------------------------------------------------
 *
 * unit.h
 *	  Units of work of pg_durable's background workers (unit.c): a
 *	  transaction with an SPI connection and a snapshot, the recovery from
 *	  an error inside one, the rate limit of their log lines, and the
 *	  registration of the workers themselves.
 *
 * Locks: none of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_UNIT_H
#define PG_DURABLE_UNIT_H

#include "postgres.h"

#include "postmaster/bgworker.h"

/*
 * A unit of work: its own transaction, an SPI connection and a snapshot,
 * with the activity shown in pg_stat_activity; ended by committing.
 */
extern void pgd_begin_unit(const char *activity);
extern void pgd_end_unit(void);

/*
 * pgd_begin_unit for a unit that touches the engine's tables: also share
 * locks the extension object, without waiting.  False (and no transaction
 * open) when the extension is gone or being dropped or altered: the caller
 * stays away from the tables and tries again later.
 */
extern bool pgd_begin_engine_unit(const char *activity);

/*
 * In the PG_CATCH of a worker loop around units of work: log the error,
 * abort the transaction, leave SPI (harmless when not connected) and
 * return to cxt.  The loop goes on with its next unit.
 */
extern void pgd_unit_recover(MemoryContext cxt);

/*
 * The same for a caller that hands the error on instead of logging it:
 * returns it, copied into cxt.
 */
extern ErrorData *pgd_unit_abort(MemoryContext cxt);

/* Is pg_durable installed in this database?  (A transaction of its own.) */
extern bool pgd_extension_exists(void);

/*
 * CHECK_FOR_INTERRUPTS() between units: a query cancel, which has no
 * statement to cancel there, is logged and forgotten instead of ending
 * the worker.
 */
extern void pgd_idle_check_for_interrupts(void);

/*
 * May the caller write one more LOG line?  At most a burst per minute per
 * process; when a new window opens after lines were suppressed, says how
 * many.
 */
extern bool pgd_log_allowed(void);

/*
 * Describe one of pg_durable's background workers: entry point function
 * (in this library), names, argument; connected to a database (or not);
 * never restarted by the postmaster (the launcher supervises), and
 * notifying notify_pid (0: nobody) when it starts and stops.
 */
extern void pgd_worker_describe(BackgroundWorker *worker, const char *function,
								const char *name, const char *type, Datum arg,
								pid_t notify_pid);

#endif /* PG_DURABLE_UNIT_H */
