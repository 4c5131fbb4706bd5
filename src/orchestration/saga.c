/*-------------------------------------------------------------------------
 *
 * saga.c
 *	  Sagas (docs/design/sagas.md): the registration of an
 *	  undo when the forward step of a COMPENSATED node completes, and the
 *	  compensations: of a SAGA whose body failed, of a losing RACE branch,
 *	  and of the instance, the root being an implicit saga.  wrappers.c
 *	  calls these from the engine's wrapper hooks; saga_resume.c resumes a
 *	  stopped compensation (df.compensate).
 *
 * Registration: the transition in which the forward step completed
 * writes the undo's row (df_internal.compensations) with the named
 * results visible in the forward's scope, and an undo_registered event.
 *
 * A compensation is named by a scope, its owner: the body scope of a SAGA
 * ("<saga scope>::<body id>::1"), the scope of a losing RACE branch, or
 * the root scope (depth 1: the instance).  It takes the registered undos
 * whose forward ran within it (a RACE branch: any generation of it; the
 * root: the whole instance) and marks them compensated_by the owner, so an
 * undo that ends knows which compensation goes on.  An inner SAGA that
 * completed leaves its undos registered: they lie within the enclosing
 * saga's body too, and it compensates them if it fails later.
 *
 * The undos run one at a time, latest registered first, or all at once
 * (df.saga(parallel => true)).  Undo seq of COMPENSATED node c, whose
 * forward ran in scope s, runs in the scope "<s>::<c>::<seq>", which holds
 * the snapshot as its named results (so $order_id is the value its own
 * forward bound); its liveness is its own subtree's (apply.c).  Each undo
 * is an ordinary step: its task and its effects commit together, so a
 * crash repeats an undo's transaction, never half of it.
 *
 * When every undo ran:
 *	 root	a SAGA at the root without on_compensated, or the implicit
 *			saga: the instance ends 'compensated' (df.result NULL; the root
 *			node's status_details hold the original failure and the undos).
 *	 SAGA	with on_compensated: it runs in the SAGA's scope and its
 *			outcome is the SAGA's (at the root: the instance ends
 *			'compensated' and df.result is its result); without: the SAGA
 *			fails with its body's error (code and node kept, outcome
 *			marked compensated), so an enclosing saga compensates further;
 *			the instance ends 'compensated' when nothing is left to undo.
 *	 RACE	the race ends with its winner's outcome.
 * An undo that fails for good: on_undo_failure 'stop' (the default, and
 * always for the implicit saga) ends the instance 'failed' with
 * "compensation of <node> failed: ...", the remaining undos registered for
 * df.compensate; 'continue' runs the others, and the compensation then
 * fails with every failure in the node's status_details.
 *
 * Locks: the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "engine/apply.h"
#include "engine/scope.h"
#include "store/store.h"
#include "orchestration/orchestration.h"
#include "orchestration/saga_internal.h"

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

/* The root scope of the generation a nested scope lies in. */
char *
pgd_saga_root_scope(const char *scope)
{
	char *s = pstrdup(scope);

	while (pgd_scope_depth(s) > 1)
		s = pgd_strip_scope(s);
	return s;
}

/* The node id in the last "::<id>::<gen>" of a nested scope. */
static char *
last_node_id(const char *scope)
{
	char *stripped = pgd_strip_scope(scope);
	char *id = pstrdup(scope + strlen(stripped) + 2);
	char *sep = strstr(id, "::");

	if (sep != NULL)
		*sep = '\0';
	return id;
}

