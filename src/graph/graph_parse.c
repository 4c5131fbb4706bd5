/*-------------------------------------------------------------------------
 *
 * graph_parse.c
 *	  Turn Durofut JSON text into a DfNode tree (df_graph_parse).
 *
 * Parsing checks only the shape of the envelope: that the text is JSON,
 * that every node is an object with a known node_type, that children are
 * objects, extra_nodes an array of objects, query and result_name strings.
 * What each node type needs (children, query configs, limits) is semantic
 * validation, in graph_validate.c.  Unknown keys are ignored; null counts
 * as absent.
 *
 * The conversion is iterative (a work queue that doubles as the record of
 * each node's parent, used to print paths in messages), so that a graph
 * nested far beyond the depth limit is parsed without touching the C
 * stack and can be refused by validation with the reference's message.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "graph/graph.h"
#include "common/json.h"
#include "common/messages.h"
#include "miscadmin.h"

/* A node waiting to be converted, and where it hangs in the tree. */
typedef struct ParseItem
{
	const DfJson *obj;
	DfNode		**slot;	  /* where the converted node goes */
	int			  parent; /* index of the parent item, -1 for root */
	const char	 *edge;	  /* "left", "right", "condition_node",
								 * "extra_nodes" */
	int			  index;  /* position in extra_nodes */
} ParseItem;

typedef struct ParseState
{
	ParseItem	  *items;
	int			   nitems;
	int			   size;
	DfParseResult *result;
} ParseState;

/* Segments kept at each end of a path too long to print whole. */
#define PATH_KEEP 16

/*
 * Path of an item in the reference's notation: root.left.extra_nodes[2].
 * Parsing has no depth limit, so a path may be absurdly long; the middle of
 * a long one is elided to keep the message readable.
 */
static char *
item_path(ParseState *ps, int i)
{
	StringInfoData buf;
	int			  *chain;
	int			   n = 0;

	chain = palloc(sizeof(int) * ps->nitems);
	for (int j = i; j >= 0; j = ps->items[j].parent)
		chain[n++] = j;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "root");
	/* chain[n - 1] is the root; segments are chain[n - 2] down to chain[0] */
	for (int k = n - 2; k >= 0; k--)
	{
		ParseItem *it = &ps->items[chain[k]];

		if (n - 1 > 2 * PATH_KEEP && k == n - 2 - PATH_KEEP)
		{
			appendStringInfo(&buf, ".(%d more levels)", n - 1 - 2 * PATH_KEEP);
			k = PATH_KEEP;
			continue;
		}
		if (strcmp(it->edge, "extra_nodes") == 0)
			appendStringInfo(&buf, ".extra_nodes[%d]", it->index);
		else
			appendStringInfo(&buf, ".%s", it->edge);
	}
	pfree(chain);
	return buf.data;
}

static void
push_item(ParseState *ps, const DfJson *obj, DfNode **slot, int parent,
		  const char *edge, int index)
{
	ParseItem *it;

	if (ps->nitems == ps->size)
	{
		ps->size *= 2;
		ps->items = repalloc_huge(ps->items, sizeof(ParseItem) * ps->size);
	}
	it = &ps->items[ps->nitems++];
	it->obj = obj;
	it->slot = slot;
	it->parent = parent;
	it->edge = edge;
	it->index = index;
}

static bool
malformed(ParseState *ps, int i, const char *msg)
{
	ps->result->status = DF_PARSE_MALFORMED;
	ps->result->errmsg = psprintf("%s: %s", item_path(ps, i), msg);
	return false;
}

/* A child key: absent or null means none, an object is queued, else an error. */
static bool
take_child(ParseState *ps, int i, const char *key, const char *edge,
		   DfNode **slot)
{
	const DfJson *v = dfjson_get(ps->items[i].obj, key);

	if (v == NULL || v->type == DFJ_NULL)
		return true;
	if (v->type != DFJ_OBJECT)
		return malformed(ps, i, psprintf(PGD_MSG_CHILD_NOT_OBJECT, key));
	push_item(ps, v, slot, i, edge, 0);
	return true;
}

/* A string key: absent or null means NULL. */
static bool
take_string(ParseState *ps, int i, const char *key, char **out)
{
	const DfJson *v = dfjson_get(ps->items[i].obj, key);

	if (v == NULL || v->type == DFJ_NULL)
		return true;
	if (v->type != DFJ_STRING)
		return malformed(ps, i, psprintf("%s must be a string", key));
	*out = v->str;
	return true;
}

