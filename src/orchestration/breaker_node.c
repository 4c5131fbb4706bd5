/*-------------------------------------------------------------------------
 *
 * breaker_node.c
 *	  The BREAKER wrapper node, df.with_breaker(step, name)
 *	  (docs/design/breakers.md): its whole subtree is one call
 *	  of the breaker.
 *
 *	 start		the breaker admits the call: the child starts, and the
 *				ticket (which state admitted it, whether it is a half-open
 *				probe) is kept in the node's status_details, since the
 *				child may end in another transaction of another process;
 *				refused, the node fails at once with kind circuit_open
 *				(unless an enclosing df.retry with circuit_open in its
 *				retry_on schedules another admission: a timer on the node,
 *				due at the later of the back-off and the breaker's
 *				half-open time).
 *	 child_done the child's outcome is recorded by the breaker and is the
 *				node's.
 *
 * A ticket of a state that is over (the breaker moved on, or the server
 * restarted: the epochs start from the clock) records nothing.
 *
 * Locks: the caller holds the instance's runs row; the breakers' LWLock
 * is taken and released inside engine/breaker_admission.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "engine/apply.h"
#include "engine/breaker_admission.h"
#include "store/store.h"
#include "orchestration/orchestration.h"

static char *
ticket_json(const PgdBreakerTicket *t)
{
	DfJson *d = dfjson_make_object();
	DfJson *k = dfjson_make_object();

	dfjson_object_add(k, "slot", dfjson_make_number(psprintf("%d", t->slot)));
	dfjson_object_add(k, "epoch",
					  dfjson_make_number(psprintf(UINT64_FORMAT, t->epoch)));
	dfjson_object_add(k, "probe", dfjson_make_bool(t->probe));
	dfjson_object_add(k, "probe_id",
					  dfjson_make_number(psprintf(UINT64_FORMAT,
												  t->probe_id)));
	dfjson_object_add(k, "started",
					  dfjson_make_number(psprintf(INT64_FORMAT, t->started)));
	dfjson_object_add(k, "role", dfjson_make_number(psprintf("%u", t->role)));
	dfjson_object_add(d, "breaker_ticket", k);
	/* for df.instance_nodes while the subtree runs: how the breaker let it through */
	dfjson_object_add(d, "breaker_state",
					  dfjson_make_string(t->probe ? "half_open" : "closed"));
	return dfjson_to_text(d);
}

static bool
ticket_read(const char *details, const char *name, PgdBreakerTicket *t)
{
	char   *err = NULL;
	DfJson *d = details ? dfjson_parse(details, strlen(details), &err) : NULL;
	DfJson *k = d ? dfjson_get(d, "breaker_ticket") : NULL;
	DfJson *probe;
	int64	v;

	memset(t, 0, sizeof(*t));
	if (k == NULL || k->type != DFJ_OBJECT)
		return false;
	if (!dfjson_get_int64(dfjson_get(k, "slot"), &v) || v < 0 ||
		v >= PGD_MAX_BREAKERS)
		return false;
	t->slot = (int) v;
	if (!dfjson_get_int64(dfjson_get(k, "epoch"), &v))
		return false;
	t->epoch = (uint64) v;
	probe = dfjson_get(k, "probe");
	t->probe = probe != NULL && probe->type == DFJ_BOOL && probe->boolean;
	if (dfjson_get_int64(dfjson_get(k, "probe_id"), &v))
		t->probe_id = (uint64) v;
	if (dfjson_get_int64(dfjson_get(k, "started"), &v))
		t->started = (TimestampTz) v;
	if (dfjson_get_int64(dfjson_get(k, "role"), &v))
		t->role = (Oid) v;
	strlcpy(t->name, name, sizeof(t->name));
	t->active = true;
	return true;
}

void
pgd_breaker_node_start(PgdGraph *g, int n, const char *scope)
{
	const PgdNode	*node = &g->nodes[n];
	const char		*name = node->wrapper->breaker_name;
	PgdBreakerTicket t;
	PgdOutcome		 refusal;
	PgdRunInfo		 run;

	pgd_graph_run(g, &run);
	if (!pgd_breaker_admit_call(name, run.submitted_by, &t, &refusal))
	{
		pgd_store_node_details_merge(g->instance_id, node->id,
									 "{\"breaker_ticket\": null}");
		if (!pgd_wrapper_retry_failed(g, n, scope, &refusal))
			pgd_apply_finish_node(g, n, scope, refusal);
		return;
	}
	pgd_store_node_details_merge(g->instance_id, node->id, ticket_json(&t));
	pgd_apply_start_node(g, node->left, scope);
}

void
pgd_breaker_node_done(PgdGraph *g, int n, const char *scope,
					  PgdOutcome outcome)
{
	const PgdNode	*node = &g->nodes[n];
	PgdBreakerTicket t;

	if (ticket_read(pgd_store_node_details(g->instance_id, node->id),
					node->wrapper->breaker_name, &t))
		pgd_breaker_record_call(&t, &outcome);
	pgd_apply_finish_node(g, n, scope, outcome);
}
