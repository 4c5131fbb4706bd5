/*-------------------------------------------------------------------------
 *
 * messages.h
 *	  The message texts that the interface reference (pg_durable 0.2.6)
 *	  pins, in one place, each with the API section that pins it.
 *
 * Scripts written for the reference compare these texts, and the tests
 * pin them, so they are kept byte for byte: they do not follow the
 * PostgreSQL message style (capital first letter, several sentences, a
 * "pg_durable:" prefix in some) and must not be "fixed".  Where the
 * reference pins only the start of a text ("Loop exceeded maximum
 * iteration count of 8388608. ..."), the rest is ours, but it is part of
 * the same string and stays with it here.  Every other message of the
 * extension is written in PostgreSQL style where it is raised: a specific
 * errcode, a lower-case errmsg without a final period, errdetail and
 * errhint as sentences.
 *
 * Each macro is a format string for ereport/psprintf, or a plain string
 * where the text has no arguments.  Texts that wrap another message take
 * it as a "%s" (PGD_MSG_INVALID_GRAPH, PGD_MSG_INVALID_FUNCTION, ...).
 * Section numbers (§) refer to reference/pg_durable-0.2.6-api.md.
 *
 * Pinned texts raised by the install script (sql/pg_durable.sql), not by
 * C code, and listed here so that this header is the complete list:
 *	 §2.1 'pg_durable must be loaded via shared_preload_libraries' (also
 *		  PGD_MSG_NOT_PRELOADED, from _PG_init)
 *	 §2.1 'pg_durable extension must be created in database "%" (currently
 *		  in "%"). ...'
 *	 §2.3 df.grant_usage: NOTICE 'pg_durable: granted df usage privileges
 *		  to "%"'
 *	 §2.3 df.revoke_usage: NOTICE 'pg_durable: revoked df usage privileges
 *		  granted by "%" from "%"'
 * Pinned texts this implementation never produces, because it diverges
 * from the reference on purpose (reference §6): "pg_durable: connection
 * limit reached (max_user_connections=N). ..." and "Failed to connect to
 * database ..." (§1.8: no loopback connections, a step waits for an
 * executor), "Instance <id> not found after
 * 5s ..." (§3.14: the rows commit with the caller's transaction),
 * "Failed to cancel: ..." (§2.3: cancelling cannot fail in an engine
 * call), "df.http() is disabled. Rebuild with ..." and "Blocked: outbound
 * HTTP requests are disabled. ..." (§3.8: the HTTP policy is a setting,
 * not a build flag).
 *
 * Locks: none; definitions only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_MESSAGES_H
#define PG_DURABLE_MESSAGES_H

/* ---- §1.6 data flow: references to named results -------------------- */

/* $name, $name.col on a result without rows */
#define PGD_MSG_REF_NO_ROWS "$%.*s has no rows — query returned zero results"
/* $name whose first column of the first row is NULL */
#define PGD_MSG_REF_FIRST_NULL \
	"$%.*s is NULL — first column of first row is NULL"
/* $name.col that is NULL */
#define PGD_MSG_REF_COLUMN_NULL "$%.*s.%.*s is NULL"
/* $name.col of a missing column, in raw (HTTP) contexts */
#define PGD_MSG_REF_NO_FIELD \
	"$%.*s.%.*s: result has no field '%.*s' (available: %s)"

/* ---- §1.8 SQL execution --------------------------------------------- */

/* a column of a type with no JSON mapping */
#define PGD_MSG_UNSUPPORTED_COLUMN_TYPE \
	"Unsupported column type '%s' for column '%s'. " \
	"Cast the column to a supported type (for example ::text) in the query."
/* the failure of a SQL step: the error of the user's statement */
#define PGD_MSG_SQL_EXECUTION_FAILED "SQL execution failed: %s"

/* ---- §1.10 limits ----------------------------------------------------- */

#define PGD_MSG_GRAPH_TOO_DEEP \
	"Graph exceeds maximum nesting depth of 256. Split the workflow into smaller workflows."
/* %d: pg_durable.max_nodes, 10000 (the reference's text) unless changed */
#define PGD_MSG_GRAPH_TOO_MANY_NODES \
	"Workflow exceeds maximum node count of %d. Split the workflow into smaller workflows."

/* ---- §2.1 extension --------------------------------------------------- */

/* _PG_init outside shared_preload_libraries */
#define PGD_MSG_NOT_PRELOADED \
	"pg_durable must be loaded via shared_preload_libraries"

/* ---- §2.3 DSL builders and operators -------------------------------- */

/* df.as, df.if_rows: "<function>: " comes before it; also in graph validation */
#define PGD_MSG_INVALID_RESULT_NAME \
	"result name '%s' is not a valid identifier — must match [a-zA-Z_][a-zA-Z0-9_]*"
