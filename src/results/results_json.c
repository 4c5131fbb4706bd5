/*-------------------------------------------------------------------------
 *
 * results_json.c
 *	  The result of a SQL step: the rows SPI returned, as the JSON the
 *	  reference stores and passes on ({"rows":[...],"row_count":N}).
 *
 * Column types map to JSON exactly as in the reference (§1.8):
 *	bool -> true/false; int2/int4/int8 -> integer; float4/float8 -> number,
 *	NaN and +-Infinity -> null; text, varchar, bpchar (padding kept), name,
 *	numeric (exact text, so "1.10" stays "1.10"), uuid -> string;
 *	timestamptz -> RFC 3339 in UTC with "Z"; timestamp -> the same without
 *	a zone; date -> YYYY-MM-DD; json/jsonb -> embedded as JSON; void ->
 *	null; SQL NULL -> null.  A domain maps like its base type.  Every other
 *	type fails the step with the reference's "Unsupported column type"
 *	message naming the column's declared type (the domain's name for a
 *	domain).
 *
 * Details the reference leaves open, decided here:
 *	- floats are written in their shortest round-trip form (what float8out
 *	  prints with the default extra_float_digits), whatever the session's
 *	  extra_float_digits;
 *	- timestamps carry fractional seconds only when non-zero: 3 digits for
 *	  a whole number of milliseconds, else 6 (chrono's AutoSi);
 *	  years outside 0000-9999 are written with a sign ("+10000", "-0044",
 *	  astronomical numbering: 1 BC is 0000); infinite timestamps and dates
 *	  become the strings "infinity" and "-infinity";
 *	- column types are checked row by row, as the reference converts each
 *	  row: a query of an unsupported type that returns no rows succeeds;
 *	  one that returns rows fails even if the value is NULL;
 *	- duplicate column names ("SELECT 1 AS a, 2 AS a") keep both keys, in
 *	  column order; whoever reads the object back as jsonb, or looks a
 *	  column up with $name.col, sees the last one;
 *	- json text holding \u0000 (which json accepts and our DOM does not)
 *	  fails the step with a message naming the column.
 *
 * The output is built in one StringInfo (amortised linear); per-row
 * garbage from output functions lives in a memory context reset per row.
 *
 * Locks: none; a pure function of the tuple table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "common/messages.h"
#include "results/results.h"

/* How one column is converted; decided once per column from its type. */
typedef enum ColKind
{
	COL_UNSUPPORTED,
	COL_BOOL,
	COL_INT2,
	COL_INT4,
	COL_INT8,
	COL_FLOAT4,
	COL_FLOAT8,
	COL_TEXT, /* text, varchar, bpchar */
	COL_NAME,
	COL_NUMERIC,
	COL_UUID,
	COL_TIMESTAMPTZ,
	COL_TIMESTAMP,
	COL_DATE,
	COL_JSON,
	COL_JSONB,
	COL_VOID
} ColKind;

static ColKind
column_kind(Oid typid)
{
	switch (getBaseType(typid))
	{
		case BOOLOID:
			return COL_BOOL;
		case INT2OID:
			return COL_INT2;
		case INT4OID:
			return COL_INT4;
		case INT8OID:
			return COL_INT8;
		case FLOAT4OID:
			return COL_FLOAT4;
		case FLOAT8OID:
			return COL_FLOAT8;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return COL_TEXT;
		case NAMEOID:
			return COL_NAME;
		case NUMERICOID:
			return COL_NUMERIC;
		case UUIDOID:
			return COL_UUID;
		case TIMESTAMPTZOID:
			return COL_TIMESTAMPTZ;
		case TIMESTAMPOID:
			return COL_TIMESTAMP;
		case DATEOID:
			return COL_DATE;
		case JSONOID:
			return COL_JSON;
		case JSONBOID:
			return COL_JSONB;
		case VOIDOID:
			return COL_VOID;
		default:
			return COL_UNSUPPORTED;
	}
}

/* A year as chrono's %Y prints it: 4 digits, a sign outside 0000-9999. */
static void
append_year(StringInfo buf, int year)
{
	if (year < 0)
		appendStringInfo(buf, "-%04d", -year);
	else if (year > 9999)
		appendStringInfo(buf, "+%d", year);
	else
		appendStringInfo(buf, "%04d", year);
}

