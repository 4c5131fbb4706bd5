/*-------------------------------------------------------------------------
 *
 * explain_dot.c
 *	  df.explain(…, format => 'dot'): a workflow graph as a Graphviz
 *	  digraph, e.g. `dot -Tsvg`.
 *
 * The picture is the flow: a step is a box, a sequence an edge from one
 * part's exit to the next one's entry, JOIN and RACE a fork and a meet
 * (every branch between them, nested unnamed ones of the same type
 * flattened), IF a diamond after its condition with
 * "true" and "false" edges and a meet, LOOP a node with the body after it
 * and a dashed edge back.  A wrapper (any other node with children:
 * RETRY, TIMEOUT, CATCH, COMPENSATED, SAGA, BREAKER) is a cluster drawn
 * around its step, labelled with its settings; a handler, an undo or a
 * saga's on_compensated hangs off it on a dashed edge.  Every part has one
 * entry and one exit, so a part is drawn without knowing its neighbours.
 *
 * With a status function (the live form) each node is filled by its
 * inferred status: completed green, failed red with a thick border and
 * ✗, running blue with a bold border and ⏳, skipped grey, compensated
 * violet; pending stays white.
 *
 * Pure: the graph in, text out.  Recursion is bounded by the validated
 * graph depth and guarded by check_stack_depth().
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"

#include "common/json.h"
#include "graph/graph.h"
#include "monitor/explain.h"

#define LABEL_MAX 48 /* bytes of SQL text or URL in a label */

typedef struct Dot
{
	StringInfoData	  out;
	int				  next_id;
	DfExplainStatusFn status;
	void			 *arg;
} Dot;

typedef struct Part
{
	int entry;
	int exit;
} Part;

/* Append s escaped for a double-quoted DOT string, whitespace collapsed, clipped. */
static void
append_escaped(StringInfo b, const char *s, int max)
{
	int	 len = strlen(s);
	int	 cut = len > max ? pg_mbcliplen(s, len, max) : len;
	bool space = false;

	for (int i = 0; i < cut; i++)
	{
		char c = s[i];

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		{
			space = true;
			continue;
		}
		if (space)
			appendStringInfoChar(b, ' ');
		space = false;
		if (c == '"' || c == '\\')
			appendStringInfoChar(b, '\\');
		appendStringInfoChar(b, c);
	}
	if (cut < len)
		appendStringInfoString(b, "...");
}

static const char *
fill_of(const char *status)
{
	if (status == NULL)
		return "white";
	if (strcmp(status, "completed") == 0)
		return "palegreen";
	if (strcmp(status, "failed") == 0)
		return "salmon";
	if (strcmp(status, "running") == 0)
		return "lightskyblue";
	if (strcmp(status, "skipped") == 0 || strcmp(status, "cancelled") == 0)
		return "gray85";
	if (strcmp(status, "compensated") == 0)
		return "plum";
	return "white";
}

/* The status attributes of a node: fill, and the marks of running and failed nodes. */
static void
append_status(Dot *d, const DfNode *node, bool filled)
{
	const char *status = d->status ? d->status(node, d->arg) : NULL;

	if (status == NULL)
		return;
	if (filled)
		appendStringInfo(&d->out, ", fillcolor=\"%s\"", fill_of(status));
	if (strcmp(status, "failed") == 0)
		appendStringInfoString(&d->out, ", color=\"red3\", penwidth=3");
	else if (strcmp(status, "running") == 0)
		appendStringInfo(&d->out, ", color=\"blue3\", penwidth=3%s",
						 filled ? ", style=\"rounded,filled,bold\"" : "");
	appendStringInfo(&d->out, ", tooltip=\"%s\"", status);
}

static const char *
status_mark(Dot *d, const DfNode *node)
{
	const char *status = d->status ? d->status(node, d->arg) : NULL;

	if (status == NULL)
		return "";
	if (strcmp(status, "failed") == 0)
		return " ✗";
	if (strcmp(status, "running") == 0)
		return " ⏳";
	if (strcmp(status, "completed") == 0)
		return " ✓";
	return "";
}

