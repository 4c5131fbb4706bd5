/*-------------------------------------------------------------------------
 *
 * graph_cache.c
 *	  The structure of an instance's graph, loaded from df.nodes once per
 *	  process and cached, its node configs parsed once.
 *
 * A graph never changes after df.start, so the cache can never be stale:
 * entries are only dropped to bound memory (the whole cache, at
 * GRAPH_CACHE_MAX entries) and when an id turns out to belong to a newer
 * instance.
 * Because an id may be reused once an old instance is deleted, each entry
 * carries a token (the creation time of the instance's runs row) that the
 * caller must match.
 * The persisted form keeps IF/LOOP conditions and JOIN extras in the
 * query column (graph/persisted.h); this file turns that back into
 * parent/child links.  Only nodes reachable from the instance's root_node
 * are part of the graph.
 *
 * Locks: none (plain reads of df.instances and df.nodes).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "common/json.h"
#include "engine/graph_cache.h"
#include "engine/store.h"
#include "graph/http_config.h"
#include "graph/persisted.h"

#define GRAPH_CACHE_MAX 2000

typedef struct GraphCacheEntry
{
	char	  instance_id[PGD_ID_LEN + 1]; /* hash key */
	PgdGraph *graph;
} GraphCacheEntry;

static HTAB			*graph_cache = NULL;
static MemoryContext graph_cache_cxt = NULL;

static void
cache_init(void)
{
	HASHCTL ctl;

	if (graph_cache != NULL)
		return;
	graph_cache_cxt =
		AllocSetContextCreate(TopMemoryContext, "pg_durable graph cache",
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
	int i;

	/* graphs are small enough on average; a linear scan beats a hash build */
	for (i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].id, node_id) == 0)
			return i;
	return -1;
}

typedef struct IdIndex
{
	char id[PGD_ID_LEN + 1];
	int	 index;
} IdIndex;

/* Children referenced from a node's query config (condition, extra branches). */
static void
link_config_children(PgdGraph *g, PgdNode *n, int self, HTAB *ids)
{
	DfConfigLinks links;
	IdIndex		 *e;
	bool		  found;
	int			  i;

	df_config_links(n->type, n->query, &links);
	if (links.condition_id != NULL &&
		(e = hash_search(ids, links.condition_id, HASH_FIND, &found)) != NULL)
	{
		n->condition = e->index;
		g->nodes[e->index].parent = self;
	}
	if (n->type == DF_NODE_JOIN && links.nextras > 0)
		n->extras = palloc0(sizeof(int) * links.nextras);
	for (i = 0; i < links.nextras; i++)
		if ((e = hash_search(ids, links.extra_ids[i], HASH_FIND, &found)) !=
			NULL)
		{
			n->extras[n->nextras++] = e->index;
			g->nodes[e->index].parent = self;
		}
}

/* The node's config as a JSON object (an empty one when it has none). */
static DfJson *
node_config(const PgdNode *n)
{
	char   *err = NULL;
	DfJson *cfg =
		n->query ? dfjson_parse(n->query, strlen(n->query), &err) : NULL;

	return (cfg && cfg->type == DFJ_OBJECT) ? cfg : dfjson_make_object();
}

/* df.break()'s value as JSON: a JSON text as itself, other text as a string, else null. */
static char *
break_value(const DfJson *bv)
{
	char		  *err = NULL;
	StringInfoData buf;

	if (bv == NULL || bv->type != DFJ_STRING)
		return pstrdup("null");
	if (dfjson_parse(bv->str, strlen(bv->str), &err) != NULL)
		return bv->str;
	initStringInfo(&buf);
	dfjson_write_string(&buf, bv->str);
	return buf.data;
}

/*
 * Parse the config of the nodes that have one, once.  Bad configs are kept
 * as what the node fails with when it starts (validation at df.start makes
 * them rare: a graph written by hand into df.nodes).
 */
