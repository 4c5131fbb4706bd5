/*-------------------------------------------------------------------------
 *
 * explain.c
 *	  df.explain(input text): what a workflow would do, as a text tree.
 *
 * The input is classified in this order:
 *	 1. exactly 8 lowercase hex characters: an instance id (live form): a
 *		header "Instance: <id> (<label>)" (no parentheses without a label),
 *		"Status:   <icon> <status>", "Output: <text>" when the instance has
 *		one (cut to 200 bytes), a blank line, then the tree with a marker
 *		per node from its inferred status (infer.c): ✓ completed, ✗ failed,
 *		⏳ running, ○ pending, ⊘ skipped; "Instance '<id>' not found" when
 *		the caller cannot see it (its nodes are read as the caller);
 *	 2. Durofut JSON: the graph itself;
 *	 3. text that starts with a SQL statement keyword (SELECT, INSERT, WITH,
 *		...): a single SQL step, exactly what df.start would make of it;
 *	 4. text that contains a DSL operator (~> |=> ?> !> @>) or "df.": a DSL
 *		expression, evaluated as "SELECT <input>" and the resulting text
 *		explained;
 *	 5. anything else: a "Cannot explain input" text saying what is
 *		accepted.
 * The reference checks 4 before 3; checking the SQL keyword first only
 * changes inputs on which the reference fails with a syntax error (e.g.
 * "SELECT * FROM df.instances", which evaluates "SELECT SELECT ..."), and
 * shows them as the SQL step df.start would run instead.
 *
 * Problems are returned as text, never raised: an invalid graph gives
 * "Invalid durable function graph: <path>: <msg>", an error while
 * evaluating a DSL expression gives its message.  The evaluation runs in an
 * internal subtransaction that is always rolled back, so explain is a dry
 * run even for expressions with side effects (df.setvar, df.start): nothing
 * they did survives.  Query cancel and shutdown are re-thrown, not turned
 * into text.
 *
 * Locks: none of its own (the live form only reads); the evaluated expression takes whatever locks its
 * functions take, released when the subtransaction rolls back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "common/messages.h"
#include "common/spi.h"
#include "monitor/explain.h"
#include "graph/graph.h"
#include "graph/loop_config.h"
#include "common/json.h"
#include "monitor/monitor.h"
#include "results/results.h"

/* Statement keywords that make an input a plain SQL step. */
static const char *const sql_keywords[] = {
	"SELECT",	  "INSERT",		"UPDATE",	"DELETE",	 "WITH",	"VALUES",
	"TABLE",	  "CALL",		"DO",		"MERGE",	 "COPY",	"CREATE",
	"ALTER",	  "DROP",		"TRUNCATE", "GRANT",	 "REVOKE",	"COMMENT",
	"SECURITY",	  "EXPLAIN",	"ANALYZE",	"ANALYSE",	 "VACUUM",	"CLUSTER",
	"REINDEX",	  "REFRESH",	"LOCK",		"NOTIFY",	 "LISTEN",	"UNLISTEN",
	"SET",		  "RESET",		"SHOW",		"DISCARD",	 "IMPORT",	"LOAD",
	"CHECKPOINT", "DECLARE",	"FETCH",	"MOVE",		 "CLOSE",	"PREPARE",
	"EXECUTE",	  "DEALLOCATE", "REASSIGN", "SAVEPOINT", "RELEASE", "ROLLBACK",
	"COMMIT",	  "BEGIN",		"START",	"END",		 "ABORT"};

#define EXPLAIN_ACCEPTS \
	"expected an instance id (8 lowercase hex characters), Durofut JSON, " \
	"a DSL expression (using ~>, |=>, ?>, !>, @> or df.) or a SQL statement"

static char *explain_text(const char *input, bool allow_eval);

/* df.explain(…, format => 'dot'): the graphs of this call as Graphviz text */
static bool want_dot = false;

/* A dry graph in the format asked for. */
static char *
render(const DfNode *root)
{
	return want_dot ? df_explain_dot(root, NULL, NULL, NULL) :
					  df_explain_graph(root, NULL, NULL);
}

