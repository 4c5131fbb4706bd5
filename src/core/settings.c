/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The pg_durable.* settings: their variables and their definitions.
 *
 * Every setting is defined once, here, from _PG_init (settings that need
 * a restart can only be defined while the postmaster starts), and the
 * prefix is reserved so that a misspelt pg_durable.* setting is an error.
 * The README's settings table documents each of them.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "core/settings.h"
#include "graph/graph.h"

char *pgd_worker_role = NULL;
char *pgd_database = NULL;
char *pgd_host = NULL;
bool  pgd_log_workflow_sql = true;
int	  pgd_max_management_connections = 6;
int	  pgd_max_duroxide_connections = 10;
int	  pgd_max_user_connections = 10;
int	  pgd_execution_acquire_timeout = 30;
int	  pgd_max_new_transaction_starts = 2;
int	  pgd_new_transaction_start_timeout = 5;
bool  pgd_enable_superuser_instances = false;
int	  pgd_list_instances_max_limit = 1000;
int	  pgd_retention_days = 30;
int	  pgd_reconcile_interval = 3600;
int	  pgd_workers = 4;
int	  pgd_max_executors_per_role = 0;
int	  pgd_loop_iteration_floor = 1000;
int	  pgd_safety_poll = 5000;
int	  pgd_max_result_size = 64 * 1024; /* kB */
int	  pgd_max_engine_errors = 10;
int	  pgd_batch_max_steps = 32;
int	  pgd_batch_max_ms = 20;
char *pgd_http_allowed_hosts = NULL;
bool  pgd_http_allow_private = false;
bool  pgd_start_inserts_nodes = false;
int	  pgd_http_max_request_body = 10 * 1024 * 1024;
int	  pgd_http_max_response_body = 10 * 1024 * 1024;
int	  pgd_http_max_timeout = 300;
int	  pgd_http_max_concurrent = 500;
char *pgd_otel_endpoint = NULL;
char *pgd_otel_service_name = NULL;
char *pgd_otel_headers = NULL;
int	  pgd_otel_batch_events = 8192;
bool  pgd_inbox = true;

