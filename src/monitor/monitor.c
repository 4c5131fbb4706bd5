/*-------------------------------------------------------------------------
 *
 * monitor.c
 *	  df.list_instances (both overloads), df.instance_info,
 *	  df.instance_executions and df.metrics.
 *
 * All but df.metrics read df.instances and df.nodes as the caller, so
 * row-level security decides what they return; they agree with df.status
 * because they read the same column.  What the reference takes from its
 * engine comes from the rows here:
 *	 function_name		  the reference's orchestration name, for scripts
 *						  that compare it;
 *	 execution_count	  the number of root generations: the generation
 *	 (current_execution_id) in the root node's stamp "<id>::<gen>", which a
 *						  root loop raises by one per iteration; 1 before
 *						  the root has run;
 *	 output				  the root node's result text when completed, the
 *						  failure text when failed; when a compensation
 *						  ran (failed with an undo that failed, or
 *						  compensated), what failed and what was undone
 *						  (monitor.h, PGD_SQL_OUTPUT); NULL otherwise.
 * df.metrics counts every instance whoever submitted it, with the bootstrap
 * superuser's privileges; EXECUTE on it is not granted to PUBLIC.  Its
 * task_queues column is df.task_queues as the caller sees it.
 *
 * Paging (the 4-argument df.list_instances): rows come in created_at DESC,
 * id ASC order; next_cursor is the hex of the UTF-8 text
 * 'v1|<created_at as YYYY-MM-DD"T"HH24:MI:SS.USOF>|<id>' of the last row of
 * a full page when more rows follow, the same on every row, NULL on the
 * last page.  A cursor is checked completely (hex, text, timestamp, id)
 * before it is used; anything else is "invalid after_cursor".
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "common/messages.h"
#include "common/spi.h"
#include "monitor/monitor.h"
#include "core/settings.h"
#include "store/types.h"

#define LIST_DEFAULT_LIMIT		 100
#define CURSOR_MAX_HEX			 512
#define EXECUTIONS_DEFAULT_LIMIT 5
#define EXECUTIONS_MAX_LIMIT	 10000
#define METRICS_COLUMNS		 7

static void
check_limit_at_least_one(int limit)
{
	if (limit < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_LIMIT_AT_LEAST_ONE)));
}

static void
invalid_cursor(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg(PGD_MSG_INVALID_CURSOR),
			 errhint("Pass the next_cursor of the previous page unchanged, or NULL for the first page.")));
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
digits(const char *s, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/*
 * Is s exactly what to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.USOF') writes?
 * (So that timestamptz_in never sees words like "now" or "infinity".)
 */
static bool
cursor_time_shape(const char *s)
{
	int y = 0;

	while (s[y] >= '0' && s[y] <= '9')
		y++;
	if (y < 4 || y > 6)
		return false;
	s += y;
	if (!(s[0] == '-' && digits(s + 1, 2) && s[3] == '-' && digits(s + 4, 2) &&
		  s[6] == 'T' && digits(s + 7, 2) && s[9] == ':' &&
		  digits(s + 10, 2) && s[12] == ':' && digits(s + 13, 2) &&
		  s[15] == '.' && digits(s + 16, 6)))
		return false;
	s += 22;
	if ((s[0] != '+' && s[0] != '-') || !digits(s + 1, 2))
		return false;
	s += 3;
	if (s[0] == ':' && digits(s + 1, 2))
		s += 3;
	if (s[0] == ':' && digits(s + 1, 2))
		s += 3;
	return s[0] == '\0';
}

/* timestamptz_in, with an out-of-range value reported as false instead of raised. */
static bool
cursor_time(const char *s, TimestampTz *out)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		*out =
			DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
													CStringGetDatum(s),
													ObjectIdGetDatum(InvalidOid),
													Int32GetDatum(-1)));
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData *edata = pgd_subxact_caught(oldcxt, oldowner);

		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return ok;
}

