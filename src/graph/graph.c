/*-------------------------------------------------------------------------
 *
 * graph.c
 *	  The Durofut graph model: node type names, node construction, counting
 *	  and the canonical compact text form.
 *
 * The text form is the reference's wire format: keys in the order
 * node_type, left_node, right_node, condition_node, extra_nodes, query,
 * result_name, absent keys omitted, no whitespace.  Identical graphs always
 * give identical text, which is what lets the DSL re-serialize every operand
 * canonically.
 *
 * The walks here (counting, writing) use an explicit stack rather than
 * recursion: they run on graphs that have not been validated yet (the DSL
 * composes whatever it is given), and a graph nested a hundred thousand
 * levels deep must still round-trip so that validation can refuse it with
 * the reference's depth message.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "graph/graph.h"
#include "common/json.h"
#include "miscadmin.h"

static const char *const node_type_names[DF_NODE_TYPE_COUNT] = {
	[DF_NODE_SQL] = "SQL",
	[DF_NODE_THEN] = "THEN",
	[DF_NODE_IF] = "IF",
	[DF_NODE_JOIN] = "JOIN",
	[DF_NODE_LOOP] = "LOOP",
	[DF_NODE_BREAK] = "BREAK",
	[DF_NODE_RACE] = "RACE",
	[DF_NODE_SLEEP] = "SLEEP",
	[DF_NODE_WAIT_SCHEDULE] = "WAIT_SCHEDULE",
	[DF_NODE_HTTP] = "HTTP",
	[DF_NODE_HTTP_MULTIPART] = "HTTP_MULTIPART",
	[DF_NODE_SIGNAL] = "SIGNAL",
	[DF_NODE_RETRY] = "RETRY",
	[DF_NODE_TIMEOUT] = "TIMEOUT",
	[DF_NODE_CATCH] = "CATCH",
	[DF_NODE_FAIL] = "FAIL",
	[DF_NODE_COMPENSATED] = "COMPENSATED",
	[DF_NODE_SAGA] = "SAGA",
	[DF_NODE_BREAKER] = "BREAKER",
	[DF_NODE_MAP] = "MAP",
	[DF_NODE_LIMIT] = "LIMIT",
	[DF_NODE_PUBLISH] = "PUBLISH",
	[DF_NODE_EVENT] = "EVENT",
	[DF_NODE_LOCK] = "LOCK",
	[DF_NODE_TASK] = "TASK",
};

const char *
df_node_type_name(DfNodeType type)
{
	if ((int) type < 0 || (int) type >= DF_NODE_TYPE_COUNT)
		elog(ERROR, "invalid pg_durable node type %d", (int) type);
	return node_type_names[type];
}

/* Exact, case-sensitive match: the names are also a CHECK constraint. */
bool
df_node_type_from_name(const char *name, DfNodeType *type)
{
	for (int i = 0; i < DF_NODE_TYPE_COUNT; i++)
	{
		if (strcmp(name, node_type_names[i]) == 0)
		{
			*type = (DfNodeType) i;
			return true;
		}
	}
	return false;
}

DfNode *
df_node_new(DfNodeType type)
{
	DfNode *node = palloc0(sizeof(DfNode));

	node->type = type;
	return node;
}

static const char *
child_path(const char *path, const char *child)
{
	return path ? psprintf("%s.%s", path, child) : NULL;
}

void
df_node_walk(const DfNode *n, const char *path, DfNodeVisit visit, void *arg)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n == NULL)
		return;
	visit(n, path, arg);
	if (n->left)
		df_node_walk(n->left, child_path(path, "left"), visit, arg);
	if (n->right)
		df_node_walk(n->right, child_path(path, "right"), visit, arg);
	if (n->condition)
		df_node_walk(n->condition, child_path(path, "condition_node"), visit, arg);
	for (int i = 0; i < n->nextras; i++)
		df_node_walk(n->extras[i],
					 path ? psprintf("%s.extra_nodes[%d]", path, i) : NULL,
					 visit, arg);
}