/* df.sleep */
#define PGD_MSG_SLEEP_NEGATIVE "Sleep duration must be non-negative"
/* df.wait_for_schedule; also graph validation and the WAIT_SCHEDULE step */
#define PGD_MSG_INVALID_CRON "Invalid cron expression '%s': %s"
/* df.wait_for_signal, df.signal; also graph validation and the SIGNAL step */
#define PGD_MSG_SIGNAL_NAME_EMPTY "Signal name cannot be empty"
/* df.wait_for_signal, df.await_instance, §3.8 df.http; also graph validation */
#define PGD_MSG_TIMEOUT_NOT_POSITIVE "Timeout must be positive"
/* an operand that carries node_type but is not valid Durofut */
#define PGD_MSG_INVALID_DUROFUT_JSON "Invalid Durofut JSON: %s"
/* the result of df.setvar & co. passed to a composer: helper, helper */
#define PGD_MSG_HELPER_AS_STEP \
	"%s cannot be used as a workflow step. Call %s before df.start()."
/* !> whose left side is not a ?> */
#define PGD_MSG_IF_ELSE_WITHOUT_IF \
	"Invalid if-then-else: left side of !> must be a ?> expression"

/* ---- §2.3 df.start ---------------------------------------------------- */

/* a graph that does not parse: wraps PGD_MSG_UNKNOWN_NODE_TYPE and others */
#define PGD_MSG_INVALID_FUNCTION "Invalid durable function: %s"
/* the node_type, then DF_VALID_NODE_TYPES (graph/graph.h) */
#define PGD_MSG_UNKNOWN_NODE_TYPE "Unknown node_type '%s'. Valid types: %s"
/* a known root node_type with a malformed envelope: type, "<path>: <what>" */
#define PGD_MSG_MALFORMED_DUROFUT \
	"Malformed Durofut JSON with node_type '%s': %s"
/* §2.3 df.start, §3.11 df.explain: wraps "<path>: <msg>" */
#define PGD_MSG_INVALID_GRAPH "Invalid durable function graph: %s"
/* graph messages after "<path>: " (the key: left_node, right_node, condition_node) */
#define PGD_MSG_CHILD_NOT_OBJECT "%s must be a Durofut JSON object"
#define PGD_MSG_EXTRAS_NOT_OBJECTS \
	"extra_nodes entries must be Durofut JSON objects"
#define PGD_MSG_IF_CONDITION_IN_QUERY \
	"condition_node in IF must be a first-class Durofut field, not embedded in query"
/* what is wrong with the if_rows config */
#define PGD_MSG_IF_QUERY_CONFIG "query in IF must be valid JSON config: %s"
/* database => that does not exist */
#define PGD_MSG_DATABASE_NOT_FOUND "database \"%s\" does not exist"
/* current_user without LOGIN */
#define PGD_MSG_NO_LOGIN \
	"current_user \"%s\" does not have LOGIN privilege. " \
	"Workflow steps run as the submitting role, which must be able to log in."
/* a superuser submitter while pg_durable.enable_superuser_instances is off */
#define PGD_MSG_SUPERUSER_DISABLED \
	"pg_durable: superuser instances are disabled. current_user \"%s\" is a superuser, " \
	"but pg_durable.enable_superuser_instances is off. " \
	"Start the workflow as an ordinary role, or turn the setting on."
/* a start that could not be enqueued */
#define PGD_MSG_START_FAILED "failed to start durable function: %s"
/*
 * what PGD_MSG_START_FAILED wraps when the readiness row holds another
 * schema_version than the engine's (operators stop intake that way; the
 * reference's test 25 sets it to -1).  The reference pins the whole text.
 */
#define PGD_MSG_ENGINE_NOT_READY \
	"pg_durable background worker not yet initialized — try again in a moment"
/* transaction_mode other than caller/new */
#define PGD_MSG_INVALID_TXN_MODE \
	"invalid transaction_mode \"%s\" for df.start(): expected 'caller' or 'new'"

/* ---- §2.3 df.cancel, df.signal, df.await_instance; §3.12 ------------ */

/* an instance the caller cannot see (row-level security) or that does not exist */
#define PGD_MSG_INSTANCE_NOT_FOUND "Instance not found or access denied: %s"
/* what df.cancel returns: id, reason */
#define PGD_MSG_INSTANCE_CANCELLED "Instance %s cancelled: %s"
/* df.signal to a finished instance: id, status */
#define PGD_MSG_SIGNAL_TERMINAL "Failed to send signal: instance %s is %s"
/* df.await_instance, df.wait_for_completion */
#define PGD_MSG_AWAIT_NOT_FOUND "Instance not found: %s"
#define PGD_MSG_AWAIT_TIMEOUT \
	"Timeout after %ds waiting for instance %s (status: %s). " \
	"The instance keeps running; wait again or check df.status()."
#define PGD_MSG_AWAIT_IN_WORKFLOW \
	"%s() cannot be called inside a workflow - a step must not wait for an instance"

/* ---- §2.3 variables ---------------------------------------------------- */