/* Decode and check an after_cursor; raises "invalid after_cursor" on anything wrong. */
static void
parse_cursor(const char *cursor, TimestampTz *ts, char **id)
{
	int	  len = strlen(cursor);
	char *text;
	char *bar;
	int	  i;

	if (len == 0 || len > CURSOR_MAX_HEX || len % 2 != 0)
		invalid_cursor();
	text = palloc(len / 2 + 1);
	for (i = 0; i < len / 2; i++)
	{
		int hi = hex_value(cursor[2 * i]);
		int lo = hex_value(cursor[2 * i + 1]);

		/* the cursor text is ASCII: no multibyte character can appear */
		if (hi < 0 || lo < 0 || hi * 16 + lo < 0x20 || hi * 16 + lo > 0x7e)
			invalid_cursor();
		text[i] = (char) (hi * 16 + lo);
	}
	text[len / 2] = '\0';

	if (strncmp(text, "v1|", 3) != 0)
		invalid_cursor();
	bar = strchr(text + 3, '|');
	if (bar == NULL)
		invalid_cursor();
	*bar = '\0';
	*id = bar + 1;
	if (strlen(*id) != PGD_ID_LEN)
		invalid_cursor();
	for (i = 0; i < PGD_ID_LEN; i++)
		if (!(((*id)[i] >= '0' && (*id)[i] <= '9') ||
			  ((*id)[i] >= 'a' && (*id)[i] <= 'f')))
			invalid_cursor();
	if (!cursor_time_shape(text + 3) || !cursor_time(text + 3, ts))
		invalid_cursor();
}

/*
 * What a live instance waits on, in words (the column waiting_on), from
 * what its running nodes say in their status_details ("waiting_on",
 * written where they begin to wait) and, for a place in a limit's queue
 * and a lock key's holders, from df.limit_queue and df.locks as the caller
 * may see them; several waits (branches of a JOIN) are joined with "; ".
 * NULL when nothing waits: its steps are running.
 */
#define WAITING_ON_SQL \
	"(SELECT pg_catalog.string_agg(w.t, '; ' ORDER BY w.o, w.t) FROM (" \
	"SELECT 0 AS o, 'start queued' AS t WHERE i.status OPERATOR(pg_catalog.=) 'pending' " \
	"UNION ALL " \
	"SELECT 1, CASE (n.status_details OPERATOR(pg_catalog.->>) 'waiting_on') " \
	"WHEN 'timer' THEN 'timer' OPERATOR(pg_catalog.||) COALESCE(' until ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'due_at'), '') " \
	"WHEN 'schedule' THEN 'schedule ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'cron_expr') OPERATOR(pg_catalog.||) COALESCE(' until ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'due_at'), '') " \
	"WHEN 'signal' THEN 'signal ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'signal_name') OPERATOR(pg_catalog.||) COALESCE(' until ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'deadline'), '') " \
	"WHEN 'event' THEN 'event ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'topic') OPERATOR(pg_catalog.||) " \
	"COALESCE(' matching ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->) 'filter')::text, '') OPERATOR(pg_catalog.||) " \
	"COALESCE(' until ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'deadline'), '') " \
	"WHEN 'limit' THEN 'limit ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'limit_key') OPERATOR(pg_catalog.||) " \
	"COALESCE(' (position ' OPERATOR(pg_catalog.||) (SELECT q.position FROM df.limit_queue q " \
	"WHERE q.instance_id OPERATOR(pg_catalog.=) n.instance_id " \
	"AND q.node_id OPERATOR(pg_catalog.=) n.id LIMIT 1)::text OPERATOR(pg_catalog.||) ')', '') OPERATOR(pg_catalog.||) " \
	"COALESCE(' until ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'queue_deadline'), '') " \
	"WHEN 'lock' THEN 'lock ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'waiting_for') OPERATOR(pg_catalog.||) " \
	"COALESCE((SELECT ' held by ' OPERATOR(pg_catalog.||) pg_catalog.concat_ws(', ', l.held_by, l.blocked_by) " \
	"FROM df.locks l WHERE l.holder OPERATOR(pg_catalog.=) n.instance_id " \
	"AND l.node_id OPERATOR(pg_catalog.=) n.id AND l.state OPERATOR(pg_catalog.=) 'waiting' " \
	"AND (l.held_by IS NOT NULL OR l.blocked_by IS NOT NULL) LIMIT 1), '') " \
	"END " \
	"FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) i.id " \
	"AND n.status OPERATOR(pg_catalog.=) 'running' " \
	"AND n.status_details OPERATOR(pg_catalog.?) 'waiting_on' " \
	"UNION ALL " \
	"SELECT 2, 'task queue ' OPERATOR(pg_catalog.||) (n.query::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'queue') " \
	"FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) i.id " \
	"AND n.status OPERATOR(pg_catalog.=) 'running' AND n.node_type OPERATOR(pg_catalog.=) 'TASK' " \
	"UNION ALL " \
	"SELECT 3, 'retry of ' OPERATOR(pg_catalog.||) n.id OPERATOR(pg_catalog.||) ' at ' OPERATOR(pg_catalog.||) (n.status_details OPERATOR(pg_catalog.->>) 'next_attempt_at') " \
	"FROM df.nodes n WHERE n.instance_id OPERATOR(pg_catalog.=) i.id " \
	"AND n.status OPERATOR(pg_catalog.=) 'running' " \
	"AND (n.status_details OPERATOR(pg_catalog.->>) 'next_attempt_at')::pg_catalog.timestamptz OPERATOR(pg_catalog.>) pg_catalog.now()" \
	") w WHERE i.status OPERATOR(pg_catalog.=) ANY ('{pending,running}'))"