static bool
is_instance_id(const char *s)
{
	int i;

	for (i = 0; i < 8; i++)
	{
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return s[8] == '\0';
}

static bool
is_ident_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '$' || IS_HIGHBIT_SET(c);
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
		c == '\v';
}

/* Does the input start with a SQL statement keyword (as a whole word)? */
static bool
starts_with_sql_keyword(const char *s)
{
	const char *end;
	int			i;

	while (is_space(*s))
		s++;
	for (end = s; is_ident_char(*end); end++)
		;
	if (end == s || is_ident_char(*end))
		return false;
	for (i = 0; i < lengthof(sql_keywords); i++)
	{
		if (strlen(sql_keywords[i]) == (size_t) (end - s) &&
			pg_strncasecmp(s, sql_keywords[i], end - s) == 0)
			return true;
	}
	return false;
}

/* Does the input use a DSL operator or a df. function? */
static bool
looks_like_dsl(const char *s)
{
	const char *p;

	if (strstr(s, "~>") || strstr(s, "|=>") || strstr(s, "?>") ||
		strstr(s, "!>") || strstr(s, "@>"))
		return true;
	for (p = strstr(s, "df."); p != NULL; p = strstr(p + 1, "df."))
	{
		if (p == s || !is_ident_char(p[-1]))
			return true;
	}
	return false;
}

/*
 * Evaluate "SELECT <input>" in a subtransaction that is rolled back
 * whatever happens.  Returns the single text value (NULL if it was SQL
 * NULL) or sets *error to a message.
 */
static char *
eval_dsl(const char *input, char **error)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char *volatile result = NULL;
	char *query = psprintf("SELECT %s", input);

	*error = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		SPIPlanPtr plan;
		int		   rc;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		plan = SPI_prepare(query, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s",
				 SPI_result_code_string(SPI_result));
		if (list_length(SPI_plan_get_plan_sources(plan)) != 1)
			*error =
				MemoryContextStrdup(oldcxt,
									"a DSL expression must be a single expression, not several statements");
		else
		{
			rc = SPI_execute_plan(plan, NULL, NULL, false, 2);
			if (rc != SPI_OK_SELECT)
				*error =
					MemoryContextStrdup(oldcxt,
										"the DSL expression did not produce a value");
			else if (SPI_processed != 1)
				*error =
					MemoryContextStrdup(oldcxt,
										psprintf("the DSL expression returned " UINT64_FORMAT
												 " rows instead of one",
												 (uint64) SPI_processed));
			else if (SPI_tuptable->tupdesc->natts != 1)
				*error =
					MemoryContextStrdup(oldcxt,
										psprintf("the DSL expression returned %d columns instead of one",
												 SPI_tuptable->tupdesc
													 ->natts));
			else
			{
				char *v = SPI_getvalue(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1);

				if (v != NULL)
					result = MemoryContextStrdup(oldcxt, v);
			}
		}
		/* SPI's memory, with everything allocated above, goes away here */
		SPI_finish();

		/* a dry run: undo whatever the expression did */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData *edata = pgd_subxact_caught(oldcxt, oldowner);

		/* a cancel or a shutdown is not the expression's error */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_CRASH_SHUTDOWN)
			ReThrowError(edata);

		*error = psprintf("evaluating it as a DSL expression failed: %s",
						  edata->message ? edata->message : "unknown error");
		FreeErrorData(edata);
		result = NULL;
	}
	PG_END_TRY();

	pfree(query);
	return result;
}

/* Is this the object ?> returns, waiting for its !> else branch? */
static bool
is_partial_if(const char *text)
{
	DfJson *json;
	char   *err;

	if (strstr(text, "\"_partial_if\"") == NULL)
		return false;
	json = dfjson_parse(text, strlen(text), &err);
	return json != NULL && dfjson_get(json, "_partial_if") != NULL;
}

