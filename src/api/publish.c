/*-------------------------------------------------------------------------
 *
 * publish.c
 *	  The event bus's SQL functions (docs/design/events.md):
 *	  df.publish_event, df.subscribe and df.unsubscribe.
 *
 * df.publish_event appends to df_internal.bus_events in the caller's
 * transaction (a trigger's too), as the bootstrap superuser since users
 * have no privileges on df_internal, with published_by = the calling
 * role; its commit asks for the bus sweep that wakes EVENT waits
 * (store/event_bus.c).  In the same transaction it starts, for every
 * subscription it sees whose topic is the event's and whose filter the
 * payload contains, one instance of the subscription's workflow as the
 * subscription's owner, with the idempotency key sub:<name>:<event id>
 * (idempotency keys are the submitter's: two roles' subscriptions of one
 * name do not share it)
 * and the named result $event bound in the root scope.  The event and
 * the starts commit together or not at all: no cursor can fall behind, a
 * crash loses neither, and the key makes a second start of the same
 * event (by hand, say) return the first instance.  A start that fails
 * (the owner lost the right to start workflows, say) is rolled back alone
 * and reported as a WARNING: the publisher's transaction goes on, and
 * that subscription misses the event.
 *
 * Topics: a topic is the caller's own unless a shared topic of that name
 * (df.create_topic) grants it publish; a subscription reads the events of
 * the topic as its owner would name it with subscribe, checked at each
 * publish, so a revoked grant stops it (docs/design/tenancy.md).
 *
 * Who may: EXECUTE on df.publish_event and on df.subscribe, which are not
 * granted to PUBLIC; a PUBLISH node publishes as its instance's submitter,
 * who needs the same grant.  A subscription's name is its owner's own:
 * another role's subscription of that name neither conflicts with it nor
 * shows; df.unsubscribe removes those of the roles the caller is a member
 * of (a superuser's: anyone's).
 *
 * Locks: none; row inserts, and the deletion of one subscription row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "api/api.h"
#include "common/json.h"
#include "common/spi.h"
#include "core/wake.h"
#include "core/standby.h"
#include "graph/event_config.h"
#include "graph/graph.h"
#include "results/results.h"
#include "store/store.h"

PG_FUNCTION_INFO_V1(pgd_publish_event);
PG_FUNCTION_INFO_V1(pgd_subscribe);
PG_FUNCTION_INFO_V1(pgd_unsubscribe);

#define SUBSCRIPTION_NAME_MAX 100

static void
check_topic(const char *func, const char *topic)
{
	const char *problem = df_topic_problem(topic);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s", func, problem)));
}

static char *
jsonb_arg_text(FunctionCallInfo fcinfo, int i)
{
	return JsonbToCString(NULL, &PG_GETARG_JSONB_P(i)->root, 64);
}

/*
 * Start the subscription's workflow for the event as its owner, in a
 * subtransaction, and bind $event in its root scope; false (with a
 * WARNING) when the start failed.  The caller is the bootstrap superuser.
 */
static bool
start_for(const char *name, const char *workflow, Oid owner,
		  const char *event_id, const char *event_json)
{
	char *error = NULL;
	char *id = PGD_EXEC_AS(owner, SECURITY_LOCAL_USERID_CHANGE, &error,
						   "SELECT df.start($1, idempotency_key => $2)",
						   workflow, psprintf("sub:%s:%s", name, event_id));

	if (id == NULL)
	{
		ereport(WARNING,
				(errmsg("subscription \"%s\" did not start its workflow for event %s",
						name, event_id),
				 errdetail("%s",
						   error ? error : "df.start returned no instance"),
				 errhint("The event stays published; the other subscriptions received it.")));
		return false;
	}
	/* a second start of the same key found the instance: already bound */
	PGD_EXEC("INSERT INTO df_internal.results (instance_id, scope, name, value) "
			 "VALUES ($1, $1 OPERATOR(pg_catalog.||) '::1', 'event', $2::pg_catalog.json) "
			 "ON CONFLICT DO NOTHING",
			 id, event_json);
	return true;
}

