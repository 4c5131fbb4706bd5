/*-------------------------------------------------------------------------
 *
 * graph_validate.c
 *	  Semantic validation of a Durofut graph: what df.start and df.explain
 *	  check before a graph is accepted (df_graph_validate), the combined
 *	  parse-and-validate used by df.start (df_graph_check_text), and the SQL
 *	  entry point df_internal.validate_graph.
 *
 * Order of checks: nesting depth first (so a graph nested a hundred
 * thousand levels deep is refused for its depth, not for its size), then
 * the node count, then each node's structure in pre-order (node, left,
 * right, condition, extras), so the first message is deterministic; last,
 * a LIMIT nested inside a LIMIT of the same literal key.
 *
 * Every recursive walk here is bounded: the depth walk (the root at depth
 * 0) stops one level past DF_MAX_DEPTH and the structure walk only runs on graphs that passed
 * it.  Each also calls check_stack_depth().
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cron.h"
#include "graph/event_config.h"
#include "graph/http_config.h"
#include "graph/task_config.h"
#include "graph/map_config.h"
#include "graph/lock_config.h"
#include "graph/loop_config.h"
#include "graph/orch_config.h"
#include "fmgr.h"
#include "graph/graph.h"
#include "common/json.h"
#include "common/messages.h"
#include "miscadmin.h"
#include "utils/builtins.h"

StaticAssertDecl(DF_MAX_DEPTH == 256,
				 "PGD_MSG_GRAPH_TOO_DEEP spells the limit out");

int df_max_nodes = DF_MAX_NODES;

/* Where a node hangs: a chain of these on the C stack makes its path. */
typedef struct VPath
{
	const struct VPath *parent;
	const char		   *edge;  /* NULL for the root */
	int					index; /* extra_nodes position */
} VPath;