/*
 * The label filter: a label with % or _ is a LIKE pattern, any other is
 * matched exactly (so a plain label keeps the reference's meaning).
 */
#define LABEL_MATCHES \
	"(CASE WHEN pg_catalog.strpos($2, '%') OPERATOR(pg_catalog.>) 0 " \
	"OR pg_catalog.strpos($2, '_') OPERATOR(pg_catalog.>) 0 " \
	"THEN i.label OPERATOR(pg_catalog.~~) $2 ELSE i.label OPERATOR(pg_catalog.=) $2 END)"

#define LIST_SQL \
	"SELECT i.id, i.label, i.status, " PGD_SQL_EXECUTION_COUNT \
	", " PGD_SQL_OUTPUT ", " \
	"i.created_at, i.completed_at, " \
	"pg_catalog.encode(pg_catalog.convert_to('v1|' " \
	"OPERATOR(pg_catalog.||) pg_catalog.to_char(i.created_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.USOF') " \
	"OPERATOR(pg_catalog.||) '|' OPERATOR(pg_catalog.||) i.id, 'UTF8'), 'hex'), " WAITING_ON_SQL \
	" " \
	"FROM " PGD_SQL_ROOT_JOIN " " \
	"WHERE ($1::text IS NULL OR i.status OPERATOR(pg_catalog.=) $1) " \
	"AND ($2::text IS NULL OR " LABEL_MATCHES ") " \
	"AND ($3::timestamptz IS NULL OR i.created_at OPERATOR(pg_catalog.<) $3 " \
	"OR (i.created_at OPERATOR(pg_catalog.=) $3 AND i.id OPERATOR(pg_catalog.>) $4)) " \
	"ORDER BY i.created_at DESC, i.id " \
	"LIMIT $5"

/*
 * Both overloads.  paged: the 4-argument form (label filter, cursor,
 * created_at, completed_at, next_cursor).
 */