void
pgd_saga_comp_of(PgdGraph *g, const char *owner, PgdComp *c)
{
	int b;
	int p;
	int a;

	memset(c, 0, sizeof(*c));
	c->owner = pstrdup(owner);
	c->saga = -1;
	c->race = -1;
	c->loser = -1;
	if (pgd_scope_depth(owner) <= 1)
	{
		/* the instance: every undo of every generation */
		c->within = pstrdup(g->instance_id);
		c->node_scope = c->owner;
		return;
	}
	c->node_scope = pgd_strip_scope(owner);
	b = pgd_graph_find(g, last_node_id(owner));
	p = b >= 0 ? g->nodes[b].parent : -1;
	if (p >= 0 && g->nodes[p].type == DF_NODE_RACE)
	{
		c->race = p;
		c->loser = b;
		/* a looping branch moves on: its undos of every generation */
		c->within = psprintf("%s::%s", c->node_scope, g->nodes[b].id);
	}
	else
	{
		c->saga = p;
		c->within = c->owner;
	}
	/* the policy: the SAGA's own, or that of the nearest SAGA around the RACE */
	for (a = c->race >= 0 ? g->nodes[p].parent : p; a >= 0;
		 a = g->nodes[a].parent)
		if (g->nodes[a].type == DF_NODE_SAGA)
			break;
	if (c->race < 0 && (p < 0 || g->nodes[p].type != DF_NODE_SAGA))
		c->saga = -1; /* cannot happen: a compensation of no SAGA */
	if (a >= 0 && g->nodes[a].wrapper_problem == NULL)
	{
		c->parallel = g->nodes[a].wrapper->saga_parallel;
		c->cont = g->nodes[a].wrapper->saga_continue;
	}
}

static const char *
comp_node_id(const PgdGraph *g, const PgdComp *c)
{
	if (c->saga >= 0)
		return g->nodes[c->saga].id;
	if (c->race >= 0)
		return g->nodes[c->race].id;
	return NULL;
}

/* The original failure and the undos that ran (and those that failed). */
static DfJson *
compensation_summary(PgdGraph *g, const PgdComp *c, const char *error,
					 int *nfailed, char **first_failure)
{
	DfJson *o = dfjson_make_object();
	DfJson *undos = dfjson_make_array();
	DfJson *failures = dfjson_make_array();
	char  **ids;
	char  **errors;
	int		n = pgd_store_undos_done(g->instance_id,
								 c->saga < 0 && c->race < 0 ? NULL : c->owner,
									 &ids, &errors);

	*nfailed = 0;
	*first_failure = NULL;
	for (int i = 0; i < n; i++)
	{
		if (errors[i] == NULL)
		{
			dfjson_array_add(undos, dfjson_make_string(ids[i]));
			continue;
		}
		{
			DfJson *f = dfjson_make_object();

			dfjson_object_add(f, "node", dfjson_make_string(ids[i]));
			dfjson_object_add(f, "error", dfjson_make_string(errors[i]));
			dfjson_array_add(failures, f);
			if ((*nfailed)++ == 0)
				*first_failure = psprintf("compensation of %s failed: %s",
										  ids[i], errors[i]);
		}
	}
	dfjson_object_add(o, "error",
					  error ? dfjson_make_string(error) : dfjson_make_null());
	dfjson_object_add(o, "undos", undos);
	if (*nfailed > 0)
		dfjson_object_add(o, "failures", failures);
	return o;
}

static void
merge_compensation(PgdGraph *g, int n, DfJson *summary)
{
	DfJson *wrap = dfjson_make_object();

	dfjson_object_add(wrap, "compensation", summary);
	pgd_store_node_details_merge(g->instance_id, g->nodes[n].id,
								 dfjson_to_text(wrap));
}

/* The failure of a SAGA's body, as it failed (code and node kept). */
static PgdOutcome
body_failure(PgdGraph *g, int saga)
{
	PgdOutcome	  o = {0};
	PgdNodeStatus status;

	pgd_store_node_state(g->instance_id, g->nodes[g->nodes[saga].left].id,
						 &status, &o.result);
	pgd_store_node_error_code(g->instance_id, g->nodes[g->nodes[saga].left].id,
							  &o);
	o.ok = false;
	return o;
}

