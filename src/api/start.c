/*-------------------------------------------------------------------------
 *
 * start.c
 *	  df.start: validate a workflow, write its instance and nodes in the
 *	  caller's transaction, capture the caller's variables and enqueue it.
 *
 * Caller mode is all-or-nothing with the caller's transaction: a ROLLBACK
 * leaves no row behind and nothing runs, because the "start" task is one of
 * the rows rolled back.  At COMMIT an idle executor is woken (wake.c).
 *
 * Checks run in the reference's order: parse, database, identity (LOGIN),
 * superuser guard, graph validation, then readiness (the reference's
 * enqueue fails when its worker is not initialized; here the readiness row
 * decides, see check_engine_ready).  The rows are written with the
 * privileges of the bootstrap superuser (the engine's tables are private);
 * submitted_by is the caller's current_user.  The engine checks the
 * identity again when it loads the instance (a forged submitted_by, a
 * submitter that became a superuser) and before every step (a dropped
 * role): core/identity.c.
 *
 * transaction_mode => 'new' hands the whole call to a background session
 * that commits on its own (new_txn.c).  database => 'x' must name a
 * database the caller may CONNECT to; the steps then run there
 * (remote.c), at least once, which a NOTICE says.
 *
 * Called from inside a step, df.start works like anywhere else: the new
 * instance belongs to the step's submitter (the current user there) and
 * starts only if the step commits.
 *
 * The start itself is queued by the pending runs row and published at
 * commit as a marker (store/tasks.c): no start task,
 * except under an older schema.
 *
 * Locks: inserts only (df.instances, df.nodes, df_internal.runs; a start
 * task under an older schema).  The node rows are written without an INSERT, so no
 * trigger fires for them, unless the user has put one of their own on
 * df.nodes (insert_nodes); the instance row skips the root-node check.
 * The deferred foreign keys of other rows are checked at commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "port.h"
#include "rewrite/rewriteHandler.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "common/compat.h"
#include "common/messages.h"
#include "common/overloads.h"
#include "api/api.h"
#include "common/spi.h"
#include "common/trace.h"
#include "core/identity.h"
#include "core/settings.h"
#include "store/store.h"
#include "core/wake.h"
#include "common/json.h"
#include "core/standby.h"
#include "dsl/dsl.h"
#include "graph/graph.h"
#include "graph/orch_config.h"
#include "results/results.h"
#include "steps/remote.h"

#define ID_ATTEMPTS					  10
#define PGD_MAX_IDEMPOTENCY_KEY_BYTES 1000

typedef struct NodeRow
{
	const DfNode *node;
	char		  id[PGD_ID_LEN + 1];
	int			  left;
	int			  right;
	int			  condition;
	int			  nextras;
	int			 *extras;
} NodeRow;

typedef struct NodeList
{
	NodeRow *rows;
	int		 count;
	int		 cap;
	HTAB	*ids; /* ids used in this instance */
} NodeList;


/*
 * A node's id: unique only within its instance (collect looks), so from
 * the backend's own generator, seeded from a strong source when the
 * backend started; the instance's id comes from the strong source itself.
 */
static void
node_id(char *out)
{
	snprintf(out, PGD_ID_LEN + 1, "%08x",
			 (unsigned int) pg_prng_uint32(&pg_global_prng_state));
}

/* Number the nodes in pre-order (root, left, right, condition, extras). */
static int
collect(NodeList *list, const DfNode *node)
{
	int	 self;
	bool found;
	int	 i;

	check_stack_depth();
	if (list->count == list->cap)
	{
		list->cap *= 2;
		list->rows = repalloc(list->rows, sizeof(NodeRow) * list->cap);
	}
	self = list->count++;
	memset(&list->rows[self], 0, sizeof(NodeRow));
	list->rows[self].node = node;
	do
	{
		node_id(list->rows[self].id);
		hash_search(list->ids, list->rows[self].id, HASH_ENTER, &found);
	} while (found);

	list->rows[self].left = node->left ? collect(list, node->left) : -1;
	list->rows[self].right = node->right ? collect(list, node->right) : -1;
	list->rows[self].condition =
		node->condition ? collect(list, node->condition) : -1;
	list->rows[self].nextras = node->nextras;
	if (node->nextras > 0)
	{
		int *extras = palloc(sizeof(int) * node->nextras);

		for (i = 0; i < node->nextras; i++)
			extras[i] = collect(list, node->extras[i]);
		list->rows[self].extras = extras;
	}
	return self;
}