static void
parse_config(PgdNode *n)
{
	DfJson *cfg;
	DfJson *v;

	switch (n->type)
	{
		case DF_NODE_SLEEP:
			/* whole seconds, or a fraction (df.sleep(0.25)) */
			n->sleep_ms = n->query ?
				(int64) llround(strtod(n->query, NULL) * 1000.0) :
				0;
			break;
		case DF_NODE_RETRY:
		case DF_NODE_TIMEOUT:
		case DF_NODE_CATCH:
		case DF_NODE_FAIL:
			n->wrapper = palloc(sizeof(DfWrapperConfig));
			n->wrapper_problem = df_wrapper_parse(df_node_type_name(n->type),
												  n->query, n->wrapper);
			break;
		case DF_NODE_LOCK:
			n->lock = palloc(sizeof(DfLockConfig));
			n->lock_problem = df_lock_parse(n->query, n->lock);
			break;
		case DF_NODE_WAIT_SCHEDULE:
			v = dfjson_get(node_config(n), "cron_expr");
			n->cron_expr = (v && v->type == DFJ_STRING) ? v->str : "";
			if (v == NULL || v->type != DFJ_STRING)
				n->cron_error = "missing cron_expr";
			else if (!df_cron_parse(v->str, &n->cron, &n->cron_error) &&
					 n->cron_error == NULL)
				n->cron_error = "missing cron_expr";
			break;
		case DF_NODE_SIGNAL:
			cfg = node_config(n);
			v = dfjson_get(cfg, "signal_name");
			n->signal_name = (v && v->type == DFJ_STRING) ? v->str : NULL;
			v = dfjson_get(cfg, "timeout_seconds");
			n->has_timeout = (v != NULL && v->type == DFJ_NUMBER);
			n->timeout_seconds =
				n->has_timeout ? strtoll(v->str, NULL, 10) : 0;
			break;
		case DF_NODE_BREAK:
			n->break_value = break_value(n->query ? dfjson_get(node_config(n),
															   "break_value") :
													NULL);
			break;
		case DF_NODE_IF:
			v = dfjson_get(node_config(n), "result_name");
			n->if_rows_name = (v && v->type == DFJ_STRING) ? v->str : NULL;
			break;
		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			/* validated at df.start, checked again: a graph is data */
			n->config_problem =
				df_http_check_config(n->query,
									 n->type == DF_NODE_HTTP_MULTIPART);
			n->config = node_config(n);
			break;
		default:
			break;
	}
}

static PgdGraph *
graph_load(const char *instance_id)
{
	int			   n, i;
	char		  *root_id;
	PgdStoredNode *rows;
	PgdGraph	  *g;
	MemoryContext  cxt, old;
	HASHCTL		   ctl;
	HTAB		  *ids;

	n = pgd_store_load_nodes(instance_id, &root_id, &rows);
	if (n == 0)
		return NULL;

	cxt = AllocSetContextCreate(graph_cache_cxt, "pg_durable graph",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	g = palloc0(sizeof(PgdGraph));
	g->cxt = cxt;
	strlcpy(g->instance_id, instance_id, sizeof(g->instance_id));
	g->nnodes = n;
	g->nodes = palloc0(sizeof(PgdNode) * n);
	g->root = -1;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PGD_ID_LEN + 1;
	ctl.entrysize = sizeof(IdIndex);
	ctl.hcxt = CurrentMemoryContext;
	ids = hash_create("pg_durable node ids", n, &ctl,
					  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	for (i = 0; i < n; i++)
	{
		PgdNode *node = &g->nodes[i];
		IdIndex *e;
		bool	 found;

		strlcpy(node->id, rows[i].id, sizeof(node->id));
		if (!df_node_type_from_name(rows[i].type, &node->type))
			elog(ERROR, "instance %s has a node of unknown type \"%s\"",
				 instance_id, rows[i].type);
		node->query = rows[i].query ? pstrdup(rows[i].query) : NULL;
		node->result_name =
			rows[i].result_name ? pstrdup(rows[i].result_name) : NULL;
		node->parent = node->left = node->right = node->condition = -1;
		e = hash_search(ids, node->id, HASH_ENTER, &found);
		e->index = i;
		if (strcmp(node->id, root_id) == 0)
			g->root = i;
	}
	for (i = 0; i < n; i++)
	{
		PgdNode *node = &g->nodes[i];
		IdIndex *e;
		bool	 found;

		if (rows[i].left &&
			(e = hash_search(ids, rows[i].left, HASH_FIND, &found)) != NULL)
		{
			node->left = e->index;
			g->nodes[e->index].parent = i;
		}
		if (rows[i].right &&
			(e = hash_search(ids, rows[i].right, HASH_FIND, &found)) != NULL)
		{
			node->right = e->index;
			g->nodes[e->index].parent = i;
		}
		link_config_children(g, node, i, ids);
		parse_config(node);
	}
	hash_destroy(ids);
	MemoryContextSwitchTo(old);
	if (g->root < 0)
	{
		MemoryContextDelete(cxt);
		elog(ERROR, "instance %s has no root node %s", instance_id, root_id);
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
	bool			 found;
	PgdGraph		*g;

	cache_init();
	e = hash_search(graph_cache, instance_id, HASH_FIND, &found);
	if (found && strcmp(e->graph->token, token) == 0)
		return e->graph;
	if (found)
		pgd_graph_forget(instance_id); /* an old instance with the same id */

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
	bool			 found;

	if (graph_cache == NULL)
		return;
	e = hash_search(graph_cache, instance_id, HASH_FIND, &found);
	if (found)
	{
		MemoryContextDelete(e->graph->cxt);
		hash_search(graph_cache, instance_id, HASH_REMOVE, NULL);
	}
}
