/*-------------------------------------------------------------------------
 *
 * graph.h
 *	  The workflow graph ("Durofut") model shared by the DSL, validation,
 *	  explain and the engine.
 *
 * A Durofut is a tree of DfNode.  Its text form is compact JSON with keys in
 * the order node_type, left_node, right_node, condition_node, extra_nodes,
 * query, result_name; absent keys are omitted.  query is always a string (SQL
 * text, or a JSON config serialized as a string).
 *
 * Every recursive walk calls check_stack_depth().
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_GRAPH_H
#define PG_DURABLE_GRAPH_H

#include "postgres.h"
#include "lib/stringinfo.h"

typedef enum DfNodeType
{
	DF_NODE_SQL,
	DF_NODE_THEN,
	DF_NODE_IF,
	DF_NODE_JOIN,
	DF_NODE_LOOP,
	DF_NODE_BREAK,
	DF_NODE_RACE,
	DF_NODE_SLEEP,
	DF_NODE_WAIT_SCHEDULE,
	DF_NODE_HTTP,
	DF_NODE_HTTP_MULTIPART,
	DF_NODE_SIGNAL,
	/* the failure-handling wrappers (docs/design/failure-handling.md,
	 * graph/orch_config.h) */
	DF_NODE_RETRY,	 /* left: the step; query: its settings */
	DF_NODE_TIMEOUT, /* left: the step; query: {"seconds": s} */
	DF_NODE_CATCH,	 /* left: the step; right: the handler; query: settings */
	DF_NODE_FAIL,	 /* a leaf; query: {"message": ..., "retryable": ...} */
	/* sagas (docs/design/sagas.md) */
	DF_NODE_COMPENSATED, /* left: the forward step; right: its undo; no query */
	DF_NODE_SAGA, /* left: the body; right: on_compensated (optional); query: settings */
	/* circuit breakers (docs/design/breakers.md) */
	DF_NODE_BREAKER, /* left: the subtree, one call; query: {"name": ...} */
	/* dynamic fan-out (docs/design/map.md) */
	DF_NODE_MAP, /* left: the SQL query; right: the step template; query:
				 * {"max_concurrent": n} or none */
	/* limits (docs/design/locks-and-limits.md §4, graph/limit_config.h) */
	DF_NODE_LIMIT, /* left: the step; query: its settings */
	/* events (docs/design/events.md, graph/event_config.c) */
	DF_NODE_PUBLISH, /* a leaf; query: {"topic", "payload", "key"} */
	DF_NODE_EVENT, /* a leaf; query: {"topic", "filter", "timeout_seconds"} */
	/* keyed locks (docs/design/locks-and-limits.md §1, graph/lock_config.h) */
	DF_NODE_LOCK, /* left: the step; query: {"keys": [...], ...} */
	/* external workers (docs/guides/external-workers.md, graph/task_config.h) */
	DF_NODE_TASK /* a leaf; query: {"queue", "payload", "timeout_seconds", ...} */
} DfNodeType;

#define DF_NODE_TYPE_COUNT 25
#define DF_MAX_DEPTH	   256	 /* edges below the root (§1.10) */
#define DF_MAX_NODES	   10000 /* §1.10; pg_durable.max_nodes's default */

/*
 * The most nodes df.start and df.explain accept in one graph: the setting
 * pg_durable.max_nodes (core/settings.c), DF_MAX_NODES unless a superuser
 * raised or lowered it.  df.map's copies keep to DF_MAX_NODES.
 */
extern int df_max_nodes;

#define DF_VALID_NODE_TYPES \
	"SQL, THEN, IF, JOIN, LOOP, BREAK, RACE, SLEEP, WAIT_SCHEDULE, HTTP, HTTP_MULTIPART, SIGNAL, " \
	"RETRY, TIMEOUT, CATCH, FAIL, COMPENSATED, SAGA, BREAKER, MAP, LIMIT, PUBLISH, EVENT, LOCK, TASK"

