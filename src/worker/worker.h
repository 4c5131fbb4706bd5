/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background workers: the launcher (launcher.c), the executors
 *	  (executor.c), the HTTP worker (http_worker.c) and the maintenance that
 *	  executor 0 runs between tasks (maintenance.c).
 *
 * Locks: see each file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_WORKER_H
#define PG_DURABLE_WORKER_H

#include "postgres.h"

/* launcher.c */
extern void		 pgd_register_launcher(void);
PGDLLEXPORT void pgd_launcher_main(Datum main_arg);

/* executor.c */
PGDLLEXPORT void pgd_executor_main(Datum main_arg);

/* batch_stats.c: the sizes of committed batches */
extern void pgd_batch_committed(int tasks);

/* http_worker.c */
PGDLLEXPORT void pgd_http_worker_main(Datum main_arg);

/*
 * otel.c: the OTLP export, a step of it between the HTTP worker's calls
 * (in cxt, reset on return); returns in how many ms it wants the next
 * step, or -1 when the export is off.
 */
extern long pgd_otel_step(MemoryContext cxt);

/*
 * maintenance.c, run by executor 0: the heartbeat (a new epoch at start-up
 * and after the extension was made again, then every 5 s), retention and
 * reconciliation
 */
extern void pgd_announce_ready(void);
extern void pgd_heartbeat_maybe(void);
extern void pgd_reconcile_maybe(long *sleep_ms);
extern void pgd_task_sweep_maybe(long *sleep_ms);

/*
 * A commit published an event or registered an EVENT wait: run the bus
 * sweep in a transaction of its own.  True when it ran.
 */
extern bool pgd_bus_sweep_maybe(void);
extern bool pgd_start_sweep_maybe(void);

#endif /* PG_DURABLE_WORKER_H */
