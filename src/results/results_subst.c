/*-------------------------------------------------------------------------
 *
 * results_subst.c
 *	  Substitution of workflow variables ({name}) and references to named
 *	  results ($name, $name.col, $name?, $name.col?, $name.*) into the text
 *	  of a step, as in the reference (§1.6).
 *
 * Two passes over the text, in this order:
 *
 * 1. Variables.  "{name}" where name is a key of vars (any non-empty text
 *	  without braces) is replaced by the value as raw text: no quoting, no
 *	  escaping.  One left-to-right pass; a replacement is not rescanned for
 *	  more variables; "{x}" with an unknown x, and any other brace, is kept.
 *	  A string value is inserted as its content, a JSON null as nothing,
 *	  any other value as compact JSON.
 *
 * 2. References, over the text pass 1 produced (so a variable whose value
 *	  is "$a" does refer to $a).  One left-to-right pass; substituted values
 *	  are not rescanned.  At each '$' the longest known result name that
 *	  follows is taken, and it must not be followed by an identifier
 *	  character ([A-Za-z0-9_] or any non-ASCII byte: "$ab" is never "$a"
 *	  followed by "b").  Result names follow df.as's rule
 *	  ^[A-Za-z_][A-Za-z0-9_]*$ (other keys of results are ignored), so "the
 *	  longest name not followed by an identifier character" is exactly "the
 *	  whole identifier after '$'", which is what is looked up.  A '$' not
 *	  followed by a known name is kept: $1, $$ and $x stay as written.
 *	  After the name:
 *		".*"				$name.*, the row set
 *		"." identifier "?"?	$name.col, a column of the first row
 *		"?"?				$name, the first column of the first row
 *	  A "." followed by anything else ends the reference ("$a." is $a and
 *	  a full stop).  Quoted column names are not recognised.
 *
 *	  In SQL mode the text is read as PostgreSQL's lexer reads it
 *	  (results_lex.c): a reference to a known result is substituted only
 *	  where it stands in code.  One inside a string literal, a quoted
 *	  identifier, a dollar-quoted string or a comment, joined to a word
 *	  (x$a) or used as a dollar-quote tag ($a$) fails the step with the
 *	  message of pgd_sql_reference_problem, as df.start would have refused
 *	  it had the name been known then.  An unknown $x stays as written
 *	  wherever it stands ('price: $x' is text).  Raw mode has no quoting to
 *	  respect and substitutes everywhere.
 *
 * Values.  A result with a "rows" array is a SQL result: $name is the
 * first column of its first row, $name.col the column col of its first
 * row.  Any other result (HTTP envelope, signal, break value, JOIN array)
 * is used whole for $name, and $name.col is its top-level key col.
 * Duplicate keys: the last one wins, as when the result is read as jsonb
 * (except in $name.*, where each column takes the value in its own
 * position when a row has the first row's key order).
 *
 * SQL mode writes SQL literals, so that a value is one token that no
 * character of it can end: strings as quote_literal writes them ('...' with
 * quotes doubled, E'...' with backslashes doubled too when there is a
 * backslash, which reads the same whatever standard_conforming_strings
 * is), numbers bare when they are JSON numbers (anything else quoted),
 * booleans bare, objects and arrays as a quoted JSON text: the types of
 * the reference.  A space goes between a value and the text next to it
 * where the two would otherwise run together into one token ("x-" and
 * "-1" would make a comment, "'a'" and "'b'" one literal).  Raw mode
 * (HTTP url/body/headers, multipart fields) writes strings as their
 * content and other values as compact JSON.
 *
 * Missing values.  Without '?' these fail the step:
 *		$n has no rows — query returned zero results
 *		$n is NULL — first column of first row is NULL
 *		$n.c is NULL
 *		$n.c: result has no field 'c' (available: a, b)	(raw mode only)
 * and with '?' they become SQL NULL in SQL mode and the empty string in raw
 * mode (a text context has no NULL; "" reads naturally in a URL or a
 * header).  Decided here where the reference leaves it open:
 *	- an unknown column in SQL mode keeps the reference text as written
 *	  ("$n.c"), as the reference does; with '?' it becomes NULL, since the
 *	  user asked for NULL instead of a failure;
 *	- a non-SQL result that is JSON null fails "$n is NULL" (without the
 *	  first-row wording, which would not make sense for it);
 *	- $n.c on a non-SQL result that is not an object has no fields.
 *
 * Row sets.  $name.* in SQL mode is
 *		(VALUES (v, v), (v, v)) AS "name"("c1", "c2")
 * with the columns of the first row: strings '...'::text, numbers and
 * booleans bare, null or a key missing from a row NULL, objects and arrays
 * a quoted JSON text; no rows give (SELECT NULL WHERE false) AS "name".
 * In raw mode it is the compact JSON rows array.  A non-SQL result that is
 * an object counts as one row (its top-level keys are its columns, as for
 * $name.col); anything else has no row set and fails.  More than
 * PGD_MAX_STAR_ROWS rows fail in both modes; a first row without columns
 * fails in SQL mode (VALUES needs at least one).  The expansion is written
 * into one StringInfo, so 10,000 rows cost linear time.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "common/messages.h"
#include "results/results.h"

/* One known name (a variable or a named result), for binary search. */
typedef struct SubstName
{
	const char	 *key;
	int			  keylen;
	int			  order; /* position in the object: last one wins */
	const DfJson *value;
} SubstName;

