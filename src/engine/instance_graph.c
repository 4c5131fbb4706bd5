/*-------------------------------------------------------------------------
 *
 * instance_graph.c
 *	  The structure of an instance's graph, loaded from df.nodes once per
 *	  process and cached.
 *
 * A graph never changes after df.start, so the cache can never be stale:
 * entries are only dropped to bound memory (and when an instance ends).
 * Because an id may be reused once an old instance is deleted, each entry
 * carries a token (the creation time of the instance's runs row) that the
 * caller must match.
 * The persisted form keeps IF/LOOP conditions as {"condition_node":"<id>"}
 * and JOIN extras as {"extra_nodes":["<id>",...]} in the query column; this
 * file turns that back into parent/child links.  Only nodes reachable from
 * the instance's root_node are part of the graph.
 *
 * Locks: none (plain reads of df.instances and df.nodes).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "engine/engine.h"

#define GRAPH_CACHE_MAX 2000

typedef struct GraphCacheEntry
{
	char		instance_id[PGD_ID_LEN + 1];	/* hash key */
	PgdGraph   *graph;
} GraphCacheEntry;

static HTAB *graph_cache = NULL;
static MemoryContext graph_cache_cxt = NULL;

static void
cache_init(void)
{
	HASHCTL		ctl;

	if (graph_cache != NULL)
		return;
	graph_cache_cxt = AllocSetContextCreate(TopMemoryContext, "pg_durable graph cache",
											ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PGD_ID_LEN + 1;
	ctl.entrysize = sizeof(GraphCacheEntry);
	ctl.hcxt = graph_cache_cxt;
	graph_cache = hash_create("pg_durable graphs", 256, &ctl,
							  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

static void
cache_reset(void)
{
	hash_destroy(graph_cache);
	graph_cache = NULL;
	MemoryContextDelete(graph_cache_cxt);
	graph_cache_cxt = NULL;
	cache_init();
}

/* Index of node_id in g, or -1. */
int
pgd_graph_find(const PgdGraph *g, const char *node_id)
{
	int			i;

	/* graphs are small enough on average; a linear scan beats a hash build */
	for (i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].id, node_id) == 0)
			return i;
	return -1;
}

typedef struct IdIndex
{
	char		id[PGD_ID_LEN + 1];
	int			index;
} IdIndex;

/* Children referenced from a node's query config ({"condition_node":..}, {"extra_nodes":[..]}). */
static void
parse_config_links(PgdGraph *g, PgdNode *n, int self, HTAB *ids)
{
	DfJson	   *cfg;
	DfJson	   *v;
	char	   *err = NULL;
	bool		found;

	if (n->query == NULL || (n->type != DF_NODE_IF && n->type != DF_NODE_LOOP &&
							 n->type != DF_NODE_JOIN))
		return;
	cfg = dfjson_parse(n->query, strlen(n->query), &err);
	if (cfg == NULL)
		return;

	v = dfjson_get(cfg, "condition_node");
	if (v != NULL && v->type == DFJ_STRING && n->type != DF_NODE_JOIN)
	{
		IdIndex    *e = hash_search(ids, v->str, HASH_FIND, &found);

		if (found)
		{
			n->condition = e->index;
			g->nodes[e->index].parent = self;
		}
	}
	v = dfjson_get(cfg, "extra_nodes");
	if (v != NULL && v->type == DFJ_ARRAY && n->type == DF_NODE_JOIN)
	{
		int			i;

		n->extras = palloc0(sizeof(int) * Max(v->count, 1));
		for (i = 0; i < v->count; i++)
		{
			IdIndex    *e;

			if (v->items[i]->type != DFJ_STRING)
				continue;
			e = hash_search(ids, v->items[i]->str, HASH_FIND, &found);
			if (found)
			{
				n->extras[n->nextras++] = e->index;
				g->nodes[e->index].parent = self;
			}
		}
	}
}

static PgdGraph *
graph_load(const char *instance_id)
{
	int			n,
				i;
	char	   *root_id;
	PgdGraph   *g;
	MemoryContext cxt,
				old;
	HASHCTL		ctl;
	HTAB	   *ids;
	char	  **lefts;
	char	  **rights;

	if (PGD_EXEC("SELECT root_node FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
				 instance_id) == 0)
		return NULL;
	root_id = pgd_spi_getstring(0, 1);

	n = PGD_EXEC("SELECT id, node_type, query, result_name, left_node, right_node "
					 "FROM df.nodes WHERE instance_id OPERATOR(pg_catalog.=) $1",
				 instance_id);
	if (n == 0)
		return NULL;

	cxt = AllocSetContextCreate(graph_cache_cxt, "pg_durable graph", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	g = palloc0(sizeof(PgdGraph));
	g->cxt = cxt;
	strlcpy(g->instance_id, instance_id, sizeof(g->instance_id));
	g->nnodes = n;
	g->nodes = palloc0(sizeof(PgdNode) * n);
	g->root = -1;
	lefts = palloc0(sizeof(char *) * n);
	rights = palloc0(sizeof(char *) * n);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PGD_ID_LEN + 1;
	ctl.entrysize = sizeof(IdIndex);
	ctl.hcxt = CurrentMemoryContext;
	ids = hash_create("pg_durable node ids", n, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	for (i = 0; i < n; i++)
	{
		PgdNode    *node = &g->nodes[i];
		char	   *type = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		IdIndex    *e;
		bool		found;

		strlcpy(node->id, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				sizeof(node->id));
		if (!df_node_type_from_name(type, &node->type))
			elog(ERROR, "pg_durable: instance %s has a node of unknown type \"%s\"",
				 instance_id, type);
		node->query = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		node->result_name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4);
		lefts[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5);
		rights[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 6);
		node->parent = node->left = node->right = node->condition = -1;
		e = hash_search(ids, node->id, HASH_ENTER, &found);
		e->index = i;
		if (strcmp(node->id, root_id) == 0)
			g->root = i;
	}
	for (i = 0; i < n; i++)
	{
		PgdNode    *node = &g->nodes[i];
		IdIndex    *e;
		bool		found;

		if (lefts[i] && (e = hash_search(ids, lefts[i], HASH_FIND, &found)) != NULL)
		{
			node->left = e->index;
			g->nodes[e->index].parent = i;
		}
		if (rights[i] && (e = hash_search(ids, rights[i], HASH_FIND, &found)) != NULL)
		{
			node->right = e->index;
			g->nodes[e->index].parent = i;
		}
		parse_config_links(g, node, i, ids);
	}
	hash_destroy(ids);
	MemoryContextSwitchTo(old);

	if (g->root < 0)
	{
		MemoryContextDelete(cxt);
		elog(ERROR, "pg_durable: instance %s has no root node %s", instance_id, root_id);
	}
	return g;
}

/*
 * The graph of an instance, from the cache or loaded now (inside SPI).
 * Returns NULL when the instance or its nodes do not exist.
 */
PgdGraph *
pgd_graph_get(const char *instance_id, const char *token)
{
	GraphCacheEntry *e;
	bool		found;
	PgdGraph   *g;

	cache_init();
	e = hash_search(graph_cache, instance_id, HASH_FIND, &found);
	if (found && strcmp(e->graph->token, token) == 0)
		return e->graph;
	if (found)
		pgd_graph_forget(instance_id);	/* an old instance with the same id */

	if (hash_get_num_entries(graph_cache) >= GRAPH_CACHE_MAX)
		cache_reset();

	g = graph_load(instance_id);
	if (g == NULL)
		return NULL;
	g->token = MemoryContextStrdup(g->cxt, token);
	e = hash_search(graph_cache, instance_id, HASH_ENTER, &found);
	e->graph = g;
	return g;
}

void
pgd_graph_forget(const char *instance_id)
{
	GraphCacheEntry *e;
	bool		found;

	if (graph_cache == NULL)
		return;
	e = hash_search(graph_cache, instance_id, HASH_FIND, &found);
	if (found)
	{
		MemoryContextDelete(e->graph->cxt);
		hash_search(graph_cache, instance_id, HASH_REMOVE, NULL);
	}
}
