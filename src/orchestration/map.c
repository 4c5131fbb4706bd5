/*-------------------------------------------------------------------------
 *
 * map.c
 *	  Node MAP, df.map(query, step, max_concurrent): dynamic fan-out
 *	  (docs/design/map.md), run by the engine through its
 *	  wrapper hooks (wrappers.c dispatches here).
 *
 * A MAP runs its query (left_node, an ordinary SQL step: exactly once, the
 * submitter's rights and containment) in its own branch scope.  When the
 * query completes, the same transition makes the children: one copy of
 * the step template (right_node, never run itself) per row, as real
 * df.nodes rows with fresh ids (map_items.c), listed in map_items, and
 * each row becomes the named result "item" in its child's scope, so the
 * step sees $item and $item.col.  Child i runs as a branch would, in
 * "<map scope>::<child root id>::1".  A MAP run again (in a loop) reuses
 * the children it made before and makes only the missing ones.
 *
 * Concurrency: at most max_concurrent children run at once (all when no
 * cap).  df_internal.maps counts, per MAP execution, the children started
 * and finished; both move only under the instance's runs lock, in the
 * transaction in which a child ends, which also starts the next child:
 * so a count is exactly once and the cap holds at every commit.
 *
 * Outcome: when the last child finishes, the MAP completes with the array
 * of the children's results in row order ([] for no rows).  The first
 * child that fails fails the MAP ("MAP item <i> failed: ..."), like a
 * JOIN branch: the scopes of the other children are abandoned (their
 * tasks go, their running steps are interrupted at commit) and the rest
 * never start.  A failing query fails the MAP with its error.  Either way
 * the children's named results ($item and what their steps named) go with
 * the MAP's end: the MAP's result is the array.  More rows
 * than the graph node limit allows (DF_MAX_NODES, counting the copies)
 * fail the MAP and say the limit.
 *
 * Lanes mode (df.map with collect; docs/design/map.md §6): the query's
 * rows go to df_internal.map_rows as its statement returns them
 * (pgd_map_row_sink), and max_concurrent copies of the step, the lanes,
 * run them one after another: row i in lane scope
 * "<map scope>::<lane root id>::<i + 1>", the lane's next row started in
 * the transaction where its row ended.  The result is the rows' results
 * (collect) or their counts; up to tolerated_failures rows may fail.
 *
 * Locks: see apply.h (inside a transition, under the runs row).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/hsearch.h"

#include "common/json.h"
#include "core/settings.h"
#include "graph/map_config.h"
#include "engine/apply.h"
#include "engine/scope.h"
#include "store/store.h"
#include "graph/persisted.h"
#include "orchestration/orchestration.h"

/* Bumped whenever a MAP execution ends: a loop starting children stops. */
static uint64 map_ends = 0;

/* The template's nodes, pre-order from its root. */
static int
template_nodes(const PgdGraph *g, int root, int **out)
{
	int	 cap = 16;
	int	 n = 0;
	int	 depth = 0;
	int *stack = palloc(sizeof(int) * (DF_MAX_NODES + 1));
	int *nodes = palloc(sizeof(int) * cap);

	stack[depth++] = root;
	while (depth > 0)
	{
		const PgdNode *node = &g->nodes[stack[--depth]];
		int			   self = (int) (node - g->nodes);

		if (n == cap)
			nodes = repalloc(nodes, sizeof(int) * (cap *= 2));
		nodes[n++] = self;
		if (depth + 3 + node->nextras > DF_MAX_NODES)
			elog(ERROR, "the step of a MAP is larger than a graph can be");
		for (int i = node->nextras - 1; i >= 0; i--)
			stack[depth++] = node->extras[i];
		if (node->condition >= 0)
			stack[depth++] = node->condition;
		if (node->right >= 0)
			stack[depth++] = node->right;
		if (node->left >= 0)
			stack[depth++] = node->left;
	}
	*out = nodes;
	return n;
}

typedef struct IdEntry
{
	char id[PGD_ID_LEN + 1];
} IdEntry;

