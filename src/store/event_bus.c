/*-------------------------------------------------------------------------
 *
 * event_bus.c
 *	  The engine store's statements for the event bus
 *	  (docs/design/events.md): an EVENT node taking an event, the sweep
 *	  that wakes the instances whose waits an event matches, and the
 *	  retention of the bus (store.h).
 *
 * The bus is df_internal.bus_events, appended by df.publish_event
 * (api/publish.c) in the publisher's transaction.  Which events an EVENT
 * node may take is one rule, whatever the commit order: an event of its
 * topic whose payload contains the filter, that the instance's start
 * snapshot (df_internal.runs.start_snapshot, taken by the INSERT of
 * df.start) did not see, and that no earlier EVENT node of the instance
 * took (df_internal.bus_takes); the lowest id first.  An event published
 * after the start but before the wait was registered therefore counts,
 * and one committed before the start never does, even with a lower id
 * than one that counts (ids are drawn in nextval order, not commit order).
 *
 * An EVENT node that finds no event registers a wait (a df_internal.waits
 * row whose name is '', which no signal can have) under the instance's
 * runs lock, with the xmin of the snapshot that looked (event_xmin): every
 * event of a lower xid was visible to that look and did not match or was
 * taken (a take is never undone), so later looks skip them and the cost of
 * a look is the events published since, not since the instance started.  Delivery is lock-free: the publisher and the waiter each
 * ask, at their commit, for a sweep (wake.c), a transaction of an executor
 * that begins after the commit and enqueues a deliver task for every
 * instance that has a wait some visible, untaken event matches.  If the
 * registration did not see an event, the event's transaction committed
 * after the registration's read; the sweep its commit asked for then sees
 * the wait unless the wait committed later still, and then the sweep the
 * wait's commit asked for sees the event.  So no event is missed, and
 * nothing polls.
 *
 * Locks: the take runs under the instance's runs row (the caller's); the
 * sweep and retention lock nothing but the rows they insert or delete.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/spi.h"
#include "core/wake.h"
#include "store/store.h"
#include "store/store_internal.h"

/*
 * The events instance $1 may still take of topic $2 whose payload contains
 * $3, of an xid at or above $4 when given (the xmin of the look that
 * registered the wait: every event of a lower xid was visible to it).
 */
#define ELIGIBLE_EVENTS \
	"FROM df_internal.bus_events b, df_internal.runs r " \
	"WHERE r.instance_id OPERATOR(pg_catalog.=) $1 " \
	"AND b.topic OPERATOR(pg_catalog.=) df_internal.space_name('topic', $2, " \
	" r.submitted_by::pg_catalog.oid, 'subscribe') " \
	"AND b.payload OPERATOR(pg_catalog.@>) $3::pg_catalog.jsonb " \
	"AND b.xid OPERATOR(pg_catalog.>=) GREATEST(pg_catalog.pg_snapshot_xmin(r.start_snapshot), " \
	" COALESCE($4::pg_catalog.xid8, '0'::pg_catalog.xid8)) " \
	"AND NOT pg_catalog.pg_visible_in_snapshot(b.xid, r.start_snapshot) " \
	"AND NOT EXISTS (SELECT 1 FROM df_internal.bus_takes t " \
	"WHERE t.instance_id OPERATOR(pg_catalog.=) r.instance_id " \
	"AND t.event_id OPERATOR(pg_catalog.=) b.id) "

/* The statements of the event bus (statements.c runs them: store_exec). */
#define T TEXTOID

enum
{
	BUS_TAKE,
	BUS_WAIT_ADD,
	BUS_WAITS,
	BUS_RETENTION,
	BUS_SWEEP,
	BUS_STMTS
};

