/*-------------------------------------------------------------------------
 *
 * results_check.c
 *	  Before a workflow starts (df.start) or is kept to be started later
 *	  (df.subscribe): refuse it when one of its SQL steps has a reference
 *	  it can bind standing where a value cannot be substituted, inside a
 *	  string literal, a quoted identifier, a dollar-quoted string or a
 *	  comment (results_lex.c says where), so that the author learns it at
 *	  once instead of from a failed step.
 *
 * The names a workflow can bind: the names its nodes give their results
 * (|=>, df.as); event, when it is a subscription's workflow (df.subscribe
 * checks it so; the subscription binds $event in the root scope of every
 * instance it starts, which df.start cannot tell from any other start);
 * item under a MAP, error under a CATCH and lock under a LOCK, when the
 * graph has one.  Any other $x is not a reference and stays as written
 * wherever it stands ('price: $5', 'cost: $total' without a result named
 * total).  The check reads the step's text as written; {variables} are
 * substituted only when the step runs, and the substituter makes the same
 * check on the text it then has.
 *
 * Keys and payloads (lock and limit keys, idempotency keys, PUBLISH keys
 * and payloads) substitute strictly when they run (results_subst.c): a
 * reference there that cannot resolve fails the node.  df.start refuses
 * the workflow at once when it can already tell: a $name no step of the
 * workflow names (not the optional $name?), a {variable} the starting
 * role has not set.
 *
 * In SQL and HTTP text a $name that names no result stays as written,
 * 0.2.6's rule ($1, $$ and prices are text there); df.start, df.subscribe
 * and df.explain say so in a NOTICE for each such name that stands in code,
 * because it is most often a typo.
 *
 * pgd_check_workflow makes the three checks, over one set of the names the
 * workflow binds; pgd_notice_unmatched_references only the last.
 *
 * Locks: none; pure functions of the graph (the variables are asked of
 * the caller's callback).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "common/json.h"
#include "graph/graph.h"
#include "results/results.h"

#define IS_NAME_CHAR(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || \
	 (c) == '_' || ((c) >= '0' && (c) <= '9') || (unsigned char) (c) >= 0x80)
/* the first character of a name substitution reads (results_subst.c) */
#define IS_NAME_START(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || (c) == '_')

typedef struct KnownNames
{
	List		*names;	 /* of char *, the result names */
	const char **sorted; /* the same, sorted for bsearch */
	int			 count;
	bool		 has_event;
	bool		 has_map;
	bool		 has_catch;
	bool		 has_lock;
} KnownNames;

static void
collect_names(const DfNode *n, KnownNames *known)
{
	check_stack_depth();
	if (n == NULL)
		return;
	if (n->result_name != NULL && df_is_valid_result_name(n->result_name))
		known->names = lappend(known->names, n->result_name);
	if (n->type == DF_NODE_MAP)
		known->has_map = true;
	else if (n->type == DF_NODE_CATCH)
		known->has_catch = true;
	else if (n->type == DF_NODE_LOCK)
		known->has_lock = true;
	collect_names(n->left, known);
	collect_names(n->right, known);
	collect_names(n->condition, known);
	for (int i = 0; i < n->nextras; i++)
		collect_names(n->extras[i], known);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static bool
is_known(const KnownNames *known, const char *name, int len)
{
	char *key = pnstrdup(name, len);
	bool  found;

	found = (known->has_event && strcmp(key, "event") == 0) ||
		(known->has_map && strcmp(key, "item") == 0) ||
		(known->has_catch && strcmp(key, "error") == 0) ||
		(known->has_lock && strcmp(key, "lock") == 0) ||
		(known->count > 0 &&
		 bsearch(&key, known->sorted, known->count, sizeof(char *),
				 name_cmp) != NULL);
	pfree(key);
	return found;
}

/* The end of the reference whose name ends at q ($n, $n.c, $n?, $n.*). */
static const char *
reference_end(const char *q)
{
	if (q[0] == '.' && q[1] == '*')
		return q + 2;
	if (q[0] == '.' && IS_NAME_CHAR(q[1]))
		for (q++; IS_NAME_CHAR(*q); q++)
			;
	if (*q == '?')
		q++;
	return q;
}

static void
check_sql(const char *func, const char *sql, const char *path,
		  const KnownNames *known)
{
	PgdSqlScan scan = {0};
	bool	   scanned = false;

	for (const char *d = strchr(sql, '$'); d != NULL; d = strchr(d + 1, '$'))
	{
		const char	 *q;
		PgdRefProblem problem;

		for (q = d + 1; IS_NAME_CHAR(*q); q++)
			;
		if (q == d + 1 || !is_known(known, d + 1, q - d - 1))
			continue;
		if (!scanned)
		{
			pgd_sql_scan(&scan, sql);
			scanned = true;
		}
		if (pgd_sql_reference_problem(&scan, d - sql, reference_end(q) - d,
									  psprintf("the SQL step at %s", path),
									  &problem))
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("%s: %s", func, problem.message),
					 errdetail("%s", problem.detail),
					 errhint("%s", problem.hint)));
	}
	if (scanned)
		pgd_sql_scan_free(&scan);
}

