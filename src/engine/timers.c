/*-------------------------------------------------------------------------
 *
 * timers.c
 *	  Nodes that wait: SLEEP, WAIT_SCHEDULE and SIGNAL, and df.signal.
 *
 * A wait is a task with a future run_at ("timer"): it survives restarts
 * like any row, and executors sleep until the earliest one is due (see
 * executor.c), so a timer fires within milliseconds of its time.
 *
 * Signals are buffered (a deliberate divergence from the reference, which
 * drops a signal sent before the wait exists).  df.signal appends to the
 * instance's mailbox (df_internal.signals) and enqueues a "deliver" task in
 * the caller's transaction; it locks nothing of the instance (DESIGN.md §5
 * rule 2).  Waits and signals meet under the instance's runs lock: a SIGNAL
 * node takes the oldest matching signal when it starts, else registers a
 * wait (df_internal.waits, plus a timer for its timeout); a deliver task
 * hands each registered wait, oldest first, the oldest signal of its name.
 * Whatever the commit order, one of the two sides sees the other (rule 4).
 *
 * Locks: the caller holds the instance's runs row; timer tasks claimed by
 * others are skipped, never waited for.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/cron.h"
#include "engine/engine.h"
#include "core/settings.h"

static PgdOutcome
outcome_ok(char *json)
{
	PgdOutcome	o = {true, json};

	return o;
}

static PgdOutcome
outcome_failed(char *msg)
{
	PgdOutcome	o = {false, msg};

	return o;
}

/* now + seconds, saturating at 'infinity' instead of overflowing */
static TimestampTz
after_seconds(TimestampTz now, int64 seconds)
{
	if (seconds <= 0)
		return now;
	if (seconds > (PG_INT64_MAX - now) / USECS_PER_SEC)
		return DT_NOEND;
	return now + seconds * USECS_PER_SEC;
}

static void
enqueue_timer(PgdGraph *g, int n, const char *scope, TimestampTz at)
{
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[4];

	values[0] = pgd_text_datum(g->instance_id);
	values[1] = pgd_text_datum(g->nodes[n].id);
	values[2] = pgd_text_datum(scope);
	values[3] = TimestampTzGetDatum(at);
	pgd_spi_exec("INSERT INTO df_internal.tasks (instance_id, node_id, scope, kind, run_at) "
				 "VALUES ($1, $2, $3, 'timer', $4)", 4, types, values, NULL, false);
	/* an idle executor must recompute how long to sleep */
	pgd_task_due_at_commit(at);
}

static DfJson *
node_config(PgdGraph *g, int n)
{
	char	   *err = NULL;
	const char *q = g->nodes[n].query;
	DfJson	   *cfg = q ? dfjson_parse(q, strlen(q), &err) : NULL;

	return (cfg && cfg->type == DFJ_OBJECT) ? cfg : dfjson_make_object();
}

static char *
signal_result(const char *name, bool timed_out, const char *payload)
{
	DfJson	   *r = dfjson_make_object();
	DfJson	   *data = NULL;
	char	   *err = NULL;

	if (payload)
		data = dfjson_parse(payload, strlen(payload), &err);
	dfjson_object_add(r, "signal_name", dfjson_make_string(name));
	dfjson_object_add(r, "timed_out", dfjson_make_bool(timed_out));
	dfjson_object_add(r, "data", data ? data : dfjson_make_null());
	return dfjson_to_text(r);
}

/* Take the oldest buffered signal of this name; returns its payload JSON text, or NULL. */
static bool
take_signal(const char *instance_id, const char *name, char **payload)
{
	if (PGD_EXEC("DELETE FROM df_internal.signals WHERE id = ("
					 " SELECT id FROM df_internal.signals "
					 " WHERE instance_id OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 "
					 " ORDER BY id LIMIT 1) RETURNING payload::text",
				 instance_id, name) == 0)
		return false;
	*payload = pgd_spi_getstring(0, 1);
	return true;
}

