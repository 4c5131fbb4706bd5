/*-------------------------------------------------------------------------
 *
 * graph_cache.c
 *	  The structure of an instance's graph, loaded from df.nodes once per
 *	  process and cached, its node configs parsed once.
 *
 * A graph changes after df.start only by growing: df.map adds the
 * children of a MAP node, and a process whose cached graph
 * misses a node loads what was added (pgd_graph_find).  Otherwise entries
 * are only dropped to bound memory (the whole cache, at
 * GRAPH_CACHE_MAX entries, or at the end of a transaction past
 * GRAPH_CACHE_MAX_NODES nodes) and when an id turns out to belong to a
 * newer instance.
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
#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "common/json.h"
#include "engine/graph_cache.h"
#include "store/store.h"
#include "graph/http_config.h"
#include "graph/task_config.h"
#include "graph/map_config.h"
#include "graph/persisted.h"

#define GRAPH_CACHE_MAX 2000
/*
 * ... or, at the end of a transaction, once the graphs hold more nodes than
 * this: a node takes about 350 bytes (a fan-out of 10,000 branches, 20,000
 * nodes, held 6.9 MB), and an executor that had run a few wide instances
 * kept every one of them.  Not sooner: a transaction may still use the
 * graphs it loaded.
 */
#define GRAPH_CACHE_MAX_NODES 100000

typedef struct GraphCacheEntry
{
	char	  instance_id[PGD_ID_LEN + 1]; /* hash key */
	PgdGraph *graph;
} GraphCacheEntry;

static HTAB			*graph_cache = NULL;
static MemoryContext graph_cache_cxt = NULL;
static int64		 cached_nodes = 0; /* in the graphs of graph_cache */

/*
 * The graphs this transaction extended (df.map made children): if it, or
 * any subtransaction, rolls back, the nodes it added are not in df.nodes,
 * so the graph is reloaded at its next use.
 */
#define EXTENDED_MAX 8
static char extended[EXTENDED_MAX][PGD_ID_LEN + 1];
static int	nextended = 0;
static bool extended_overflow = false;

static void mark_stale(void);
static void cache_reset(void);

/*
 * A transaction ends: if it rolled back, the graphs it extended are loaded
 * again at their next use (mark_stale); the cache is emptied past
 * GRAPH_CACHE_MAX_NODES.
 */
static void
cache_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		mark_stale();
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
	{
		nextended = 0;
		extended_overflow = false;
		if (graph_cache != NULL && cached_nodes > GRAPH_CACHE_MAX_NODES)
			cache_reset();
	}
}

static void
extend_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		mark_stale();
}

static void
cache_init(void)
{
	HASHCTL		ctl;
	static bool callbacks = false;

	if (graph_cache != NULL)
		return;
	if (!callbacks)
	{
		RegisterXactCallback(cache_xact_callback, NULL);
		RegisterSubXactCallback(extend_subxact_callback, NULL);
		callbacks = true;
	}
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
	cached_nodes = 0;
	cache_init();
}

static void
mark_stale(void)
{
	if (graph_cache == NULL)
		return;
	if (extended_overflow)
	{
		HASH_SEQ_STATUS	 seq;
		GraphCacheEntry *e;

		hash_seq_init(&seq, graph_cache);
		while ((e = hash_seq_search(&seq)) != NULL)
			e->graph->stale = true;
		return;
	}
	for (int i = 0; i < nextended; i++)
	{
		bool			 found;
		GraphCacheEntry *e =
			hash_search(graph_cache, extended[i], HASH_FIND, &found);

		if (found)
			e->graph->stale = true;
	}
}

static void
note_extended(const char *instance_id)
{
	for (int i = 0; i < nextended; i++)
		if (strcmp(extended[i], instance_id) == 0)
			return;
	if (nextended == EXTENDED_MAX)
		extended_overflow = true;
	else
		strlcpy(extended[nextended++], instance_id, PGD_ID_LEN + 1);
}

/*
 * Graphs of up to this many nodes are searched node by node; a larger one
 * keeps the hash of its ids that its load builds to link the nodes
 * (add_rows).  A linear search of a 5,000-branch fan-out's 9,999 nodes
 * took 36 us a branch against 8 at 1,000 branches (perf, bench/run's
 * widths): a lookup per transition made a wide fan-out quadratic.  A small
 * graph does not keep it: its hash's memory context would double what the
 * graph holds.
 */