/* Icon of a node's inferred status or an instance's status. */
static const char *
status_icon(const char *status)
{
	if (status == NULL)
		return "?";
	if (strcmp(status, "completed") == 0)
		return "✓";
	if (strcmp(status, "failed") == 0)
		return "✗";
	if (strcmp(status, "running") == 0)
		return "⏳";
	if (strcmp(status, "pending") == 0)
		return "○";
	if (strcmp(status, "skipped") == 0 || strcmp(status, "cancelled") == 0)
		return "⊘";
	if (strcmp(status, "compensated") == 0)
		return "↶";
	return "?";
}

/* The rows of a live instance and the DfNode built for each (same index). */
typedef struct LiveTree
{
	PgdInstanceView *view;
	DfNode			*nodes;
	bool			*used;
} LiveTree;

static const char *
live_marker(const DfNode *node, void *arg)
{
	LiveTree   *lt = (LiveTree *) arg;
	const char *status = lt->view->nodes[node - lt->nodes].inferred;

	/* a saga step whose undo ran: compensated */
	if (node->type == DF_NODE_COMPENSATED && node->right != NULL &&
		status != NULL && strcmp(status, "completed") == 0)
	{
		const char *undo = lt->view->nodes[node->right - lt->nodes].inferred;

		if (undo != NULL && strcmp(undo, "completed") == 0)
			return "↶";
	}
	/* a SAGA whose undos all ran (its compensation, without failures) */
	if (node->type == DF_NODE_SAGA && status != NULL &&
		(strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0))
	{
		const char *details = lt->view->nodes[node - lt->nodes].status_details;
		char	   *err = NULL;
		DfJson	   *d =
			details ? dfjson_parse(details, strlen(details), &err) : NULL;
		DfJson *c = d ? dfjson_get(d, "compensation") : NULL;

		if (c != NULL && c->type == DFJ_OBJECT &&
			dfjson_get(c, "failures") == NULL)
			return "↶";
	}
	return status_icon(status);
}

static const char *
live_status(const DfNode *node, void *arg)
{
	LiveTree *lt = (LiveTree *) arg;

	return lt->view->nodes[node - lt->nodes].inferred;
}

/*
 * The DfNode tree of row i and below, in the form df.explain renders (the
 * links the persisted form keeps in query become children again).  A row
 * already placed is not placed twice, so hand-made cycles end; what they
 * break, df_graph_validate reports.
 */
static DfNode *
live_node(LiveTree *lt, int i)
{
	PgdNodeRow *r;
	DfNode	   *node;
	int			k;

	if (i < 0 || lt->used[i])
		return NULL;
	check_stack_depth();
	lt->used[i] = true;
	r = &lt->view->nodes[i];
	node = &lt->nodes[i];
	node->type = r->type;
	node->query = r->query;
	node->result_name = r->result_name;
	node->left = live_node(lt, r->left);
	node->right = live_node(lt, r->right);
	node->condition = live_node(lt, r->condition);
	if (r->type == DF_NODE_LOOP)
	{
		DfLoopConfig loop;

		/* the settings without the condition_node link */
		(void) df_loop_parse(r->query, true, &loop);
		node->query = df_loop_query(&loop);
	}
	else if (r->condition >= 0 && r->type == DF_NODE_IF)
		node->query = NULL; /* it only held {"condition_node": ...} */
	if (r->nextras > 0)
	{
		node->extras = palloc(sizeof(DfNode *) * r->nextras);
		for (k = 0; k < r->nextras; k++)
		{
			DfNode *e = live_node(lt, r->extras[k]);

			if (e != NULL)
				node->extras[node->nextras++] = e;
		}
		node->query = NULL; /* it only held {"extra_nodes": [...]} */
	}
	return node;
}

/* Append s with whitespace runs collapsed, cut to max bytes ("..." after keep). */
static void
append_clipped_line(StringInfo buf, const char *s, int max, int keep)
{
	StringInfoData tmp;
	bool		   space = false;

	initStringInfo(&tmp);
	for (; *s; s++)
	{
		if (is_space(*s))
		{
			space = tmp.len > 0;
			continue;
		}
		if (space)
			appendStringInfoChar(&tmp, ' ');
		space = false;
		appendStringInfoChar(&tmp, *s);
	}
	if (tmp.len > max)
	{
		appendBinaryStringInfo(buf, tmp.data,
							   pg_mbcliplen(tmp.data, tmp.len, keep));
		appendStringInfoString(buf, "...");
	}
	else
		appendBinaryStringInfo(buf, tmp.data, tmp.len);
	pfree(tmp.data);
}