/* Start a SLEEP, WAIT_SCHEDULE or SIGNAL node. */
void
pgd_timer_node_start(PgdGraph *g, int n, const char *scope)
{
	PgdNode    *node = &g->nodes[n];
	TimestampTz now = GetCurrentTimestamp();

	switch (node->type)
	{
		case DF_NODE_SLEEP:
			{
				int64		secs = node->query ? strtoll(node->query, NULL, 10) : 0;

				enqueue_timer(g, n, scope, after_seconds(now, secs));
			}
			break;

		case DF_NODE_WAIT_SCHEDULE:
			{
				DfJson	   *expr = dfjson_get(node_config(g, n), "cron_expr");
				DfCron		cron;
				char	   *err = NULL;
				TimestampTz next;

				if (expr == NULL || expr->type != DFJ_STRING ||
					!df_cron_parse(expr->str, &cron, &err))
					pgd_transition_complete(g, n, scope,
											outcome_failed(psprintf("Invalid cron expression '%s': %s",
																	expr && expr->type == DFJ_STRING ? expr->str : "",
																	err ? err : "missing cron_expr")));
				else if (!df_cron_next(&cron, now, &next))
					pgd_transition_complete(g, n, scope,
											outcome_failed(psprintf("Cron expression '%s' has no upcoming time",
																	expr->str)));
				else
					enqueue_timer(g, n, scope, next);
			}
			break;

		case DF_NODE_SIGNAL:
			{
				DfJson	   *cfg = node_config(g, n);
				DfJson	   *name = dfjson_get(cfg, "signal_name");
				DfJson	   *timeout = dfjson_get(cfg, "timeout_seconds");
				char	   *payload;

				if (name == NULL || name->type != DFJ_STRING)
				{
					pgd_transition_complete(g, n, scope, outcome_failed(pstrdup("Signal name cannot be empty")));
					break;
				}
				if (take_signal(g->instance_id, name->str, &payload))
				{
					pgd_event_add(g->instance_id, "signal_received", node->id, scope, 0,
								  pgd_event_detail("name", name->str));
					pgd_transition_complete(g, n, scope,
											outcome_ok(signal_result(name->str, false, payload)));
					break;
				}
				PGD_EXEC("INSERT INTO df_internal.waits (instance_id, node_id, scope, name) "
							 "VALUES ($1, $2, $3, $4) "
							 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE SET name = EXCLUDED.name",
				 g->instance_id, node->id, scope, name->str);
				if (timeout != NULL && timeout->type == DFJ_NUMBER)
					enqueue_timer(g, n, scope, after_seconds(now, strtoll(timeout->str, NULL, 10)));
			}
			break;

		default:
			elog(ERROR, "pg_durable: node type %s is not a timer", df_node_type_name(node->type));
	}
}

/* A timer of node n fell due (the caller checked that n is live in scope). */
void
pgd_timer_fire(PgdGraph *g, int n, const char *scope)
{
	PgdNode    *node = &g->nodes[n];

	switch (node->type)
	{
		case DF_NODE_SLEEP:
			{
				DfJson	   *r = dfjson_make_object();

				dfjson_object_add(r, "slept", dfjson_make_bool(true));
				dfjson_object_add(r, "seconds", dfjson_make_number(node->query ? node->query : "0"));
				pgd_transition_complete(g, n, scope, outcome_ok(dfjson_to_text(r)));
			}
			break;

		case DF_NODE_WAIT_SCHEDULE:
			pgd_transition_complete(g, n, scope, outcome_ok(pstrdup("{\"scheduled\":true}")));
			break;

		case DF_NODE_LOOP:
			pgd_loop_timer(g, n, scope);
			break;

		case DF_NODE_SIGNAL:
			{
				DfJson	   *name = dfjson_get(node_config(g, n), "signal_name");

				if (PGD_EXEC("DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1 "
								 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
				 g->instance_id, node->id, scope) == 0)
					break;		/* delivered meanwhile */
				pgd_transition_complete(g, n, scope,
										outcome_ok(signal_result(name && name->type == DFJ_STRING ? name->str : "",
																 true, NULL)));
			}
			break;

		default:
			elog(ERROR, "pg_durable: node type %s has no timer", df_node_type_name(node->type));
	}
}