/* The engine's settings: where and as whom it runs, its limits and pace. */
static void
define_engine_settings(void)
{
	DefineCustomStringVariable("pg_durable.worker_role",
							   "Role the pg_durable background workers connect as.",
							   "Must be a superuser.", &pgd_worker_role,
							   "postgres", PGC_POSTMASTER, 0, NULL, NULL,
							   NULL);

	DefineCustomStringVariable("pg_durable.database",
							   "Database that holds the pg_durable extension and its engine.",
							   NULL, &pgd_database, "postgres", PGC_POSTMASTER,
							   0, NULL, NULL, NULL);

	DefineCustomStringVariable("pg_durable.host",
							   "Host of the connections pg_durable opens to its own server (compatibility setting).",
							   "pg_durable opens no connection to its own server: its workers and background "
							   "sessions are attached to the server directly. The value is accepted and ignored.",
							   &pgd_host, "", PGC_POSTMASTER, 0, NULL, NULL,
							   NULL);

	DefineCustomBoolVariable("pg_durable.log_workflow_sql",
							 "Lets the workers write the SQL of workflow steps to the server log.",
							 "On: a step's statement, after substitution, is the activity of the process "
							 "running it, and is logged at DEBUG1 before it runs. Off: it appears in no log "
							 "line of pg_durable's, and the log lines of a failed step give its error code "
							 "instead of its message.",
							 &pgd_log_workflow_sql, true, PGC_POSTMASTER, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.max_management_connections",
							"Size of the management pool (compatibility setting).",
							"pg_durable executors need no connection pool; the value is checked and reported only.",
							&pgd_max_management_connections, 6, 1, 1000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.max_duroxide_connections",
							"Size of the engine pool (compatibility setting).",
							"pg_durable executors need no connection pool; the value is checked and reported only.",
							&pgd_max_duroxide_connections, 10, 1, 1000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.max_user_connections",
							"Maximum number of SQL steps running at the same time.",
							NULL, &pgd_max_user_connections, 10, 1, 1000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.execution_acquire_timeout",
							"Seconds a step may wait for an execution slot (compatibility setting).",
							"Steps wait in the queue for a free executor instead of failing.",
							&pgd_execution_acquire_timeout, 30, 1, 3600,
							PGC_POSTMASTER, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.max_new_transaction_starts",
							"Maximum number of concurrent df.start(..., transaction_mode => 'new') launches.",
							NULL, &pgd_max_new_transaction_starts, 2, 1, 1000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.new_transaction_start_timeout",
							"Seconds to wait for a launch slot for transaction_mode => 'new'.",
							NULL, &pgd_new_transaction_start_timeout, 5, 1,
							3600, PGC_POSTMASTER, GUC_UNIT_S, NULL, NULL,
							NULL);

	DefineCustomBoolVariable("pg_durable.enable_superuser_instances",
							 "Allow superusers to start workflow instances.",
							 "Steps run as the submitting role; a superuser submitter runs them with full privileges.",
							 &pgd_enable_superuser_instances, false,
							 PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL,
							 NULL);

	DefineCustomIntVariable("pg_durable.list_instances_max_limit",
							"Largest page size df.list_instances accepts.",
							NULL, &pgd_list_instances_max_limit, 1000, 1,
							1000000, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.retention_days",
							"Days finished instances are kept before removal (0 keeps them only until the next pass).",
							NULL, &pgd_retention_days, 30, 0, 36500,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.reconcile_interval",
							"Seconds between reconciliation and retention passes (0 disables them).",
							NULL, &pgd_reconcile_interval, 3600, 0, 86400,
							PGC_POSTMASTER, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.workers",
							"Number of executor background workers.",
							"The launcher starts no more executors than free background worker slots allow.",
							&pgd_workers, 4, 1, 64, PGC_POSTMASTER, 0, NULL,
							NULL, NULL);

	/*
	 * The server's value, read by the executors at every claim: a reload
	 * changes it for the next steps.
	 */
	DefineCustomIntVariable("pg_durable.max_executors_per_role",
							"Most executors that SQL steps of one role may occupy at the same time.",
							"0 means no limit. Steps over it wait in the queue while the other roles' "
							"steps run.",
							&pgd_max_executors_per_role, 0, 0, 64, PGC_SIGHUP,
							0, NULL, NULL, NULL);

	/*
	 * Every wake-up is delivered at commit (core/wake.c); the poll only
	 * covers what no commit announces (an executor that died holding a
	 * share, say).  Tests raise it so that a lost wake-up hangs instead of
	 * costing 5 s.
	 */
	DefineCustomIntVariable("pg_durable.safety_poll",
							"Longest time an idle executor sleeps before it scans the queue anyway.",
							NULL, &pgd_safety_poll, 5000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.loop_iteration_floor",
							"Least time between the starts of two iterations of a loop.",
							"Keeps a loop without waits from spinning; tests may lower it.",
							&pgd_loop_iteration_floor, 1000, 0, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	/*
	 * At most 256MB: a jsonb string or container holds no more, so a larger
	 * result could never be stored.  The server's value, not a session's:
	 * a step cannot raise it for itself.
	 */
	DefineCustomIntVariable("pg_durable.max_result_size",
							"Largest result a SQL step may return, as JSON text.",
							"A step whose rows exceed it fails, as soon as they do.",
							&pgd_max_result_size, 64 * 1024, 1, 256 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.max_engine_errors",
							"Unexpected engine errors on one SQL step's task before its node is failed.",
							"0 retries such a task forever; df.check() reports it either way.",
							&pgd_max_engine_errors, 10, 0, 1000, PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	/* §1.10's node limit; raised for bench/run's fan-out of 10,000 */
	DefineCustomIntVariable("pg_durable.max_nodes",
							"Most nodes of a workflow df.start accepts.",
							"The reference's limit is 10000.  df.map's copies keep to 10000 whatever it is.",
							&df_max_nodes, DF_MAX_NODES, 1, 1000000, PGC_SUSET,
							0, NULL, NULL, NULL);

	/* docs/design/batches-and-inbox.md §2: several ready steps, one commit */
	DefineCustomIntVariable("pg_durable.batch_max_steps",
							"Most tasks an executor runs in one transaction (a batch).",
							"1 runs each task in a transaction of its own.  Past it a batch takes no new work, but runs on the branches of a fan-out under way and the steps of an instance holding a lock or a limit slot, up to twice as many.",
							&pgd_batch_max_steps, 32, 1, 1000, PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pg_durable.batch_max_ms",
							"Longest time a batch takes new tasks, and the budget of each step after its first.",
							"A later step that runs past it, or would wait for a lock, is rolled back and leads the next batch.",
							&pgd_batch_max_ms, 20, 1, 60000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("pg_durable.inbox",
							 "Lets a step whose instance is held elsewhere commit its completion into the inbox instead of waiting.",
							 "Off: the first step of a batch waits for its instance's runs row, and never commits its completion into the inbox.",
							 &pgd_inbox, true, PGC_SIGHUP, 0, NULL, NULL,
							 NULL);
}

/*
 * The HTTP destination policy and limits.  Only the HTTP worker applies
 * them, with the values of the server's configuration (PGC_SIGHUP:
 * postgresql.conf or ALTER SYSTEM, then a reload); no session can change
 * them for itself.
 */
static void
define_http_settings(void)
{
	DefineCustomStringVariable("pg_durable.http_allowed_hosts",
							   "Hosts HTTP steps may call: comma-separated host names or suffixes.",
							   "\"example.com\" allows example.com and its subdomains, \".example.com\" only "
							   "its subdomains, an IP address allows that bare address. Empty allows any host "
							   "whose addresses are public.",
							   &pgd_http_allowed_hosts, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	/*
	 * Not a setting anyone sets: on while df.start inserts an instance's
	 * nodes (api/start.c), read by the WHEN of the root-node check on
	 * df.nodes.  Superuser context, so no other role can turn it on; hidden
	 * from SHOW ALL and pg_settings.
	 */
	DefineCustomBoolVariable("pg_durable.start_inserts_nodes",
							 "On while df.start inserts an instance's nodes (internal).",
							 NULL, &pgd_start_inserts_nodes, false, PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE |
								 GUC_DISALLOW_IN_FILE | GUC_NO_RESET_ALL,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_durable.http_allow_private",
							 "Allow HTTP steps to connect to private, loopback and reserved addresses.",
							 "Off by default: a step may only connect to public addresses.",
							 &pgd_http_allow_private, false, PGC_SIGHUP,
							 GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.http_max_request_body",
							"Largest request body an HTTP step may send.",
							NULL, &pgd_http_max_request_body, 10 * 1024 * 1024,
							0, 1024 * 1024 * 1024, PGC_SIGHUP,
							GUC_UNIT_BYTE | GUC_SUPERUSER_ONLY, NULL, NULL,
							NULL);

	DefineCustomIntVariable("pg_durable.http_max_response_body",
							"Largest response body an HTTP step accepts.",
							"A longer response fails the step.",
							&pgd_http_max_response_body, 10 * 1024 * 1024, 0,
							256 * 1024 * 1024, PGC_SIGHUP,
							GUC_UNIT_BYTE | GUC_SUPERUSER_ONLY, NULL, NULL,
							NULL);

	DefineCustomIntVariable("pg_durable.http_max_timeout",
							"Largest timeout_seconds an HTTP step may use.",
							"A step asking for more fails; it bounds how long a call lost in a crash "
							"holds its lease before it is made again.",
							&pgd_http_max_timeout, 300, 1, 86400, PGC_SIGHUP,
							GUC_UNIT_S | GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomIntVariable("pg_durable.http_max_concurrent",
							"Most HTTP calls in flight at the same time.",
							NULL, &pgd_http_max_concurrent, 500, 1, 10000,
							PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
}

/* OTLP export of the spans by the HTTP worker (worker/otel.c). */
static void
define_otel_settings(void)
{
	DefineCustomStringVariable("pg_durable.otel_endpoint",
							   "OTLP/HTTP endpoint the HTTP worker exports spans to; empty: no export.",
							   "The base URL of an OpenTelemetry collector, e.g. http://collector:4318: spans are "
							   "posted as JSON to <endpoint>/v1/traces.",
							   &pgd_otel_endpoint, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomStringVariable("pg_durable.otel_service_name",
							   "service.name of the exported spans.", NULL,
							   &pgd_otel_service_name, "pg_durable",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL,
							   NULL);

	DefineCustomStringVariable("pg_durable.otel_headers",
							   "Headers sent with every OTLP export: name=value pairs separated by commas.",
							   "For example the API key a collector asks for: \"x-api-key=<key>\".",
							   &pgd_otel_headers, "", PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	/*
	 * at least 4: the events of one history row (a one-step instance's
	 * start, its node's start and end, its end) fit in any batch
	 */
	DefineCustomIntVariable("pg_durable.otel_batch_events",
							"Most history events whose spans one OTLP export posts.",
							NULL, &pgd_otel_batch_events, 8192, 4, 1000000,
							PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
}

void
pgd_settings_define(void)
{
	define_engine_settings();
	define_http_settings();
	define_otel_settings();
	MarkGUCPrefixReserved("pg_durable");
}