/* Every undo of compensation c ran: what comes next. */
static void
compensation_done(PgdGraph *g, const PgdComp *c)
{
	int		   nfailed;
	char	  *failure;
	PgdOutcome orig = {0};
	DfJson	  *summary;
	char	  *root_error = NULL;
	PgdNodeStatus status;

	if (c->saga >= 0)
		orig = body_failure(g, c->saga);
	else if (c->race < 0)
		pgd_store_node_state(g->instance_id, g->nodes[g->root].id, &status,
							 &root_error);
	summary =
		compensation_summary(g, c, c->saga >= 0 ? orig.result : root_error,
							 &nfailed, &failure);
	if (c->race >= 0)
	{
		pgd_apply_race_finish(g, c->race, c->loser, c->node_scope);
		merge_compensation(g, c->race, summary);
		return;
	}
	if (c->saga < 0)
	{
		/* the implicit saga of the instance */
		merge_compensation(g, g->root, summary);
		if (nfailed > 0)
			pgd_apply_end_with(g, c->owner, PGD_INSTANCE_FAILED,
							   "instance_failed",
							   pgd_event_detail("error", failure));
		else
			pgd_apply_end_with(g, c->owner, PGD_INSTANCE_COMPENSATED,
							   "instance_compensated",
							   dfjson_to_text(summary));
		return;
	}
	if (nfailed > 0)
	{
		pgd_apply_finish_node(g, c->saga, c->node_scope,
							  pgd_failure("%s", failure));
		merge_compensation(g, c->saga, summary);
		return;
	}
	if (g->nodes[c->saga].right >= 0)
	{
		/* pgd_saga_compensated_done records the summary */
		pgd_apply_start_node(g, g->nodes[c->saga].right, c->node_scope);
		return;
	}
	if (g->nodes[c->saga].parent < 0)
	{
		/* the root SAGA: the instance is compensated */
		pgd_store_node_done(g->instance_id, g->nodes[c->saga].id,
							c->node_scope, orig);
		merge_compensation(g, c->saga, summary);
		pgd_apply_end_with(g, c->node_scope, PGD_INSTANCE_COMPENSATED,
						   "instance_compensated", dfjson_to_text(summary));
		return;
	}
	orig.compensated = true;
	/* the node's end writes its status_details: the summary goes after */
	pgd_apply_finish_node(g, c->saga, c->node_scope, orig);
	merge_compensation(g, c->saga, summary);
}

/* Start undo row u of compensation c. */
static void
start_undo(PgdGraph *g, const PgdComp *c, const PgdUndoRow *u)
{
	char   *uscope;
	char   *err = NULL;
	DfJson *snap;
	DfJson *detail;
	int		n = pgd_graph_find(g, u->node_id);

	if (n < 0 || g->nodes[n].type != DF_NODE_COMPENSATED)
	{
		/* a row that names no COMPENSATED node of this graph: fail clearly */
		pgd_store_undo_finish(g->instance_id, u->seq, false,
							  "the node is not a COMPENSATED node of the graph");
		pgd_apply_end_with(g, c->owner, PGD_INSTANCE_FAILED, "instance_failed",
						   pgd_event_detail("error",
											psprintf("compensation of %s failed: it is not a COMPENSATED node of the graph",
													 u->node_id)));
		return;
	}
	uscope = psprintf("%s::%s::" INT64_FORMAT, u->scope, u->node_id, u->seq);
	/*
	 * Taken again (its compensation was abandoned): a scope of its own, so
	 * that the attempt that was interrupted is never live again.
	 */
	if (u->attempts > 1)
		uscope = psprintf("%s::%s::%d", uscope, g->nodes[g->nodes[n].right].id,
						  u->attempts);
	snap = dfjson_parse(u->results, strlen(u->results), &err);
	if (snap != NULL && snap->type == DFJ_OBJECT)
		for (int i = 0; i < snap->count; i++)
			pgd_store_result_save(g->instance_id, uscope, snap->pairs[i].key,
								  dfjson_to_text(snap->pairs[i].value));
	detail = dfjson_make_object();
	dfjson_object_add(detail, "undo",
					  dfjson_make_string(g->nodes[g->nodes[n].right].id));
	dfjson_object_add(detail, "seq",
					  dfjson_make_number(psprintf(INT64_FORMAT, u->seq)));
	pgd_store_event_add(g->instance_id, "undo_started", u->node_id, uscope, 0,
						dfjson_to_text(detail));
	pgd_apply_start_node(g, g->nodes[n].right, uscope);
}

void
pgd_saga_advance(PgdGraph *g, const PgdComp *c)
{
	PgdUndoRow *rows;
	int			running;
	int			failed;
	int			n;

	pgd_store_undo_tally(g->instance_id, c->owner, &running, &failed);
	if (running > 0 && !c->parallel)
		return; /* cannot happen: one runs at a time */
	n = pgd_store_undo_claim(g->instance_id, c->within, c->owner, c->parallel,
							 &rows);
	for (int i = 0; i < n; i++)
		start_undo(g, c, &rows[i]);
	if (n == 0 && running == 0)
		compensation_done(g, c);
}

