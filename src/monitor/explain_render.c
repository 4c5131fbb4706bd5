/*-------------------------------------------------------------------------
 *
 * explain_render.c
 *	  The text tree of df.explain: one line per node, children indented by
 *	  two spaces per level.
 *
 * Shape of the output (a THEN chain is flattened: items after the first
 * get "→ "; a compound node shows one header line per child and the child
 * one level below it):
 *
 *   SQL: INSERT INTO t VALUES (1) |=> 'a'
 *   → JOIN (2)
 *     ║ branch 1:
 *       SQL: SELECT 1
 *     ║ branch 2:
 *       SLEEP 5s
 *   → LOOP (while)
 *     ↻ body:
 *       SQL: SELECT 2
 *     ? while:
 *       SQL: SELECT false
 *
 * An unnamed THEN has no line of its own: left-nested and right-nested
 * chains read the same.  A named THEN keeps its name: it gets a "THEN |=>
 * 'n'" line with its chain one level deeper.
 *
 * Lines are collected first (offset, length, node) and joined at the end,
 * so the work is linear in the size of the output; markers, when the live
 * form asks for them, are appended after padding node lines to the width of
 * the widest one.  Recursion is bounded by the graph depth (validated to
 * DF_MAX_DEPTH before rendering) and guarded by check_stack_depth().
 *
 * Labels never contain a line break: every label text has its whitespace
 * runs collapsed to one space.
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

#include "monitor/explain.h"
#include "graph/graph.h"
#include "graph/loop_config.h"
#include "common/json.h"

/* SQL text and break values longer than this are cut to _KEEP bytes + "..." */
#define EXPLAIN_SQL_MAX	 50
#define EXPLAIN_SQL_KEEP 47
#define EXPLAIN_URL_MAX	 40
#define EXPLAIN_URL_KEEP 37

#define EXPLAIN_ARROW "→ "

typedef struct ExplainLine
{
	int			  start; /* offset of the line's text in text.data */
	int			  len;
	const DfNode *node; /* the node it shows, NULL for a header */
} ExplainLine;

typedef struct ExplainState
{
	StringInfoData text; /* all line texts, back to back */
	ExplainLine	  *lines;
	int			   nlines;
	int			   maxlines;
	StringInfoData label; /* scratch for building one label */
} ExplainState;

static void render_node(ExplainState *st, const DfNode *node, int depth,
						const char *prefix);

/* Append s with every whitespace run collapsed to one space, trimmed. */
static void
append_collapsed(StringInfo buf, const char *s)
{
	bool pending_space = false;
	bool any = false;

	for (; *s; s++)
	{
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' ||
			*s == '\f' || *s == '\v')
		{
			pending_space = any;
			continue;
		}
		if (pending_space)
			appendStringInfoChar(buf, ' ');
		pending_space = false;
		any = true;
		appendStringInfoChar(buf, *s);
	}
}

/*
 * Append s (whitespace collapsed); if that is longer than max bytes, only
 * its first keep bytes, cut on a character boundary, and "...".
 */
static void
append_clipped(StringInfo buf, const char *s, int max, int keep)
{
	StringInfoData tmp;

	initStringInfo(&tmp);
	append_collapsed(&tmp, s);
	if (tmp.len > max)
	{
		int cut = pg_mbcliplen(tmp.data, tmp.len, keep);

		appendBinaryStringInfo(buf, tmp.data, cut);
		appendStringInfoString(buf, "...");
	}
	else
		appendBinaryStringInfo(buf, tmp.data, tmp.len);
	pfree(tmp.data);
}