/* The query column as persisted: condition and extra links become config keys. */
static char *
persisted_query(NodeList *list, NodeRow *row)
{
	const DfNode *node = row->node;
	DfJson		 *cfg;
	char		 *err = NULL;
	int			  i;

	if (row->condition < 0 && row->nextras == 0)
		return node->query;

	cfg = node->query ? dfjson_parse(node->query, strlen(node->query), &err) :
						NULL;
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		cfg = dfjson_make_object();
	if (row->condition >= 0)
		dfjson_object_add(cfg, "condition_node",
						  dfjson_make_string(list->rows[row->condition].id));
	if (row->nextras > 0)
	{
		DfJson *arr = dfjson_make_array();

		for (i = 0; i < row->nextras; i++)
			dfjson_array_add(arr,
							 dfjson_make_string(list->rows[row->extras[i]]
													.id));
		dfjson_object_add(cfg, "extra_nodes", arr);
	}
	return dfjson_to_text(cfg);
}

/*
 * The node rows of the graph, in pre-order, written by the store
 * (pgd_store_start_nodes: straight into df.nodes's heap and indexes, or by
 * an INSERT when a trigger of the user's must fire).
 */
static void
insert_nodes(const char *instance_id, Oid submitter, const char *database,
			 NodeList *list)
{
	PgdStartNode *rows = palloc(sizeof(PgdStartNode) * Max(list->count, 1));

	for (int i = 0; i < list->count; i++)
	{
		NodeRow *row = &list->rows[i];

		rows[i].id = row->id;
		rows[i].node_type = df_node_type_name(row->node->type);
		rows[i].query = persisted_query(list, row);
		rows[i].result_name = row->node->result_name;
		rows[i].left = row->left >= 0 ? list->rows[row->left].id : NULL;
		rows[i].right = row->right >= 0 ? list->rows[row->right].id : NULL;
	}
	pgd_store_start_nodes(instance_id, submitter, database, list->count, rows);
}

static void
raise_graph_error(const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", msg)));
}

/* 2. database => 'x': it must exist and the caller may CONNECT; true when it is another one. */
static bool
check_database(const char *database, Oid userid)
{
	Oid dboid;

	if (database == NULL)
		return false;
	dboid = get_database_oid(database, true);
	if (!OidIsValid(dboid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_DATABASE),
				 errmsg(PGD_MSG_DATABASE_NOT_FOUND, database)));
	if (pgd_database_aclcheck(dboid, userid, ACL_CONNECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for database \"%s\"", database),
				 errdetail("current_user \"%s\" does not have CONNECT privilege on it; "
						   "the workflow's steps would run there as that role.",
						   GetUserNameFromId(userid, false))));
	return dboid != MyDatabaseId;
}