#define FIND_LINEAR_MAX 64

typedef struct IdIndex
{
	char id[PGD_ID_LEN + 1];
	int	 index;
} IdIndex;

/* Index of node_id among the nodes g holds now, or -1. */
int
pgd_graph_find_loaded(const PgdGraph *g, const char *node_id)
{
	if (g->ids != NULL)
	{
		IdIndex *e;

		/* the hash compares PGD_ID_LEN bytes: a longer id is none of them */
		if (strlen(node_id) > PGD_ID_LEN)
			return -1;
		e = hash_search(g->ids, node_id, HASH_FIND, NULL);
		return e != NULL ? e->index : -1;
	}
	for (int i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].id, node_id) == 0)
			return i;
	return -1;
}

/*
 * Index of node_id in g, or -1.  A graph with a MAP node grows while it
 * runs (df.map adds a copy of its step per row, in the transition that
 * read the rows): a node another process added is loaded on the first
 * miss.  Nodes are never removed, so a hit is never stale.
 */
int
pgd_graph_find(const PgdGraph *g, const char *node_id)
{
	int i = pgd_graph_find_loaded(g, node_id);

	if (i >= 0 || !g->has_map)
		return i;
	pgd_graph_extend((PgdGraph *) g);
	return pgd_graph_find_loaded(g, node_id);
}

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
		case DF_NODE_SAGA:
		case DF_NODE_BREAKER:
		case DF_NODE_LIMIT:
			n->wrapper = palloc(sizeof(DfWrapperConfig));
			n->wrapper_problem = df_wrapper_parse(df_node_type_name(n->type),
												  n->query, n->wrapper);
			break;
		case DF_NODE_PUBLISH:
		case DF_NODE_EVENT:
			n->event = palloc(sizeof(DfEventConfig));
			n->event_problem =
				df_event_config_parse(n->type, n->query, n->event);
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
		case DF_NODE_MAP:
			n->map_problem = df_map_settings(n->query, &n->map);
			break;
		case DF_NODE_LOOP:
			n->loop_problem = df_loop_parse(n->query, true, &n->loop);
			break;
		case DF_NODE_HTTP:
		case DF_NODE_HTTP_MULTIPART:
			/* validated at df.start, checked again: a graph is data */
			n->config_problem =
				df_http_check_config(n->query,
									 n->type == DF_NODE_HTTP_MULTIPART);
			n->config = node_config(n);
			break;
		case DF_NODE_TASK:
			{
				DfTaskConfig task;

				/* validated at df.start, checked again: a graph is data */
				n->config_problem = df_task_parse(n->query, &task);
				n->config = node_config(n);
			}
			break;
		default:
			break;
	}
}

/*
 * Can a node of g still be running when its instance completes?  Only
 * where a scope was abandoned while the instance went on: a RACE's loser,
 * a loop's break out of a JOIN, a wrapper that ended its step (a timeout,
 * a catch or retry of a failed JOIN, ...), a df.map.  Steps, sequences,
 * conditionals and JOINs complete only once every node they started has
 * ended.  The nodes df.map adds are copies of its step under the MAP, so
 * what the loaded graph says holds as it grows.
 */
static bool
may_end_running(const PgdGraph *g)
{
	for (int i = 0; i < g->nnodes; i++)
		switch (g->nodes[i].type)
		{
			case DF_NODE_SQL:
			case DF_NODE_THEN:
			case DF_NODE_IF:
			case DF_NODE_JOIN:
			case DF_NODE_SLEEP:
			case DF_NODE_WAIT_SCHEDULE:
			case DF_NODE_HTTP:
			case DF_NODE_HTTP_MULTIPART:
			case DF_NODE_SIGNAL:
			case DF_NODE_PUBLISH:
			case DF_NODE_EVENT:
			case DF_NODE_TASK:
				break;
			default:
				return true;
		}
	return false;
}

/* Does the graph hold a MAP node (whose children df.map adds while it runs)? */
static bool
has_map(const PgdGraph *g)
{
	for (int i = 0; i < g->nnodes; i++)
		if (g->nodes[i].type == DF_NODE_MAP)
			return true;
	return false;
}