typedef struct WorkflowCheck
{
	const char		*func;
	KnownNames		 known;
	PgdVarIsSet		 var_is_set; /* NULL: variables are not known yet */
	void			*arg;
	List			*unmatched; /* of char *, the $names no result matches */
} WorkflowCheck;

static void
check_node_references(const DfNode *n, const char *path, void *arg)
{
	WorkflowCheck *wc = arg;

	if (n->type == DF_NODE_SQL && n->query != NULL)
		check_sql(wc->func, n->query, path, &wc->known);
}

static void
known_names(const DfNode *root, bool subscription, KnownNames *known)
{
	ListCell *lc;

	memset(known, 0, sizeof(*known));
	known->has_event = subscription;
	collect_names(root, known);
	known->sorted = palloc(sizeof(char *) * Max(list_length(known->names), 1));
	foreach(lc, known->names)
		known->sorted[known->count++] = lfirst(lc);
	qsort(known->sorted, known->count, sizeof(char *), name_cmp);
}

/* ---------------------------------------------------------------------
 * Keys and payloads, at df.start
 * ---------------------------------------------------------------------
 */

static void
check_template(const WorkflowCheck *tc, const char *what, const char *path,
			   const char *text)
{
	if (text == NULL)
		return;
	for (const char *p = strchr(text, '{'); p != NULL; p = strchr(p + 1, '{'))
	{
		const char *q = p + 1;
		char	   *name;

		if (tc->var_is_set == NULL || !IS_NAME_START(*q))
			continue;
		while (IS_NAME_CHAR(*q))
			q++;
		if (*q != '}')
			continue;
		name = pnstrdup(p + 1, q - p - 1);
		/* the engine's own (sys_instance_id, sys_label, the trace's) */
		if (strncmp(name, "sys_", 4) != 0 && !tc->var_is_set(name, tc->arg))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("%s: variable \"%s\" is not set, and %s at %s substitutes {%s}",
							tc->func, name, what, path, name),
					 errdetail("A key or payload never keeps an unresolved {variable} as text."),
					 errhint("Set it with df.setvar('%s', …) before df.start.", name)));
	}
	for (const char *d = strchr(text, '$'); d != NULL; d = strchr(d + 1, '$'))
	{
		const char *q;
		const char *end;

		if (!IS_NAME_START(d[1]))
			continue;
		for (q = d + 1; IS_NAME_CHAR(*q); q++)
			;
		end = reference_end(q);
		if (end[-1] == '?' || is_known(&tc->known, d + 1, q - d - 1))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s: $%.*s matches no result of the workflow, and %s at %s substitutes it",
						tc->func, (int) (q - d - 1), d + 1, what, path),
				 errdetail("A key or payload never keeps an unresolved reference as text."),
				 errhint("Name the step whose result it is with |=> '%.*s' (or df.as), or write $%.*s? for an optional one.",
						 (int) (q - d - 1), d + 1, (int) (q - d - 1), d + 1)));
	}
}

/* The string at key of the node's settings, or NULL. */
static const char *
setting(const DfJson *cfg, const char *key)
{
	const DfJson *v = cfg ? dfjson_get(cfg, key) : NULL;

	return v != NULL && v->type == DFJ_STRING ? v->str : NULL;
}