static int
new_node(Dot *d, const char *shape, const char *label, const DfNode *node)
{
	int id = d->next_id++;

	appendStringInfo(&d->out, "  n%d [shape=%s, label=\"%s", id, shape, label);
	if (node)
		appendStringInfoString(&d->out, status_mark(d, node));
	appendStringInfoChar(&d->out, '"');
	if (node)
		append_status(d, node, true);
	appendStringInfoString(&d->out, "];\n");
	return id;
}

static void
edge(Dot *d, int from, int to, const char *attrs)
{
	appendStringInfo(&d->out, "  n%d -> n%d%s%s%s;\n", from, to,
					 attrs ? " [" : "", attrs ? attrs : "", attrs ? "]" : "");
}

static char *
config_str(const DfNode *node, const char *key)
{
	char   *err = NULL;
	DfJson *cfg = node->query ?
		dfjson_parse(node->query, strlen(node->query), &err) :
		NULL;
	DfJson *v = cfg ? dfjson_get(cfg, key) : NULL;

	return v && v->type == DFJ_STRING ? v->str : NULL;
}

/* The label of a leaf: its type, what it runs, its result name. */
static char *
leaf_label(const DfNode *node)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, df_node_type_name(node->type));
	if (node->type == DF_NODE_SQL && node->query)
	{
		appendStringInfoString(&b, "\\n");
		append_escaped(&b, node->query, LABEL_MAX);
	}
	else if (node->type == DF_NODE_HTTP ||
			 node->type == DF_NODE_HTTP_MULTIPART)
	{
		const char *m = config_str(node, "method");
		const char *u = config_str(node, "url");

		appendStringInfo(&b, " %s\\n", m ? m : "POST");
		append_escaped(&b, u ? u : "?", LABEL_MAX);
	}
	else if (node->query)
	{
		appendStringInfoString(&b, "\\n");
		append_escaped(&b, node->query, LABEL_MAX);
	}
	if (node->result_name)
	{
		appendStringInfoString(&b, "\\n|=> ");
		append_escaped(&b, node->result_name, LABEL_MAX);
	}
	return b.data;
}

static Part draw(Dot *d, const DfNode *node);

/*
 * The branches of a JOIN or RACE, the branches of an unnamed JOIN (RACE)
 * directly below a JOIN (RACE) included: a & b & c builds JOIN(JOIN(a, b),
 * c), and draws as one fork of three.
 */
static void
collect_branches(const DfNode *node, DfNodeType type, List **out)
{
	const DfNode *kids[2] = {node->left, node->right};

	check_stack_depth();
	for (int i = 0; i < 2 + node->nextras; i++)
	{
		const DfNode *k = i < 2 ? kids[i] : node->extras[i - 2];

		if (k == NULL)
			continue;
		if (k->type == type && k->result_name == NULL)
			collect_branches(k, type, out);
		else
			*out = lappend(*out, (void *) k);
	}
}

/* JOIN and RACE: a fork, every branch, a meet. */
static Part
draw_branches(Dot *d, const DfNode *node, const char *fork, const char *meet)
{
	Part	  p;
	List	 *branches = NIL;
	ListCell *lc;

	p.entry = new_node(d, "circle", fork, node);
	p.exit = new_node(d, "circle", meet, node);
	collect_branches(node, node->type, &branches);
	foreach(lc, branches)
	{
		Part b = draw(d, (const DfNode *) lfirst(lc));

		edge(d, p.entry, b.entry, NULL);
		edge(d, b.exit, p.exit, NULL);
	}
	return p;
}

/* A wrapper: a cluster around its step; a handler or undo on a dashed edge. */
static Part
draw_wrapper(Dot *d, const DfNode *node)
{
	int	 cluster = d->next_id++;
	Part inner;

	appendStringInfo(&d->out, "  subgraph cluster_%d {\n  graph [label=\"%s",
					 cluster, df_node_type_name(node->type));
	if (node->query && node->type != DF_NODE_COMPENSATED)
	{
		appendStringInfoChar(&d->out, ' ');
		append_escaped(&d->out, node->query, LABEL_MAX * 2);
	}
	if (node->result_name)
	{
		appendStringInfoString(&d->out, " |=> ");
		append_escaped(&d->out, node->result_name, LABEL_MAX);
	}
	appendStringInfo(&d->out, "%s\", style=\"rounded,dashed\"",
					 status_mark(d, node));
	append_status(d, node, false);
	appendStringInfoString(&d->out, "];\n");
	if (node->left)
		inner = draw(d, node->left);
	else
		inner.entry = inner.exit = new_node(d, "box", "(no step)", NULL);
	appendStringInfoString(&d->out, "  }\n");
	if (node->right)
	{
		Part side = draw(d, node->right);

		edge(d, inner.exit, side.entry,
			 node->type == DF_NODE_CATCH ?
				 "style=dashed, label=\"on error\"" :
				 node->type == DF_NODE_COMPENSATED ?
				 "style=dashed, label=\"undo\"" :
				 node->type == DF_NODE_SAGA ?
				 "style=dashed, label=\"on compensated\"" :
				 node->type == DF_NODE_MAP ?
				 "style=dashed, label=\"each row\"" :
				 "style=dashed");
	}
	return inner;
}