/*
 * Add the rows that g does not hold yet to it, linked to their children,
 * their configs parsed.  The nodes already there keep their indexes (a
 * caller may hold one): the array is copied into a larger one, the old
 * one stays in g->cxt until the graph is dropped.
 */
static void
add_rows(PgdGraph *g, PgdStoredNode *rows, int n, const char *root_id)
{
	MemoryContext old = MemoryContextSwitchTo(g->cxt);
	HASHCTL		  ctl;
	HTAB		 *ids;
	PgdNode		 *nodes;
	int			 *row_of; /* index in g->nodes of each new row */
	int			  total = g->nnodes;
	int			  i;

	/* the ids of the nodes held: kept by a large graph, else made now */
	ids = g->ids;
	if (ids == NULL)
	{
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = PGD_ID_LEN + 1;
		ctl.entrysize = sizeof(IdIndex);
		ctl.hcxt = CurrentMemoryContext;
		ids = hash_create("pg_durable node ids", Max(g->nnodes + n, 16), &ctl,
						  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		for (i = 0; i < g->nnodes; i++)
		{
			bool	 found;
			IdIndex *e = hash_search(ids, g->nodes[i].id, HASH_ENTER, &found);

			e->index = i;
		}
	}

	/*
	 * Room for the new rows: in place when the array has it (so pointers
	 * into it stay good), else a copy twice as large, the old array left
	 * where it is for whoever still points into it; so the copies a
	 * growing graph leaves behind add up to less than its final size.
	 */
	if (g->nnodes + n <= g->cap)
		nodes = g->nodes;
	else
	{
		g->cap = Max(Max(g->nnodes + n, 2 * g->cap), 1);
		nodes = palloc0(sizeof(PgdNode) * g->cap);
		if (g->nnodes > 0)
			memcpy(nodes, g->nodes, sizeof(PgdNode) * g->nnodes);
	}
	row_of = palloc(sizeof(int) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		PgdNode *node;
		IdIndex *e;
		bool	 found;

		row_of[i] = -1;
		e = hash_search(ids, rows[i].id, HASH_ENTER, &found);
		if (found)
			continue; /* held already */
		row_of[i] = e->index = total;
		node = &nodes[total++];
		strlcpy(node->id, rows[i].id, sizeof(node->id));
		if (!df_node_type_from_name(rows[i].type, &node->type))
			elog(ERROR, "instance %s has a node of unknown type \"%s\"",
				 g->instance_id, rows[i].type);
		node->query = rows[i].query ? pstrdup(rows[i].query) : NULL;
		node->result_name =
			rows[i].result_name ? pstrdup(rows[i].result_name) : NULL;
		node->parent = node->left = node->right = node->condition = -1;
		if (root_id != NULL && strcmp(node->id, root_id) == 0)
			g->root = e->index;
	}
	g->nodes = nodes;
	g->nnodes = total;
	for (i = 0; i < n; i++)
	{
		PgdNode *node;
		IdIndex *e;
		bool	 found;

		if (row_of[i] < 0)
			continue;
		node = &g->nodes[row_of[i]];
		if (rows[i].left &&
			(e = hash_search(ids, rows[i].left, HASH_FIND, &found)) != NULL)
		{
			node->left = e->index;
			g->nodes[e->index].parent = row_of[i];
		}
		if (rows[i].right &&
			(e = hash_search(ids, rows[i].right, HASH_FIND, &found)) != NULL)
		{
			node->right = e->index;
			g->nodes[e->index].parent = row_of[i];
		}
		link_config_children(g, node, row_of[i], ids);
		parse_config(node);
	}
	/* kept for the lookups by id of a large graph (pgd_graph_find_loaded) */
	if (g->nnodes > FIND_LINEAR_MAX)
		g->ids = ids;
	else
		hash_destroy(ids);
	MemoryContextSwitchTo(old);
}

/*
 * The children df.map made (df_internal.map_items): each MAP node's list,
 * in item order, and each child's parent.
 */
static void
link_map_items(PgdGraph *g)
{
	char **maps;
	int	  *items;
	char **children;
	int n = pgd_store_map_items_load(g->instance_id, &maps, &items, &children);
	MemoryContext old = MemoryContextSwitchTo(g->cxt);
	int			  i;

	for (i = 0; i < g->nnodes; i++)
		if (g->nodes[i].type == DF_NODE_MAP)
		{
			g->nodes[i].nitems = 0;
			g->nodes[i].items = palloc(sizeof(int) * Max(n, 1));
		}
	for (i = 0; i < n; i++)
	{
		int m = pgd_graph_find_loaded(g, maps[i]);
		int c = pgd_graph_find_loaded(g, children[i]);

		if (m < 0 || c < 0 || g->nodes[m].type != DF_NODE_MAP ||
			items[i] != g->nodes[m].nitems)
			elog(ERROR,
				 "instance %s: item %d of MAP node %s is not where it belongs",
				 g->instance_id, items[i], maps[i]);
		g->nodes[m].items[g->nodes[m].nitems++] = c;
		g->nodes[c].parent = m;
	}
	MemoryContextSwitchTo(old);
}

static PgdGraph *
graph_load(const char *instance_id)
{
	int			   n;
	char		  *root_id;
	PgdStoredNode *rows;
	PgdGraph	  *g;
	MemoryContext  cxt;

	n = pgd_store_load_nodes(instance_id, &root_id, &rows);
	if (n == 0)
		return NULL;

	cxt = AllocSetContextCreate(graph_cache_cxt, "pg_durable graph",
								ALLOCSET_SMALL_SIZES);
	g = MemoryContextAllocZero(cxt, sizeof(PgdGraph));
	g->cxt = cxt;
	strlcpy(g->instance_id, instance_id, sizeof(g->instance_id));
	g->root = -1;
	add_rows(g, rows, n, root_id);
	if (g->root < 0)
	{
		MemoryContextDelete(cxt);
		elog(ERROR, "instance %s has no root node %s", instance_id, root_id);
	}
	g->has_map = has_map(g);
	g->may_end_running = may_end_running(g);
	if (g->has_map)
		link_map_items(g);
	return g;
}

void
pgd_graph_extend(PgdGraph *g)
{
	char		  *root_id;
	PgdStoredNode *rows;
	int			   n = pgd_store_load_nodes(g->instance_id, &root_id, &rows);
	int			   before = g->nnodes;

	note_extended(g->instance_id);
	add_rows(g, rows, n, NULL);
	link_map_items(g);
	cached_nodes += g->nnodes - before;
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
	if (found && strcmp(e->graph->token, token) == 0 && !e->graph->stale)
		return e->graph;
	if (found)
		pgd_graph_forget(instance_id); /* an old instance with the same id,
										* or nodes added by a rollback */

	if (hash_get_num_entries(graph_cache) >= GRAPH_CACHE_MAX)
		cache_reset();

	g = graph_load(instance_id);
	if (g == NULL)
		return NULL;
	g->token = MemoryContextStrdup(g->cxt, token);
	e = hash_search(graph_cache, instance_id, HASH_ENTER, &found);
	e->graph = g;
	cached_nodes += g->nnodes;
	return g;
}

static char *
cxt_strdup(MemoryContext cxt, const char *s)
{
	return s ? MemoryContextStrdup(cxt, s) : NULL;
}

void
pgd_graph_remember_run(PgdGraph *g, const PgdRunInfo *run)
{
	if (g->has_run)
		return;
	g->run.submitted_by = run->submitted_by;
	g->run.label = cxt_strdup(g->cxt, run->label);
	g->run.vars = cxt_strdup(g->cxt, run->vars);
	g->run.token = g->token;
	g->run.database = cxt_strdup(g->cxt, run->database);
	g->run.status = PGD_INSTANCE_RUNNING; /* not kept: see graph_cache.h */
	g->has_run = true;
}

void
pgd_graph_run(PgdGraph *g, PgdRunInfo *run)
{
	if (!g->has_run)
	{
		PgdRunInfo loaded;

		if (!pgd_store_load_run(g->instance_id, &loaded))
			elog(ERROR, "instance %s has no runs row", g->instance_id);
		/* a newer instance under the same id is not this graph's */
		if (loaded.token == NULL || strcmp(loaded.token, g->token) != 0)
			elog(ERROR,
				 "the runs row of instance %s is of another incarnation",
				 g->instance_id);
		pgd_graph_remember_run(g, &loaded);
	}
	*run = g->run;
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
		cached_nodes -= e->graph->nnodes;
		MemoryContextDelete(e->graph->cxt);
		hash_search(graph_cache, instance_id, HASH_REMOVE, NULL);
	}
}