/* The nodes of the graph with their new ids, in pre-order. */
static void
collect_nodes(NodeList *list, const DfNode *root)
{
	HASHCTL ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PGD_ID_LEN + 1;
	ctl.entrysize = PGD_ID_LEN + 1;
	ctl.hcxt = CurrentMemoryContext;
	list->ids = hash_create("pg_durable new node ids", 64, &ctl,
							HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	list->cap = 64;
	list->count = 0;
	list->rows = palloc(sizeof(NodeRow) * list->cap);
	collect(list, root);
}

/* Is one of the nodes an EVENT node (which reads the start's snapshot)? */
static bool
has_event_node(const NodeList *list)
{
	for (int i = 0; i < list->count; i++)
		if (list->rows[i].node->type == DF_NODE_EVENT)
			return true;
	return false;
}

/*
 * The df.instances row, under a fresh random id (inside SPI).  With an
 * idempotency key, one INSERT … ON CONFLICT DO NOTHING covers both the id and
 * the unique (submitted_by, idempotency_key) index: a concurrent start with
 * the same key waits there until the first one's transaction ends, then
 * either inserts (the first rolled back) or finds the first one's row.
 * Returns false when the key already names an instance, whose id is then in
 * instance_id; the same key with another workflow is an error.
 */
static bool
insert_instance(char *instance_id, const char *label, const char *root_id,
				Oid userid, const char *database, const char *key,
				const char *digest_source, const StartTrace *tr)
{
	int attempt;

	if (key == NULL &&
		pgd_store_start_instance_row(instance_id, label, root_id, userid,
									 database, tr ? tr->trace_id : NULL,
									 tr ? tr->traceparent : NULL,
									 tr ? tr->tracestate : NULL))
		return true;
	for (attempt = 0;; attempt++)
	{
		Oid	  types[10] = {TEXTOID, TEXTOID, TEXTOID, OIDOID,  TEXTOID,
						   TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
		Datum values[10];
		char  nulls[10] = "          ";

		if (attempt == ID_ATTEMPTS)
			pgd_store_no_free_instance_id();
		pgd_store_random_instance_id(instance_id);
		values[0] = pgd_text_datum(instance_id);
		if (label)
			values[1] = pgd_text_datum(label);
		else
			nulls[1] = 'n';
		values[2] = pgd_text_datum(root_id);
		values[3] = ObjectIdGetDatum(userid);
		if (database)
			values[4] = pgd_text_datum(database);
		else
			nulls[4] = 'n';
		if (key)
		{
			values[5] = pgd_text_datum(key);
			values[6] = pgd_text_datum(digest_source);
		}
		else
			nulls[5] = nulls[6] = 'n';
		if (tr != NULL)
		{
			values[7] = pgd_text_datum(tr->trace_id);
			if (tr->traceparent)
				values[8] = pgd_text_datum(tr->traceparent);
			else
				nulls[8] = 'n';
			if (tr->tracestate)
				values[9] = pgd_text_datum(tr->tracestate);
			else
				nulls[9] = 'n';
		}
		/*
		 * Without a key and a trace, the statement of 0.3.0: the frozen
		 * 0.3.0 script's df.start calls this function, and its df.instances
		 * has no key or trace columns until the extension is updated.
		 */
		if (key == NULL && tr == NULL)
		{
			if (pgd_spi_exec("INSERT INTO df.instances (id, label, root_node, submitted_by, database) "
							 "VALUES ($1, $2, $3, $4::pg_catalog.regrole, $5) "
							 "ON CONFLICT (id) DO NOTHING RETURNING id",
							 5, types, values, nulls, false) == 1)
				return true;
			continue;
		}
		if (tr != NULL)
		{
			if (pgd_spi_exec("INSERT INTO df.instances (id, label, root_node, submitted_by, database, "
							 "idempotency_key, idempotency_digest, trace_id, traceparent, tracestate) "
							 "VALUES ($1, $2, $3, $4::pg_catalog.regrole, $5, $6, pg_catalog.md5($7), "
							 "$8, $9, $10) "
							 "ON CONFLICT DO NOTHING RETURNING id",
							 10, types, values, nulls, false) == 1)
				return true;
		}
		else if (pgd_spi_exec("INSERT INTO df.instances (id, label, root_node, submitted_by, database, "
							  "idempotency_key, idempotency_digest) "
							  "VALUES ($1, $2, $3, $4::pg_catalog.regrole, $5, $6, pg_catalog.md5($7)) "
							  "ON CONFLICT DO NOTHING RETURNING id",
							  7, types, values, nulls, false) == 1)
			return true;
		if (pgd_spi_exec("SELECT id, idempotency_digest OPERATOR(pg_catalog.=) pg_catalog.md5($7) "
						 "FROM df.instances "
						 "WHERE submitted_by OPERATOR(pg_catalog.=) $4::pg_catalog.regrole "
						 "AND idempotency_key OPERATOR(pg_catalog.=) $6",
						 7, types, values, nulls, false) == 1)
		{
			char *id = pgd_spi_getstring(0, 1);
			char *same = pgd_spi_getstring(0, 2);

			if (same == NULL || strcmp(same, "t") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNIQUE_VIOLATION),
						 errmsg(PGD_MSG_START_FAILED,
								psprintf("idempotency key \"%s\" already started instance %s with another workflow",
										 key, id)),
						 errhint("Use another key for another workflow; the same workflow with this key "
								 "returns instance %s.",
								 id)));
			strlcpy(instance_id, id, PGD_ID_LEN + 1);
			return false;
		}
		/* an id collision (or the keyed row went away meanwhile): try again */
	}
}

