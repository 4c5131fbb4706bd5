/*-------------------------------------------------------------------------
 *
 * row_checks.c
 *	  The CHECK constraints of df.nodes and df_internal.events that name
 *	  every node type or event kind: df_internal.node_type_ok,
 *	  df_internal.node_shape_ok and df_internal.event_kind_ok; and
 *	  df_internal.id_ok, the form of the ids of df.instances and df.nodes.
 *
 * PostgreSQL reads a table's CHECK expressions from the catalog and
 * prepares them again in every statement that inserts or updates a row,
 * so their size is paid on every node write and every event.  Written as
 * IN lists and a CASE over the 24 node types, they took about a third of
 * an executor's CPU (ExecConstraints, in perf); one insert into a table
 * with the 25-kind IN list of the events took 0.17 ms against 0.11 ms
 * without it (pgbench, one client).  A call of one of these functions is
 * a small expression, and the lists are the ones the engine itself uses:
 * the node type names of graph.c and the kinds below, so a new node type
 * or event kind needs no CHECK restated in the upgrade script.  The ids'
 * form, ^[0-9a-f]{8}$, is a loop over 8 bytes, not a regular expression:
 * as one, its four matches for each node df.start writes cost 3.4 us of a
 * 20-step chain's 105 us a step with every step in a df.catch (perf,
 * textregexeq).
 *
 * They are IMMUTABLE and STRICT (the columns they check are NOT NULL, and
 * the shape's arguments are IS NOT NULL tests), and callable by anyone:
 * whoever inserts a node or an event runs them.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h" /* VARDATA_ANY and VARSIZE_ANY_EXHDR; postgres.h on 15 */
#endif

#include "common/trace.h"
#include "store/types.h"
#include "graph/graph.h"

/* Every kind df_internal.events may hold (df.history documents them). */
static const char *const event_kinds[] = {
	"instance_started", "node_started", "node_completed", "node_failed",
	"step_retried", "signal_received", "instance_completed", "instance_failed",
	"instance_cancelled",
	/* failure handling */
	"retry_scheduled", "retries_exhausted", "error_caught", "timeout_fired",
	/* sagas */
	"undo_registered", "compensation_started", "undo_started",
	"undo_completed", "undo_failed", "instance_compensated",
	"instance_resumed",
	/* events */
	"event_published", "event_received",
	/* keyed locks */
	"lock_waiting", "lock_acquired", "lock_timeout",
	/* limits */
	"limit_queued", "limit_admitted"};

PG_FUNCTION_INFO_V1(pgd_event_kind_ok);
Datum
pgd_event_kind_ok(PG_FUNCTION_ARGS)
{
	char *kind = text_to_cstring(PG_GETARG_TEXT_PP(0));

	for (int i = 0; i < lengthof(event_kinds); i++)
		if (strcmp(kind, event_kinds[i]) == 0)
			PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(false);
}

/* An instance's or a node's id: PGD_ID_LEN lower-case hexadecimal digits. */
PG_FUNCTION_INFO_V1(pgd_id_ok);
Datum
pgd_id_ok(PG_FUNCTION_ARGS)
{
	text *id = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BOOL(VARSIZE_ANY_EXHDR(id) == PGD_ID_LEN &&
				   pgd_is_lower_hex(VARDATA_ANY(id), PGD_ID_LEN));
}

PG_FUNCTION_INFO_V1(pgd_node_type_ok);
Datum
pgd_node_type_ok(PG_FUNCTION_ARGS)
{
	DfNodeType type;

	PG_RETURN_BOOL(df_node_type_from_name(text_to_cstring(PG_GETARG_TEXT_PP(0)),
										  &type));
}

/*
 * Which of left_node, right_node and query a node of this type has: the
 * shape df.start writes and the engine reads.  An unknown type has none
 * that fits.
 */
PG_FUNCTION_INFO_V1(pgd_node_shape_ok);
Datum
pgd_node_shape_ok(PG_FUNCTION_ARGS)
{
	DfNodeType type;
	bool	   left = PG_GETARG_BOOL(1);
	bool	   right = PG_GETARG_BOOL(2);
	bool	   query = PG_GETARG_BOOL(3);

	if (!df_node_type_from_name(text_to_cstring(PG_GETARG_TEXT_PP(0)), &type))
		PG_RETURN_BOOL(false);
	switch (type)
	{
		case DF_NODE_SQL:
		case DF_NODE_BREAK:
		case DF_NODE_SLEEP:
		case DF_NODE_WAIT_SCHEDULE:
		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
		case DF_NODE_SIGNAL:
		case DF_NODE_FAIL:
		case DF_NODE_PUBLISH:
		case DF_NODE_EVENT:
		case DF_NODE_TASK:
			PG_RETURN_BOOL(!left && !right && query);
		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_BREAKER:
		case DF_NODE_LIMIT:
		case DF_NODE_LOCK:
			PG_RETURN_BOOL(left && !right && query);
		case DF_NODE_CATCH:
		case DF_NODE_IF:
			PG_RETURN_BOOL(left && right && query);
		case DF_NODE_COMPENSATED:
		case DF_NODE_THEN:
		case DF_NODE_RACE:
			PG_RETURN_BOOL(left && right && !query);
		case DF_NODE_SAGA:
			PG_RETURN_BOOL(left && query);
		case DF_NODE_LOOP:
			PG_RETURN_BOOL(left && !right);
		case DF_NODE_JOIN:
		case DF_NODE_MAP:
			PG_RETURN_BOOL(left && right);
	}
	PG_RETURN_BOOL(false);
}