typedef struct DfNode
{
	DfNodeType		type;
	struct DfNode  *left;  /* THEN/JOIN/RACE left, IF then-arm, LOOP body */
	struct DfNode  *right; /* THEN/JOIN/RACE right, IF else-arm */
	struct DfNode  *condition; /* IF condition, LOOP while-condition */
	int				nextras;   /* JOIN extra branches */
	struct DfNode **extras;
	char		   *query;		 /* NULL when absent */
	char		   *result_name; /* NULL when absent */
} DfNode;

extern const char *df_node_type_name(DfNodeType type);
extern bool		   df_node_type_from_name(const char *name, DfNodeType *type);

extern DfNode *df_node_new(DfNodeType type);

/*
 * Call visit on n and on every node below it, parent first, in the order
 * left, right, condition_node, extra_nodes[i].  With a path ("root"), each
 * node's path comes with it ("root.left.extra_nodes[0]"); without one, the
 * paths are NULL and not built.
 */
typedef void (*DfNodeVisit) (const DfNode *n, const char *path, void *arg);
extern void df_node_walk(const DfNode *n, const char *path, DfNodeVisit visit,
						 void *arg);

/* Compact Durofut JSON text. */
extern char *df_graph_to_text(const DfNode *node);
extern void	 df_graph_write(StringInfo buf, const DfNode *node);

/*
 * Result of df_graph_parse.  On success, node is set.  On failure node is
 * NULL, errmsg says what was wrong, and kind tells which reference message
 * family applies:
 *	 DF_PARSE_NOT_DUROFUT	 text is not a JSON object carrying "node_type"
 *							 (the DSL treats it as SQL text)
 *	 DF_PARSE_BAD_JSON		 text looks like Durofut ('{' ... "node_type")
 *							 but is not valid JSON
 *	 DF_PARSE_UNKNOWN_TYPE	 a node_type that is not one of DF_VALID_NODE_TYPES
 *							 (type_name holds it)
 *	 DF_PARSE_MALFORMED		 node_type known but the shape is wrong (a child
 *							 that is not an object, query not a string, ...);
 *							 type_name holds the root node_type
 *
 * errmsg forms: BAD_JSON and NOT_DUROFUT carry the JSON parser's message;
 * UNKNOWN_TYPE the whole sentence "Unknown node_type 'X'. Valid types: ..."
 * (with " at <path>" after the name below the root); MALFORMED
 * "<path>: <what>", e.g. "root.left: condition_node must be a Durofut JSON
 * object".  Parsing never recurses, whatever the nesting depth.
 */
typedef enum DfParseStatus
{
	DF_PARSE_OK,
	DF_PARSE_NOT_DUROFUT,
	DF_PARSE_BAD_JSON,
	DF_PARSE_UNKNOWN_TYPE,
	DF_PARSE_MALFORMED
} DfParseStatus;

typedef struct DfParseResult
{
	DfParseStatus status;
	DfNode		 *node;
	char		 *errmsg;
	char		 *type_name;
} DfParseResult;

extern DfParseResult df_graph_parse(const char *text);

/*
 * Semantic validation of a parsed graph (what df.start and df.explain run):
 * structure per node type, query configs, limits (depth, node count).
 * Returns NULL when valid, else "<path>: <msg>" (path like root.left,
 * root.condition_node, root.extra_nodes[0]); limit violations return the
 * reference's whole message ("Graph exceeds maximum nesting depth of 256. ...").
 */
extern char *df_graph_validate(const DfNode *root);

/*
 * Parse and validate text the way df.start does.  Returns NULL and sets
 * *out when the graph is valid; else returns the whole message df.start
 * raises ("Invalid durable function: Unknown node_type 'X'. ...",
 * "Malformed Durofut JSON with node_type 'T': ...", "Invalid durable
 * function graph: <path>: <msg>").
 */
extern char *df_graph_check_text(const char *text, DfNode **out);

/* Result names (|=>, df.as, df.if_rows): ^[A-Za-z_][A-Za-z0-9_]*$ */
extern bool df_is_valid_result_name(const char *name);

/* Number of nodes in the tree. */
extern int df_graph_count(const DfNode *root);

#endif /* PG_DURABLE_GRAPH_H */
