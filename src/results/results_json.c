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
 * The output is built in one StringInfo (amortised linear), row by row as
 * the executor produces them (pgd_result_add_row is called from a
 * DestReceiver, so the rows are never all held at once); per-row garbage
 * from output functions lives in a memory context reset per row.
 *
 * Size limit.  A result is stored as jsonb in df.nodes.result, whose
 * strings and containers cannot exceed 256MB (and a varlena 1GB), and it is
 * held in the executor's memory several times over (text, jsonb, the DOM of
 * a later step that refers to it).  So a builder may be given a limit on
 * the bytes of JSON text: a text or json value whose raw length does not
 * fit is refused before it is detoasted or escaped, and the text is
 * measured after every value, so the buffer never exceeds the limit by
 * more than one value's JSON.  Past the limit the row fails with a
 * message naming the limit and the setting (pg_durable.max_result_size,
 * read by the caller: this file reads no settings).
 *
 * Locks: none; a pure function of the rows it is given.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
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

#define PGD_MSG_RESULT_TOO_LARGE \
	"step result exceeds pg_durable.max_result_size (%s) at row %llu: " \
	"return fewer or smaller rows, or raise the setting"

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

/* The builder of one result; see pgd_result_begin. */
struct PgdResultBuilder
{
	TupleDesc	   tupdesc;
	ColKind		  *kinds;
	Size		   limit; /* bytes of JSON text, 0 for none */
	uint64		   nrows;
	StringInfoData buf;
	MemoryContext  rowcxt; /* output functions' garbage, reset per row */
};

/* A limit as the setting shows it: MB when it is a whole number of them. */
static char *
size_text(Size bytes)
{
	if (bytes % (1024 * 1024) == 0)
		return psprintf("%zuMB", bytes / (1024 * 1024));
	if (bytes % 1024 == 0)
		return psprintf("%zukB", bytes / 1024);
	return psprintf("%zu bytes", bytes);
}

/*
 * Before converting a text or json value: its raw length already tells
 * whether it fits, without detoasting, escaping or parsing a value that
 * does not (a JSON string is never shorter than the text it holds).  A
 * json value is measured as stored, whitespace included, although it is
 * written back compactly: parsing a huge one only to find that it does not
 * fit would cost far more than the limit.
 */
static bool
value_fits(const PgdResultBuilder *b, ColKind kind, Datum d)
{
	if (b->limit == 0 || (kind != COL_TEXT && kind != COL_JSON))
		return true;
	return (Size) b->buf.len + toast_raw_datum_size(d) <= b->limit;
}

PgdResultBuilder *
pgd_result_begin(TupleDesc tupdesc, Size limit)
{
	PgdResultBuilder *b = palloc0(sizeof(PgdResultBuilder));

	b->tupdesc = tupdesc;
	b->limit = limit;
	b->kinds = palloc(sizeof(ColKind) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		b->kinds[i] =
			att->attisdropped ? COL_VOID : column_kind(att->atttypid);
	}
	initStringInfo(&b->buf);
	appendStringInfoString(&b->buf, "{\"rows\":[");
	b->rowcxt = AllocSetContextCreate(CurrentMemoryContext,
									  "pg_durable step result row",
									  ALLOCSET_DEFAULT_SIZES);
	return b;
}

bool
pgd_result_add_row(PgdResultBuilder *b, const Datum *values,
				   const bool *isnull, char **errmsg)
{
	TupleDesc	  tupdesc = b->tupdesc;
	MemoryContext callercxt = CurrentMemoryContext;
	char		 *err = NULL;
	bool		  first = true;
	bool		  too_large = false;

	*errmsg = NULL;
	/* like the reference, a type is only refused when a row is converted */
	for (int i = 0; i < tupdesc->natts && b->nrows == 0; i++)
		if (b->kinds[i] == COL_UNSUPPORTED)
		{
			Form_pg_attribute att = TupleDescAttr(tupdesc, i);

			*errmsg =
				psprintf(PGD_MSG_UNSUPPORTED_COLUMN_TYPE,
						 format_type_be(att->atttypid), NameStr(att->attname));
			return false;
		}

	MemoryContextSwitchTo(b->rowcxt);
	if (b->nrows > 0)
		appendStringInfoChar(&b->buf, ',');
	appendStringInfoChar(&b->buf, '{');
	for (int i = 0; i < tupdesc->natts && err == NULL && !too_large; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (att->attisdropped)
			continue;
		if (!first)
			appendStringInfoChar(&b->buf, ',');
		first = false;
		dfjson_write_string(&b->buf, NameStr(att->attname));
		appendStringInfoChar(&b->buf, ':');
		if (isnull[i])
			appendStringInfoString(&b->buf, "null");
		else if (!value_fits(b, b->kinds[i], values[i]))
			too_large = true;
		else if (append_value(&b->buf, b->kinds[i], values[i],
							  NameStr(att->attname), &err))
			too_large = b->limit > 0 && (Size) b->buf.len > b->limit;
	}
	appendStringInfoChar(&b->buf, '}');
	MemoryContextSwitchTo(callercxt);
	if (too_large)
		*errmsg = psprintf(PGD_MSG_RESULT_TOO_LARGE, size_text(b->limit),
						   (unsigned long long) b->nrows + 1);
	else if (err != NULL)
		*errmsg = pstrdup(err);
	MemoryContextReset(b->rowcxt);
	if (*errmsg != NULL)
		return false;
	b->nrows++;
	return true;
}

char *
pgd_result_finish(PgdResultBuilder *b)
{
	char *json;

	appendStringInfo(&b->buf, "],\"row_count\":" UINT64_FORMAT "}", b->nrows);
	json = b->buf.data;
	MemoryContextDelete(b->rowcxt);
	pfree(b->kinds);
	pfree(b);
	return json;
}

void
pgd_result_discard(PgdResultBuilder *b)
{
	pfree(b->buf.data);
	MemoryContextDelete(b->rowcxt);
	pfree(b->kinds);
	pfree(b);
}

char *
pgd_result_empty(void)
{
	return pstrdup("{\"rows\":[],\"row_count\":0}");
}

char *
pgd_spi_result_to_json(SPITupleTable *tuptable, uint64 nrows, char **errmsg)
{
	PgdResultBuilder *b;
	TupleDesc		  tupdesc;
	Datum			 *values;
	bool			 *isnull;

	*errmsg = NULL;
	if (tuptable == NULL)
		return pgd_result_empty();

	tupdesc = tuptable->tupdesc;
	b = pgd_result_begin(tupdesc, 0);
	values = palloc(sizeof(Datum) * Max(tupdesc->natts, 1));
	isnull = palloc(sizeof(bool) * Max(tupdesc->natts, 1));
	for (uint64 row = 0; row < nrows; row++)
	{
		heap_deform_tuple(tuptable->vals[row], tupdesc, values, isnull);
		if (!pgd_result_add_row(b, values, isnull, errmsg))
		{
			pgd_result_discard(b);
			return NULL;
		}
	}
	pfree(values);
	pfree(isnull);
	return pgd_result_finish(b);
}