static void
check_node_templates(const DfNode *n, const char *path, void *arg)
{
	WorkflowCheck *tc = arg;
	DfJson		  *cfg = NULL;
	char		  *err = NULL;

	if (n->query != NULL &&
		(n->type == DF_NODE_LOCK || n->type == DF_NODE_LIMIT ||
		 n->type == DF_NODE_PUBLISH ||
		 (n->type == DF_NODE_HTTP && strstr(n->query, "idempotency_key") != NULL)))
		cfg = dfjson_parse(n->query, strlen(n->query), &err);
	if (cfg != NULL && cfg->type == DFJ_OBJECT)
	{
		const DfJson *keys = dfjson_get(cfg, "keys");

		if (n->type == DF_NODE_LOCK && keys != NULL && keys->type == DFJ_ARRAY)
			for (int i = 0; i < keys->count; i++)
				if (keys->items[i]->type == DFJ_STRING)
					check_template(tc, psprintf("lock key %d", i + 1), path,
								   keys->items[i]->str);
		if (n->type == DF_NODE_LIMIT)
			check_template(tc, "the limit key", path, setting(cfg, "key"));
		if (n->type == DF_NODE_HTTP)
			check_template(tc, "the idempotency key", path,
						   setting(cfg, "idempotency_key"));
		if (n->type == DF_NODE_PUBLISH)
		{
			check_template(tc, "the event key", path, setting(cfg, "key"));
			check_template(tc, "the event payload", path, setting(cfg, "payload"));
		}
	}
}

/* ---------------------------------------------------------------------
 * $names that match no result, in SQL and HTTP text
 * ---------------------------------------------------------------------
 */

/* Add to *names each $name of text in code that names no result. */
static void
unmatched_in(const char *text, bool sql, const KnownNames *known, List **names)
{
	PgdSqlScan scan = {0};
	bool	   scanned = false;

	for (const char *d = strchr(text, '$'); d != NULL; d = strchr(d + 1, '$'))
	{
		const char	 *q;
		char		 *name;
		ListCell	 *lc;
		bool		  seen = false;
		PgdRefProblem problem;

		/* $1, $$, a$b (an identifier), $tag$ (a dollar quote) are SQL's */
		if (!IS_NAME_START(d[1]) || (d > text && IS_NAME_CHAR(d[-1])))
			continue;
		for (q = d + 1; IS_NAME_CHAR(*q); q++)
			;
		if (*q == '$' || is_known(known, d + 1, q - d - 1))
			continue;
		name = pnstrdup(d + 1, q - d - 1);
		/* bound by the nodes that have them, in workflows that have them */
		if (strcmp(name, "event") == 0 || strcmp(name, "item") == 0 ||
			strcmp(name, "error") == 0 || strcmp(name, "lock") == 0)
			continue;
		if (sql)
		{
			/* inside a literal or a comment it is text, as the user meant */
			if (!scanned)
			{
				pgd_sql_scan(&scan, text);
				scanned = true;
			}
			if (pgd_sql_reference_problem(&scan, d - text, q - d, NULL, &problem))
				continue;
		}
		foreach(lc, *names)
			if (strcmp(lfirst(lc), name) == 0)
				seen = true;
		if (!seen)
			*names = lappend(*names, name);
	}
	if (scanned)
		pgd_sql_scan_free(&scan);
}

static void
collect_unmatched(const DfNode *n, const char *path, void *arg)
{
	WorkflowCheck *wc = arg;

	if (n->query != NULL && strchr(n->query, '$') != NULL)
	{
		if (n->type == DF_NODE_SQL)
			unmatched_in(n->query, true, &wc->known, &wc->unmatched);
		else if (n->type == DF_NODE_HTTP || n->type == DF_NODE_HTTP_MULTIPART)
			unmatched_in(n->query, false, &wc->known, &wc->unmatched);
	}
}

static void
notice_unmatched(WorkflowCheck *wc, const DfNode *root)
{
	ListCell *lc;

	df_node_walk(root, NULL, collect_unmatched, wc);
	foreach(lc, wc->unmatched)
		ereport(NOTICE,
				(errmsg("%s: $%s matches no result of the workflow, so it is left as written",
						wc->func, (char *) lfirst(lc)),
				 errhint("Name the step whose result it is with |=> '%s' (or df.as) for $%s to be substituted.",
						 (char *) lfirst(lc), (char *) lfirst(lc))));
}

void
pgd_check_workflow(const char *func, const DfNode *root, bool subscription,
				   PgdVarIsSet var_is_set, void *arg)
{
	WorkflowCheck wc = {func};

	wc.var_is_set = var_is_set;
	wc.arg = arg;
	known_names(root, subscription, &wc.known);
	df_node_walk(root, "root", check_node_references, &wc);
	/*
	 * In keys and payloads $event always: a subscription binds it in the
	 * root scope of the instances it starts, through df.start like any
	 * other start (the NOTICE leaves $event alone as well).
	 */
	wc.known.has_event = true;
	df_node_walk(root, "root", check_node_templates, &wc);
	notice_unmatched(&wc, root);
}

void
pgd_notice_unmatched_references(const char *func, const DfNode *root)
{
	WorkflowCheck wc = {func};

	known_names(root, false, &wc.known);
	notice_unmatched(&wc, root);
}