/* Convert one queued object into its node; queue its children. */
static bool
convert_item(ParseState *ps, int i)
{
	const DfJson  *obj = ps->items[i].obj;
	const DfJson  *type_json = dfjson_get(obj, "node_type");
	const DfJson  *extras;
	DfNodeType	   type;
	DfNode		  *node;
	DfParseResult *r = ps->result;

	if (type_json == NULL || type_json->type == DFJ_NULL)
		return malformed(ps, i, "node_type is required");
	if (type_json->type != DFJ_STRING ||
		!df_node_type_from_name(type_json->str, &type))
	{
		const char *name = type_json->type == DFJ_STRING ?
			type_json->str :
			dfjson_to_text(type_json);

		r->status = DF_PARSE_UNKNOWN_TYPE;
		r->type_name = pstrdup(name);
		if (i == 0)
			r->errmsg =
				psprintf(PGD_MSG_UNKNOWN_NODE_TYPE, name, DF_VALID_NODE_TYPES);
		else
			r->errmsg =
				psprintf("Unknown node_type '%s' at %s. Valid types: %s", name,
						 item_path(ps, i), DF_VALID_NODE_TYPES);
		return false;
	}
	if (i == 0)
		r->type_name = pstrdup(type_json->str);

	node = df_node_new(type);
	*ps->items[i].slot = node;

	if (!take_string(ps, i, "query", &node->query) ||
		!take_string(ps, i, "result_name", &node->result_name) ||
		!take_child(ps, i, "left_node", "left", &node->left) ||
		!take_child(ps, i, "right_node", "right", &node->right) ||
		!take_child(ps, i, "condition_node", "condition_node",
					&node->condition))
		return false;

	extras = dfjson_get(obj, "extra_nodes");
	if (extras != NULL && extras->type != DFJ_NULL)
	{
		if (extras->type != DFJ_ARRAY)
			return malformed(ps, i,
							 "extra_nodes must be an array of Durofut JSON objects");
		if (extras->count > 0)
		{
			node->nextras = extras->count;
			node->extras = palloc0(sizeof(DfNode *) * extras->count);
			for (int k = 0; k < extras->count; k++)
			{
				if (extras->items[k]->type != DFJ_OBJECT)
					return malformed(ps, i, PGD_MSG_EXTRAS_NOT_OBJECTS);
				push_item(ps, extras->items[k], &node->extras[k], i,
						  "extra_nodes", k);
			}
		}
	}
	return true;
}

/*
 * Does the text look like it was meant to be Durofut?  Only then is a JSON
 * syntax error reported as such; anything else is SQL text to the DSL.
 */
static bool
looks_like_durofut(const char *text)
{
	while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
		text++;
	return *text == '{' && strstr(text, "\"node_type\"") != NULL;
}

DfParseResult
df_graph_parse(const char *text)
{
	DfParseResult result;
	ParseState	  ps;
	DfJson		 *json;
	char		 *jerr;
	DfNode		 *root = NULL;
	const DfJson *type_json;

	memset(&result, 0, sizeof(result));

	json = dfjson_parse(text, strlen(text), &jerr);
	if (json == NULL)
	{
		result.status = looks_like_durofut(text) ? DF_PARSE_BAD_JSON :
												   DF_PARSE_NOT_DUROFUT;
		result.errmsg = jerr;
		return result;
	}
	type_json = dfjson_get(json, "node_type");
	if (json->type != DFJ_OBJECT || type_json == NULL ||
		type_json->type == DFJ_NULL)
	{
		result.status = DF_PARSE_NOT_DUROFUT;
		result.errmsg = pstrdup("not a JSON object with a \"node_type\" key");
		return result;
	}

	ps.size = 64;
	ps.items = palloc(sizeof(ParseItem) * ps.size);
	ps.nitems = 0;
	ps.result = &result;
	push_item(&ps, json, &root, -1, NULL, 0);

	/* breadth-first: the queue only grows, so item indexes stay valid */
	for (int i = 0; i < ps.nitems; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!convert_item(&ps, i))
			return result;
	}

	result.status = DF_PARSE_OK;
	result.node = root;
	return result;
}