/* Fractional seconds: none, .fff for whole milliseconds, else .ffffff. */
static void
append_fraction(StringInfo buf, fsec_t fsec)
{
	if (fsec == 0)
		return;
	if (fsec % 1000 == 0)
		appendStringInfo(buf, ".%03d", (int) (fsec / 1000));
	else
		appendStringInfo(buf, ".%06d", (int) fsec);
}

/*
 * A timestamp as a JSON string: "YYYY-MM-DDTHH:MM:SS[.f]" plus "Z" for
 * timestamptz, which is shown in UTC whatever the session's TimeZone
 * (timestamp2tm without a zone pointer does no conversion, and a
 * timestamptz is stored in UTC).
 */
static void
append_timestamp(StringInfo buf, Timestamp ts, bool utc)
{
	struct pg_tm tm;
	fsec_t		 fsec;

	if (TIMESTAMP_NOT_FINITE(ts))
	{
		appendStringInfoString(buf,
							   TIMESTAMP_IS_NOBEGIN(ts) ? "\"-infinity\"" :
														  "\"infinity\"");
		return;
	}
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	appendStringInfoChar(buf, '"');
	append_year(buf, tm.tm_year);
	appendStringInfo(buf, "-%02d-%02dT%02d:%02d:%02d", tm.tm_mon, tm.tm_mday,
					 tm.tm_hour, tm.tm_min, tm.tm_sec);
	append_fraction(buf, fsec);
	if (utc)
		appendStringInfoChar(buf, 'Z');
	appendStringInfoChar(buf, '"');
}

static void
append_date(StringInfo buf, DateADT date)
{
	int year, month, day;

	if (DATE_NOT_FINITE(date))
	{
		appendStringInfoString(buf,
							   DATE_IS_NOBEGIN(date) ? "\"-infinity\"" :
													   "\"infinity\"");
		return;
	}
	j2date(date + POSTGRES_EPOCH_JDATE, &year, &month, &day);
	appendStringInfoChar(buf, '"');
	append_year(buf, year);
	appendStringInfo(buf, "-%02d-%02d\"", month, day);
}

/* Finite floats in shortest round-trip form; NaN and infinities as null. */
static void
append_float(StringInfo buf, double d, bool is_float4)
{
	char tmp[DOUBLE_SHORTEST_DECIMAL_LEN + 1];

	if (isnan(d) || isinf(d))
	{
		appendStringInfoString(buf, "null");
		return;
	}
	if (is_float4)
		float_to_shortest_decimal_buf((float) d, tmp);
	else
		double_to_shortest_decimal_buf(d, tmp);
	appendStringInfoString(buf, tmp);
}

/*
 * JSON text re-parsed into our DOM and written compactly (key order and
 * number text kept).  False with *errmsg set if our parser refuses it.
 */
static bool
append_json_text(StringInfo buf, const char *text, const char *colname,
				 char **errmsg)
{
	char   *perr = NULL;
	DfJson *doc = dfjson_parse(text, strlen(text), &perr);

	if (doc == NULL)
	{
		*errmsg =
			psprintf("column '%s' holds JSON that cannot be used as a step result: %s",
					 colname, perr);
		return false;
	}
	dfjson_write(buf, doc);
	return true;
}