/*
 * Compensation c begins with the failure error (text): undos within it
 * left running by an abandoned compensation are taken again.
 */
static void
compensation_begin(PgdGraph *g, const PgdComp *c, const char *error)
{
	char **owners;

	(void) pgd_store_undo_requeue(g->instance_id, c->within, false, &owners);
	pgd_store_event_add(g->instance_id, "compensation_started",
						comp_node_id(g, c), c->owner, 0,
						pgd_event_detail("error", error));
	pgd_saga_advance(g, c);
}

bool
pgd_saga_instance_failed(PgdGraph *g, const char *scope, PgdOutcome outcome)
{
	PgdComp c;

	pgd_saga_comp_of(g, pgd_saga_root_scope(scope), &c);
	if (!pgd_store_undo_pending(g->instance_id, c.within))
	{
		int		nfailed;
		char   *failure;
		DfJson *summary;

		if (!outcome.compensated)
			return false;
		/* a SAGA compensated and nothing is left to undo */
		summary =
			compensation_summary(g, &c, outcome.result, &nfailed, &failure);
		merge_compensation(g, g->root, summary);
		pgd_apply_end_with(g, scope, PGD_INSTANCE_COMPENSATED,
						   "instance_compensated", dfjson_to_text(summary));
		return true;
	}
	compensation_begin(g, &c, outcome.result);
	return true;
}

bool
pgd_saga_body_failed(PgdGraph *g, int saga, const char *scope,
					 PgdOutcome outcome)
{
	const PgdNode *node = &g->nodes[saga];
	char		  *body = pgd_branch_scope(g, node->left, scope);
	PgdComp		   c;

	/*
	 * Nothing of the body runs on: the body has ended, and a JOIN in it
	 * cancelled its running branches when one failed (join_fails_fast).
	 */
	if (!pgd_store_undo_pending(g->instance_id, body) && node->right < 0)
		return false;
	pgd_saga_comp_of(g, body, &c);
	compensation_begin(g, &c, outcome.result);
	return true;
}

bool
pgd_saga_branch_lost(PgdGraph *g, int race, int loser, const char *loser_scope)
{
	PgdComp c;

	(void) race;
	(void) loser;
	pgd_saga_comp_of(g, loser_scope, &c);
	if (!pgd_store_undo_pending(g->instance_id, c.within))
		return false;
	compensation_begin(g, &c, "the branch lost the race");
	return true;
}

/*
 * Is the SAGA or RACE of compensation c still running where it began?  A
 * df.timeout around it may have abandoned it, undos under way and all.
 */
static bool
comp_is_live(PgdGraph *g, const PgdComp *c)
{
	int n = c->saga >= 0 ? c->saga : c->race;

	return n < 0 || pgd_node_is_live(g, n, c->node_scope);
}

/*
 * The sequence number in the scope of an undo of COMPENSATED node n:
 * "<forward scope>::<n>::<seq>", with "::<undo id>::<attempt>" after it
 * when the undo was taken again.
 */
static int64
undo_seq(const PgdGraph *g, int n, const char *uscope)
{
	char	   *s = pstrdup(uscope);
	const char *p;

	if (pgd_scope_depth(s) > 2 &&
		strcmp(last_node_id(s), g->nodes[g->nodes[n].right].id) == 0)
		s = pgd_strip_scope(s);
	p = strrchr(s, ':');
	return p ? strtoll(p + 1, NULL, 10) : 0;
}