/* A fresh node id, not in used (which it joins). */
static char *
fresh_id(HTAB *used)
{
	char *id = palloc(PGD_ID_LEN + 1);
	bool  found;

	do
	{
		uint8 bytes[4];

		if (!pg_strong_random(bytes, sizeof(bytes)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random node id")));
		snprintf(id, PGD_ID_LEN + 1, "%02x%02x%02x%02x", bytes[0], bytes[1],
				 bytes[2], bytes[3]);
		hash_search(used, id, HASH_ENTER, &found);
	} while (found);
	return id;
}

/* The id that template node old_id has in this copy. */
static const char *
copied_id(const PgdGraph *g, const int *tnodes, int m, char **ids,
		  const char *old_id)
{
	for (int j = 0; j < m; j++)
		if (strcmp(g->nodes[tnodes[j]].id, old_id) == 0)
			return ids[j];
	elog(ERROR, "node %s is not part of the step of its MAP", old_id);
	return NULL; /* keep compiler quiet */
}

/* A template node's query with the links in its config pointing into the copy. */
static char *
copied_query(const PgdGraph *g, const PgdNode *t, const int *tnodes, int m,
			 char **ids)
{
	char   *err = NULL;
	DfJson *cfg;

	if (t->query == NULL || (t->condition < 0 && t->nextras == 0))
		return t->query;
	cfg = dfjson_parse(t->query, strlen(t->query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return t->query;
	for (int i = 0; i < cfg->count; i++)
	{
		DfJson *v = cfg->pairs[i].value;

		if (strcmp(cfg->pairs[i].key, "condition_node") == 0 &&
			v->type == DFJ_STRING)
			cfg->pairs[i].value =
				dfjson_make_string(copied_id(g, tnodes, m, ids, v->str));
		else if (strcmp(cfg->pairs[i].key, "extra_nodes") == 0 &&
				 v->type == DFJ_ARRAY)
			for (int k = 0; k < v->count; k++)
				if (v->items[k]->type == DFJ_STRING)
					v->items[k] =
						dfjson_make_string(copied_id(g, tnodes, m, ids,
													 v->items[k]->str));
	}
	return dfjson_to_text(cfg);
}

/* Make the children first..total-1 of MAP n: copies of its template. */
static void
make_children(PgdGraph *g, int n, int first, int total)
{
	PgdNode	  *map = &g->nodes[n];
	int		  *tnodes;
	int		   m = template_nodes(g, map->right, &tnodes);
	PgdMapCopy copy;
	HASHCTL	   ctl;
	HTAB	  *used;
	int		   r = 0;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PGD_ID_LEN + 1;
	ctl.entrysize = sizeof(IdEntry);
	ctl.hcxt = CurrentMemoryContext;
	used = hash_create("pg_durable map ids", g->nnodes + (total - first) * m,
					   &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	for (int i = 0; i < g->nnodes; i++)
		hash_search(used, g->nodes[i].id, HASH_ENTER, NULL);

	copy.nnodes = (total - first) * m;
	copy.nitems = total - first;
	copy.ids = palloc(sizeof(char *) * copy.nnodes);
	copy.types = palloc(sizeof(char *) * copy.nnodes);
	copy.queries = palloc(sizeof(char *) * copy.nnodes);
	copy.result_names = palloc(sizeof(char *) * copy.nnodes);
	copy.lefts = palloc(sizeof(char *) * copy.nnodes);
	copy.rights = palloc(sizeof(char *) * copy.nnodes);
	copy.roots = palloc(sizeof(char *) * copy.nitems);
	for (int item = first; item < total; item++)
	{
		char **ids = &copy.ids[r];

		for (int j = 0; j < m; j++)
			ids[j] = fresh_id(used);
		for (int j = 0; j < m; j++)
		{
			const PgdNode *t = &g->nodes[tnodes[j]];

			copy.types[r + j] = (char *) df_node_type_name(t->type);
			copy.queries[r + j] = copied_query(g, t, tnodes, m, ids);
			copy.result_names[r + j] = t->result_name;
			copy.lefts[r + j] = t->left >= 0 ?
				(char *) copied_id(g, tnodes, m, ids, g->nodes[t->left].id) :
				NULL;
			copy.rights[r + j] = t->right >= 0 ?
				(char *) copied_id(g, tnodes, m, ids, g->nodes[t->right].id) :
				NULL;
		}
		copy.roots[item - first] = ids[0];
		r += m;
	}
	pgd_store_map_add(g->instance_id, map->id, first, &copy);
	pgd_graph_extend(g);
	if (g->nodes[n].nitems != total)
		elog(ERROR, "MAP node %s of instance %s has %d children, not %d",
			 g->nodes[n].id, g->instance_id, g->nodes[n].nitems, total);
}

/*
 * The MAP execution in scope ends with outcome: its counters and its
 * children's named results go (a MAP in a loop leaves none behind).
 */
static void
map_end(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	int			  nitems = g->nodes[n].nitems;
	const char	**ids = palloc(sizeof(char *) * Max(nitems, 1));

	map_ends++;
	for (int i = 0; i < nitems; i++)
		ids[i] = g->nodes[g->nodes[n].items[i]].id;
	if (nitems > 0)
		pgd_store_map_drop_results(g->instance_id, scope, nitems, ids);
	if (g->nodes[n].map.lanes)
		pgd_store_map_rows_drop(g->instance_id, g->nodes[n].id, scope);
	pgd_store_map_close(g->instance_id, g->nodes[n].id, scope);
	pgd_apply_finish_node(g, n, scope, outcome);
}

/* Start child i of MAP n (running in scope). */
static void
start_child(PgdGraph *g, int n, const char *scope, int i)
{
	int c = g->nodes[n].items[i];

	pgd_apply_start_node(g, c, pgd_branch_scope(g, c, scope));
}

/* The query returned its rows: make the children and start the first ones. */
static void
rows_arrived(PgdGraph *g, int n, const char *scope, PgdOutcome outcome)
{
	char   *err = NULL;
	DfJson *res = dfjson_parse(outcome.result, strlen(outcome.result), &err);
	DfJson *rows = res ? dfjson_get(res, "rows") : NULL;
	int		total;
	int		m;
	int	   *tnodes;
	int		have = g->nodes[n].nitems;
	int		first;
	const char **scopes;
	const char **items;
	uint64		 ends;

	if (rows == NULL || rows->type != DFJ_ARRAY)
	{
		map_end(g, n, scope,
				pgd_failure("MAP query did not return rows: %s",
							outcome.result));
		return;
	}
	total = rows->count;
	if (total == 0)
	{
		map_end(g, n, scope, (PgdOutcome){true, pstrdup("[]")});
		return;
	}
	m = template_nodes(g, g->nodes[n].right, &tnodes);
	if (total > have &&
		(int64) g->nnodes + (int64) (total - have) * m > DF_MAX_NODES)
	{
		PgdOutcome too_many =
			pgd_failure("df.map: the query returned %d rows, and one copy of its step (%d node%s) "
						"per row would make the graph %lld nodes, more than the limit of %d nodes",
						total, m, m == 1 ? "" : "s",
						(long long) g->nnodes + (long long) (total - have) * m,
						DF_MAX_NODES);

		too_many.code = pstrdup("fail");
		map_end(g, n, scope, too_many);
		return;
	}
	if (total > have)
		make_children(g, n, have, total);

	scopes = palloc(sizeof(char *) * total);
	items = palloc(sizeof(char *) * total);
	for (int i = 0; i < total; i++)
	{
		scopes[i] = pgd_branch_scope(g, g->nodes[n].items[i], scope);
		items[i] = dfjson_to_text(rows->items[i]);
	}
	pgd_store_map_items_bind(g->instance_id, total, scopes, items);

	first = g->nodes[n].map.max_concurrent > 0 ?
		Min(g->nodes[n].map.max_concurrent, total) : total;
	pgd_store_map_open(g->instance_id, g->nodes[n].id, scope, total, first);
	ends = map_ends;
	for (int i = 0; i < first; i++)
	{
		start_child(g, n, scope, i);
		/* a child that ended at once may have ended the MAP */
		if (map_ends != ends)
		{
			int t, s, f;

			pgd_store_map_counts(g->instance_id, g->nodes[n].id, scope, &t, &s,
								 &f);
			if (t < 0)
				return;
			ends = map_ends;
		}
	}
}

/* ---------------------------------------------------------------------
 * Lanes mode: max_concurrent copies of the step, each running the items
 * one after another, item i in "<map scope>::<lane root id>::<i + 1>"
 * ---------------------------------------------------------------------
 */

/* The scope item runs in, in lane c of the MAP running in scope. */
static char *
lane_scope(const PgdGraph *g, int c, const char *scope, int item)
{
	return psprintf("%s::%s::%d", scope, g->nodes[c].id, item + 1);
}

/* Item (from 0) starts in lane (an index into the MAP's children). */
static void
start_item(PgdGraph *g, int n, const char *scope, int lane, int item)
{
	int	  c = g->nodes[n].items[lane];
	char *iscope = lane_scope(g, c, scope, item);

	if (!pgd_store_map_row_bind(g->instance_id, g->nodes[n].id, scope, item,
								iscope))
		elog(ERROR, "MAP node %s of instance %s has no row %d in scope %s",
			 g->nodes[n].id, g->instance_id, item, scope);
	pgd_apply_start_node(g, c, iscope);
}

/*
 * The scope each lane of the MAP running in scope runs its item in now
 * (NULL for a lane that runs none), from the lanes' stamps.
 */
static char **
lane_scopes(const PgdGraph *g, int n, const char *scope)
{
	int			   nl = g->nodes[n].nitems;
	const char   **ids = palloc(sizeof(char *) * Max(nl, 1));
	char		 **out = palloc0(sizeof(char *) * Max(nl, 1));
	char		 **row_ids;
	PgdNodeStatus *statuses;
	char		 **stamps;
	int			   rows;

	for (int j = 0; j < nl; j++)
		ids[j] = g->nodes[g->nodes[n].items[j]].id;
	rows = pgd_store_node_stamps(g->instance_id, ids, nl, &row_ids, &statuses,
								 &stamps);
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < nl; j++)
			if (strcmp(row_ids[r], ids[j]) == 0 && stamps[r] != NULL &&
				strcmp(pgd_strip_scope(stamps[r]), scope) == 0)
				out[j] = stamps[r];
	return out;
}

/* The item a lane's scope ("<scope>::<lane id>::<item + 1>") runs. */
static int
scope_item(const char *lane_scope)
{
	const char *p = strrchr(lane_scope, ':');

	if (p == NULL || atoi(p + 1) < 1)
		elog(ERROR, "malformed MAP lane scope \"%s\"", lane_scope);
	return atoi(p + 1) - 1;
}

/* The query of a MAP in lanes mode returned total rows (in map_rows). */
static void
lanes_rows_arrived(PgdGraph *g, int n, const char *scope, PgdOutcome outcome,
				   const DfMapSettings *s)
{
	char   *err = NULL;
	DfJson *res = dfjson_parse(outcome.result, strlen(outcome.result), &err);
	DfJson *items = res ? dfjson_get(res, "items") : NULL;
	DfJson *rows = res ? dfjson_get(res, "rows") : NULL;
	int64	total;
	int		lanes;
	int		m;
	int	   *tnodes;
	int		have = g->nodes[n].nitems;
	uint64	ends;

	if (items != NULL && dfjson_get_int64(items, &total))
		;
	else if (rows != NULL && rows->type == DFJ_ARRAY)
	{
		/* the rows came as a result (a step in another database) */
		total = rows->count;
		if (total > 0)
			pgd_store_map_rows_add(g->instance_id, g->nodes[n].id, scope, 0,
								   outcome.result);
	}
	else
	{
		map_end(g, n, scope,
				pgd_failure("MAP query did not return rows: %s",
							outcome.result));
		return;
	}
	if (total > PG_INT32_MAX - 1)
	{
		PgdOutcome too_many =
			pgd_failure("df.map: the query returned " INT64_FORMAT " rows, more than the %d a MAP takes",
						total, PG_INT32_MAX - 1);

		too_many.code = pstrdup("fail");
		map_end(g, n, scope, too_many);
		return;
	}
	if (total == 0)
	{
		map_end(g, n, scope,
				(PgdOutcome){true,
							 s->collect ? pstrdup("[]") :
										  pstrdup("{\"items\":0,\"succeeded\":0,\"failed\":0}")});
		return;
	}
	lanes = (int) Min((int64) s->max_concurrent, total);
	m = template_nodes(g, g->nodes[n].right, &tnodes);
	if (lanes > have &&
		(int64) g->nnodes + (int64) (lanes - have) * m > DF_MAX_NODES)
	{
		PgdOutcome too_many =
			pgd_failure("df.map: %d lanes, each a copy of its step (%d node%s), would make the graph %lld nodes, "
						"more than the limit of %d nodes",
						lanes, m, m == 1 ? "" : "s",
						(long long) g->nnodes + (long long) (lanes - have) * m,
						DF_MAX_NODES);

		too_many.code = pstrdup("fail");
		map_end(g, n, scope, too_many);
		return;
	}
	if (lanes > have)
		make_children(g, n, have, lanes);

	pgd_store_map_open(g->instance_id, g->nodes[n].id, scope, (int) total,
					   lanes);
	ends = map_ends;
	for (int j = 0; j < lanes; j++)
	{
		start_item(g, n, scope, j, j);
		/* an item that ended at once may have ended the MAP */
		if (map_ends != ends)
		{
			int t, st, f;

			pgd_store_map_counts(g->instance_id, g->nodes[n].id, scope, &t,
								 &st, &f);
			if (t < 0)
				return;
			ends = map_ends;
		}
	}
}

/* A tolerated failure, as kept: {"error": ..., "code": ...}. */
static char *
item_error(PgdOutcome outcome)
{
	DfJson *e = dfjson_make_object();

	dfjson_object_add(e, "error",
					  dfjson_make_string(outcome.result ? outcome.result : ""));
	dfjson_object_add(e, "code",
					  outcome.code ? dfjson_make_string(outcome.code) :
									 dfjson_make_null());
	return dfjson_to_text(e);
}

/* Every item of the MAP running in scope has ended: its outcome. */
static void
lanes_finish(PgdGraph *g, int n, const char *scope, const DfMapSettings *s,
			 int total, int nfailed)
{
	const char *map_id = g->nodes[n].id;

	if (s->collect)
	{
		int64 size = pgd_store_map_rows_size(g->instance_id, map_id, scope);
		int64 limit = (int64) pgd_max_result_size * 1024;

		if (size > limit)
		{
			PgdOutcome too_big =
				pgd_failure("df.map: the results of its %d items are " INT64_FORMAT " bytes, "
							"more than pg_durable.max_result_size (%d kB); with collect => false "
							"the step writes its results itself and the MAP returns counts",
							total, size, pgd_max_result_size);

			too_big.code = pstrdup("fail");
			map_end(g, n, scope, too_big);
			return;
		}
		map_end(g, n, scope,
				(PgdOutcome){true, pgd_store_map_rows_results(
									   g->instance_id, map_id, scope, false)});
		return;
	}
	map_end(g, n, scope,
			(PgdOutcome){
				true,
				nfailed == 0 ?
					psprintf("{\"items\":%d,\"succeeded\":%d,\"failed\":0}",
							 total, total) :
					psprintf("{\"items\":%d,\"succeeded\":%d,\"failed\":%d,\"failures\":%s}",
							 total, total - nfailed, nfailed,
							 pgd_store_map_rows_results(g->instance_id, map_id,
														scope, true))});
}

/* Lane child of MAP n (running in scope) ended its item with outcome. */
static void
lane_done(PgdGraph *g, int n, int child, const char *scope,
		  PgdOutcome outcome, const DfMapSettings *s)
{
	const char	  *map_id = g->nodes[n].id;
	const char	  *child_id = g->nodes[child].id;
	char		 **row_ids;
	PgdNodeStatus *statuses;
	char		 **stamps;
	char		  *iscope;
	int			   lane = -1;
	int			   item;
	int			   total, finished, nfailed, next;

	for (int j = 0; j < g->nodes[n].nitems; j++)
		if (g->nodes[n].items[j] == child)
			lane = j;
	/* the lane's stamp is the scope of the item it ran */
	if (lane < 0 ||
		pgd_store_node_stamps(g->instance_id, &child_id, 1, &row_ids,
							  &statuses, &stamps) != 1 ||
		stamps[0] == NULL || strcmp(pgd_strip_scope(stamps[0]), scope) != 0)
		elog(ERROR, "node %s is not a lane of MAP node %s running in scope %s",
			 child_id, map_id, scope);
	iscope = stamps[0];
	item = scope_item(iscope);
	if (!pgd_store_map_lane_done(g->instance_id, map_id, scope, !outcome.ok,
								 s->tolerated_failures, &total, &finished,
								 &nfailed, &next))
		elog(ERROR, "MAP node %s of instance %s has no counters in scope %s",
			 map_id, g->instance_id, scope);
	/* the item's named results ($item among them) go with it */
	pgd_store_map_item_results_drop(g->instance_id, iscope);

	if (!outcome.ok && nfailed > s->tolerated_failures)
	{
		PgdOutcome failed = outcome;
		char	 **scopes = lane_scopes(g, n, scope);

		/* the other lanes' items are no longer wanted */
		for (int j = 0; j < g->nodes[n].nitems; j++)
			if (j != lane && scopes[j] != NULL)
				pgd_apply_abandon_scope(g, scopes[j]);
		failed.result = psprintf("MAP item %d failed: %s", item + 1,
								 outcome.result ? outcome.result : "");
		map_end(g, n, scope, failed);
		return;
	}
	if (!outcome.ok)
		pgd_store_map_row_done(g->instance_id, map_id, scope, item,
							   item_error(outcome), true);
	else
		pgd_store_map_row_done(g->instance_id, map_id, scope, item,
							   s->collect ?
								   (outcome.result ? outcome.result : "null") :
								   NULL,
							   false);
	if (finished >= total)
	{
		lanes_finish(g, n, scope, s, total, nfailed);
		return;
	}
	/* the lane's next item starts in the transaction where this one ended */
	if (next >= 0)
		start_item(g, n, scope, lane, next);
}

typedef struct MapSink
{
	char *instance_id;
	char *map_id;
	char *scope;
} MapSink;

static void
map_sink_flush(void *arg, int64 first, const char *chunk)
{
	MapSink *m = arg;

	pgd_store_map_rows_add(m->instance_id, m->map_id, m->scope, first, chunk);
}

bool
pgd_map_row_sink(const PgdGraph *g, int n, const char *scope,
				 PgdRowSink *sink)
{
	int			  p = g->nodes[n].parent;
	MapSink		 *m;

	if (p < 0 || g->nodes[p].type != DF_NODE_MAP || g->nodes[p].left != n ||
		!g->nodes[p].map.lanes)
		return false;
	m = palloc(sizeof(MapSink));
	m->instance_id = pstrdup(g->instance_id);
	m->map_id = pstrdup(g->nodes[p].id);
	m->scope = pgd_parent_scope(g, n, scope);
	sink->flush = map_sink_flush;
	sink->arg = m;
	return true;
}


void
pgd_map_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *map = &g->nodes[n];

	if (map->map_problem != NULL)
	{
		pgd_apply_finish_node(g, n, scope,
							  pgd_failure("%s", map->map_problem));
		return;
	}
	pgd_apply_start_node(g, map->left, pgd_branch_scope(g, map->left, scope));
}

void
pgd_map_child_done(PgdGraph *g, int n, int child, const char *scope,
				   PgdOutcome outcome)
{
	const char *map_id = g->nodes[n].id;
	int			item = -1;
	int			total, started, finished;
	const DfMapSettings *s = &g->nodes[n].map;
	bool		lanes = s->lanes;

	if (child == g->nodes[n].left)
	{
		if (!outcome.ok)
		{
			map_end(g, n, scope, outcome);
			return;
		}
		pgd_store_results_merge(g->instance_id,
								pgd_branch_scope(g, child, scope), scope,
								true);
		if (lanes)
			lanes_rows_arrived(g, n, scope, outcome, s);
		else
			rows_arrived(g, n, scope, outcome);
		return;
	}
	if (lanes)
	{
		lane_done(g, n, child, scope, outcome, s);
		return;
	}

	for (int i = 0; i < g->nodes[n].nitems; i++)
		if (g->nodes[n].items[i] == child)
			item = i;
	if (item < 0)
		elog(ERROR, "node %s is not a child of MAP node %s",
			 g->nodes[child].id, map_id);
	if (!pgd_store_map_child_done(g->instance_id, map_id, scope, &total,
								  &started, &finished))
		elog(ERROR, "MAP node %s of instance %s has no counters in scope %s",
			 map_id, g->instance_id, scope);

	if (!outcome.ok)
	{
		PgdOutcome failed = outcome;

		/* like a JOIN branch: the others are no longer wanted */
		for (int i = 0; i < started && i < g->nodes[n].nitems; i++)
			if (i != item)
				pgd_apply_abandon_scope(g,
										pgd_branch_scope(g,
														 g->nodes[n].items[i],
														 scope));
		failed.result = psprintf("MAP item %d failed: %s", item + 1,
								 outcome.result ? outcome.result : "");
		map_end(g, n, scope, failed);
		return;
	}
	if (finished >= total)
	{
		const char **ids = palloc(sizeof(char *) * total);

		for (int i = 0; i < total; i++)
			ids[i] = g->nodes[g->nodes[n].items[i]].id;
		map_end(g, n, scope,
				(PgdOutcome){
					true, pgd_store_map_results(g->instance_id, total, ids)});
		return;
	}
	if (started < total)
	{
		/* the next child starts in the transaction where this one ended */
		pgd_store_map_started(g->instance_id, map_id, scope, started + 1);
		start_child(g, n, scope, started);
	}
}