/*
 * The engine's runs row, with the caller's variables captured (start_rows.c,
 * or this statement), and the start: its marker at commit, or a start
 * task (inside SPI; pgd_store_start_ready).  {sys_idempotency_key}
 * is kept with the variables, which every step reads anyway; the trace
 * context is df.instances's (pgd_step_vars).  events: the graph has an
 * EVENT node, which needs the start's snapshot.
 */
static void
insert_run(const char *instance_id, Oid userid, const char *label,
		   const char *database, const char *key, bool events)
{
	if (!pgd_store_start_run_row(instance_id, userid, label, database, key, events))
	{
		Oid	  types[5] = {TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID};
		Datum values[5];
		char  nulls[5] = "     ";

		values[0] = pgd_text_datum(instance_id);
		values[1] = ObjectIdGetDatum(userid);
		values[2] = label ? pgd_text_datum(label) : (Datum) 0;
		nulls[2] = label ? ' ' : 'n';
		values[3] = database ? pgd_text_datum(database) : (Datum) 0;
		nulls[3] = database ? ' ' : 'n';
		values[4] = key ? pgd_text_datum(key) : (Datum) 0;
		nulls[4] = key ? ' ' : 'n';
		pgd_spi_exec("INSERT INTO df_internal.runs (instance_id, submitted_by, label, database, vars) "
					 "SELECT $1, $2, $3, $4, COALESCE(pg_catalog.jsonb_object_agg(name, value), '{}') "
					 "OPERATOR(pg_catalog.||) pg_catalog.jsonb_strip_nulls("
					 "pg_catalog.jsonb_build_object('sys_idempotency_key', $5)) "
					 "FROM df.vars WHERE owner OPERATOR(pg_catalog.=) $2::pg_catalog.regrole",
					 5, types, values, nulls, false);
	}
	/* its start (a marker, tasks.c); its commit wakes an executor */
	pgd_store_start_ready(instance_id);
}

/*
 * Refuse the start while the readiness row says the engine is not ready: it
 * holds another schema_version than the one the executors write.  Operators
 * stop intake by changing it (the reference's way, §2.1) and resume by
 * setting it back; running instances are not affected.  No row at all means
 * no executor has started since CREATE EXTENSION: the start is accepted and
 * runs once one does (a restore, or a start in the transaction that created
 * the extension).  Raised before any row is written (inside SPI).
 */
static void
check_engine_ready(void)
{
	int version;

	if (pgd_store_ready_version(&version) &&
		version != PGD_ENGINE_SCHEMA_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(PGD_MSG_START_FAILED, PGD_MSG_ENGINE_NOT_READY),
				 errdetail("df_internal._worker_ready.schema_version is %d; this engine's version is %d.",
						   version, PGD_ENGINE_SCHEMA_VERSION),
				 errhint("New workflows are refused while the readiness row holds another version. "
						 "If it was changed to stop new workflows, set it back with "
						 "UPDATE df_internal._worker_ready SET schema_version = %d.",
						 PGD_ENGINE_SCHEMA_VERSION)));
}