void
pgd_saga_undo_done(PgdGraph *g, int n, const char *uscope, PgdOutcome outcome)
{
	int64	seq = undo_seq(g, n, uscope);
	char   *owner;
	DfJson *detail = dfjson_make_object();
	PgdComp c;

	owner =
		pgd_store_undo_finish(g->instance_id, seq, outcome.ok, outcome.result);
	/* a row registered before compensations had owners: the instance's */
	pgd_saga_comp_of(g, owner ? owner : pgd_saga_root_scope(uscope), &c);
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
	if (!comp_is_live(g, &c))
		return; /* its SAGA or RACE was abandoned: an enclosing one takes over */
	if (outcome.ok || c.cont)
	{
		pgd_saga_advance(g, &c);
		return;
	}
	/*
	 * on_undo_failure 'stop': the remaining undos stay registered.  The
	 * root's status_details say what failed and what was undone, for the
	 * instance's output (monitor.h, PGD_SQL_OUTPUT).
	 */
	if (c.race < 0)
	{
		PgdOutcome	  orig = {0};
		PgdNodeStatus status;
		char		 *root_error = NULL;
		int			  nfailed;
		char		 *failure;

		if (c.saga >= 0)
			orig = body_failure(g, c.saga);
		else
			pgd_store_node_state(g->instance_id, g->nodes[g->root].id,
								 &status, &root_error);
		merge_compensation(g, g->root,
						   compensation_summary(g, &c,
												c.saga >= 0 ? orig.result :
															  root_error,
												&nfailed, &failure));
	}
	pgd_apply_end_with(g, c.owner, PGD_INSTANCE_FAILED, "instance_failed",
					   pgd_event_detail("error",
										psprintf("compensation of %s failed: %s",
												 g->nodes[n].id,
												 outcome.result ?
													 outcome.result :
													 "")));
}

void
pgd_saga_compensated_done(PgdGraph *g, int saga, const char *scope,
						  PgdOutcome outcome)
{
	PgdComp	   c;
	PgdOutcome orig = body_failure(g, saga);
	int		   nfailed;
	char	  *failure;
	DfJson	  *summary;

	pgd_saga_comp_of(g, pgd_branch_scope(g, g->nodes[saga].left, scope), &c);
	summary = compensation_summary(g, &c, orig.result, &nfailed, &failure);
	if (g->nodes[saga].parent >= 0 || !outcome.ok)
	{
		pgd_apply_finish_node(g, saga, scope, outcome);
		merge_compensation(g, saga, summary);
		return;
	}
	/* the root SAGA: the instance is compensated, df.result is on_compensated's */
	pgd_store_node_done(g->instance_id, g->nodes[saga].id, scope, outcome);
	merge_compensation(g, saga, summary);
	pgd_apply_end_with(g, scope, PGD_INSTANCE_COMPENSATED,
					   "instance_compensated", dfjson_to_text(summary));
}

bool
pgd_saga_join_fails_fast(PgdGraph *g, int join)
{
	(void) join;
	for (int i = 0; i < g->nnodes; i++)
		if (g->nodes[i].type == DF_NODE_COMPENSATED ||
			g->nodes[i].type == DF_NODE_SAGA)
			return true;
	return false;
}

/* ---------------------------------------------------------------------
 * The operations of COMPENSATED and SAGA (dispatch.c's table)
 * ---------------------------------------------------------------------
 */

/* A SAGA's body runs in a scope of its own. */
void
pgd_saga_start(PgdGraph *g, int n, const char *scope)
{
	int body = g->nodes[n].left;

	pgd_apply_start_node(g, body, pgd_branch_scope(g, body, scope));
}

/*
 * The forward step's outcome is the COMPENSATED node's; when it completed,
 * its undo is registered in the same transaction.  The end of the undo
 * (right) belongs to the compensation that ran it.
 */
void
pgd_compensated_child_done(PgdGraph *g, int n, int child, const char *scope,
						   PgdOutcome outcome)
{
	if (child == g->nodes[n].right)
	{
		pgd_saga_undo_done(g, n, scope, outcome);
		return;
	}
	if (outcome.ok)
		pgd_saga_register(g, n, scope);
	pgd_apply_finish_node(g, n, scope, outcome);
}

/*
 * The body's named results reach the SAGA's scope; a body that failed is
 * compensated when anything is registered in it or on_compensated is
 * given, and on_compensated's end is the SAGA's.
 */
void
pgd_saga_child_done(PgdGraph *g, int n, int child, const char *scope,
					PgdOutcome outcome)
{
	if (child == g->nodes[n].right)
	{
		pgd_saga_compensated_done(g, n, scope, outcome);
		return;
	}
	pgd_store_results_merge(g->instance_id, pgd_branch_scope(g, child, scope),
							scope, outcome.ok);
	if (!outcome.ok && pgd_saga_body_failed(g, n, scope, outcome))
		return;
	pgd_apply_finish_node(g, n, scope, outcome);
}