#define EXPLAIN_OUTPUT_MAX	200
#define EXPLAIN_OUTPUT_KEEP 197

/*
 * The live form: a header (id and label, status, output if any), a blank
 * line, then the tree with the inferred status of each node as a marker.
 * An instance the caller cannot see is "not found", like one that does not
 * exist.
 */
static char *
explain_instance(const char *id)
{
	PgdInstanceView *v = pgd_load_instance_view(id);
	LiveTree		 lt;
	DfNode			*root;
	char			*problem;
	StringInfoData	 buf;

	if (v == NULL)
		return psprintf(PGD_MSG_EXPLAIN_NOT_FOUND, id);

	initStringInfo(&buf);
	appendStringInfo(&buf, "Instance: %s", v->id);
	if (v->label != NULL)
	{
		appendStringInfoString(&buf, " (");
		append_clipped_line(&buf, v->label, EXPLAIN_OUTPUT_MAX,
							EXPLAIN_OUTPUT_KEEP);
		appendStringInfoChar(&buf, ')');
	}
	appendStringInfo(&buf, "\nStatus:   %s %s", status_icon(v->status),
					 v->status ? v->status : "unknown");
	if (v->output != NULL)
	{
		appendStringInfoString(&buf, "\nOutput: ");
		append_clipped_line(&buf, v->output, EXPLAIN_OUTPUT_MAX,
							EXPLAIN_OUTPUT_KEEP);
	}
	appendStringInfoString(&buf, "\n\n");

	lt.view = v;
	lt.nodes = palloc0(sizeof(DfNode) * Max(v->nnodes, 1));
	lt.used = palloc0(sizeof(bool) * Max(v->nnodes, 1));
	root = live_node(&lt, v->root);
	if (root == NULL)
	{
		appendStringInfo(&buf, "(root node %s is missing)",
						 v->root_id ? v->root_id : "?");
		return buf.data;
	}
	problem = df_graph_validate(root);
	if (problem != NULL)
	{
		appendStringInfo(&buf, "(the stored graph cannot be shown: %s)",
						 problem);
		return buf.data;
	}
	/* a MAP shows how many children it made and their states */
	for (int i = 0; i < v->nnodes; i++)
		if (lt.used[i] && lt.nodes[i].type == DF_NODE_MAP)
			lt.nodes[i].query = pgd_explain_map_config(v->id, v->nodes[i].id,
													   lt.nodes[i].query);

	if (want_dot)
	{
		/* the header becomes the picture's label */
		char *title = psprintf("%s%s%s%s: %s", v->id, v->label ? " (" : "",
							   v->label ? v->label : "", v->label ? ")" : "",
							   v->status ? v->status : "unknown");

		return df_explain_dot(root, live_status, &lt, title);
	}
	appendStringInfoString(&buf, df_explain_graph(root, live_marker, &lt));
	return buf.data;
}

/*
 * Where the unknown node_type was: the parser says "Unknown node_type 'X' at
 * root.left. Valid types: ..." below the root and leaves the path out at the
 * root.
 */
static const char *
unknown_type_path(const DfParseResult *pr)
{
	const char *at = pr->errmsg ? strstr(pr->errmsg, "' at root") : NULL;
	const char *end;

	if (at == NULL)
		return "root";
	at += strlen("' at ");
	end = strstr(at, ". Valid types");
	if (end == NULL)
		return "root";
	return pnstrdup(at, end - at);
}