/*
 * df.start(…, max_attempts, max_backoff, on_failure): the instance-wide
 * failure policy (docs/design/failure-handling.md §6).  Left at its defaults
 * it changes nothing, not even the graph.  Otherwise the graph is wrapped in a
 * RETRY at the root, marked instance_policy: every SQL or HTTP step without a
 * RETRY of its own is retried up to max_attempts with a back-off from 1 s,
 * doubling, capped at max_backoff (the nearest RETRY wins, so a step's own
 * df.retry keeps its settings), and with on_failure 'continue' a step that
 * gives up completes with {"error": {...}} instead of failing.
 */
static char *
with_instance_policy(FunctionCallInfo fcinfo, char *fut)
{
	int32	max_attempts = 1;
	int64	backoff_us = 16 * USECS_PER_SEC;
	char   *on_failure = "fail";
	DfJson *cfg;
	DfNode *retry;

	if (PG_NARGS() < 7)
		return fut;
	if (!PG_ARGISNULL(4))
		max_attempts = PG_GETARG_INT32(4);
	if (!PG_ARGISNULL(5))
	{
		Interval *iv = PG_GETARG_INTERVAL_P(5);

		backoff_us = iv->time + (int64) iv->day * USECS_PER_DAY +
			(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
	}
	if (!PG_ARGISNULL(6))
		on_failure = text_to_cstring(PG_GETARG_TEXT_PP(6));
	if (max_attempts < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.start: max_attempts must be 0 (unlimited) or more")));
	if (backoff_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.start: max_backoff must be greater than zero")));
	if (strcmp(on_failure, "fail") != 0 && strcmp(on_failure, "continue") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.start: unknown on_failure \"%s\": use 'fail' or 'continue'",
						on_failure)));
	if (max_attempts == 1 && strcmp(on_failure, "fail") == 0)
		return fut;

	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "instance_policy", dfjson_make_bool(true));
	if (max_attempts != 1)
		dfjson_object_add(cfg, "max_attempts",
						  dfjson_make_number(psprintf("%d", max_attempts)));
	else
		dfjson_object_add(cfg, "max_attempts", dfjson_make_number("1"));
	dfjson_object_add(cfg, "max_interval",
					  dfjson_make_number(df_seconds_text(backoff_us)));
	dfjson_object_add(cfg, "jitter", dfjson_make_string("none"));
	if (strcmp(on_failure, "continue") == 0)
		dfjson_object_add(cfg, "on_failure", dfjson_make_string("continue"));
	retry = df_node_new(DF_NODE_RETRY);
	retry->left = dsl_operand(fut);
	retry->query = dfjson_to_text(cfg);
	return df_graph_to_text(retry);
}

/*
 * df.start(…, idempotency_key): at most PGD_MAX_IDEMPOTENCY_KEY_BYTES bytes,
 * not empty (docs/design/failure-handling.md §7).
 */
static char *
check_idempotency_key(char *key)
{
	if (key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.start: idempotency_key must not be empty"),
				 errhint("Pass NULL for a start without a key.")));
	if (strlen(key) > PGD_MAX_IDEMPOTENCY_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("df.start: idempotency_key is too long"),
				 errdetail("The key is %zu bytes long; the limit is %d bytes.",
						   strlen(key), PGD_MAX_IDEMPOTENCY_KEY_BYTES)));
	return key;
}

/*
 * Refuse a circuit breaker that does not exist (df.with_breaker, df.http's
 * breaker): a breaker's name is always literal, so df.start can tell what
 * its step would fail with when it runs.
 */
