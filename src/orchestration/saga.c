/*-------------------------------------------------------------------------
 *
 * saga.c
 *	  Sagas (orchestration-api.md §2, issue 16): the registration of an
 *	  undo when the forward step of a COMPENSATED node completes, and the
 *	  compensation of the instance, the root being an implicit saga.
 *	  wrappers.c calls these from the engine's wrapper hooks.
 *
 * Registration: the transition in which the forward step completed
 * writes the undo's row (df_internal.compensations) with the named
 * results visible in the forward's scope, and an undo_registered event.
 *
 * Compensation: when the root fails and undos are registered, the
 * instance stays running; the undos run one at a time, latest registered
 * first.  Undo seq of COMPENSATED node c, whose forward ran in scope s,
 * runs in the scope "<s>::<c>::<seq>", which holds the snapshot as its
 * named results (so $order_id is the value its own forward bound); its
 * liveness is its own subtree's (apply.c).  Each undo is an ordinary
 * step: its task and its effects commit together, so a crash repeats an
 * undo's transaction, never half of it.  When the last undo completed the
 * instance ends 'compensated' (df.result NULL; the root node's
 * status_details hold the original failure and the undos that ran).  An
 * undo that fails ends the instance 'failed' with "compensation of <node>
 * failed: ...", the remaining undos left registered (on_undo_failure
 * 'stop').
 *
 * Locks: the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "engine/apply.h"
#include "engine/scope.h"
#include "engine/store.h"
#include "orchestration/orchestration.h"

void
pgd_saga_register(PgdGraph *g, int n, const char *scope)
{
	const PgdNode *node = &g->nodes[n];
	DfJson		  *results = pgd_visible_results(g->instance_id, scope);
	DfJson		  *detail = dfjson_make_object();
	int64		   seq;

	seq = pgd_store_undo_register(g->instance_id, node->id, scope,
								  dfjson_to_text(results));
	dfjson_object_add(detail, "undo",
					  dfjson_make_string(g->nodes[node->right].id));
	dfjson_object_add(detail, "seq",
					  dfjson_make_number(psprintf(INT64_FORMAT, seq)));
	pgd_store_event_add(g->instance_id, "undo_registered", node->id, scope, 0,
						dfjson_to_text(detail));
}

/* The root's status_details get the original failure and the undos that ran. */
static DfJson *
compensation_summary(PgdGraph *g)
{
	DfJson *o = dfjson_make_object();
	DfJson *undos = dfjson_make_array();
	char   *status = NULL;
	char   *result = NULL;
	char  **ids;
	int		n = pgd_store_undos_done(g->instance_id, &ids);

	pgd_store_node_state(g->instance_id, g->nodes[g->root].id, &status,
						 &result);
	for (int i = 0; i < n; i++)
		dfjson_array_add(undos, dfjson_make_string(ids[i]));
	dfjson_object_add(o, "error",
					  result ? dfjson_make_string(result) :
							   dfjson_make_null());
	dfjson_object_add(o, "undos", undos);
	return o;
}

/*
 * Start the next undo, latest registered first; none left: the instance
 * is compensated.
 */
static void
next_undo(PgdGraph *g, const char *root_scope)
{
	int64	seq;
	char   *node_id;
	char   *scope;
	char   *results;
	char   *uscope;
	char   *err = NULL;
	DfJson *snap;
	DfJson *detail;
	int		c;

	if (!pgd_store_undo_next(g->instance_id, &seq, &node_id, &scope, &results))
	{
		DfJson *wrap = dfjson_make_object();
		DfJson *summary = compensation_summary(g);

		dfjson_object_add(wrap, "compensation", summary);
		pgd_store_node_details_merge(g->instance_id, g->nodes[g->root].id,
									 dfjson_to_text(wrap));
		pgd_apply_end_with(g, root_scope, PGD_INSTANCE_COMPENSATED,
						   "instance_compensated", dfjson_to_text(summary));
		return;
	}
	c = pgd_graph_find(g, node_id);
	if (c < 0 || g->nodes[c].type != DF_NODE_COMPENSATED)
	{
		/* a row that names no COMPENSATED node of this graph: fail clearly */
		pgd_store_undo_finish(g->instance_id, seq, false,
							  "the node is not a COMPENSATED node of the graph");
		pgd_apply_end_with(g, root_scope, PGD_INSTANCE_FAILED,
						   "instance_failed",
						   pgd_event_detail("error",
											psprintf("compensation of %s failed: it is not a COMPENSATED node of the graph",
													 node_id)));
		return;
	}

	uscope = psprintf("%s::%s::" INT64_FORMAT, scope, node_id, seq);
	snap = dfjson_parse(results, strlen(results), &err);
	if (snap != NULL && snap->type == DFJ_OBJECT)
		for (int i = 0; i < snap->count; i++)
			pgd_store_result_save(g->instance_id, uscope, snap->pairs[i].key,
								  dfjson_to_text(snap->pairs[i].value));
	detail = dfjson_make_object();
	dfjson_object_add(detail, "undo",
					  dfjson_make_string(g->nodes[g->nodes[c].right].id));
	dfjson_object_add(detail, "seq",
					  dfjson_make_number(psprintf(INT64_FORMAT, seq)));
	pgd_store_event_add(g->instance_id, "undo_started", node_id, uscope, 0,
						dfjson_to_text(detail));
	pgd_apply_start_node(g, g->nodes[c].right, uscope);
}

bool
pgd_saga_instance_failed(PgdGraph *g, const char *scope, PgdOutcome outcome)
{
	if (!pgd_store_undo_pending(g->instance_id))
		return false;
	pgd_store_event_add(g->instance_id, "compensation_started", NULL, scope, 0,
						pgd_event_detail("error", outcome.result));
	next_undo(g, scope);
	return true;
}

/* The last part of an undo's scope: its sequence number. */
static int64
undo_seq(const char *uscope)
{
	const char *p = strrchr(uscope, ':');

	return p ? strtoll(p + 1, NULL, 10) : 0;
}

void
pgd_saga_undo_done(PgdGraph *g, int n, const char *uscope, PgdOutcome outcome)
{
	int64	seq = undo_seq(uscope);
	char   *root_scope = pstrdup(uscope);
	DfJson *detail = dfjson_make_object();

	/* the root scope of the generation the undo's forward ran in */
	while (pgd_scope_depth(root_scope) > 1)
		root_scope = pgd_strip_scope(root_scope);
	pgd_store_undo_finish(g->instance_id, seq, outcome.ok, outcome.result);
	pgd_store_results_merge(g->instance_id, uscope, uscope, false);
	dfjson_object_add(detail, "seq",
					  dfjson_make_number(psprintf(INT64_FORMAT, seq)));
	if (!outcome.ok)
		dfjson_object_add(detail, "error",
						  dfjson_make_string(outcome.result ? outcome.result :
															  ""));
	pgd_store_event_add(g->instance_id,
						outcome.ok ? "undo_completed" : "undo_failed",
						g->nodes[n].id, uscope, 0, dfjson_to_text(detail));
	if (outcome.ok)
	{
		next_undo(g, root_scope);
		return;
	}
	/* on_undo_failure 'stop': the remaining undos stay registered */
	pgd_apply_end_with(g, root_scope, PGD_INSTANCE_FAILED, "instance_failed",
					   pgd_event_detail("error",
										psprintf("compensation of %s failed: %s",
												 g->nodes[n].id,
												 outcome.result ?
													 outcome.result :
													 "")));
}