bool
df_is_valid_result_name(const char *name)
{
	const char *p = name;

	if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
		return false;
	for (p++; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			  (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return true;
}

static void
path_append(StringInfo buf, const VPath *path)
{
	check_stack_depth();
	if (path->parent == NULL)
	{
		appendStringInfoString(buf, "root");
		return;
	}
	path_append(buf, path->parent);
	if (strcmp(path->edge, "extra_nodes") == 0)
		appendStringInfo(buf, ".extra_nodes[%d]", path->index);
	else
		appendStringInfo(buf, ".%s", path->edge);
}

static char *
at_path(const VPath *path, const char *msg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	path_append(&buf, path);
	appendStringInfo(&buf, ": %s", msg);
	return buf.data;
}

/*
 * True when no node is deeper than DF_MAX_DEPTH; never descends past it.
 * Depth counts edges from the root, as the reference does (§1.10): the root
 * is at depth 0, so a chain of 257 steps (256 THENs) is exactly at the
 * limit and one more step is over it.
 */
static bool
depth_ok(const DfNode *n, int depth)
{
	check_stack_depth();
	if (depth > DF_MAX_DEPTH)
		return false;
	if (n->left && !depth_ok(n->left, depth + 1))
		return false;
	if (n->right && !depth_ok(n->right, depth + 1))
		return false;
	if (n->condition && !depth_ok(n->condition, depth + 1))
		return false;
	for (int i = 0; i < n->nextras; i++)
		if (!depth_ok(n->extras[i], depth + 1))
			return false;
	return true;
}

/* The query of a config-carrying node as a JSON object, or NULL. */
static DfJson *
config_object(const DfNode *n)
{
	DfJson *cfg;
	char   *err;

	if (n->query == NULL)
		return NULL;
	cfg = dfjson_parse(n->query, strlen(n->query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return NULL;
	return cfg;
}

static bool
is_blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

/* IF: a condition node, or the if_rows config in query (never both). */
static char *
check_if(const DfNode *n)
{
	DfJson *cfg;
	DfJson *v;
	char   *err;

	if (n->query == NULL)
	{
		if (n->condition == NULL)
			return pstrdup("IF node requires condition_node or a result_has_rows query config");
		return NULL;
	}
	cfg = dfjson_parse(n->query, strlen(n->query), &err);
	if (cfg == NULL)
		return psprintf(PGD_MSG_IF_QUERY_CONFIG, err);
	if (cfg->type != DFJ_OBJECT)
		return psprintf(PGD_MSG_IF_QUERY_CONFIG, "expected a JSON object");
	if (dfjson_get(cfg, "condition_node") != NULL)
		return pstrdup(PGD_MSG_IF_CONDITION_IN_QUERY);
	if (n->condition != NULL)
		return pstrdup("IF node cannot have both condition_node and a query config");
	v = dfjson_get(cfg, "condition_type");
	if (v == NULL || v->type != DFJ_STRING ||
		strcmp(v->str, "result_has_rows") != 0)
		return psprintf(PGD_MSG_IF_QUERY_CONFIG,
						"condition_type must be \"result_has_rows\"");
	v = dfjson_get(cfg, "result_name");
	if (v == NULL || v->type != DFJ_STRING)
		return psprintf(PGD_MSG_IF_QUERY_CONFIG,
						"result_name must be a string");
	if (!df_is_valid_result_name(v->str))
		return psprintf(PGD_MSG_IF_QUERY_CONFIG,
						psprintf(PGD_MSG_INVALID_RESULT_NAME, v->str));
	return NULL;
}

static char *
check_break(const DfNode *n)
{
	DfJson *cfg = config_object(n);
	DfJson *v = dfjson_get(cfg, "break_value");

	if (v == NULL || (v->type != DFJ_STRING && v->type != DFJ_NULL))
		return pstrdup("BREAK query must be a JSON object {\"break_value\": <text or null>}");
	return NULL;
}

static char *
check_sleep(const DfNode *n)
{
	const char *q = n->query;
	int64		seconds;
	size_t		whole;

	if (q == NULL)
		return pstrdup("SLEEP node requires a query with the number of seconds");
	whole = strspn(q, "0123456789");
	/* whole seconds (the reference), or a fraction: df.sleep(0.25) */
	if (whole > 0 && q[whole] == '.' && q[whole + 1] != '\0' &&
		strspn(q + whole + 1, "0123456789") == strlen(q + whole + 1) &&
		strlen(q + whole + 1) <= 6 && whole <= 12)
		return NULL;
	if (*q == '\0' || whole != strlen(q) ||
		!dfjson_get_int64(dfjson_make_number(q), &seconds))
		return psprintf("SLEEP query must be a non-negative number of seconds, got '%s'",
						q);
	return NULL;
}

static char *
check_wait_schedule(const DfNode *n)
{
	DfJson *v = dfjson_get(config_object(n), "cron_expr");
	DfCron	cron;
	char   *err;

	if (v == NULL || v->type != DFJ_STRING)
		return pstrdup("WAIT_SCHEDULE query must be a JSON object {\"cron_expr\": \"<5-field cron expression>\"}");
	if (!df_cron_parse(v->str, &cron, &err))
		return psprintf(PGD_MSG_INVALID_CRON, v->str, err);
	return NULL;
}

static char *
check_signal(const DfNode *n)
{
	DfJson *cfg = config_object(n);
	DfJson *name = dfjson_get(cfg, "signal_name");
	DfJson *timeout = dfjson_get(cfg, "timeout_seconds");
	int64	t;

	if (cfg == NULL || name == NULL || name->type != DFJ_STRING)
		return pstrdup("SIGNAL query must be a JSON object {\"signal_name\": \"<name>\", \"timeout_seconds\": <seconds or null>}");
	if (is_blank(name->str))
		return pstrdup(PGD_MSG_SIGNAL_NAME_EMPTY);
	if (timeout != NULL && timeout->type != DFJ_NULL)
	{
		if (!dfjson_get_int64(timeout, &t))
			return pstrdup("SIGNAL timeout_seconds must be a whole number of seconds or null");
		if (t <= 0)
			return pstrdup(PGD_MSG_TIMEOUT_NOT_POSITIVE);
		if (t > PG_INT32_MAX)
			return pstrdup("SIGNAL timeout_seconds is out of range");
	}
	return NULL;
}

static bool
is_leaf_type(DfNodeType t)
{
	return !(t == DF_NODE_THEN || t == DF_NODE_IF || t == DF_NODE_JOIN ||
			 t == DF_NODE_LOOP || t == DF_NODE_RACE || t == DF_NODE_RETRY ||
			 t == DF_NODE_TIMEOUT || t == DF_NODE_CATCH ||
			 t == DF_NODE_COMPENSATED || t == DF_NODE_SAGA ||
			 t == DF_NODE_BREAKER || t == DF_NODE_MAP || t == DF_NODE_LIMIT ||
			 t == DF_NODE_LOCK);
}

/* What is wrong with this one node (not its children), or NULL. */
static char *
check_node(const DfNode *n)
{
	const char	   *tname = df_node_type_name(n->type);
	DfWrapperConfig wrapper;
	DfEventConfig	event;
	DfLockConfig	lock;
	bool has_children = n->left || n->right || n->condition || n->nextras > 0;

	if (n->result_name != NULL && !df_is_valid_result_name(n->result_name))
		return psprintf(PGD_MSG_INVALID_RESULT_NAME, n->result_name);
	if (is_leaf_type(n->type) && has_children)
		return psprintf("%s node cannot have child nodes (left_node, right_node, condition_node or extra_nodes)",
						tname);
	if (n->nextras > 0 && n->type != DF_NODE_JOIN)
		return pstrdup("extra_nodes is only allowed on JOIN nodes");
	if (n->condition && n->type != DF_NODE_IF && n->type != DF_NODE_LOOP)
		return pstrdup("condition_node is only allowed on IF and LOOP nodes");

	switch (n->type)
	{
		case DF_NODE_SQL:
			if (n->query == NULL || is_blank(n->query))
				return pstrdup("SQL node requires a non-empty query");
			return NULL;
		case DF_NODE_THEN:
		case DF_NODE_JOIN:
		case DF_NODE_RACE:
			if (n->left == NULL || n->right == NULL)
				return psprintf("%s node requires left_node and right_node",
								tname);
			if (n->query != NULL)
				return psprintf("%s node cannot have a query", tname);
			return NULL;
		case DF_NODE_IF:
			if (n->left == NULL || n->right == NULL)
				return pstrdup("IF node requires left_node (then branch) and right_node (else branch)");
			return check_if(n);
		case DF_NODE_LOOP:
			if (n->left == NULL)
				return pstrdup("LOOP node requires left_node (the loop body)");
			if (n->right != NULL)
				return pstrdup("LOOP node cannot have right_node");
			{
				DfLoopConfig cfg;

				return df_loop_parse(n->query, false, &cfg);
			}
		case DF_NODE_BREAK:
			return check_break(n);
		case DF_NODE_SLEEP:
			return check_sleep(n);
		case DF_NODE_WAIT_SCHEDULE:
			return check_wait_schedule(n);
		case DF_NODE_SIGNAL:
			return check_signal(n);
		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_CATCH:
		case DF_NODE_BREAKER:
		case DF_NODE_LIMIT:
			if (n->left == NULL)
				return psprintf("%s node requires left_node (the step it wraps)",
								tname);
			if (n->type == DF_NODE_CATCH && n->right == NULL)
				return pstrdup("CATCH node requires right_node (the handler)");
			if (n->type != DF_NODE_CATCH && n->right != NULL)
				return psprintf("%s node cannot have right_node", tname);
			return df_wrapper_parse(tname, n->query, &wrapper);
		case DF_NODE_FAIL:
			return df_wrapper_parse(tname, n->query, &wrapper);
		case DF_NODE_PUBLISH:
		case DF_NODE_EVENT:
			return df_event_config_parse(n->type, n->query, &event);
		case DF_NODE_COMPENSATED:
			if (n->left == NULL || n->right == NULL)
				return pstrdup("COMPENSATED node requires left_node (the forward step) and right_node (its undo)");
			if (n->query != NULL)
				return pstrdup("COMPENSATED node cannot have a query");
			return NULL;
		case DF_NODE_SAGA:
			if (n->left == NULL)
				return pstrdup("SAGA node requires left_node (the body)");
			return df_wrapper_parse(tname, n->query, &wrapper);

		case DF_NODE_MAP:
			return df_map_check(n);

		case DF_NODE_LOCK:
			if (n->left == NULL)
				return pstrdup("LOCK node requires left_node (the step it wraps)");
			if (n->right != NULL)
				return pstrdup("LOCK node cannot have right_node");
			return df_lock_parse(n->query, &lock);
		case DF_NODE_TASK:
			{
				DfTaskConfig task;

				return df_task_parse(n->query, &task);
			}
		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			if (n->query == NULL)
				return psprintf("%s node requires a query config", tname);
			return df_http_check_config(n->query,
										n->type == DF_NODE_HTTP_MULTIPART);
	}
	return NULL;
}

/* Pre-order structure check; depth is already known to be within bounds. */
static char *
validate_tree(const DfNode *n, const VPath *path)
{
	VPath child;
	char *err;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if ((err = check_node(n)) != NULL)
		return at_path(path, err);

	child.parent = path;
	child.index = 0;
	if (n->left)
	{
		child.edge = "left";
		if ((err = validate_tree(n->left, &child)) != NULL)
			return err;
	}
	if (n->right)
	{
		child.edge = "right";
		if ((err = validate_tree(n->right, &child)) != NULL)
			return err;
	}
	if (n->condition)
	{
		child.edge = "condition_node";
		if ((err = validate_tree(n->condition, &child)) != NULL)
			return err;
	}
	child.edge = "extra_nodes";
	for (int i = 0; i < n->nextras; i++)
	{
		child.index = i;
		if ((err = validate_tree(n->extras[i], &child)) != NULL)
			return err;
	}
	return NULL;
}

/* The literal keys of the LIMIT nodes enclosing a node, innermost first. */
typedef struct EnclosingLimit
{
	const struct EnclosingLimit *up;
	const char					*key;
} EnclosingLimit;

/*
 * A LIMIT inside a LIMIT of the same literal key
 * (docs/guides/limits.md): the inner one would wait for a slot its own
 * instance holds.  A key with a {var} or $name is known only when the
 * node starts, where the engine fails it the same way.
 */
static char *
limit_nesting(const DfNode *n, const EnclosingLimit *up, const VPath *path)
{
	EnclosingLimit here = {up, NULL};
	VPath		   child;
	char		  *err;

	check_stack_depth();
	if (n->type == DF_NODE_LIMIT)
	{
		DfWrapperConfig cfg;

		if (df_wrapper_parse("LIMIT", n->query, &cfg) == NULL &&
			strchr(cfg.limit.key, '{') == NULL &&
			strchr(cfg.limit.key, '$') == NULL)
		{
			for (const EnclosingLimit *e = up; e != NULL; e = e->up)
				if (strcmp(e->key, cfg.limit.key) == 0)
					return at_path(path,
								   psprintf("df.limit on key \"%s\" is inside a df.limit on the same key, "
											"and would wait for a slot its own instance holds; take a key once on a path",
											cfg.limit.key));
			here.key = cfg.limit.key;
			up = &here;
		}
	}
	child.parent = path;
	child.index = 0;
	child.edge = "left";
	if (n->left && (err = limit_nesting(n->left, up, &child)) != NULL)
		return err;
	child.edge = "right";
	if (n->right && (err = limit_nesting(n->right, up, &child)) != NULL)
		return err;
	child.edge = "condition_node";
	if (n->condition && (err = limit_nesting(n->condition, up, &child)) != NULL)
		return err;
	child.edge = "extra_nodes";
	for (int i = 0; i < n->nextras; i++)
	{
		child.index = i;
		if ((err = limit_nesting(n->extras[i], up, &child)) != NULL)
			return err;
	}
	return NULL;
}

char *
df_graph_validate(const DfNode *root)
{
	VPath path = {NULL, NULL, 0};
	char *err;

	if (!depth_ok(root, 0))
		return pstrdup(PGD_MSG_GRAPH_TOO_DEEP);
	if (df_graph_count(root) > df_max_nodes)
		return psprintf(PGD_MSG_GRAPH_TOO_MANY_NODES, df_max_nodes);
	if ((err = validate_tree(root, &path)) != NULL)
		return err;
	return limit_nesting(root, NULL, &path);
}

char *
df_graph_check_text(const char *text, DfNode **out)
{
	DfParseResult r = df_graph_parse(text);
	char		 *err;

	*out = NULL;
	switch (r.status)
	{
		case DF_PARSE_OK:
			break;
		case DF_PARSE_NOT_DUROFUT:
			return psprintf(PGD_MSG_INVALID_FUNCTION,
							"not Durofut JSON (expected an object with \"node_type\"); build workflows with the df.* functions and operators");
		case DF_PARSE_BAD_JSON:
			return psprintf(PGD_MSG_INVALID_FUNCTION,
							psprintf("invalid JSON: %s", r.errmsg));
		case DF_PARSE_UNKNOWN_TYPE:
			return psprintf(PGD_MSG_INVALID_FUNCTION, r.errmsg);
		case DF_PARSE_MALFORMED:
			return psprintf(PGD_MSG_MALFORMED_DUROFUT, r.type_name, r.errmsg);
	}
	if ((err = df_graph_validate(r.node)) != NULL)
		return psprintf(PGD_MSG_INVALID_GRAPH, err);
	*out = r.node;
	return NULL;
}

PG_FUNCTION_INFO_V1(pgd_validate_graph);

/*
 * df_internal.validate_graph(graph text): NULL when df.start would accept
 * the graph, else the message it would raise.  Lets tests pin every
 * validation message without starting anything.
 */
Datum
pgd_validate_graph(PG_FUNCTION_ARGS)
{
	DfNode *node;
	char   *err =
		df_graph_check_text(text_to_cstring(PG_GETARG_TEXT_PP(0)), &node);

	if (err == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(err));
}