static void
check_breaker_exists(const DfNode *n, const char *path, void *arg)
{
	char			  *name = NULL;
	PgdBreakerSettings s;
	PgdBreakerState	   state;
	TimestampTz		   opened_at;
	TimestampTz		   open_until;

	if (n->type == DF_NODE_BREAKER)
		(void) df_breaker_parse(n->query, &name);
	else if (n->type == DF_NODE_HTTP && n->query != NULL &&
			 strstr(n->query, "\"breaker\"") != NULL)
	{
		char   *err = NULL;
		DfJson *cfg = dfjson_parse(n->query, strlen(n->query), &err);
		DfJson *v = cfg && cfg->type == DFJ_OBJECT ? dfjson_get(cfg, "breaker") : NULL;

		if (v != NULL && v->type == DFJ_STRING)
			name = v->str;
	}
	if (name != NULL &&
		!pgd_store_breaker_load(name, &s, &state, &opened_at, &open_until))
		raise_graph_error(psprintf(PGD_MSG_INVALID_GRAPH,
								   psprintf("%s: circuit breaker \"%s\" does not exist "
											"(create it with df.create_circuit_breaker first)",
											path, name)));
}

/* Has the starting role (*arg) set variable name?  Its df.vars row. */
static bool
var_is_set(const char *name, void *arg)
{
	Oid	  types[2] = {OIDOID, TEXTOID};
	Datum values[2];

	values[0] = ObjectIdGetDatum(*(Oid *) arg);
	values[1] = pgd_text_datum(name);
	return pgd_spi_exec("SELECT FROM df.vars WHERE owner OPERATOR(pg_catalog.=) $1::pg_catalog.regrole "
						"AND name OPERATOR(pg_catalog.=) $2",
						2, types, values, NULL, true) > 0;
}

/*
 * df.start(traceparent, tracestate), arguments 9 and 10 of the overload
 * (df.start(text, text, text, text) has neither): continue the caller's
 * trace, or begin a new one.
 */
static void
start_trace(FunctionCallInfo fcinfo, StartTrace *tr)
{
	memset(tr, 0, sizeof(*tr));
	strlcpy(tr->flags, PGD_TRACE_FLAGS_SAMPLED, sizeof(tr->flags));
	if (PG_NARGS() > 8 && !PG_ARGISNULL(8))
	{
		char		  *tp = text_to_cstring(PG_GETARG_TEXT_PP(8));
		PgdTraceParent parsed;
		const char	  *problem = pgd_trace_parse(tp, &parsed);

		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("df.start: invalid traceparent \"%s\": %s", tp,
							problem),
					 errhint("Pass a W3C traceparent such as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, "
							 "or NULL to begin a new trace.")));
		strlcpy(tr->trace_id, parsed.trace_id, sizeof(tr->trace_id));
		strlcpy(tr->flags, parsed.flags, sizeof(tr->flags));
		tr->traceparent = tp;
	}
	else
		pgd_trace_new_id(tr->trace_id);
	if (PG_NARGS() > 9 && !PG_ARGISNULL(9))
	{
		char *ts = text_to_cstring(PG_GETARG_TEXT_PP(9));

		/* W3C: at most 32 list members of 256 characters; printable ASCII */
		if (strlen(ts) > 512)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("df.start: tracestate is too long"),
					 errdetail("It is %zu bytes long; the limit is 512.",
							   strlen(ts))));
		for (const char *c = ts; *c; c++)
			if (*c < 0x20 || *c > 0x7e)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("df.start: tracestate may hold printable ASCII characters only")));
		if (*ts)
			tr->tracestate = ts;
	}
}

