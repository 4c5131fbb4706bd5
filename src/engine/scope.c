/*-------------------------------------------------------------------------
 *
 * scope.c
 *	  Execution-scope arithmetic: names of the scopes that JOIN/RACE
 *	  branches and loop bodies run in, and the way back up (scope.h).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/scope.h"

char *
pgd_root_scope(const char *instance_id, int generation)
{
	return psprintf("%s::%d", instance_id, generation);
}

char *
pgd_branch_scope(const PgdGraph *g, int branch, const char *scope)
{
	return psprintf("%s::%s::1", scope, g->nodes[branch].id);
}

bool
pgd_opens_scope(const PgdGraph *g, int p)
{
	DfNodeType t = g->nodes[p].type;

	if (t == DF_NODE_RETRY)
		return g->nodes[p].wrapper != NULL &&
			g->nodes[p].wrapper_problem == NULL &&
			g->nodes[p].wrapper->retry.subtree;
	return t == DF_NODE_JOIN || t == DF_NODE_RACE || t == DF_NODE_TIMEOUT ||
		t == DF_NODE_MAP || /* the query and each item, as branches */
		t == DF_NODE_LOCK ||
		(t == DF_NODE_LOOP && !pgd_loop_moves_scope(g, p));
}

int
pgd_scope_depth(const char *scope)
{
	int			n = 0;
	const char *p = scope;

	while ((p = strstr(p, "::")) != NULL)
	{
		n++;
		p += 2;
	}
	return n;
}

char *
pgd_strip_scope(const char *scope)
{
	char *s = pstrdup(scope);
	int	  i;
	int	  seps = 0;

	for (i = strlen(s) - 1; i > 0; i--)
	{
		if (s[i] == ':' && s[i - 1] == ':')
		{
			if (++seps == 2)
			{
				s[i - 1] = '\0';
				return s;
			}
			i--;
		}
	}
	elog(ERROR, "malformed execution scope \"%s\"", scope);
	return NULL; /* keep compiler quiet */
}

char *
pgd_parent_scope(const PgdGraph *g, int node, const char *scope)
{
	int p = g->nodes[node].parent;

	if (p >= 0 && g->nodes[p].type == DF_NODE_SAGA)
		return g->nodes[p].left == node ? pgd_strip_scope(scope) :
										  pstrdup(scope);
	if (p >= 0 && pgd_opens_scope(g, p))
		return pgd_strip_scope(scope);
	return pstrdup(scope);
}

bool
pgd_is_root_loop(const PgdGraph *g, int loop)
{
	return g->nodes[loop].parent < 0;
}

bool
pgd_loop_moves_scope(const PgdGraph *g, int loop)
{
	int p = g->nodes[loop].parent;

	return p < 0 || g->nodes[p].type == DF_NODE_JOIN ||
		g->nodes[p].type == DF_NODE_RACE;
}

char *
pgd_loop_body_scope(const PgdGraph *g, int loop, const char *loop_scope,
					int gen)
{
	if (pgd_is_root_loop(g, loop))
		return pgd_root_scope(g->instance_id, gen);
	if (pgd_loop_moves_scope(g, loop))
	{
		/* the branch "<parent scope>::<loop id>::<gen>", at generation gen */
		char *s = pgd_strip_scope(loop_scope);

		return psprintf("%s::%s::%d", s, g->nodes[loop].id, gen);
	}
	return psprintf("%s::%s::%d", loop_scope, g->nodes[loop].id, gen);
}

bool
pgd_scope_within(const char *scope, const char *outer)
{
	size_t len = strlen(outer);

	return strncmp(scope, outer, len) == 0 &&
		(scope[len] == '\0' || (scope[len] == ':' && scope[len + 1] == ':'));
}