static Part
draw(Dot *d, const DfNode *node)
{
	Part p;

	check_stack_depth();
	switch (node->type)
	{
		case DF_NODE_THEN:
		{
			Part l = draw(d, node->left);
			Part r = draw(d, node->right);

			edge(d, l.exit, r.entry, NULL);
			p.entry = l.entry;
			p.exit = r.exit;
			return p;
		}
		case DF_NODE_JOIN:
			return draw_branches(d, node, "&", "join");
		case DF_NODE_RACE:
			return draw_branches(d, node, "|", "first");
		case DF_NODE_IF:
		{
			Part c =
				node->condition ? draw(d, node->condition) : (Part){-1, -1};
			int test = new_node(d, "diamond", "if", node);
			int meet = new_node(d, "point", "", NULL);

			if (c.exit >= 0)
				edge(d, c.exit, test, NULL);
			if (node->left)
			{
				Part t = draw(d, node->left);

				edge(d, test, t.entry, "label=\"true\"");
				edge(d, t.exit, meet, NULL);
			}
			if (node->right)
			{
				Part f = draw(d, node->right);

				edge(d, test, f.entry, "label=\"false\"");
				edge(d, f.exit, meet, NULL);
			}
			else
				edge(d, test, meet, "label=\"false\"");
			p.entry = c.entry >= 0 ? c.entry : test;
			p.exit = meet;
			return p;
		}
		case DF_NODE_LOOP:
		{
			int loop = new_node(d, "circle", "loop", node);

			p.entry = p.exit = loop;
			if (node->condition)
			{
				Part c = draw(d, node->condition);

				edge(d, loop, c.entry, "label=\"while\"");
				edge(d, c.exit, loop, "style=dotted");
			}
			if (node->left)
			{
				Part b = draw(d, node->left);

				edge(d, loop, b.entry, "label=\"body\"");
				edge(d, b.exit, loop, "style=dashed, label=\"repeat\"");
			}
			return p;
		}
		default:
			/* a wrapper (RETRY, TIMEOUT, CATCH, COMPENSATED, SAGA, BREAKER …) */
			if (node->left != NULL || node->right != NULL)
				return draw_wrapper(d, node);
			p.entry = p.exit = new_node(d, "box", leaf_label(node), node);
			return p;
	}
}

char *
df_explain_dot(const DfNode *root, DfExplainStatusFn status, void *arg,
			   const char *title)
{
	Dot	 d;
	Part p;
	int	 start, end;

	memset(&d, 0, sizeof(d));
	d.status = status;
	d.arg = arg;
	initStringInfo(&d.out);
	appendStringInfoString(&d.out,
						   "digraph workflow {\n  graph [rankdir=TB, fontname=\"Helvetica\"");
	if (title)
	{
		appendStringInfoString(&d.out, ", labelloc=t, label=\"");
		append_escaped(&d.out, title, LABEL_MAX * 4);
		appendStringInfoChar(&d.out, '"');
	}
	appendStringInfoString(&d.out,
						   "];\n"
						   "  node [style=\"rounded,filled\", fillcolor=\"white\", fontname=\"Helvetica\", fontsize=11];\n"
						   "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	start = new_node(&d, "point", "", NULL);
	p = draw(&d, root);
	end = new_node(&d, "doublecircle", "", NULL);
	edge(&d, start, p.entry, NULL);
	edge(&d, p.exit, end, NULL);
	appendStringInfoString(&d.out, "}\n");
	return d.out.data;
}
