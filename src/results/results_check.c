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
 * Locks: none; pure functions of the graph.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "graph/graph.h"
#include "results/results.h"

#define IS_NAME_CHAR(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || \
	 (c) == '_' || ((c) >= '0' && (c) <= '9') || (unsigned char) (c) >= 0x80)

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

static void
check_tree(const char *func, const DfNode *n, const char *path,
		   const KnownNames *known)
{
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (n == NULL)
		return;
	if (n->type == DF_NODE_SQL && n->query != NULL)
		check_sql(func, n->query, path, known);
	if (n->left)
		check_tree(func, n->left, psprintf("%s.left", path), known);
	if (n->right)
		check_tree(func, n->right, psprintf("%s.right", path), known);
	if (n->condition)
		check_tree(func, n->condition, psprintf("%s.condition_node", path),
				   known);
	for (int i = 0; i < n->nextras; i++)
		check_tree(func, n->extras[i], psprintf("%s.extra_nodes[%d]", path, i),
				   known);
}

void
pgd_check_workflow_references(const char *func, const DfNode *root,
							  const char *sql, bool subscription)
{
	KnownNames known = {NIL, NULL, 0, subscription, false, false, false};
	ListCell  *lc;

	if (root == NULL)
	{
		if (sql != NULL && strchr(sql, '$') != NULL)
			check_sql(func, sql, "root", &known);
		return;
	}
	collect_names(root, &known);
	known.count = list_length(known.names);
	known.sorted = palloc(sizeof(char *) * Max(known.count, 1));
	known.count = 0;
	foreach(lc, known.names)
		known.sorted[known.count++] = lfirst(lc);
	qsort(known.sorted, known.count, sizeof(char *), name_cmp);
	check_tree(func, root, "root", &known);
	list_free(known.names);
	pfree(known.sorted);
}