PG_FUNCTION_INFO_V1(pgd_start);
Datum
pgd_start(PG_FUNCTION_ARGS)
{
	char *fut;
	char *label =
		PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	char *database =
		PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	char		 *mode = PG_ARGISNULL(3) ? pstrdup("caller") :
										   text_to_cstring(PG_GETARG_TEXT_PP(3));
	DfParseResult pr;
	DfNode		 *root = NULL;
	char		 *msg;
	Oid			  userid = GetUserId();
	PgdCaller	  caller;
	int			  nest;
	NodeList	  list;
	char		  instance_id[PGD_ID_LEN + 1];
	bool		  remote;
	char		 *key = NULL;
	bool		  created;
	StartTrace	  trace;
	bool		  traced = PG_NARGS() >= 10 || pgd_store_instances_traced();

	pgd_refuse_on_standby("df.start", "start a workflow");
	pgd_require_compat_execute(fcinfo, 4);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg(PGD_MSG_INVALID_FUNCTION, "the workflow is NULL")));
	fut = with_instance_policy(fcinfo, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (PG_NARGS() >= 8 && !PG_ARGISNULL(7))
		key = check_idempotency_key(text_to_cstring(PG_GETARG_TEXT_PP(7)));
	if (traced)
		start_trace(fcinfo, &trace);
	if (label != NULL && strlen(label) > PGD_MAX_LABEL_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("label is too long"),
				 errdetail("The label is %zu bytes long; the limit is %d bytes.",
						   strlen(label), PGD_MAX_LABEL_BYTES),
				 errhint("Pass a shorter label, and keep longer data in the workflow's variables or tables.")));

	if (pg_strcasecmp(mode, "caller") != 0)
	{
		if (pg_strcasecmp(mode, "new") == 0 && traced &&
			(trace.traceparent || trace.tracestate))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("df.start: traceparent and tracestate cannot be used with transaction_mode 'new' yet"),
					 errhint("Start the instance in the caller's transaction (the default) to continue a trace.")));
		if (pg_strcasecmp(mode, "new") == 0)
			PG_RETURN_TEXT_P(cstring_to_text(pgd_start_in_new_transaction(fut,
																		  label,
																		  database,
																		  key)));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_INVALID_TXN_MODE, mode)));
	}

	/* 1. parse */
	pr = df_graph_parse(fut);
	if (pr.status == DF_PARSE_NOT_DUROFUT)
	{
		root = df_node_new(DF_NODE_SQL);
		root->query = fut;
	}
	else if (pr.status != DF_PARSE_OK)
		raise_graph_error(df_graph_check_text(fut, &root));

	/* 2. database */
	remote = check_database(database, userid);

	/* 3. identity, 4. superuser guard */
	pgd_check_start_identity(userid);

	/* 5. graph validation, of the tree parsed in 1 (not parsed again) */
	if (pr.status == DF_PARSE_OK)
		root = pr.node;
	if ((msg = df_graph_validate(root)) != NULL)
		raise_graph_error(psprintf(PGD_MSG_INVALID_GRAPH, msg));

	collect_nodes(&list, root);

	/*
	 * The fixed statements below run with the engine's rights, also inside
	 * a workflow step (common/spi.h): the deferred foreign-key checks they
	 * queue fire at the caller's commit.
	 */
	pgd_engine_rights(&caller);
	/*
	 * references in quotes, keys and payloads that could never resolve,
	 * $names that match nothing (the variables are read through SPI)
	 */
	pgd_check_workflow("df.start", root, false, var_is_set, &userid);
	df_node_walk(root, "root", check_breaker_exists, NULL);
	/* 6. the engine takes new work */
	check_engine_ready();
	/*
	 * The instance side of the root-node check skips this row while the
	 * setting is on: its root is among the nodes inserted next (the install
	 * script's instances_root_node_same_instance_fkey).  Superuser-only, so
	 * no other role can turn it on; an error's abort undoes it.
	 */
	nest = NewGUCNestLevel();
	(void) set_config_option("pg_durable.start_inserts_nodes", "on", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	created = insert_instance(instance_id, label, list.rows[0].id, userid,
							  database, key,
							  key ? psprintf("%s\n%s",
											 database ? database : "", fut) :
									NULL,
							  traced ? &trace : NULL);
	AtEOXact_GUC(true, nest);
	if (created)
	{
		insert_nodes(instance_id, userid, database, &list);
		insert_run(instance_id, userid, label, database, key,
				   has_event_node(&list));
	}
	pgd_caller_again(&caller);

	if (remote && created)
		ereport(NOTICE,
				(errmsg("the steps of instance %s run in database \"%s\" at least once",
						instance_id, database),
				 errdetail("A step in another database commits there before the engine records it; "
						   "after a crash or restart in between, the step runs again. "
						   "Make such steps idempotent.")));

	PG_RETURN_TEXT_P(cstring_to_text(instance_id));
}