static const PgdStmtDef bus_stmts[BUS_STMTS] = {
	[BUS_TAKE] =
		{"an EVENT node's take of the first event it may take, and the snapshot that looked",
		 0, REACH_INSTANCE,
		 "WITH e AS (SELECT b.id, b.key, b.payload, b.published_at " ELIGIBLE_EVENTS
		 "ORDER BY b.id LIMIT 1), "
		 "taken AS (INSERT INTO df_internal.bus_takes (instance_id, event_id) "
		 "SELECT $1, e.id FROM e) "
		 "SELECT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text, "
		 "(SELECT pg_catalog.json_build_object('topic', $2::text, 'key', e.key, "
		 "'payload', e.payload, 'published_at', e.published_at, "
		 "'event_id', e.id)::text FROM e)",
		 4,
		 {T, T, T, T}},
	[BUS_WAIT_ADD] =
		{"an EVENT node's registered wait",
		 0, REACH_INSTANCE,
		 "INSERT INTO df_internal.waits (instance_id, node_id, scope, name, event_xmin) "
		 "VALUES ($1, $2, $3, '', $4::pg_catalog.xid8) "
		 "ON CONFLICT (instance_id, node_id, scope) DO UPDATE "
		 "SET name = EXCLUDED.name, event_xmin = EXCLUDED.event_xmin",
		 4,
		 {T, T, T, T}},
	[BUS_WAITS] =
		{"an instance's registered EVENT waits",
		 0, REACH_INSTANCE,
		 "SELECT node_id, scope, event_xmin FROM df_internal.waits "
		 "WHERE instance_id OPERATOR(pg_catalog.=) $1 "
		 "AND name OPERATOR(pg_catalog.=) '' ORDER BY seq",
		 1,
		 {T}},
	[BUS_RETENTION] =
		{"the bus's events older than the retention dropped",
		 0, REACH_ALL,
		 "DELETE FROM df_internal.bus_events WHERE published_at "
		 "OPERATOR(pg_catalog.<) (pg_catalog.now() "
		 "OPERATOR(pg_catalog.-) pg_catalog.make_interval(days => $1::int))",
		 1,
		 {T}},
	[BUS_SWEEP] =
		{"a deliver task for each instance with a registered EVENT wait that an event of the bus matches",
		 FLUSH_NODE_WRITES, REACH_ALL,
		 "INSERT INTO df_internal.tasks (instance_id, scope, kind) "
		 "SELECT m.instance_id, m.instance_id, 'deliver' FROM ("
		 " SELECT DISTINCT w.instance_id FROM df_internal.runs r "
		 " JOIN df_internal.waits w ON w.instance_id OPERATOR(pg_catalog.=) r.instance_id "
		 " JOIN df.nodes n ON n.instance_id OPERATOR(pg_catalog.=) w.instance_id "
		 "  AND n.id OPERATOR(pg_catalog.=) w.node_id "
		 " WHERE w.name OPERATOR(pg_catalog.=) '' AND n.node_type OPERATOR(pg_catalog.=) 'EVENT' "
		 " AND EXISTS (SELECT 1 FROM df_internal.bus_events b "
		 "  WHERE b.topic OPERATOR(pg_catalog.=) df_internal.space_name('topic', "
		 "   n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'topic', "
		 "   r.submitted_by::pg_catalog.oid, 'subscribe') "
		 "  AND b.payload OPERATOR(pg_catalog.@>) COALESCE("
		 "   n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->) 'filter', '{}') "
		 "  AND b.xid OPERATOR(pg_catalog.>=) GREATEST(pg_catalog.pg_snapshot_xmin(r.start_snapshot), "
		 "   COALESCE(w.event_xmin, '0'::pg_catalog.xid8)) "
		 "  AND NOT pg_catalog.pg_visible_in_snapshot(b.xid, r.start_snapshot) "
		 "  AND NOT EXISTS (SELECT 1 FROM df_internal.bus_takes t "
		 "   WHERE t.instance_id OPERATOR(pg_catalog.=) w.instance_id "
		 "   AND t.event_id OPERATOR(pg_catalog.=) b.id))) m "
		 "RETURNING id",
		 0,
		 {0},
		 true},
};

#undef T

static PgdStmtPlan bus_plans[BUS_STMTS];

bool
pgd_store_event_take(const char *instance_id, const char *topic,
					 const char *filter, const char *after_xid, char **result,
					 char **horizon)
{
	/* one statement, so the horizon is the snapshot that looked */
	if (STORE_EXEC(bus_stmts, bus_plans, BUS_TAKE, instance_id, topic, filter, after_xid) != 1)
		elog(ERROR, "the event take returned no row");
	*horizon = pgd_spi_getstring(0, 1);
	*result = pgd_spi_getstring(0, 2);
	return *result != NULL;
}

void
pgd_store_event_wait_add(const char *instance_id, const char *node_id,
						 const char *scope, const char *horizon)
{
	STORE_EXEC(bus_stmts, bus_plans, BUS_WAIT_ADD, instance_id, node_id, scope, horizon);
}

int
pgd_store_event_waits(const char *instance_id, char ***node_ids,
					  char ***scopes, char ***horizons)
{
	int n;

	if (!pgd_internal_relation_exists("bus_events"))
		return 0; /* an older schema: no EVENT waits (nor event_xmin) */
	n = STORE_EXEC(bus_stmts, bus_plans, BUS_WAITS, instance_id);

	*node_ids = palloc(sizeof(char *) * Max(n, 1));
	*scopes = palloc(sizeof(char *) * Max(n, 1));
	*horizons = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		(*node_ids)[i] = pgd_spi_getstring(i, 1);
		(*scopes)[i] = pgd_spi_getstring(i, 2);
		(*horizons)[i] = pgd_spi_getstring(i, 3);
	}
	return n;
}

/*
 * The sweep locks runs before waits, as every transition does (a schema
 * update locks them in that order too).
 */
int
pgd_store_event_sweep(void)
{
	int n;

	if (!pgd_internal_relation_exists("bus_events"))
		return -1;
	n = store_exec(&bus_stmts[BUS_SWEEP], &bus_plans[BUS_SWEEP], NULL, NULL);

	for (int i = 0; i < n; i++)
		pgd_task_ready_at_commit(strtoll(pgd_spi_getstring(i, 1), NULL, 10));
	return n;
}

int
pgd_store_event_retention(int retention_days)
{
	char days[16];

	if (!pgd_internal_relation_exists("bus_events"))
		return -1;

	snprintf(days, sizeof(days), "%d", retention_days);
	return STORE_EXEC(bus_stmts, bus_plans, BUS_RETENTION, days);
}