static Datum
list_instances(FunctionCallInfo fcinfo, bool paged)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int	  limit = PG_ARGISNULL(1) ? LIST_DEFAULT_LIMIT : PG_GETARG_INT32(1);
	Oid	  types[5] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, INT8OID};
	Datum values[5];
	char  nulls[5] = {' ', ' ', ' ', ' ', ' '};
	int	  n, nrows, i;
	char *next_cursor = NULL;

	check_limit_at_least_one(limit);
	if (limit > pgd_list_instances_max_limit)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_LIMIT_EXCEEDS_MAX, limit,
						pgd_list_instances_max_limit,
						pgd_list_instances_max_limit)));

	if (PG_ARGISNULL(0))
		nulls[0] = 'n';
	else
		values[0] = PG_GETARG_DATUM(0);
	nulls[1] = nulls[2] = nulls[3] = 'n';
	if (paged && !PG_ARGISNULL(2))
	{
		values[1] = PG_GETARG_DATUM(2);
		nulls[1] = ' ';
	}
	if (paged && !PG_ARGISNULL(3))
	{
		TimestampTz ts;
		char	   *id;

		parse_cursor(text_to_cstring(PG_GETARG_TEXT_PP(3)), &ts, &id);
		values[2] = TimestampTzGetDatum(ts);
		values[3] = pgd_text_datum(id);
		nulls[2] = nulls[3] = ' ';
	}
	/* one row more than asked for tells whether another page follows */
	values[4] = Int64GetDatum((int64) limit + (paged ? 1 : 0));

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	n = pgd_spi_exec(LIST_SQL, 5, types, values, nulls, true);
	nrows = Min(n, limit);
	if (paged && n > limit)
		next_cursor = SPI_getvalue(SPI_tuptable->vals[limit - 1],
								   SPI_tuptable->tupdesc, 8);

	for (i = 0; i < nrows; i++)
	{
		HeapTuple tup = SPI_tuptable->vals[i];
		TupleDesc desc = SPI_tuptable->tupdesc;
		Datum	  out[10];
		bool	  outnull[10];
		int		  waiting = paged ? 9 : 6;

		memset(outnull, 0, sizeof(outnull));
		out[0] = SPI_getbinval(tup, desc, 1, &outnull[0]); /* instance_id */
		out[1] = SPI_getbinval(tup, desc, 2, &outnull[1]); /* label */
		out[2] = CStringGetTextDatum(PGD_FUNCTION_NAME);
		out[3] = SPI_getbinval(tup, desc, 3, &outnull[3]); /* status */
		out[4] =
			SPI_getbinval(tup, desc, 4, &outnull[4]); /* execution_count */
		out[5] = SPI_getbinval(tup, desc, 5, &outnull[5]); /* output */
		if (paged)
		{
			out[6] = SPI_getbinval(tup, desc, 6, &outnull[6]);
			out[7] = SPI_getbinval(tup, desc, 7, &outnull[7]);
			outnull[8] = (next_cursor == NULL);
			out[8] =
				next_cursor ? CStringGetTextDatum(next_cursor) : (Datum) 0;
		}
		/* waiting_on, last: not in the 0.3.0 schema's declaration */
		if (rsinfo->setDesc->natts > waiting)
			out[waiting] = SPI_getbinval(tup, desc, 9, &outnull[waiting]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgd_list_instances);
Datum
pgd_list_instances(PG_FUNCTION_ARGS)
{
	return list_instances(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgd_list_instances_paged);
Datum
pgd_list_instances_paged(PG_FUNCTION_ARGS)
{
	return list_instances(fcinfo, true);
}

PG_FUNCTION_INFO_V1(pgd_instance_info);
Datum
pgd_instance_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			   types[1] = {TEXTOID};
	Datum		   values[1];

	values[0] = PG_GETARG_DATUM(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (pgd_spi_exec("SELECT i.id, i.label, i.status, " PGD_SQL_EXECUTION_COUNT
					 ", " PGD_SQL_OUTPUT " "
					 "FROM " PGD_SQL_ROOT_JOIN
					 " WHERE i.id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, true) > 0)
	{
		HeapTuple tup = SPI_tuptable->vals[0];
		TupleDesc desc = SPI_tuptable->tupdesc;
		Datum	  out[7];
		bool	  outnull[7];

		memset(outnull, 0, sizeof(outnull));
		out[0] = SPI_getbinval(tup, desc, 1, &outnull[0]);
		out[1] = SPI_getbinval(tup, desc, 2, &outnull[1]);
		out[2] = CStringGetTextDatum(PGD_FUNCTION_NAME);
		out[3] = CStringGetTextDatum(PG_DURABLE_VERSION);
		out[4] = SPI_getbinval(tup, desc, 4, &outnull[4]);
		out[5] = SPI_getbinval(tup, desc, 3, &outnull[5]);
		out[6] = SPI_getbinval(tup, desc, 5, &outnull[6]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * One row per root generation, newest first.  Generations are numbered
 * without gaps, so all of them existed.  event_count and duration_ms come
 * from the event history: the events whose scope lies in the generation
 * (instance-wide events without a scope count for the current one), and
 * the time from its first event to its last, or to now while it runs.
 * The events are read as the bootstrap superuser once the instance is
 * known to be visible to the caller.
 */
/*
 * Events per root generation of an instance, from the first level of each
 * scope: the generations, their event counts and durations (ms).  Read with
 * the bootstrap superuser's privileges (users have none on df_internal);
 * the caller checked that it sees the instance.  Inside SPI.
 */
static int
load_generations(Datum id, int64 current, int64 **gens, int64 **counts,
				 int64 **durations)
{
	Oid	  t2[2] = {TEXTOID, INT8OID};
	Datum v2[2];
	Oid	  save_userid;
	int	  save_sec;
	int	  ngens;
	bool  isnull;
	int	  i;

	v2[0] = id;
	v2[1] = Int64GetDatum(current);
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	ngens =
		pgd_spi_exec(psprintf("SELECT g, pg_catalog.count(*), "
							  "GREATEST(0, (pg_catalog.date_part('epoch', "
							  "CASE WHEN g OPERATOR(pg_catalog.=) $2 AND NOT pg_catalog.bool_or(kind "
							  "OPERATOR(pg_catalog.~) '^instance_(completed|failed|cancelled)$') "
							  "THEN pg_catalog.clock_timestamp() ELSE pg_catalog.max(at) END "
							  "OPERATOR(pg_catalog.-) pg_catalog.min(at)) OPERATOR(pg_catalog.*) 1000)::bigint) "
							  "FROM (SELECT COALESCE((pg_catalog.regexp_match(scope, "
							  " '^[^:]+::([0-9]{1,18})(::|$)'))[1]::bigint, $2) AS g, kind, at "
							  " FROM %s h WHERE instance_id OPERATOR(pg_catalog.=) $1) s "
							  "GROUP BY g",
							  pgd_history_events()),
					 2, t2, v2, NULL, true);
	SetUserIdAndSecContext(save_userid, save_sec);
	*gens = *counts = *durations = NULL;
	if (ngens == 0)
		return 0;
	*gens = palloc(sizeof(int64) * ngens);
	*counts = palloc(sizeof(int64) * ngens);
	*durations = palloc(sizeof(int64) * ngens);
	for (i = 0; i < ngens; i++)
	{
		(*gens)[i] =
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
										SPI_tuptable->tupdesc, 1, &isnull));
		(*counts)[i] =
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
										SPI_tuptable->tupdesc, 2, &isnull));
		(*durations)[i] =
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
										SPI_tuptable->tupdesc, 3, &isnull));
	}
	return ngens;
}

PG_FUNCTION_INFO_V1(pgd_instance_executions);
Datum
pgd_instance_executions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			   limit = PG_GETARG_INT32(1);
	Oid			   types[1] = {TEXTOID};
	Datum		   values[1];
	int64		   current;
	int64		   g;
	int64		   last;
	bool		   isnull;
	Datum		   status;
	Datum		   output;
	bool		   output_null;
	int64		  *gens = NULL;
	int64		  *counts = NULL;
	int64		  *durations = NULL;
	int			   ngens = 0;
	int			   i;

	check_limit_at_least_one(limit);
	limit = Min(limit, EXECUTIONS_MAX_LIMIT);

	values[0] = PG_GETARG_DATUM(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (pgd_spi_exec("SELECT i.status, " PGD_SQL_EXECUTION_COUNT
					 ", " PGD_SQL_OUTPUT " "
					 "FROM " PGD_SQL_ROOT_JOIN
					 " WHERE i.id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, true) == 0)
	{
		SPI_finish();
		return (Datum) 0;
	}
	status =
		SPI_datumTransfer(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull),
						  false, -1);
	current = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 2, &isnull));
	output = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
						   &output_null);
	if (!output_null)
		output = SPI_datumTransfer(output, false, -1);

	ngens = load_generations(values[0], current, &gens, &counts, &durations);

	last = Max(1, current - limit + 1);
	for (g = current; g >= last; g--)
	{
		Datum out[5];
		bool  outnull[5];
		int64 count = 0;
		int	  found = -1;

		for (i = 0; i < ngens; i++)
			if (gens[i] == g)
				found = i;
		if (found >= 0)
			count = counts[found];
		memset(outnull, 0, sizeof(outnull));
		out[0] = Int64GetDatum(g);
		out[2] = Int64GetDatum(count);
		out[3] = Int64GetDatum(found >= 0 ? durations[found] : 0);
		outnull[3] = found < 0;
		if (g == current)
		{
			out[1] = status;
			out[4] = output;
			outnull[4] = output_null;
		}
		else
		{
			/* an earlier iteration of a root loop: it went on as the next one */
			out[1] = CStringGetTextDatum("continued_as_new");
			outnull[4] = true;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * Engine-wide counters, and the depth and age of each queue of external
 * tasks.  The counters read every instance whoever submitted it, as the
 * bootstrap superuser (row-level security does not apply to it); the
 * caller needs EXECUTE, which PUBLIC does not have.  The queues are read
 * from df.task_queues as the caller, so a queue shows to whoever sees its
 * tasks there (a superuser sees them all) and nobody learns the name of
 * another role's queue.  A schema older than task_queues declares six
 * columns, and gets those.
 */
PG_FUNCTION_INFO_V1(pgd_metrics);
Datum
pgd_metrics(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			   save_userid;
	int			   save_sec;
	SPITupleTable *counters;
	Datum		   out[METRICS_COLUMNS];
	bool		   outnull[METRICS_COLUMNS];
	int			   ncolumns;
	int			   i;

	InitMaterializedSRF(fcinfo, 0);
	ncolumns = rsinfo->setDesc->natts;
	if (ncolumns != METRICS_COLUMNS && ncolumns != METRICS_COLUMNS - 1)
		elog(ERROR, "df.metrics() declares %d columns", ncolumns);
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	pgd_spi_exec(psprintf("SELECT pg_catalog.count(*), "
						  "pg_catalog.count(*) FILTER (WHERE i.status OPERATOR(pg_catalog.=) ANY ('{pending,running}'::text[])), "
						  "pg_catalog.count(*) FILTER (WHERE i.status OPERATOR(pg_catalog.=) 'completed'), "
						  "pg_catalog.count(*) FILTER (WHERE i.status OPERATOR(pg_catalog.=) 'failed'), "
						  "COALESCE(pg_catalog.sum(" PGD_SQL_EXECUTION_COUNT
						  "), 0)::bigint, "
						  "(SELECT pg_catalog.count(*) FROM %s h) "
						  "FROM " PGD_SQL_ROOT_JOIN,
						  pgd_history_events()),
				 0, NULL, NULL, NULL, true);
	counters = SPI_tuptable;
	SetUserIdAndSecContext(save_userid, save_sec);
	for (i = 0; i < METRICS_COLUMNS - 1; i++)
		out[i] = SPI_getbinval(counters->vals[0], counters->tupdesc, i + 1,
							   &outnull[i]);
	if (ncolumns == METRICS_COLUMNS)
	{
		pgd_spi_exec("SELECT COALESCE(pg_catalog.jsonb_object_agg(q.queue, "
					 "pg_catalog.jsonb_build_object("
					 "'ready', q.ready, 'leased', q.leased, "
					 "'oldest_ready_age_seconds', "
					 "pg_catalog.round(EXTRACT(epoch FROM q.oldest_ready_age), 3))), "
					 "'{}'::pg_catalog.jsonb) "
					 "FROM df.task_queues q",
					 0, NULL, NULL, NULL, true);
		out[METRICS_COLUMNS - 1] =
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
						  &outnull[METRICS_COLUMNS - 1]);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	SPI_finish();
	return (Datum) 0;
}
