/*-------------------------------------------------------------------------
 *
 * monitor_nodes.c
 *	  df.instance_nodes(instance_id_param): one row per node of an instance
 *	  with its physical status and the status inferred from the whole graph
 *	  (infer.c), and the compatibility overload
 *	  df.instance_nodes(instance_id_param, _last_n_executions) of older
 *	  releases (execution_id always 1, no inference).
 *
 * Rows come in tree order (the order of the inference walk: THEN/RACE
 * left, right; JOIN left, right, extras; IF condition, then, else; LOOP
 * body, condition), which the reference leaves unspecified.  An instance
 * the caller cannot see gives no rows.
 *
 * Locks: none (plain reads as the caller).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"

#include "monitor/monitor.h"

/* Append a text column (NULL when s is). */
static void
put_text(Datum *out, bool *outnull, int *c, const char *s)
{
	outnull[*c] = (s == NULL);
	out[*c] = s ? CStringGetTextDatum(s) : (Datum) 0;
	(*c)++;
}

static Datum
instance_nodes(FunctionCallInfo fcinfo, bool compat)
{
	ReturnSetInfo	*rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PgdInstanceView *v;
	int				 k;

	InitMaterializedSRF(fcinfo, 0);
	v = pgd_load_instance_view(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (v == NULL)
		return (Datum) 0;

	for (k = 0; k < v->norder; k++)
	{
		PgdNodeRow *r = &v->nodes[v->order[k]];
		Datum		out[12];
		bool		outnull[12];
		int			c = 0;

		memset(outnull, 0, sizeof(outnull));
		if (compat)
			out[c++] = Int64GetDatum(1);
		put_text(out, outnull, &c, r->id);
		put_text(out, outnull, &c, r->node_type);
		put_text(out, outnull, &c, r->query);
		put_text(out, outnull, &c, r->result_name);
		put_text(out, outnull, &c, r->left_id);
		put_text(out, outnull, &c, r->right_id);
		put_text(out, outnull, &c, r->status);
		put_text(out, outnull, &c, r->result);
		if (!compat)
		{
			put_text(out, outnull, &c, r->status_details);
			put_text(out, outnull, &c, r->inferred);
			put_text(out, outnull, &c,
					 r->from_ancestor >= 0 ? v->nodes[r->from_ancestor].id :
											 NULL);
		}
		out[c] = TimestampTzGetDatum(r->updated_at);
		outnull[c] = r->updated_at_null;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgd_instance_nodes);
Datum
pgd_instance_nodes(PG_FUNCTION_ARGS)
{
	return instance_nodes(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgd_instance_nodes_compat);
Datum
pgd_instance_nodes_compat(PG_FUNCTION_ARGS)
{
	return instance_nodes(fcinfo, true);
}