typedef struct SubstTable
{
	SubstName *names;
	int		   count;
} SubstTable;

#define IS_IDENT_START(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || (c) == '_')
#define IS_IDENT_CHAR(c) \
	(IS_IDENT_START(c) || ((c) >= '0' && (c) <= '9') || \
	 (unsigned char) (c) >= 0x80)

static int
subst_name_cmp_raw(const char *a, int alen, const char *b, int blen)
{
	int r = memcmp(a, b, Min(alen, blen));

	if (r != 0)
		return r;
	return (alen > blen) - (alen < blen);
}

static int
subst_name_qsort_cmp(const void *a, const void *b)
{
	const SubstName *x = a;
	const SubstName *y = b;
	int r = subst_name_cmp_raw(x->key, x->keylen, y->key, y->keylen);

	if (r != 0)
		return r;
	return (x->order > y->order) - (x->order < y->order);
}

/* A result name df.as would accept. */
static bool
is_result_name(const char *s)
{
	if (!IS_IDENT_START(*s))
		return false;
	for (s++; *s; s++)
		if (!(IS_IDENT_START(*s) || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/*
 * Sort the keys of an object for lookup; among duplicate keys only the
 * last one is kept.  only_result_names drops keys df.as would refuse.
 */
static void
subst_table_build(SubstTable *t, const DfJson *obj, bool only_result_names)
{
	int n = 0;

	t->names = NULL;
	t->count = 0;
	if (obj == NULL || obj->type != DFJ_OBJECT || obj->count == 0)
		return;
	t->names = palloc(sizeof(SubstName) * obj->count);
	for (int i = 0; i < obj->count; i++)
	{
		const char *key = obj->pairs[i].key;

		if (key[0] == '\0' || (only_result_names && !is_result_name(key)))
			continue;
		t->names[n].key = key;
		t->names[n].keylen = strlen(key);
		t->names[n].order = i;
		t->names[n].value = obj->pairs[i].value;
		n++;
	}
	qsort(t->names, n, sizeof(SubstName), subst_name_qsort_cmp);
	/* keep the last of each run of equal keys */
	t->count = 0;
	for (int i = 0; i < n; i++)
	{
		if (i + 1 < n &&
			subst_name_cmp_raw(t->names[i].key, t->names[i].keylen,
							   t->names[i + 1].key,
							   t->names[i + 1].keylen) == 0)
			continue;
		t->names[t->count++] = t->names[i];
	}
}

static const DfJson *
subst_table_find(const SubstTable *t, const char *key, int keylen)
{
	int lo = 0, hi = t->count - 1;

	while (lo <= hi)
	{
		int mid = lo + (hi - lo) / 2;
		int r = subst_name_cmp_raw(key, keylen, t->names[mid].key,
								   t->names[mid].keylen);

		if (r == 0)
			return t->names[mid].value;
		if (r < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Last member named key of an object; NULL if absent or not an object. */
static const DfJson *
object_get(const DfJson *obj, const char *key, int keylen)
{
	if (obj == NULL || obj->type != DFJ_OBJECT)
		return NULL;
	for (int i = obj->count - 1; i >= 0; i--)
	{
		const char *k = obj->pairs[i].key;

		if (strncmp(k, key, keylen) == 0 && k[keylen] == '\0')
			return obj->pairs[i].value;
	}
	return NULL;
}

/* A string as a SQL literal, as quote_literal writes it. */
static void
append_sql_literal(StringInfo out, const char *s)
{
	char *lit = quote_literal_cstr(s);

	appendStringInfoString(out, lit);
	pfree(lit);
}

/* RFC 8259's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool
is_json_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return false;
	if (*s == '.')
	{
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E')
	{
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return *s == '\0';
}

/* "ident" with double quotes doubled, whatever the identifier. */
static void
append_sql_ident(StringInfo out, const char *s, int len)
{
	appendStringInfoChar(out, '"');
	for (int i = 0; i < len; i++)
	{
		if (s[i] == '"')
			appendStringInfoChar(out, '"');
		appendStringInfoChar(out, s[i]);
	}
	appendStringInfoChar(out, '"');
}

/* A non-null value in the mode's form. */
static void
append_value(StringInfo out, const DfJson *v, PgdSubstMode mode)
{
	switch (v->type)
	{
		case DFJ_STRING:
			if (mode == PGD_SUBST_SQL)
				append_sql_literal(out, v->str);
			else
				appendStringInfoString(out, v->str);
			break;
		case DFJ_NUMBER:
			if (mode == PGD_SUBST_SQL && !is_json_number(v->str))
				append_sql_literal(out, v->str);
			else
				appendStringInfoString(out, v->str);
			break;
		case DFJ_BOOL:
			appendStringInfoString(out, v->boolean ? "true" : "false");
			break;
		case DFJ_NULL:
			if (mode == PGD_SUBST_SQL)
				appendStringInfoString(out, "NULL");
			break;
		case DFJ_ARRAY:
		case DFJ_OBJECT:
			if (mode == PGD_SUBST_SQL)
				append_sql_literal(out, dfjson_to_text(v));
			else
				dfjson_write(out, v);
			break;
	}
}

/* What '?' turns a missing value into. */
static void
append_missing(StringInfo out, PgdSubstMode mode)
{
	if (mode == PGD_SUBST_SQL)
		appendStringInfoString(out, "NULL");
}

/* The rows array of a SQL result, or NULL for any other result. */
static const DfJson *
sql_rows(const DfJson *result)
{
	const DfJson *rows = object_get(result, "rows", 4);

	return (rows != NULL && rows->type == DFJ_ARRAY) ? rows : NULL;
}

/* One value of a VALUES row: strings typed as text, the rest as usual. */
static void
append_star_cell(StringInfo out, const DfJson *v)
{
	if (v == NULL || v->type == DFJ_NULL)
		appendStringInfoString(out, "NULL");
	else if (v->type == DFJ_STRING)
	{
		append_sql_literal(out, v->str);
		appendStringInfoString(out, "::text");
	}
	else
		append_value(out, v, PGD_SUBST_SQL);
}

/*
 * $name.*: the row set.  rows is the rows array, or NULL with single set
 * for a non-SQL object result standing for one row.
 */
static bool
expand_star(StringInfo out, const char *name, int namelen, const DfJson *rows,
			const DfJson *single, PgdSubstMode mode, char **errmsg)
{
	int			  nrows = rows ? rows->count : 1;
	const DfJson *row0;

	if (nrows > PGD_MAX_STAR_ROWS)
	{
		*errmsg =
			psprintf("$%.*s.* has %d rows — at most %d rows can be expanded",
					 namelen, name, nrows, PGD_MAX_STAR_ROWS);
		return false;
	}
	if (mode == PGD_SUBST_RAW)
	{
		if (rows)
			dfjson_write(out, rows);
		else
		{
			appendStringInfoChar(out, '[');
			dfjson_write(out, single);
			appendStringInfoChar(out, ']');
		}
		return true;
	}
	if (nrows == 0)
	{
		appendStringInfoString(out, "(SELECT NULL WHERE false) AS ");
		append_sql_ident(out, name, namelen);
		return true;
	}
	row0 = rows ? rows->items[0] : single;
	if (row0->type != DFJ_OBJECT || row0->count == 0)
	{
		*errmsg =
			psprintf("$%.*s.* has no columns — its first row is not an object with at least one key",
					 namelen, name);
		return false;
	}
	appendStringInfoString(out, "(VALUES ");
	for (int r = 0; r < nrows; r++)
	{
		const DfJson *row = rows ? rows->items[r] : single;

		if (r > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '(');
		for (int c = 0; c < row0->count; c++)
		{
			const char	 *col = row0->pairs[c].key;
			const DfJson *v;

			if (c > 0)
				appendStringInfoString(out, ", ");
			/*
			 * Rows of one query share their key order: take the value in the
			 * same position when the key matches, so that a row costs O(cols)
			 * (and duplicate column names keep their own values).
			 */
			if (row->type == DFJ_OBJECT && c < row->count &&
				strcmp(row->pairs[c].key, col) == 0)
				v = row->pairs[c].value;
			else
				v = object_get(row, col, strlen(col));
			append_star_cell(out, v);
		}
		appendStringInfoChar(out, ')');
	}
	appendStringInfoString(out, ") AS ");
	append_sql_ident(out, name, namelen);
	appendStringInfoChar(out, '(');
	for (int c = 0; c < row0->count; c++)
	{
		if (c > 0)
			appendStringInfoString(out, ", ");
		append_sql_ident(out, row0->pairs[c].key, strlen(row0->pairs[c].key));
	}
	appendStringInfoChar(out, ')');
	return true;
}

/* "a, b" for the unknown-field message. */
static char *
field_list(const DfJson *obj)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (obj != NULL && obj->type == DFJ_OBJECT)
		for (int i = 0; i < obj->count; i++)
		{
			if (i > 0)
				appendStringInfoString(&buf, ", ");
			appendStringInfoString(&buf, obj->pairs[i].key);
		}
	return buf.data;
}

typedef enum RefForm
{
	REF_BARE,	/* $name */
	REF_COLUMN, /* $name.col */
	REF_STAR	/* $name.* */
} RefForm;

/*
 * Write the value of one reference.  literal/litlen is the reference as
 * written, kept for an unknown column in SQL mode.
 */
static bool
resolve_reference(StringInfo out, const DfJson *result, const char *name,
				  int namelen, RefForm form, const char *col, int collen,
				  bool optional, const char *literal, int litlen,
				  PgdSubstMode mode, char **errmsg)
{
	const DfJson *rows = sql_rows(result);
	const DfJson *holder; /* the object $name.col reads */
	const DfJson *v;

	if (form == REF_STAR)
	{
		if (rows == NULL && result->type != DFJ_OBJECT)
		{
			*errmsg =
				psprintf("$%.*s.* is not a row set — the result has no rows",
						 namelen, name);
			return false;
		}
		return expand_star(out, name, namelen, rows, rows ? NULL : result,
						   mode, errmsg);
	}

	if (rows != NULL && rows->count == 0)
	{
		if (optional)
		{
			append_missing(out, mode);
			return true;
		}
		*errmsg = psprintf(PGD_MSG_REF_NO_ROWS, namelen, name);
		return false;
	}

	if (form == REF_BARE)
	{
		if (rows == NULL)
			v = result;
		else if (rows->items[0]->type != DFJ_OBJECT)
			v = rows->items[0];
		else
			v = rows->items[0]->count > 0 ? rows->items[0]->pairs[0].value :
											NULL;
		if (v == NULL || v->type == DFJ_NULL)
		{
			if (optional)
			{
				append_missing(out, mode);
				return true;
			}
			if (rows != NULL)
				*errmsg = psprintf(PGD_MSG_REF_FIRST_NULL, namelen, name);
			else
				*errmsg = psprintf("$%.*s is NULL", namelen, name);
			return false;
		}
		append_value(out, v, mode);
		return true;
	}

	holder = rows != NULL ? rows->items[0] : result;
	v = object_get(holder, col, collen);
	if (v == NULL)
	{
		if (optional)
			append_missing(out, mode);
		else if (mode == PGD_SUBST_SQL)
			appendBinaryStringInfo(out, literal, litlen);
		else
		{
			*errmsg = psprintf(PGD_MSG_REF_NO_FIELD, namelen, name, collen,
							   col, collen, col, field_list(holder));
			return false;
		}
		return true;
	}
	if (v->type == DFJ_NULL)
	{
		if (optional)
		{
			append_missing(out, mode);
			return true;
		}
		*errmsg =
			psprintf(PGD_MSG_REF_COLUMN_NULL, namelen, name, collen, col);
		return false;
	}
	append_value(out, v, mode);
	return true;
}

/* Pass 1: {variables}. */
static char *
substitute_vars(const char *text, const DfJson *vars)
{
	SubstTable	   t;
	StringInfoData out;
	const char	  *p = text;

	subst_table_build(&t, vars, false);
	if (t.count == 0)
		return pstrdup(text);

	initStringInfo(&out);
	while (*p)
	{
		const char	 *open = strchr(p, '{');
		const char	 *q;
		const DfJson *v;

		if (open == NULL)
		{
			appendStringInfoString(&out, p);
			break;
		}
		appendBinaryStringInfo(&out, p, open - p);
		/* the name ends at the first brace; each byte is looked at twice at most */
		for (q = open + 1; *q && *q != '}' && *q != '{'; q++)
			;
		if (*q == '}' && q > open + 1 &&
			(v = subst_table_find(&t, open + 1, q - open - 1)) != NULL)
		{
			if (v->type == DFJ_STRING)
				appendStringInfoString(&out, v->str);
			else if (v->type != DFJ_NULL)
				dfjson_write(&out, v);
			p = q + 1;
		}
		else
		{
			appendStringInfoChar(&out, '{');
			p = open + 1;
		}
	}
	return out.data;
}

/* PostgreSQL's operator characters. */
static bool
is_op_char(char c)
{
	return c != '\0' && strchr("~!@#^&|`?+-*/%<>=", c) != NULL;
}

/*
 * True when a ending one piece of SQL text and b starting the next would
 * run together into one token (or a comment), so that a space must go
 * between them: two word characters (5 and x, x and E'..'), a word
 * character and a quote, digits and a decimal point, two operator
 * characters (- and -1), two quotes.
 */
static bool
tokens_join(char a, char b)
{
	bool a_word = IS_IDENT_CHAR(a) || a == '$';
	bool b_word = IS_IDENT_CHAR(b) || b == '$';

	if (a == '\0' || b == '\0')
		return false;
	return (a_word && (b_word || b == '\'')) ||
		((a == '.' || (a >= '0' && a <= '9')) &&
		 (b == '.' || (b >= '0' && b <= '9'))) ||
		(is_op_char(a) && is_op_char(b)) || (a == '\'' && b == '\'');
}

/* Pass 2: $references. */
static char *
substitute_references(const char *text, const DfJson *results,
					  PgdSubstMode mode, char **errmsg)
{
	SubstTable	   t;
	StringInfoData out;
	StringInfoData val;
	PgdSqlScan	   scan = {0};
	bool		   scanned = false;
	const char	  *p = text;

	subst_table_build(&t, results, true);
	if (t.count == 0)
		return pstrdup(text);

	initStringInfo(&out);
	initStringInfo(&val);
	while (*p)
	{
		const char	 *dollar = strchr(p, '$');
		const char	 *name;
		const char	 *q;
		const char	 *col = NULL;
		int			  namelen;
		int			  collen = 0;
		bool		  optional = false;
		RefForm		  form;
		const DfJson *result;
		PgdRefProblem problem;

		if (dollar == NULL)
		{
			appendStringInfoString(&out, p);
			break;
		}
		appendBinaryStringInfo(&out, p, dollar - p);
		name = dollar + 1;
		for (q = name; IS_IDENT_CHAR(*q); q++)
			;
		namelen = q - name;
		result = namelen > 0 ? subst_table_find(&t, name, namelen) : NULL;
		if (result == NULL)
		{
			appendStringInfoChar(&out, '$');
			p = name;
			continue;
		}

		if (q[0] == '.' && q[1] == '*')
		{
			form = REF_STAR;
			q += 2;
		}
		else
		{
			if (q[0] == '.' && IS_IDENT_CHAR(q[1]))
			{
				form = REF_COLUMN;
				col = q + 1;
				for (q = col; IS_IDENT_CHAR(*q); q++)
					;
				collen = q - col;
			}
			else
				form = REF_BARE;
			if (*q == '?')
			{
				optional = true;
				q++;
			}
		}

		/* a value only where one can stand (results_lex.c) */
		if (mode == PGD_SUBST_SQL)
		{
			if (!scanned)
			{
				pgd_sql_scan(&scan, text);
				scanned = true;
			}
			if (pgd_sql_reference_problem(&scan, dollar - text, q - dollar,
										  NULL, &problem))
			{
				/* one text: the message, then the detail and the hint */
				problem.detail[0] = pg_ascii_tolower(problem.detail[0]);
				*errmsg = psprintf("%s: %s %s", problem.message,
								   problem.detail, problem.hint);
				pgd_sql_scan_free(&scan);
				pfree(out.data);
				pfree(val.data);
				return NULL;
			}
		}

		resetStringInfo(&val);
		if (!resolve_reference(&val, result, name, namelen, form, col, collen,
							   optional, dollar, q - dollar, mode, errmsg))
		{
			if (scanned)
				pgd_sql_scan_free(&scan);
			pfree(out.data);
			pfree(val.data);
			return NULL;
		}
		if (mode == PGD_SUBST_SQL && val.len > 0 && out.len > 0 &&
			tokens_join(out.data[out.len - 1], val.data[0]))
			appendStringInfoChar(&out, ' ');
		appendBinaryStringInfo(&out, val.data, val.len);
		if (mode == PGD_SUBST_SQL && val.len > 0 &&
			tokens_join(val.data[val.len - 1], *q))
			appendStringInfoChar(&out, ' ');
		p = q;
	}
	if (scanned)
		pgd_sql_scan_free(&scan);
	pfree(val.data);
	return out.data;
}

char *
pgd_substitute(const char *text, const DfJson *vars, const DfJson *results,
			   PgdSubstMode mode, char **errmsg)
{
	char *aftervars;

	*errmsg = NULL;
	aftervars = substitute_vars(text, vars);
	return substitute_references(aftervars, results, mode, errmsg);
}

/*
 * Substitution for keys and payloads (lock and limit keys, idempotency
 * keys, PUBLISH payloads), where an unresolved reference kept as literal
 * text would silently change what the text means (a typo turns a per-order
 * lock into one global lock).  A {name} (an identifier) that names no
 * variable, and a $name (or $name.col) that names no result, fail with
 * what is missing; an optional $name? or $name.col? that names no result
 * becomes the empty string.  Other braces and dollars ({"a": 1}, $1, a
 * lone $) are text.  Then as raw mode.
 */
char *
pgd_substitute_strict(const char *text, const DfJson *vars,
					  const DfJson *results, char **errmsg)
{
	SubstTable	   vt;
	SubstTable	   rt;
	StringInfoData out;
	const char	  *p;
	char		  *aftervars;

	*errmsg = NULL;
	subst_table_build(&vt, vars, false);
	for (p = strchr(text, '{'); p != NULL; p = strchr(p + 1, '{'))
	{
		const char *q = p + 1;

		if (!IS_IDENT_START(*q))
			continue;
		while (IS_IDENT_CHAR(*q))
			q++;
		if (*q == '}' && subst_table_find(&vt, p + 1, q - p - 1) == NULL)
		{
			*errmsg = psprintf("variable \"%.*s\" is not set: {%.*s} is substituted here, never kept as text (set it with df.setvar before df.start)",
							   (int) (q - p - 1), p + 1, (int) (q - p - 1),
							   p + 1);
			return NULL;
		}
	}
	aftervars = substitute_vars(text, vars);
	subst_table_build(&rt, results, true);
	initStringInfo(&out);
	p = aftervars;
	while (*p)
	{
		const char *dollar = strchr(p, '$');
		const char *name;
		const char *q;
		const char *r;

		if (dollar == NULL)
		{
			appendStringInfoString(&out, p);
			break;
		}
		appendBinaryStringInfo(&out, p, dollar - p);
		name = dollar + 1;
		if (!IS_IDENT_START(*name))
		{
			appendStringInfoChar(&out, '$');
			p = name;
			continue;
		}
		for (q = name; IS_IDENT_CHAR(*q); q++)
			;
		if (subst_table_find(&rt, name, q - name) != NULL)
		{
			/* substituted by the pass below */
			appendBinaryStringInfo(&out, dollar, q - dollar);
			p = q;
			continue;
		}
		r = q;
		if (r[0] == '.' && IS_IDENT_CHAR(r[1]))
			for (r++; IS_IDENT_CHAR(*r); r++)
				;
		if (*r == '?')
		{
			p = r + 1; /* optional and missing: nothing */
			continue;
		}
		*errmsg = psprintf("$%.*s matches no result: no step before this one is named \"%.*s\" (df.as or |=>), "
						   "and a reference is substituted here, never kept as text (write $%.*s? for an optional one)",
						   (int) (q - name), name, (int) (q - name), name,
						   (int) (q - name), name);
		return NULL;
	}
	return substitute_references(out.data, results, PGD_SUBST_RAW, errmsg);
}

bool
pgd_is_whole_value_reference(const char *s)
{
	const char *p;

	if (s == NULL)
		return false;
	if (s[0] == '{')
	{
		for (p = s + 1; *p && *p != '{' && *p != '}'; p++)
			;
		return *p == '}' && p > s + 1 && p[1] == '\0';
	}
	if (s[0] != '$' || !IS_IDENT_START(s[1]))
		return false;
	for (p = s + 2; IS_IDENT_START(*p) || (*p >= '0' && *p <= '9'); p++)
		;
	if (p[0] == '.' && IS_IDENT_CHAR(p[1]))
		for (p++; IS_IDENT_CHAR(*p); p++)
			;
	if (*p == '?')
		p++;
	return *p == '\0';
}
