/*-------------------------------------------------------------------------
 *
 * infer.c
 *	  The inferred status of each node of an instance (reference §1.5): what
 *	  df.instance_nodes shows as inferred_status and what the live form of
 *	  df.explain marks each node with.
 *
 * The physical status of a node (df.nodes.status) is the last thing the
 * engine wrote to it, in whichever execution scope ran it last.  Once a
 * loop has moved on, a race has been decided or a sequence has failed,
 * that is misleading: a node of an earlier loop iteration still says
 * "completed", the loser of a race still says "running", the right side of
 * a failed sequence still says "pending".  The inferred status corrects
 * that, from the rows alone:
 *
 *	 1. A stamp "<instance>::<g1>::<id1>::<g2>::...::<gk>" belongs to k
 *		scopes, one per level: "<instance>" with generation g1,
 *		"<instance>::<g1>::<id1>" with g2, and so on.  Per scope, the
 *		highest generation seen in any stamp is the current one.  A stamp
 *		is superseded if, at any level, its generation is below that scope's
 *		current one (which covers "its spawning parent generation is
 *		superseded").  A node without a stamp, or with one that does not
 *		parse, is never superseded.
 *	 2. Walk from the root (THEN/RACE: left, right; JOIN: left, right,
 *		extras; IF: condition, then, else; LOOP: body, condition), carrying
 *		the nearest ancestor that is terminal (completed/failed) and
 *		current:
 *		  terminal and current	   keeps its status, and is that ancestor
 *								   for its subtree;
 *		  terminal, superseded	   "skipped" below such an ancestor, else
 *								   "pending" (it will run again);
 *		  not terminal			   "skipped" below such an ancestor, else
 *								   its physical status (running/pending;
 *								   "skipped" for cancelled).
 *		inferred_status_from_ancestor_id names the ancestor for "skipped".
 *	 3. An instance that has ended runs nothing more: a node still shown
 *		"running" or "pending" after the walk is "skipped", with no
 *		ancestor.  The engine's end turns the nodes it stops from "running"
 *		into "cancelled" (the reference's engine left them "running",
 *		docs/compatibility.md), which infers "skipped" as before; rows
 *		written before that, and the nodes of an instance that failed when
 *		it was loaded (they stay "pending"), are what this step is for.
 *
 * Rows the walk does not reach (only possible in rows written by hand)
 * keep their physical status ("skipped" for "cancelled").  Each row is visited at most once, so even
 * hand-made cycles end.
 *
 * Locks: none; a pure function of its input.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "monitor/monitor.h"

typedef struct ScopeGen
{
	char *key; /* the scope, e.g. "ab12cd34::1::0f0f0f0f" */
	int64 gen;
} ScopeGen;

typedef struct InferState
{
	PgdInstanceView *view;
	ScopeGen		*scopes; /* sorted by key, one entry per scope */
	int				 nscopes;
	bool			*visited;
} InferState;

static int
scopegen_cmp(const void *a, const void *b)
{
	return strcmp(((const ScopeGen *) a)->key, ((const ScopeGen *) b)->key);
}

/*
 * Split a stamp into its levels: keys[j] is the scope of level j, gens[j]
 * its generation.  Returns the number of levels, 0 if the stamp does not
 * have the form "<id>::<gen>(::<id>::<gen>)*".
 */
static int
parse_stamp(const char *stamp, char ***keys, int64 **gens)
{
	int			nseps = 0;
	int			nlevels;
	const char *p;
	int			level = 0;
	bool		want_gen = false;
	const char *start = stamp;

	for (p = stamp; (p = strstr(p, "::")) != NULL; p += 2)
		nseps++;
	/* id::gen has one separator; each further level adds two */
	if (nseps == 0 || nseps % 2 == 0)
		return 0;
	nlevels = (nseps + 1) / 2;
	*keys = palloc(sizeof(char *) * nlevels);
	*gens = palloc(sizeof(int64) * nlevels);

	/* walk the components: id, gen, id, gen, ... */
	p = stamp;
	for (;;)
	{
		const char *sep = strstr(p, "::");
		const char *end = sep ? sep : p + strlen(p);

		if (end == p)
			return 0; /* empty component */
		if (want_gen)
		{
			int64		g = 0;
			const char *c;

			if (end - p > 18)
				return 0;
			for (c = p; c < end; c++)
			{
				if (*c < '0' || *c > '9')
					return 0;
				g = g * 10 + (*c - '0');
			}
			/* the scope is everything before this generation */
			(*keys)[level] = pnstrdup(start, (p - 2) - start);
			(*gens)[level] = g;
			level++;
		}
		want_gen = !want_gen;
		if (sep == NULL)
			break;
		p = sep + 2;
	}
	return level == nlevels ? nlevels : 0;
}

static int64
current_gen(InferState *st, const char *key)
{
	ScopeGen  probe;
	ScopeGen *found;

	probe.key = (char *) key;
	found = bsearch(&probe, st->scopes, st->nscopes, sizeof(ScopeGen),
					scopegen_cmp);
	return found ? found->gen : 0;
}