/* df.setvar, df.unsetvar, df.clearvars inside a workflow: the function */
#define PGD_MSG_VARS_IN_WORKFLOW \
	"%s() cannot be called inside a workflow - variables are captured when df.start() is called"

/* ---- §2.3 monitoring ------------------------------------------------- */

/* df.list_instances, df.instance_executions */
#define PGD_MSG_LIMIT_AT_LEAST_ONE "limit_count must be at least 1"
#define PGD_MSG_INVALID_CURSOR	   "df.list_instances: invalid after_cursor"
/* limit, max, max */
#define PGD_MSG_LIMIT_EXCEEDS_MAX \
	"df.list_instances: limit_count (%d) exceeds pg_durable.list_instances_max_limit (%d); " \
	"request at most %d rows per call and page with after_cursor"

/* ---- §3.3 conditionals ------------------------------------------------- */

#define PGD_MSG_IF_ROWS_NOT_FOUND "df.if_rows: result '%s' not found"
#define PGD_MSG_IF_ROWS_NOT_SQL \
	"df.if_rows: result '%s' is not a SQL result (missing row_count)"

/* ---- §3.4 join / race ------------------------------------------------- */

/* 1-based branch number, the branch's failure */
#define PGD_MSG_JOIN_BRANCH_FAILED "JOIN branch %d failed: %s"
/* "left" or "right", the winner's failure */
#define PGD_MSG_RACE_BRANCH_FAILED "RACE %s branch failed: %s"
/* the result of a LOOP node that lost a RACE */
#define PGD_MSG_LOOP_LOST_RACE "Loop branch cancelled after losing RACE"

/* ---- §3.5 loops --------------------------------------------------------- */

#define PGD_MSG_BREAK_OUTSIDE_LOOP \
	"df.break() was called outside of a loop. Use df.break() inside df.loop() (or @>) only."
/* the limit (PGD_MAX_LOOP_ITERATIONS, 8388608 since the reference's 0.2.8) */
#define PGD_MSG_LOOP_MAX_ITERATIONS \
	"Loop exceeded maximum iteration count of %d. " \
	"End the loop with df.break() or a while-condition."

/* ---- §3.8 HTTP ---------------------------------------------------------- */

/* the scheme */
#define PGD_MSG_HTTP_BAD_SCHEME \
	"Blocked: unsupported URL scheme '%s'. Only http and https are allowed."
/* the method as given */
#define PGD_MSG_HTTP_BAD_METHOD "Invalid HTTP method: %s"
#define PGD_MSG_PARTS_NULL		"parts is required and cannot be NULL"
#define PGD_MSG_PARTS_NOT_ARRAY "parts must be a JSON array of part objects"
#define PGD_MSG_PARTS_EMPTY		"parts must contain at least one part"
/* the part's index */
#define PGD_MSG_PART_DATA_B64 \
	"parts[%d] \"data_b64\" must be base64 or a single whole-value reference " \
	"($name, $name?, $name.col, $name.col?, {var})"
/* the part's name, what is wrong with the base64 */
#define PGD_MSG_INVALID_BASE64 "Invalid base64 in part '%s': %s"
/* role, function (df.http or df.http_multipart), role */
#define PGD_MSG_HTTP_NO_EXECUTE \
	"Blocked: role '%s' does not have EXECUTE privilege on %s(). " \
	"Grant it with df.grant_usage('%s', include_http => true)."
/* the address */
#define PGD_MSG_HTTP_BARE_IP \
	"Blocked: requests to bare IP addresses are not permitted. " \
	"Use a host name, or name the address '%s' in pg_durable.http_allowed_hosts."
/* the host */
#define PGD_MSG_HTTP_HOST_NOT_ALLOWED \
	"Blocked: '%s' is not in the allowed endpoint list. " \
	"A superuser can add it to pg_durable.http_allowed_hosts."
/* the host */
#define PGD_MSG_HTTP_RESTRICTED_ADDRESS \
	"Blocked: the resolved IP address for '%s' is in a restricted range. " \
	"Private, loopback and reserved addresses are refused unless " \
	"pg_durable.http_allow_private is on."
/* a 5xx response: method, url, status, a preview of the body */
#define PGD_MSG_HTTP_5XX "HTTP %s %s returned %ld: %s"

/* ---- §3.11 df.explain (returned as text) ------------------------------ */

#define PGD_MSG_EXPLAIN_NOT_FOUND "Instance '%s' not found"
/* what the input was, or what went wrong evaluating it */
#define PGD_MSG_CANNOT_EXPLAIN "Cannot explain input: %s"

/* ---- §3.13 transaction_mode => 'new' -------------------------------- */

/* max_new_transaction_starts, new_transaction_start_timeout */
#define PGD_MSG_NEW_TXN_LIMIT \
	"pg_durable: transaction_mode => 'new' launch limit reached " \
	"(max_new_transaction_starts=%d). Timed out after %ds waiting for a " \
	"launch slot before opening the loopback session."

#endif /* PG_DURABLE_MESSAGES_H */