int
df_graph_count(const DfNode *root)
{
	const DfNode **stack;
	int			   stack_size = 64;
	int			   depth = 0;
	int			   count = 0;

	if (root == NULL)
		return 0;
	stack = palloc(sizeof(DfNode *) * stack_size);
	stack[depth++] = root;
	while (depth > 0)
	{
		const DfNode *n = stack[--depth];
		int			  need = 3 + n->nextras;

		CHECK_FOR_INTERRUPTS();
		count++;
		if (depth + need > stack_size)
		{
			while (depth + need > stack_size)
				stack_size *= 2;
			stack = repalloc_huge(stack, sizeof(DfNode *) * stack_size);
		}
		if (n->left)
			stack[depth++] = n->left;
		if (n->right)
			stack[depth++] = n->right;
		if (n->condition)
			stack[depth++] = n->condition;
		for (int i = 0; i < n->nextras; i++)
			if (n->extras[i])
				stack[depth++] = n->extras[i];
	}
	pfree(stack);
	return count;
}

/*
 * Writer state: a node and how far its text has got.  The stages follow
 * the key order of the wire format; extras advance one entry at a time.
 */
typedef enum WriteStage
{
	WS_LEFT,
	WS_RIGHT,
	WS_CONDITION,
	WS_EXTRAS,
	WS_TAIL
} WriteStage;

typedef struct WriteFrame
{
	const DfNode *node;
	WriteStage	  stage;
	int			  extra; /* next extra to write in WS_EXTRAS */
} WriteFrame;

void
df_graph_write(StringInfo buf, const DfNode *root)
{
	WriteFrame *stack;
	int			stack_size = 64;
	int			depth = 0;

	stack = palloc(sizeof(WriteFrame) * stack_size);

	/* open the root */
	appendStringInfoString(buf, "{\"node_type\":");
	dfjson_write_string(buf, df_node_type_name(root->type));
	stack[0].node = root;
	stack[0].stage = WS_LEFT;
	stack[0].extra = 0;
	depth = 1;

	while (depth > 0)
	{
		WriteFrame	 *f = &stack[depth - 1];
		const DfNode *n = f->node;
		const DfNode *child = NULL;

		CHECK_FOR_INTERRUPTS();
		switch (f->stage)
		{
			case WS_LEFT:
				f->stage = WS_RIGHT;
				if (n->left)
				{
					appendStringInfoString(buf, ",\"left_node\":");
					child = n->left;
				}
				break;
			case WS_RIGHT:
				f->stage = WS_CONDITION;
				if (n->right)
				{
					appendStringInfoString(buf, ",\"right_node\":");
					child = n->right;
				}
				break;
			case WS_CONDITION:
				f->stage = WS_EXTRAS;
				if (n->condition)
				{
					appendStringInfoString(buf, ",\"condition_node\":");
					child = n->condition;
				}
				break;
			case WS_EXTRAS:
				if (f->extra >= n->nextras)
				{
					if (n->nextras > 0)
						appendStringInfoChar(buf, ']');
					f->stage = WS_TAIL;
					break;
				}
				appendStringInfoString(buf,
									   f->extra == 0 ? ",\"extra_nodes\":[" :
													   ",");
				child = n->extras[f->extra++];
				break;
			case WS_TAIL:
				if (n->query)
				{
					appendStringInfoString(buf, ",\"query\":");
					dfjson_write_string(buf, n->query);
				}
				if (n->result_name)
				{
					appendStringInfoString(buf, ",\"result_name\":");
					dfjson_write_string(buf, n->result_name);
				}
				appendStringInfoChar(buf, '}');
				depth--;
				break;
		}

		if (child)
		{
			if (depth == stack_size)
			{
				stack_size *= 2;
				stack = repalloc_huge(stack, sizeof(WriteFrame) * stack_size);
			}
			appendStringInfoString(buf, "{\"node_type\":");
			dfjson_write_string(buf, df_node_type_name(child->type));
			stack[depth].node = child;
			stack[depth].stage = WS_LEFT;
			stack[depth].extra = 0;
			depth++;
		}
	}
	pfree(stack);
}

char *
df_graph_to_text(const DfNode *node)
{
	StringInfoData buf;

	initStringInfo(&buf);
	df_graph_write(&buf, node);
	return buf.data;
}