/* One non-NULL value of a supported column. */
static bool
append_value(StringInfo buf, ColKind kind, Datum d, const char *colname,
			 char **errmsg)
{
	switch (kind)
	{
		case COL_BOOL:
			appendStringInfoString(buf, DatumGetBool(d) ? "true" : "false");
			break;
		case COL_INT2:
			appendStringInfo(buf, "%d", (int) DatumGetInt16(d));
			break;
		case COL_INT4:
			appendStringInfo(buf, "%d", DatumGetInt32(d));
			break;
		case COL_INT8:
			appendStringInfo(buf, INT64_FORMAT, DatumGetInt64(d));
			break;
		case COL_FLOAT4:
			append_float(buf, DatumGetFloat4(d), true);
			break;
		case COL_FLOAT8:
			append_float(buf, DatumGetFloat8(d), false);
			break;
		case COL_TEXT:
			dfjson_write_string(buf, TextDatumGetCString(d));
			break;
		case COL_NAME:
			dfjson_write_string(buf, NameStr(*DatumGetName(d)));
			break;
		case COL_NUMERIC:
			dfjson_write_string(buf,
								DatumGetCString(DirectFunctionCall1(numeric_out,
																	d)));
			break;
		case COL_UUID:
			dfjson_write_string(buf,
								DatumGetCString(DirectFunctionCall1(uuid_out,
																	d)));
			break;
		case COL_TIMESTAMPTZ:
			append_timestamp(buf, DatumGetTimestampTz(d), true);
			break;
		case COL_TIMESTAMP:
			append_timestamp(buf, DatumGetTimestamp(d), false);
			break;
		case COL_DATE:
			append_date(buf, DatumGetDateADT(d));
			break;
		case COL_JSON:
			return append_json_text(buf, TextDatumGetCString(d), colname,
									errmsg);
		case COL_JSONB:
		{
			Jsonb *jb = DatumGetJsonbP(d);

			return append_json_text(buf,
									JsonbToCString(NULL, &jb->root,
												   VARSIZE(jb)),
									colname, errmsg);
		}
		case COL_VOID:
			appendStringInfoString(buf, "null");
			break;
		case COL_UNSUPPORTED:
			elog(ERROR, "unsupported column kind reached append_value");
	}
	return true;
}

char *
pgd_spi_result_to_json(SPITupleTable *tuptable, uint64 nrows, char **errmsg)
{
	MemoryContext  callercxt = CurrentMemoryContext;
	MemoryContext  rowcxt;
	StringInfoData buf;
	TupleDesc	   tupdesc;
	ColKind		  *kinds;
	char		  *err = NULL;
	uint64		   row;

	*errmsg = NULL;
	if (tuptable == NULL)
		return pstrdup("{\"rows\":[],\"row_count\":0}");

	tupdesc = tuptable->tupdesc;
	kinds = palloc(sizeof(ColKind) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		kinds[i] = att->attisdropped ? COL_VOID : column_kind(att->atttypid);
		/* like the reference, a type is only refused when a row is converted */
		if (kinds[i] == COL_UNSUPPORTED && nrows > 0)
		{
			*errmsg =
				psprintf(PGD_MSG_UNSUPPORTED_COLUMN_TYPE,
						 format_type_be(att->atttypid), NameStr(att->attname));
			pfree(kinds);
			return NULL;
		}
	}

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"rows\":[");
	rowcxt = AllocSetContextCreate(callercxt, "pg_durable step result row",
								   ALLOCSET_DEFAULT_SIZES);
	for (row = 0; row < nrows && err == NULL; row++)
	{
		HeapTuple tuple = tuptable->vals[row];
		bool	  first = true;

		MemoryContextSwitchTo(rowcxt);
		if (row > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoChar(&buf, '{');
		for (int i = 0; i < tupdesc->natts && err == NULL; i++)
		{
			Form_pg_attribute att = TupleDescAttr(tupdesc, i);
			bool			  isnull;
			Datum			  d;

			if (att->attisdropped)
				continue;
			if (!first)
				appendStringInfoChar(&buf, ',');
			first = false;
			dfjson_write_string(&buf, NameStr(att->attname));
			appendStringInfoChar(&buf, ':');
			d = heap_getattr(tuple, i + 1, tupdesc, &isnull);
			if (isnull)
				appendStringInfoString(&buf, "null");
			else if (!append_value(&buf, kinds[i], d, NameStr(att->attname),
								   &err))
			{
				MemoryContextSwitchTo(callercxt);
				*errmsg = pstrdup(err);
			}
		}
		appendStringInfoChar(&buf, '}');
		MemoryContextSwitchTo(callercxt);
		MemoryContextReset(rowcxt);
	}
	MemoryContextDelete(rowcxt);
	pfree(kinds);
	if (*errmsg != NULL)
	{
		pfree(buf.data);
		return NULL;
	}
	appendStringInfo(&buf, "],\"row_count\":" UINT64_FORMAT "}", nrows);
	return buf.data;
}