/*
 * Hand buffered signals to registered waits: each wait, oldest first, gets
 * the oldest signal of its name.  Completing a wait may start new waits,
 * which look at the mailbox themselves, so the loop re-reads each time.
 */
void
pgd_signal_deliver(PgdGraph *g)
{
	for (;;)
	{
		char	   *node_id;
		char	   *scope;
		char	   *name;
		char	   *payload;
		int			n;

		if (PGD_EXEC("SELECT w.node_id, w.scope, w.name FROM df_internal.waits w "
						 "WHERE w.instance_id OPERATOR(pg_catalog.=) $1 AND EXISTS ("
						 " SELECT 1 FROM df_internal.signals s "
						 " WHERE s.instance_id OPERATOR(pg_catalog.=) w.instance_id "
						 " AND s.name OPERATOR(pg_catalog.=) w.name) "
						 "ORDER BY w.seq LIMIT 1",
				 g->instance_id) == 0)
			return;
		node_id = pgd_spi_getstring(0, 1);
		scope = pgd_spi_getstring(0, 2);
		name = pgd_spi_getstring(0, 3);

		PGD_EXEC("DELETE FROM df_internal.waits WHERE instance_id OPERATOR(pg_catalog.=) $1 "
					 "AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3",
				 g->instance_id, node_id, scope);
		n = pgd_graph_find(g, node_id);
		if (n < 0 || !pgd_node_is_live(g, n, scope))
			continue;			/* a stale wait: the signal stays for a live one */
		/* its timeout timer is no longer needed (one being fired finds the wait gone) */
		PGD_EXEC("DELETE FROM df_internal.tasks WHERE id IN ("
					 " SELECT id FROM df_internal.tasks WHERE instance_id OPERATOR(pg_catalog.=) $1 "
					 " AND node_id OPERATOR(pg_catalog.=) $2 AND scope OPERATOR(pg_catalog.=) $3 "
					 " AND kind OPERATOR(pg_catalog.=) 'timer' FOR UPDATE SKIP LOCKED)",
				 g->instance_id, node_id, scope);
		if (!take_signal(g->instance_id, name, &payload))
			elog(ERROR, "pg_durable: signal '%s' of instance %s vanished under the instance lock",
				 name, g->instance_id);
		pgd_event_add(g->instance_id, "signal_received", node_id, scope, 0,
					  pgd_event_detail("name", name));
		pgd_transition_complete(g, n, scope, outcome_ok(signal_result(name, false, payload)));
	}
}


/* ---------------------------------------------------------------------
 * df.signal
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(pgd_signal);
Datum
pgd_signal(PG_FUNCTION_ARGS)
{
	char	   *id = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *data = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *status = NULL;
	char	   *err = NULL;
	bool		is_json;
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, BOOLOID};
	Datum		values[4];
	Oid			save_userid;
	int			save_sec;

	if (id[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("Instance id cannot be empty")));
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("Signal name cannot be empty")));

	/* visibility as the caller (row-level security decides) */
	values[0] = pgd_text_datum(id);
	SPI_connect();
	if (pgd_spi_exec("SELECT status FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) > 0)
		status = pgd_spi_getstring(0, 1);
	if (status == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("Instance not found or access denied: %s", id)));
	if (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
		strcmp(status, "cancelled") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Failed to send signal: instance %s is %s", id, status)));

	is_json = dfjson_parse(data, strlen(data), &err) != NULL;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	values[1] = pgd_text_datum(name);
	values[2] = pgd_text_datum(data);
	values[3] = BoolGetDatum(is_json);
	pgd_spi_exec("INSERT INTO df_internal.signals (instance_id, name, payload) "
				 "VALUES ($1, $2, CASE WHEN $4 THEN $3::pg_catalog.jsonb ELSE pg_catalog.to_jsonb($3) END)",
				 4, types, values, NULL, false);
	pgd_spi_exec("INSERT INTO df_internal.tasks (instance_id, scope, kind) VALUES ($1, $1, 'deliver')",
				 1, types, values, NULL, false);
	SetUserIdAndSecContext(save_userid, save_sec);
	SPI_finish();

	pgd_wake_at_commit(1);
	PG_RETURN_TEXT_P(cstring_to_text("OK"));
}