static char *
explain_graph_text(const DfParseResult *pr)
{
	char *problem;

	switch (pr->status)
	{
		case DF_PARSE_OK:
			problem = df_graph_validate(pr->node);
			if (problem != NULL)
				return psprintf(PGD_MSG_INVALID_GRAPH, problem);
			return render(pr->node);

		case DF_PARSE_UNKNOWN_TYPE:
			return psprintf(PGD_MSG_INVALID_GRAPH,
							psprintf("%s: " PGD_MSG_UNKNOWN_NODE_TYPE,
									 unknown_type_path(pr), pr->type_name,
									 DF_VALID_NODE_TYPES));

		case DF_PARSE_MALFORMED:
			/* errmsg is already "<path>: <msg>" */
			return psprintf(PGD_MSG_INVALID_GRAPH, pr->errmsg);

		case DF_PARSE_BAD_JSON:
			return psprintf(PGD_MSG_INVALID_GRAPH,
							psprintf("root: " PGD_MSG_INVALID_DUROFUT_JSON,
									 pr->errmsg));

		case DF_PARSE_NOT_DUROFUT:
			break;
	}
	elog(ERROR, "unexpected Durofut parse status %d", (int) pr->status);
	return NULL; /* keep compiler quiet */
}

/*
 * Explain one input.  allow_eval is false for the text a DSL expression
 * produced, so that evaluation never recurses.
 */
static char *
explain_text(const char *input, bool allow_eval)
{
	DfParseResult pr;

	if (is_instance_id(input))
		return explain_instance(input);

	pr = df_graph_parse(input);
	if (pr.status == DF_PARSE_OK)
		pgd_notice_unmatched_references("df.explain", pr.node);
	if (pr.status != DF_PARSE_NOT_DUROFUT)
		return explain_graph_text(&pr);

	if (starts_with_sql_keyword(input))
	{
		DfNode *node = df_node_new(DF_NODE_SQL);

		node->query = pstrdup(input);
		pgd_notice_unmatched_references("df.explain", node);
		return render(node);
	}

	if (allow_eval && looks_like_dsl(input))
	{
		char *error;
		char *value = eval_dsl(input, &error);

		if (error != NULL)
			return psprintf(PGD_MSG_CANNOT_EXPLAIN, error);
		if (value == NULL)
			return psprintf(PGD_MSG_CANNOT_EXPLAIN,
							"the DSL expression returned NULL");
		if (is_partial_if(value))
			return psprintf(PGD_MSG_CANNOT_EXPLAIN,
							"incomplete if-then-else: ?> must be completed with !> (else branch)");
		return explain_text(value, false);
	}

	if (!allow_eval)
		return psprintf(PGD_MSG_CANNOT_EXPLAIN,
						"the DSL expression returned text that is neither Durofut JSON nor SQL");
	return psprintf(PGD_MSG_CANNOT_EXPLAIN, EXPLAIN_ACCEPTS);
}

static text *
explain_in_format(const char *input, bool dot)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	char		 *result = NULL;
	text		 *out;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "df.explain",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	want_dot = dot;
	PG_TRY();
	{
		result = explain_text(input, true);
	}
	PG_FINALLY();
	{
		want_dot = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);

	out = cstring_to_text(result);
	MemoryContextDelete(cxt);
	return out;
}

PG_FUNCTION_INFO_V1(pgd_explain);

/*
 * df.explain(input text) -> text
 */
Datum
pgd_explain(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(explain_in_format(text_to_cstring(PG_GETARG_TEXT_PP(0)),
									   false));
}

PG_FUNCTION_INFO_V1(pgd_explain_format);

/*
 * df.explain(input text, format text) -> text: format 'text' (the tree of
 * df.explain(input)) or 'dot' (Graphviz, explain_dot.c).
 */
Datum
pgd_explain_format(PG_FUNCTION_ARGS)
{
	char *format = text_to_cstring(PG_GETARG_TEXT_PP(1));

	if (pg_strcasecmp(format, "text") != 0 &&
		pg_strcasecmp(format, "dot") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("df.explain: unknown format \"%s\"", format),
				 errhint("Use format => 'text' (the default) or format => 'dot' (Graphviz).")));
	PG_RETURN_TEXT_P(explain_in_format(text_to_cstring(PG_GETARG_TEXT_PP(0)),
									   pg_strcasecmp(format, "dot") == 0));
}
