/*-------------------------------------------------------------------------
 *
 * pg_durable.h
 *	  Settings and entry points shared by every part of pg_durable.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_H
#define PG_DURABLE_H

#include "postgres.h"
#include "common/compat.h"

#ifndef PG_DURABLE_VERSION
#define PG_DURABLE_VERSION "0.0.0"
#endif
#ifndef PG_DURABLE_BUILT
#define PG_DURABLE_BUILT "unknown"
#endif

/* GUC variables (pg_durable.c) */
extern char *pgd_worker_role;
extern char *pgd_database;
extern int	pgd_max_management_connections;
extern int	pgd_max_duroxide_connections;
extern int	pgd_max_user_connections;
extern int	pgd_execution_acquire_timeout;
extern int	pgd_max_new_transaction_starts;
extern int	pgd_new_transaction_start_timeout;
extern bool pgd_enable_superuser_instances;
extern int	pgd_list_instances_max_limit;
extern int	pgd_retention_days;
extern int	pgd_reconcile_interval;
extern int	pgd_workers;
extern int	pgd_loop_iteration_floor;
extern char *pgd_http_allowed_hosts;
extern bool pgd_http_allow_private;
extern int	pgd_http_max_request_body;
extern int	pgd_http_max_response_body;
extern int	pgd_http_max_timeout;
extern int	pgd_http_max_concurrent;

/* shmem.c */
extern void pgd_shmem_request(void);
extern void pgd_shmem_startup(void);

/* launcher.c */
extern void pgd_register_launcher(void);
PGDLLEXPORT void pgd_launcher_main(Datum main_arg);

/* http_worker.c */
PGDLLEXPORT void pgd_http_worker_main(Datum main_arg);

/* step_sql.c: true inside a workflow step (or with df.in_workflow = 'true') */
extern bool pgd_in_workflow(void);

/* dsl_guard.c: detection of helper results (df.setvar ...) used as steps */
extern void pgd_note_helper_result(const char *helper, const char *result);
extern void pgd_check_not_helper_result(const char *operand);

#endif							/* PG_DURABLE_H */