/* The config object in a node's query, or NULL if it is not one. */
static DfJson *
node_config(const DfNode *node)
{
	DfJson *cfg;
	char   *err = NULL;

	if (node->query == NULL)
		return NULL;
	cfg = dfjson_parse(node->query, strlen(node->query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return NULL;
	return cfg;
}

/* A string member of a config, or NULL. */
static const char *
config_string(const DfJson *cfg, const char *key)
{
	DfJson *v = cfg ? dfjson_get(cfg, key) : NULL;

	if (v == NULL || v->type != DFJ_STRING)
		return NULL;
	return v->str;
}

/* A number member of a config (its text as written), or NULL. */
static const char *
config_number(const DfJson *cfg, const char *key)
{
	DfJson *v = cfg ? dfjson_get(cfg, key) : NULL;

	if (v == NULL || v->type != DFJ_NUMBER)
		return NULL;
	return v->str;
}

/*
 * A node that names what it waits for or sends to: its type, the name
 * under key of its config quoted, and its timeout when it has one
 * ("SIGNAL 'approve' (30s)").
 */
static void
append_named(StringInfo buf, const DfNode *node, const char *key)
{
	const DfJson *cfg = node_config(node);
	const char *s = config_string(cfg, key);

	appendStringInfo(buf, "%s '", df_node_type_name(node->type));
	append_collapsed(buf, s ? s : "?");
	appendStringInfoChar(buf, '\'');
	s = config_number(cfg, "timeout_seconds");
	if (s != NULL)
		appendStringInfo(buf, " (%ss)", s);
}

/* Record one line: indentation, prefix, then the label in st->label. */
static void
emit_line(ExplainState *st, int depth, const char *prefix, const DfNode *node)
{
	ExplainLine *line;

	if (st->nlines == st->maxlines)
	{
		st->maxlines *= 2;
		st->lines = repalloc(st->lines, st->maxlines * sizeof(ExplainLine));
	}
	line = &st->lines[st->nlines++];
	line->start = st->text.len;
	line->node = node;
	appendStringInfoSpaces(&st->text, depth * 2);
	appendStringInfoString(&st->text, prefix);
	appendBinaryStringInfo(&st->text, st->label.data, st->label.len);
	line->len = st->text.len - line->start;
}

/* A header line ("║ branch 1:") with the child one level below it. */
static void
render_child(ExplainState *st, const char *header, const DfNode *child,
			 int depth)
{
	resetStringInfo(&st->label);
	appendStringInfoString(&st->label, header);
	emit_line(st, depth, "", NULL);
	render_node(st, child, depth + 1, "");
}

/* The items of a THEN chain, in order, with unnamed inner THENs flattened. */
static void
collect_chain(const DfNode *node, List **items)
{
	check_stack_depth();

	if (node->type == DF_NODE_THEN && node->result_name == NULL &&
		node->left != NULL && node->right != NULL)
	{
		collect_chain(node->left, items);
		collect_chain(node->right, items);
	}
	else
		*items = lappend(*items, (void *) node);
}

static void
render_chain(ExplainState *st, const DfNode *then_node, int depth,
			 const char *prefix)
{
	List	 *items = NIL;
	ListCell *lc;
	bool	  first = true;

	collect_chain(then_node->left, &items);
	collect_chain(then_node->right, &items);
	foreach(lc, items)
	{
		render_node(st, (const DfNode *) lfirst(lc), depth,
					first ? prefix : EXPLAIN_ARROW);
		first = false;
	}
	list_free(items);
}

/* Append the label of a leaf node (everything but the name suffix). */
static void
append_leaf_label(StringInfo buf, const DfNode *node)
{
	DfJson	   *cfg;
	const char *s;

	switch (node->type)
	{
		case DF_NODE_SQL:
			appendStringInfoString(buf, "SQL: ");
			append_clipped(buf, node->query ? node->query : "",
						   EXPLAIN_SQL_MAX, EXPLAIN_SQL_KEEP);
			break;

		case DF_NODE_SLEEP:
			appendStringInfoString(buf, "SLEEP ");
			append_collapsed(buf, node->query ? node->query : "?");
			appendStringInfoChar(buf, 's');
			break;

		case DF_NODE_WAIT_SCHEDULE:
			cfg = node_config(node);
			s = config_string(cfg, "cron_expr");
			appendStringInfoString(buf, "WAIT '");
			append_collapsed(buf, s ? s : "?");
			appendStringInfoChar(buf, '\'');
			break;

		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			cfg = node_config(node);
			s = config_string(cfg, "method");
			appendStringInfoString(buf, "HTTP ");
			append_collapsed(buf, s ? s : "POST");
			appendStringInfoChar(buf, ' ');
			s = config_string(cfg, "url");
			append_clipped(buf, s ? s : "?", EXPLAIN_URL_MAX,
						   EXPLAIN_URL_KEEP);
			if (node->type == DF_NODE_HTTP_MULTIPART)
			{
				DfJson *parts = cfg ? dfjson_get(cfg, "parts") : NULL;
				int n = (parts && parts->type == DFJ_ARRAY) ? parts->count : 0;

				appendStringInfo(buf, " (multipart, %d part%s)", n,
								 n == 1 ? "" : "s");
			}
			break;

		case DF_NODE_SIGNAL:
			/* SIGNAL 'name' (30s) */
			append_named(buf, node, "signal_name");
			break;

		case DF_NODE_TASK:
			/* TASK 'queue' (30s) */
			append_named(buf, node, "queue");
			break;

		case DF_NODE_PUBLISH:
		case DF_NODE_EVENT:
			/* PUBLISH 'topic', EVENT 'topic' (30s) */
			append_named(buf, node, "topic");
			break;

		case DF_NODE_FAIL:
			cfg = node_config(node);
			s = config_string(cfg, "message");
			appendStringInfoString(buf, "FAIL '");
			append_clipped(buf, s ? s : "?", EXPLAIN_SQL_MAX,
						   EXPLAIN_SQL_KEEP);
			appendStringInfoChar(buf, '\'');
			break;

		case DF_NODE_BREAK:
			cfg = node_config(node);
			s = config_string(cfg, "break_value");
			appendStringInfoString(buf, "BREAK");
			if (s != NULL)
			{
				appendStringInfoString(buf, " '");
				append_clipped(buf, s, EXPLAIN_SQL_MAX, EXPLAIN_SQL_KEEP);
				appendStringInfoChar(buf, '\'');
			}
			break;

		default:
			/* compound types are handled by render_node */
			appendStringInfoString(buf, df_node_type_name(node->type));
			break;
	}
}

static void
append_name(StringInfo buf, const DfNode *node)
{
	if (node->result_name != NULL)
	{
		appendStringInfoString(buf, " |=> '");
		append_collapsed(buf, node->result_name);
		appendStringInfoChar(buf, '\'');
	}
}

static void
render_node(ExplainState *st, const DfNode *node, int depth,
			const char *prefix)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	resetStringInfo(&st->label);

	switch (node->type)
	{
		case DF_NODE_THEN:
			if (node->result_name == NULL)
			{
				render_chain(st, node, depth, prefix);
				return;
			}
			appendStringInfoString(&st->label, "THEN");
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_chain(st, node, depth + 1, "");
			return;

		case DF_NODE_IF:
			appendStringInfoString(&st->label, "IF");
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			if (node->condition != NULL)
				render_child(st, "? condition:", node->condition, depth + 1);
			else
			{
				DfJson	   *cfg = node_config(node);
				const char *rn = config_string(cfg, "result_name");

				resetStringInfo(&st->label);
				appendStringInfoString(&st->label, "? condition: result '");
				append_collapsed(&st->label, rn ? rn : "?");
				appendStringInfoString(&st->label, "' has rows");
				emit_line(st, depth + 1, "", NULL);
			}
			render_child(st, "✓ then:", node->left, depth + 1);
			render_child(st, "✗ else:", node->right, depth + 1);
			return;

		case DF_NODE_LOOP:
		{
			DfLoopConfig loop;

			/* a config that does not parse shows as none: df.start refuses it */
			(void) df_loop_parse(node->query, true, &loop);
			appendStringInfoString(&st->label,
								   node->condition ? "LOOP (while" :
													 "LOOP (infinite");
			appendStringInfoString(&st->label,
								   loop.continue_on_failure ?
									   ", continue on failure)" :
									   ")");
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "↻ body:", node->left, depth + 1);
			if (node->condition != NULL)
				render_child(st, "? while:", node->condition, depth + 1);
			return;
		}

		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_CATCH:
		case DF_NODE_BREAKER:
		case DF_NODE_LIMIT:
		case DF_NODE_LOCK:
			/* a wrapper: its type and settings, then its step (and handler) */
			appendStringInfo(&st->label, "%s ", df_node_type_name(node->type));
			append_clipped(&st->label, node->query ? node->query : "{}",
						   EXPLAIN_SQL_MAX, EXPLAIN_SQL_KEEP);
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "▸ step:", node->left, depth + 1);
			if (node->right != NULL)
				render_child(st, "✗ handler:", node->right, depth + 1);
			return;

		case DF_NODE_COMPENSATED:
			/* a saga step: its forward step, then the undo that compensates it */
			appendStringInfoString(&st->label, "COMPENSATED");
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "▸ forward:", node->left, depth + 1);
			render_child(st, "↶ undo:", node->right, depth + 1);
			return;

		case DF_NODE_SAGA:
			/* a saga: its settings, its body, what runs once it compensated */
			appendStringInfoString(&st->label, "SAGA ");
			append_clipped(&st->label, node->query ? node->query : "{}",
						   EXPLAIN_SQL_MAX, EXPLAIN_SQL_KEEP);
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "▸ body:", node->left, depth + 1);
			if (node->right != NULL)
				render_child(st, "↶ on_compensated:", node->right, depth + 1);
			return;
		case DF_NODE_MAP:
		{
			/* df.map: its cap, live its children's states, then query and step */
			DfJson	   *cfg = node_config(node);
			const char *max = config_number(cfg, "max_concurrent");
			const char *lanes = config_number(cfg, "lanes");
			const char *items = config_string(cfg, "items");

			appendStringInfoString(&st->label, "MAP");
			if (max != NULL)
				appendStringInfo(&st->label, " (max_concurrent %s)", max);
			if (lanes != NULL)
				appendStringInfo(&st->label, " (lanes %s)", lanes);
			append_name(&st->label, node);
			/* in lanes mode the children are the lanes: "lanes N: ..." */
			if (items != NULL && lanes != NULL && strncmp(items, "items ", 6) == 0)
				appendStringInfo(&st->label, " · lanes %s", items + 6);
			else if (items != NULL)
				appendStringInfo(&st->label, " · %s", items);
			emit_line(st, depth, prefix, node);
			render_child(st, "▸ rows:", node->left, depth + 1);
			render_child(st, "▸ each row ($item):", node->right, depth + 1);
			return;
		}

		case DF_NODE_JOIN:
		{
			char header[32];
			int	 i;

			appendStringInfo(&st->label, "JOIN (%d)", 2 + node->nextras);
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "║ branch 1:", node->left, depth + 1);
			render_child(st, "║ branch 2:", node->right, depth + 1);
			for (i = 0; i < node->nextras; i++)
			{
				snprintf(header, sizeof(header), "║ branch %d:", i + 3);
				render_child(st, header, node->extras[i], depth + 1);
			}
			return;
		}

		case DF_NODE_RACE:
			appendStringInfoString(&st->label, "RACE");
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			render_child(st, "║ branch 1:", node->left, depth + 1);
			render_child(st, "║ branch 2:", node->right, depth + 1);
			return;

		default:
			append_leaf_label(&st->label, node);
			append_name(&st->label, node);
			emit_line(st, depth, prefix, node);
			return;
	}
}