/* df.publish_event(topic, payload jsonb, key DEFAULT NULL) RETURNS bigint */
Datum
pgd_publish_event(PG_FUNCTION_ARGS)
{
	char *topic =
		PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char *payload;
	char *key = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	Oid	  publisher = GetUserId();
	char *id;
	int64 event_id;
	char *event_json;
	char **names, **workflows, **owners;
	char  *space_topic;
	int	   nsubs;
	PgdCaller caller;

	pgd_refuse_on_standby("df.publish_event", "publish an event");
	check_topic("df.publish_event", topic);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.publish_event: payload cannot be NULL"),
				 errhint("Use '{}' for an empty payload.")));
	payload = jsonb_arg_text(fcinfo, 1);

	pgd_engine_rights(&caller);
	/* the publisher's own topic, or a shared one it may publish to (tenancy.md) */
	space_topic =
		pgd_store_space_name(PGD_SPACE_TOPIC, topic, publisher, "publish");
	PGD_EXEC("INSERT INTO df_internal.bus_events (topic, key, payload, published_by) "
			 "VALUES ($1, $2, $3::pg_catalog.jsonb, $4::pg_catalog.oid::pg_catalog.regrole) "
			 "RETURNING id, pg_catalog.json_build_object('topic', $5::text, 'key', key, "
			 "'payload', payload, 'published_at', published_at, 'event_id', id)::text",
			 space_topic, key, payload, psprintf("%u", publisher), topic);
	id = pgd_spi_getstring(0, 1);
	/* read now: the text is SPI's, gone with SPI_finish */
	event_id = strtoll(id, NULL, 10);
	event_json = pgd_spi_getstring(0, 2);
	pgd_bus_sweep_at_commit();

	nsubs =
		PGD_EXEC("SELECT name, workflow, owner::pg_catalog.oid FROM df_internal.subscriptions "
				 "WHERE topic OPERATOR(pg_catalog.=) $1 "
				 "AND $2::pg_catalog.jsonb OPERATOR(pg_catalog.@>) filter "
				 "AND df_internal.space_name('topic', topic, owner::pg_catalog.oid, 'subscribe') "
				 "OPERATOR(pg_catalog.=) $3 ORDER BY name",
				 topic, payload, space_topic);
	names = palloc(sizeof(char *) * Max(nsubs, 1));
	workflows = palloc(sizeof(char *) * Max(nsubs, 1));
	owners = palloc(sizeof(char *) * Max(nsubs, 1));
	for (int i = 0; i < nsubs; i++)
	{
		names[i] = pgd_spi_getstring(i, 1);
		workflows[i] = pgd_spi_getstring(i, 2);
		owners[i] = pgd_spi_getstring(i, 3);
	}
	for (int i = 0; i < nsubs; i++)
		(void) start_for(names[i], workflows[i],
						 (Oid) strtoul(owners[i], NULL, 10), id, event_json);
	pgd_caller_again(&caller);
	PG_RETURN_INT64(event_id);
}

/* df.subscribe(name, topic, workflow, filter jsonb DEFAULT '{}') RETURNS text */
Datum
pgd_subscribe(PG_FUNCTION_ARGS)
{
	char *name = PG_ARGISNULL(0) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char *topic =
		PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	char *workflow =
		PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	char		 *filter;
	DfParseResult pr;
	DfNode		 *root = NULL;
	char		 *msg;
	DfJson		 *f;
	char		 *err = NULL;
	Oid			  owner = GetUserId();
	PgdCaller caller;

	pgd_refuse_on_standby("df.subscribe", "subscribe to a topic");
	if (name[strspn(name, " \t\r\n")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.subscribe: the subscription name cannot be empty")));
	if (strlen(name) > SUBSCRIPTION_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.subscribe: the subscription name is longer than %d bytes",
						SUBSCRIPTION_NAME_MAX)));
	check_topic("df.subscribe", topic);
	if (workflow == NULL || workflow[strspn(workflow, " \t\r\n")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.subscribe: the workflow cannot be empty")));
	pr = df_graph_parse(workflow);
	if (pr.status != DF_PARSE_NOT_DUROFUT &&
		(msg = df_graph_check_text(workflow, &root)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.subscribe: the workflow is not valid"),
				 errdetail("%s", msg)));
	if (root == NULL)
	{
		/* a workflow of one SQL step, as df.start reads it */
		DfNode *step = df_node_new(DF_NODE_SQL);

		step->query = workflow;
		root = step;
	}
	/* the variables are the owner's when an event starts the workflow */
	pgd_check_workflow("df.subscribe", root, true, NULL, NULL);
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.subscribe: filter cannot be NULL"),
				 errhint("Use '{}' for every event of the topic.")));
	filter = jsonb_arg_text(fcinfo, 3);
	f = dfjson_parse(filter, strlen(filter), &err);
	if (f == NULL || f->type != DFJ_OBJECT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.subscribe: filter must be a JSON object"),
				 errdetail("An event matches when its payload contains the filter (payload @> filter).")));

	pgd_engine_rights(&caller);
	if (PGD_EXEC("INSERT INTO df_internal.subscriptions (name, topic, workflow, filter, owner) "
				 "VALUES ($1, $2, $3, $4::pg_catalog.jsonb, $5::pg_catalog.oid::pg_catalog.regrole) "
				 "ON CONFLICT (owner, name) DO NOTHING",
				 name, topic, workflow, filter, psprintf("%u", owner)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("subscription \"%s\" already exists", name),
				 errhint("Remove it with df.unsubscribe('%s') first, or choose another name.",
						 name)));
	pgd_caller_again(&caller);
	PG_RETURN_TEXT_P(cstring_to_text(name));
}

/*
 * df.unsubscribe(name) RETURNS boolean: false when the caller's roles have
 * none of that name.  Another role's subscription of the same name is its
 * own and stays (a superuser, a member of every role, removes them all).
 */
Datum
pgd_unsubscribe(PG_FUNCTION_ARGS)
{
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int	  removed;
	PgdCaller caller;

	pgd_refuse_on_standby("df.unsubscribe", "drop a subscription");
	pgd_engine_rights(&caller);
	removed = PGD_EXEC("DELETE FROM df_internal.subscriptions "
					   "WHERE name OPERATOR(pg_catalog.=) $1 "
					   "AND pg_catalog.pg_has_role($2::pg_catalog.oid, owner, 'USAGE')",
					   name, psprintf("%u", caller.userid));
	pgd_caller_again(&caller);
	PG_RETURN_BOOL(removed > 0);
}
