/*-------------------------------------------------------------------------
 *
 * spans_sql.c
 *	  df.instance_spans and df.timeline: the spans of an instance
 *	  (spans.c) as rows, and as a text Gantt chart.
 *
 * Both read under df.history's visibility (pgd_read_as_engine): an
 * instance the caller cannot see has no spans.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "monitor/spans.h"

#define SPAN_COLUMNS	 9
#define TIMELINE_COLUMNS 7
#define BAR_WIDTH		 40

PG_FUNCTION_INFO_V1(pgd_instance_spans);
Datum
pgd_instance_spans(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PgdSpanSet	  *set;

	InitMaterializedSRF(fcinfo, 0);
	set = pgd_spans_load(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	for (int i = 0; set != NULL && i < set->nspans; i++)
	{
		PgdSpan *s = &set->spans[i];
		Datum	 v[SPAN_COLUMNS];
		bool	 nulls[SPAN_COLUMNS] = {0};

		if (s->status_message)
			dfjson_object_add(s->attrs, "error.message",
							  dfjson_make_string(s->status_message));
		v[0] = CStringGetTextDatum(set->trace_id);
		v[1] = CStringGetTextDatum(s->span_id);
		v[2] = CStringGetTextDatum(s->parent_id);
		nulls[2] = s->parent_id[0] == '\0';
		v[3] = CStringGetTextDatum(s->name);
		v[4] = CStringGetTextDatum(pgd_span_kind_name(s->kind));
		v[5] = TimestampTzGetDatum(s->start);
		v[6] = TimestampTzGetDatum(s->end);
		nulls[6] = !s->ended;
		v[7] = CStringGetTextDatum(pgd_span_status_name(s->status));
		v[8] = DirectFunctionCall1(jsonb_in,
								   CStringGetDatum(dfjson_to_text(s->attrs)));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}

/*
 * One row per span: its depth, name (indented), attempt, offset from the
 * instance's start and duration in milliseconds, status, and a bar of
 * BAR_WIDTH columns scaled to the whole instance.  A span still running
 * is drawn to now.
 */
PG_FUNCTION_INFO_V1(pgd_timeline);
Datum
pgd_timeline(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PgdSpanSet	  *set;
	TimestampTz	   now = GetCurrentTimestamp();
	TimestampTz	   t0, t1;
	double		   total;

	InitMaterializedSRF(fcinfo, 0);
	set = pgd_spans_load(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	if (set == NULL || set->nspans == 0)
		return (Datum) 0;
	t0 = set->spans[0].start;
	t1 = set->spans[0].ended ? set->spans[0].end : now;
	total = Max((double) (t1 - t0), 1.0);
	for (int i = 0; i < set->nspans; i++)
	{
		PgdSpan		  *s = &set->spans[i];
		TimestampTz	   end = s->ended ? s->end : now;
		Datum		   v[TIMELINE_COLUMNS];
		bool		   nulls[TIMELINE_COLUMNS] = {0};
		StringInfoData bar;
		int			   from = (int) ((s->start - t0) / total * BAR_WIDTH);
		int			   to = (int) ((end - t0) / total * BAR_WIDTH);

		from = Max(0, Min(from, BAR_WIDTH - 1));
		to = Max(from + 1, Min(to, BAR_WIDTH));
		initStringInfo(&bar);
		for (int c = 0; c < BAR_WIDTH; c++)
			appendStringInfoChar(&bar, c < from ? ' ' : c < to ? '#' : ' ');
		v[0] = Int32GetDatum(s->depth);
		v[1] =
			CStringGetTextDatum(psprintf("%*s%s", 2 * s->depth, "", s->name));
		v[2] = Int32GetDatum(s->attempt);
		nulls[2] = s->attempt == 0;
		v[3] = Float8GetDatum((s->start - t0) / 1000.0);
		v[4] = Float8GetDatum((end - s->start) / 1000.0);
		v[5] = CStringGetTextDatum(s->ended ? pgd_span_status_name(s->status) :
											  "RUNNING");
		v[6] = CStringGetTextDatum(bar.data);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}