/* Display width of a line, in terminal columns. */
static int
line_width(const char *s, int len)
{
	int width = 0;
	int i = 0;

	while (i < len)
	{
		int w = pg_dsplen(s + i);

		width += (w > 0) ? w : 0;
		i += pg_mblen(s + i);
	}
	return width;
}

char *
df_explain_graph(const DfNode *root, DfExplainMarkerFn marker,
				 void *marker_arg)
{
	ExplainState   st;
	StringInfoData out;
	const char	 **markers = NULL;
	int			   maxwidth = 0;
	int			   i;

	initStringInfo(&st.text);
	initStringInfo(&st.label);
	st.maxlines = 64;
	st.nlines = 0;
	st.lines = palloc(st.maxlines * sizeof(ExplainLine));

	render_node(&st, root, 0, "");

	if (marker != NULL)
	{
		markers = palloc0(st.nlines * sizeof(const char *));
		for (i = 0; i < st.nlines; i++)
		{
			if (st.lines[i].node == NULL)
				continue;
			markers[i] = marker(st.lines[i].node, marker_arg);
			if (markers[i] != NULL)
				maxwidth = Max(maxwidth,
							   line_width(st.text.data + st.lines[i].start,
										  st.lines[i].len));
		}
	}

	initStringInfo(&out);
	for (i = 0; i < st.nlines; i++)
	{
		const ExplainLine *line = &st.lines[i];

		if (i > 0)
			appendStringInfoChar(&out, '\n');
		appendBinaryStringInfo(&out, st.text.data + line->start, line->len);
		if (markers != NULL && markers[i] != NULL)
		{
			appendStringInfoSpaces(&out,
								   maxwidth -
									   line_width(st.text.data + line->start,
												  line->len));
			appendStringInfoChar(&out, ' ');
			appendStringInfoString(&out, markers[i]);
		}
	}

	pfree(st.text.data);
	pfree(st.label.data);
	pfree(st.lines);
	if (markers)
		pfree(markers);
	return out.data;
}
