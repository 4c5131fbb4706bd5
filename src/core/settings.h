/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The pg_durable.* settings (settings.c defines them) and the version
 *	  the module was built as.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SETTINGS_H
#define PG_DURABLE_SETTINGS_H

#include "postgres.h"
#include "common/compat.h"

#ifndef PG_DURABLE_VERSION
#define PG_DURABLE_VERSION "0.0.0"
#endif
#ifndef PG_DURABLE_BUILT
#define PG_DURABLE_BUILT "unknown"
#endif

/* GUC variables (settings.c) */
extern char *pgd_worker_role;
extern char *pgd_database;
extern char *pgd_host;				/* accepted and ignored */
extern bool	 pgd_log_workflow_sql; /* step SQL may appear in log lines */
extern int	 pgd_max_management_connections;
extern int	 pgd_max_duroxide_connections;
extern int	 pgd_max_user_connections;
extern int	 pgd_execution_acquire_timeout;
extern int	 pgd_max_new_transaction_starts;
extern int	 pgd_new_transaction_start_timeout;
extern bool	 pgd_enable_superuser_instances;
extern int	 pgd_list_instances_max_limit;
extern int	 pgd_retention_days;
extern int	 pgd_reconcile_interval;
extern int	 pgd_workers;
extern int	 pgd_max_executors_per_role;
extern int	 pgd_safety_poll;
extern int	 pgd_loop_iteration_floor;
extern int	 pgd_max_result_size;
extern int	 pgd_max_engine_errors;
extern int	 pgd_batch_max_steps;
extern int	 pgd_batch_max_ms;
extern bool	 pgd_inbox; /* completions may go to the inbox */
extern char *pgd_http_allowed_hosts;
extern bool	 pgd_http_allow_private;
extern bool	 pgd_start_inserts_nodes;
extern int	 pgd_http_max_request_body;
extern int	 pgd_http_max_response_body;
extern int	 pgd_http_max_timeout;
extern int	 pgd_http_max_concurrent;
extern char *pgd_otel_endpoint;
extern char *pgd_otel_service_name;
extern char *pgd_otel_headers;
extern int	 pgd_otel_batch_events;

/* settings.c: define every pg_durable.* setting (from _PG_init) */
extern void pgd_settings_define(void);

#endif /* PG_DURABLE_SETTINGS_H */