/* Collect the current generation of every scope named by any stamp. */
static void
collect_scopes(InferState *st)
{
	PgdInstanceView *v = st->view;
	int				 cap = 16;
	int				 n = 0;
	int				 i, j;

	st->scopes = palloc(sizeof(ScopeGen) * cap);
	for (i = 0; i < v->nnodes; i++)
	{
		char **keys;
		int64 *gens;
		int	   nlevels;

		if (v->nodes[i].stamp == NULL)
			continue;
		nlevels = parse_stamp(v->nodes[i].stamp, &keys, &gens);
		for (j = 0; j < nlevels; j++)
		{
			if (n == cap)
				st->scopes =
					repalloc(st->scopes, sizeof(ScopeGen) * (cap *= 2));
			st->scopes[n].key = keys[j];
			st->scopes[n].gen = gens[j];
			n++;
		}
	}
	if (n > 1)
		qsort(st->scopes, n, sizeof(ScopeGen), scopegen_cmp);

	/* keep one entry per scope, with its highest generation */
	st->nscopes = 0;
	for (i = 0; i < n; i++)
	{
		if (st->nscopes > 0 &&
			strcmp(st->scopes[st->nscopes - 1].key, st->scopes[i].key) == 0)
		{
			if (st->scopes[i].gen > st->scopes[st->nscopes - 1].gen)
				st->scopes[st->nscopes - 1].gen = st->scopes[i].gen;
			continue;
		}
		st->scopes[st->nscopes++] = st->scopes[i];
	}
}

static bool
is_superseded(InferState *st, const char *stamp)
{
	char **keys;
	int64 *gens;
	int	   nlevels;
	int	   j;

	if (stamp == NULL)
		return false;
	nlevels = parse_stamp(stamp, &keys, &gens);
	for (j = 0; j < nlevels; j++)
	{
		if (gens[j] < current_gen(st, keys[j]))
			return true;
	}
	return false;
}

static bool
is_terminal(const char *status)
{
	return status != NULL &&
		(strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0);
}

static void
visit(InferState *st, int i, int ancestor)
{
	PgdInstanceView *v = st->view;
	PgdNodeRow		*row;
	int				 below = ancestor;
	int				 k;

	if (i < 0 || st->visited[i])
		return;
	check_stack_depth();
	st->visited[i] = true;
	v->order[v->norder++] = i;
	row = &v->nodes[i];
	row->from_ancestor = -1;

	if (is_terminal(row->status) && !is_superseded(st, row->stamp))
	{
		row->inferred = row->status;
		below = i;
	}
	else if (ancestor >= 0)
	{
		row->inferred = "skipped";
		row->from_ancestor = ancestor;
	}
	else if (is_terminal(row->status))
		row->inferred = "pending"; /* of an earlier generation: runs again */
	else if (row->status != NULL && strcmp(row->status, "running") == 0)
		row->inferred = "running";
	else if (row->status != NULL && strcmp(row->status, "cancelled") == 0)
		row->inferred = "skipped";
	else
		row->inferred = "pending";

	switch (row->type)
	{
		case DF_NODE_IF:
			visit(st, row->condition, below);
			visit(st, row->left, below);
			visit(st, row->right, below);
			break;
		case DF_NODE_LOOP:
			visit(st, row->left, below);
			visit(st, row->condition, below);
			break;
		default:
			/* THEN, RACE, JOIN (then its extras); leaves have no links */
			visit(st, row->left, below);
			visit(st, row->right, below);
			for (k = 0; k < row->nextras; k++)
				visit(st, row->extras[k], below);
			break;
	}
}

void
pgd_infer_statuses(PgdInstanceView *view)
{
	InferState st;
	int		   i;

	st.view = view;
	st.visited = palloc0(sizeof(bool) * Max(view->nnodes, 1));
	view->order = palloc(sizeof(int) * Max(view->nnodes, 1));
	view->norder = 0;
	collect_scopes(&st);

	for (i = 0; i < view->nnodes; i++)
	{
		/* what a row the walk does not reach shows */
		view->nodes[i].inferred =
			view->nodes[i].status == NULL ? "pending" :
			strcmp(view->nodes[i].status, "cancelled") == 0 ?
											"skipped" :
											view->nodes[i].status;
		view->nodes[i].from_ancestor = -1;
	}
	visit(&st, view->root, -1);

	if (view->status != NULL &&
		(strcmp(view->status, "cancelled") == 0 ||
		 strcmp(view->status, "compensated") == 0 || is_terminal(view->status)))
		for (i = 0; i < view->nnodes; i++)
		{
			const char *s = view->nodes[i].inferred;

			if (strcmp(s, "running") == 0 || strcmp(s, "pending") == 0)
			{
				view->nodes[i].inferred = "skipped";
				view->nodes[i].from_ancestor = -1;
			}
		}

	/* unreachable rows last, in id order as loaded */
	for (i = 0; i < view->nnodes; i++)
		if (!st.visited[i])
			view->order[view->norder++] = i;
}
