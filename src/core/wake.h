/*-------------------------------------------------------------------------
 *
 * wake.h
 *	  Wake-ups at commit (wake.c): executors for ready tasks, the HTTP
 *	  worker for HTTP tasks, sessions in df.await_instance for ended
 *	  instances, and interrupts for steps whose scope was abandoned; and
 *	  the shared-memory registry of executors and awaiters they use.
 *
 * Locks: the pgd_shared spinlocks, briefly.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_WAKE_H
#define PG_DURABLE_WAKE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "core/task_ref.h"

/* the commit hook (from _PG_init) */
extern void pgd_wake_register_xact_callback(void);

/* what this transaction's commit owes */
extern void pgd_wake_at_commit(int ntasks);
extern void pgd_task_ready_at_commit(int64 task_id);
extern void pgd_task_due_at_commit(TimestampTz due);
extern void pgd_http_wake_at_commit(void);
/* an event was published or an EVENT wait registered: the bus sweep */
extern void pgd_bus_sweep_at_commit(void);
extern bool pgd_bus_sweep_take(void);
extern void pgd_instance_finished_at_commit(const char *instance_id);
extern void pgd_interrupt_at_commit(const char *instance_id,
									const char *scope);

/* executors: the ring of published task ids and when to scan the queue */
/*
 * A start's marker: df.start publishes its instance, not a task; the
 * instance's pending runs row is the queued work.  Its instance (9 bytes
 * with the NUL), or false for any other task.
 */
extern bool pgd_start_marker_instance(PgdTaskRef task, char *instance_id);
extern void pgd_start_ready_at_commit(const char *instance_id);
extern void pgd_start_sweep_request(void);
extern bool pgd_start_sweep_take(void);
extern bool pgd_ready_took_marker(bool reset);
extern void pgd_wake_set_prepare_hook(void (*hook)(const char *instance_id));

extern bool	  pgd_ready_pop(PgdTaskRef *task);
extern int	  pgd_ready_made_here(PgdTaskRef *tasks, int max);
extern void	  pgd_ready_consumed(PgdTaskRef task);
extern bool	  pgd_queue_scan_due(TimestampTz now, long *sleep_ms);
extern uint64 pgd_queue_scan_begin(void);
extern void	  pgd_queue_rescan(void);
extern void	  pgd_queue_rescan_wake(void);
extern void	  pgd_queue_scanned(uint64 gen, TimestampTz earliest);

/* the registry */
extern void		   pgd_executor_attach(int slot);
extern void		   pgd_executor_set_idle(bool idle);
extern void		   pgd_executor_set_running(const char *instance_id,
											const char *scope);
extern bool		   pgd_http_worker_attach(void);
extern const char *pgd_executor_running_instance(void);
extern const char *pgd_executor_running_scope(void);

/* df.await_instance */
extern void pgd_await_prepare(const char *instance_id);
extern void pgd_await_wait(long timeout_ms);
extern void pgd_await_cancel(void);

#endif /* PG_DURABLE_WAKE_H */
