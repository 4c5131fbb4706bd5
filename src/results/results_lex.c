/*-------------------------------------------------------------------------
 *
 * results_lex.c
 *	  Where each byte of a SQL step's text stands for PostgreSQL's lexer
 *	  (code, a word, a string literal, a quoted identifier, a dollar-quoted
 *	  string or its tag, a comment), and whether a reference ($name,
 *	  $name.col, ...) written at some place may be substituted there.
 *
 * Substitution writes a value only where a value can stand: in code, as
 * a token of its own.  A reference inside quotes or a comment would have
 * its value spliced into the quoted text, where a quote, a backslash or a
 * dollar tag in the value could end the quoting and run the rest as SQL;
 * it is refused instead (pgd_sql_reference_problem), by the substituter
 * at run time and by df.start and df.subscribe before anything runs
 * (results_check.c).
 *
 * The scanner follows src/backend/parser/scan.l, byte by byte (every
 * server encoding keeps ASCII bytes for ASCII characters, so a byte below
 * 0x80 is always the character it looks like):
 *	- whitespace; "--" to the end of the line; "/" "*" ... "*" "/" comments,
 *	  which nest; both start anywhere in code, also inside a run of
 *	  operator characters (scan.l cuts the operator there);
 *	- identifiers and keywords: [A-Za-z_\200-\377] then [A-Za-z0-9_$\200-\377]*,
 *	  so "x$a" is one word and "$a" in it is not a reference;
 *	- '...' (with '' for a quote): backslash is an ordinary character when
 *	  standard_conforming_strings is on and escapes the next byte when it
 *	  is off; E'...' always takes backslash escapes; N'...' is '...';
 *	  B'...' and X'...' end at the first quote; U&'...' takes no backslash
 *	  escapes (with standard_conforming_strings off PostgreSQL refuses it);
 *	  a literal continues after its closing quote when whitespace holding
 *	  a newline and another quote follow ('a'<newline>'b' is one literal,
 *	  read by the rules of the first part);
 *	- "..." and U&"..." (with "" for a quote): quoted identifiers;
 *	- $1, $2, ...: parameters; $tag$ ... $tag$ with tag empty or
 *	  [A-Za-z_\200-\377][A-Za-z0-9_\200-\377]*: a dollar-quoted string,
 *	  ending at the first identical $tag$; "$" followed by a name and no
 *	  closing "$" is a lone "$" in code, which is where a reference stands;
 *	- numbers: digits, a decimal point, an exponent; the rest is code.
 * An unterminated literal, identifier or comment runs to the end of the
 * text, as PostgreSQL would complain about it anyway.
 *
 * Which rules apply to '...' depends on standard_conforming_strings where
 * the statement is parsed: the executor's session for a step in its own
 * database, a background session for a step in another database, whose
 * role or database settings may differ.  So the text is scanned under both
 * settings, and a reference stands as a value only when it is in code
 * under both.  The values the substituter writes read the same under
 * either setting (results_subst.c).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "results/results.h"

#define IS_IDENT_START(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || \
	 (c) == '_' || (unsigned char) (c) >= 0x80)
#define IS_DIGIT(c)		  ((c) >= '0' && (c) <= '9')
#define IS_IDENT_CONT(c)  (IS_IDENT_START(c) || IS_DIGIT(c) || (c) == '$')
#define IS_DOLQ_CONT(c)	  (IS_IDENT_START(c) || IS_DIGIT(c))
#define IS_HORIZ_SPACE(c) ((c) == ' ' || (c) == '\t' || (c) == '\f')
#define IS_NEWLINE(c)	  ((c) == '\n' || (c) == '\r')
#define IS_SPACE(c)		  (IS_HORIZ_SPACE(c) || IS_NEWLINE(c) || (c) == '\v')

/* The longest literal quoted in a message. */
#define SHOWN_LITERAL_MAX 80

/* How the body of a quoted literal reads its characters. */
typedef enum LitRules
{
	LIT_PLAIN,	 /* '' doubles a quote; backslash is ordinary */
	LIT_ESCAPES, /* '' or a backslash escape */
	LIT_BITS	 /* ends at the first quote */
} LitRules;

typedef struct Lexer
{
	const char *s;
	int			len;
	bool		scs; /* standard_conforming_strings */
	uint8	   *ctx;
} Lexer;

static void
mark(Lexer *lx, int from, int to, PgdSqlContext c)
{
	for (int i = from; i < to && i < lx->len; i++)
		lx->ctx[i] = (uint8) c;
}

/* End of a "--" comment starting at i: the newline (not included) or the end. */
static int
line_comment_end(const Lexer *lx, int i)
{
	while (i < lx->len && !IS_NEWLINE(lx->s[i]))
		i++;
	return i;
}

/*
 * After a literal's closing quote at q: the position of the quote that
 * continues it (whitespace holding a newline, "--" comments allowed, then a
 * quote), or -1.  Comments met on the way are marked.
 */
static int
continuation(Lexer *lx, int q)
{
	int	 i = q + 1;
	bool newline = false;

	for (;;)
	{
		if (i >= lx->len)
			return -1;
		if (IS_SPACE(lx->s[i]))
		{
			if (IS_NEWLINE(lx->s[i]))
				newline = true;
			i++;
		}
		else if (lx->s[i] == '-' && i + 1 < lx->len && lx->s[i + 1] == '-')
		{
			int e = line_comment_end(lx, i);

			/* after the newline, a comment counts only with its own newline */
			if (newline && e >= lx->len)
				return -1;
			i = e;
		}
		else
			break;
	}
	if (!newline || lx->s[i] != '\'')
		return -1;
	/* the comments between the parts */
	for (int j = q + 1; j < i; j++)
		if (lx->s[j] == '-' && lx->s[j + 1] == '-')
		{
			int e = line_comment_end(lx, j);

			mark(lx, j, e, PGD_SQL_COMMENT);
			j = e;
		}
	return i;
}

/* A quoted literal whose opening quote is at q; returns the index after it. */
static int
scan_literal(Lexer *lx, int q, LitRules rules)
{
	int i = q + 1;

	lx->ctx[q] = PGD_SQL_STRING;

	for (;;)
	{
		while (i < lx->len)
		{
			char c = lx->s[i];

			if (c == '\\' && rules == LIT_ESCAPES)
			{
				mark(lx, i, i + 2, PGD_SQL_STRING);
				i += 2;
				continue;
			}
			if (c == '\'')
			{
				if (rules != LIT_BITS && i + 1 < lx->len &&
					lx->s[i + 1] == '\'')
				{
					mark(lx, i, i + 2, PGD_SQL_STRING);
					i += 2;
					continue;
				}
				break;
			}
			lx->ctx[i++] = PGD_SQL_STRING;
		}
		if (i >= lx->len)
			return lx->len;
		lx->ctx[i] = PGD_SQL_STRING; /* the closing quote */
		{
			int next = continuation(lx, i);

			if (next < 0)
				return i + 1;
			lx->ctx[next] = PGD_SQL_STRING;
			i = next + 1;
		}
	}
}

/* A quoted identifier whose opening quote is at q. */
static int
scan_quoted_ident(Lexer *lx, int q)
{
	int i = q + 1;

	lx->ctx[q] = PGD_SQL_QUOTED_IDENT;

	while (i < lx->len)
	{
		if (lx->s[i] == '"')
		{
			if (i + 1 < lx->len && lx->s[i + 1] == '"')
			{
				mark(lx, i, i + 2, PGD_SQL_QUOTED_IDENT);
				i += 2;
				continue;
			}
			lx->ctx[i] = PGD_SQL_QUOTED_IDENT;
			return i + 1;
		}
		lx->ctx[i++] = PGD_SQL_QUOTED_IDENT;
	}
	return lx->len;
}

/* The length of a dollar-quote delimiter ($$ or $tag$) at i, or 0. */
static int
dollar_delimiter(const Lexer *lx, int i)
{
	int j = i + 1;

	if (j < lx->len && IS_IDENT_START(lx->s[j]))
		for (j++; j < lx->len && IS_DOLQ_CONT(lx->s[j]); j++)
			;
	return (j < lx->len && lx->s[j] == '$') ? j + 1 - i : 0;
}

/* A dollar-quoted string whose opening delimiter (dlen bytes) is at i. */
static int
scan_dollar_string(Lexer *lx, int i, int dlen)
{
	const char *tag = lx->s + i;
	int			j = i + dlen;

	mark(lx, i, j, PGD_SQL_DOLLAR_TAG);
	for (; j + dlen <= lx->len; j++)
		if (lx->s[j] == '$' && memcmp(lx->s + j, tag, dlen) == 0)
		{
			mark(lx, j, j + dlen, PGD_SQL_DOLLAR_TAG);
			return j + dlen;
		}
		else
			lx->ctx[j] = PGD_SQL_DOLLAR_STRING;
	mark(lx, j, lx->len, PGD_SQL_DOLLAR_STRING);
	return lx->len;
}

static void
lex(Lexer *lx)
{
	const char *s = lx->s;
	int			i = 0;

	while (i < lx->len)
	{
		char c = s[i];
		char n1 = i + 1 < lx->len ? s[i + 1] : '\0';
		char n2 = i + 2 < lx->len ? s[i + 2] : '\0';

		if (c == '-' && n1 == '-')
		{
			int e = line_comment_end(lx, i);

			mark(lx, i, e, PGD_SQL_COMMENT);
			i = e;
		}
		else if (c == '/' && n1 == '*')
		{
			int depth = 1;
			int j = i + 2;

			while (j < lx->len && depth > 0)
			{
				if (s[j] == '/' && j + 1 < lx->len && s[j + 1] == '*')
				{
					depth++;
					j += 2;
				}
				else if (s[j] == '*' && j + 1 < lx->len && s[j + 1] == '/')
				{
					depth--;
					j += 2;
				}
				else
					j++;
			}
			mark(lx, i, j, PGD_SQL_COMMENT);
			i = j;
		}
		else if (c == '\'')
			i = scan_literal(lx, i, lx->scs ? LIT_PLAIN : LIT_ESCAPES);
		else if (c == '"')
			i = scan_quoted_ident(lx, i);
		else if ((c == 'e' || c == 'E') && n1 == '\'')
		{
			lx->ctx[i] = PGD_SQL_STRING;
			i = scan_literal(lx, i + 1, LIT_ESCAPES);
		}
		else if ((c == 'n' || c == 'N') && n1 == '\'')
		{
			lx->ctx[i] = PGD_SQL_STRING;
			i = scan_literal(lx, i + 1, lx->scs ? LIT_PLAIN : LIT_ESCAPES);
		}
		else if ((c == 'b' || c == 'B' || c == 'x' || c == 'X') && n1 == '\'')
		{
			lx->ctx[i] = PGD_SQL_STRING;
			i = scan_literal(lx, i + 1, LIT_BITS);
		}
		else if ((c == 'u' || c == 'U') && n1 == '&' && n2 == '\'')
		{
			mark(lx, i, i + 2, PGD_SQL_STRING);
			i = scan_literal(lx, i + 2, LIT_PLAIN);
		}
		else if ((c == 'u' || c == 'U') && n1 == '&' && n2 == '"')
		{
			mark(lx, i, i + 2, PGD_SQL_QUOTED_IDENT);
			i = scan_quoted_ident(lx, i + 2);
		}
		else if (IS_IDENT_START(c))
		{
			int j = i + 1;

			while (j < lx->len && IS_IDENT_CONT(s[j]))
				j++;
			mark(lx, i, j, PGD_SQL_WORD);
			i = j;
		}
		else if (IS_DIGIT(c) || (c == '.' && IS_DIGIT(n1)))
		{
			int j = i;

			while (j < lx->len && (IS_DIGIT(s[j]) || s[j] == '.'))
				j++;
			/* an exponent only with its digits (scan.l throws a bare e back) */
			if (j < lx->len && (s[j] == 'e' || s[j] == 'E'))
			{
				int k = j + 1;

				if (k < lx->len && (s[k] == '+' || s[k] == '-'))
					k++;
				if (k < lx->len && IS_DIGIT(s[k]))
				{
					for (j = k; j < lx->len && IS_DIGIT(s[j]); j++)
						;
				}
			}
			mark(lx, i, j, PGD_SQL_CODE);
			i = j;
		}
		else if (c == '$')
		{
			int dlen;

			if (IS_DIGIT(n1))
			{
				int j = i + 1;

				while (j < lx->len && IS_DIGIT(s[j]))
					j++;
				mark(lx, i, j, PGD_SQL_CODE);
				i = j;
			}
			else if ((dlen = dollar_delimiter(lx, i)) > 0)
				i = scan_dollar_string(lx, i, dlen);
			else
				lx->ctx[i++] =
					PGD_SQL_CODE; /* a lone "$": a reference's place */
		}
		else
			lx->ctx[i++] = PGD_SQL_CODE;
	}
}

void
pgd_sql_scan(PgdSqlScan *scan, const char *text)
{
	Lexer lx;

	scan->text = text;
	scan->len = strlen(text);
	lx.s = text;
	lx.len = scan->len;

	scan->ctx_on = palloc0(Max(scan->len, 1));
	lx.scs = true;
	lx.ctx = scan->ctx_on;
	lex(&lx);

	scan->ctx_off = palloc0(Max(scan->len, 1));
	lx.scs = false;
	lx.ctx = scan->ctx_off;
	lex(&lx);
}

void
pgd_sql_scan_free(PgdSqlScan *scan)
{
	if (scan->ctx_on)
		pfree(scan->ctx_on);
	if (scan->ctx_off)
		pfree(scan->ctx_off);
	scan->ctx_on = scan->ctx_off = NULL;
}

/* text[from, to) for a message, clipped to SHOWN_LITERAL_MAX bytes. */
static char *
shown(const char *text, int from, int to)
{
	int len = to - from;

	if (len > SHOWN_LITERAL_MAX)
		return psprintf("%.*s…",
						pg_mbcliplen(text + from, len, SHOWN_LITERAL_MAX),
						text + from);
	return pnstrdup(text + from, len);
}

/*
 * For a reference alone in a short plain literal ('k2:$event.key'), the
 * expression that says the same with the reference outside the quotes
 * ('k2:' || $event.key); NULL when the literal is not that simple.
 */
static char *
joined_form(const PgdSqlScan *scan, int from, int to, int pos, int reflen)
{
	const char	  *s = scan->text;
	StringInfoData buf;

	if (s[from] != '\'' || s[to - 1] != '\'' || to - from > SHOWN_LITERAL_MAX)
		return NULL;
	for (int i = from + 1; i < to - 1; i++)
		if (s[i] == '\'' || s[i] == '\\' || (s[i] == '$' && i != pos))
			return NULL;
	initStringInfo(&buf);
	if (pos > from + 1)
		appendStringInfo(&buf, "'%.*s' || ", pos - from - 1, s + from + 1);
	appendBinaryStringInfo(&buf, s + pos, reflen);
	if (pos + reflen < to - 1)
		appendStringInfo(&buf, " || '%.*s'", to - 1 - pos - reflen,
						 s + pos + reflen);
	if (pos == from + 1 && pos + reflen == to - 1)
		appendStringInfoString(&buf, "::text");
	return buf.data;
}

bool
pgd_sql_reference_problem(const PgdSqlScan *scan, int pos, int reflen,
						  const char *where, PgdRefProblem *problem)
{
	PgdSqlContext on = (PgdSqlContext) scan->ctx_on[pos];
	PgdSqlContext off = (PgdSqlContext) scan->ctx_off[pos];
	char		 *ref = pnstrdup(scan->text + pos, reflen);
	int			  from = pos;
	int			  to = pos;
	char		 *lead;

	if (on == PGD_SQL_CODE && off == PGD_SQL_CODE)
		return false;

	/* the extent of what holds it, under the setting PostgreSQL defaults to */
	while (from > 0 && scan->ctx_on[from - 1] == on)
		from--;
	while (to < scan->len && scan->ctx_on[to] == on)
		to++;
	lead = where ? psprintf("The reference %s stands in %s, ", ref, where) :
				   psprintf("The reference %s stands ", ref);

	if (on != off)
	{
		problem->message =
			"the quoting around a reference depends on standard_conforming_strings";
		problem->detail =
			psprintf("%safter a string literal with a backslash before a quote: whether the reference is inside that literal depends on standard_conforming_strings.",
					 lead);
		problem->hint =
			pstrdup("Write that literal as E'…' with its backslashes doubled, or without a backslash before a quote.");
		return true;
	}

	switch (on)
	{
		case PGD_SQL_STRING:
		{
			char *joined = joined_form(scan, from, to, pos, reflen);

			problem->message =
				"a reference inside a string literal is not substituted";
			problem->detail =
				psprintf("%sinside the string literal %s: a value spliced into it could end the literal and run as SQL.",
						 lead, shown(scan->text, from, to));
			problem->hint = joined ?
				psprintf("Write %s instead.", joined) :
				psprintf("Write the reference outside the quotes and join it to the text with ||, as in 'k2:' || %s.",
						 ref);
			break;
		}
		case PGD_SQL_QUOTED_IDENT:
			problem->message =
				"a reference inside a quoted identifier is not substituted";
			problem->detail =
				psprintf("%sinside the quoted identifier %s: a value spliced into it could end the identifier and run as SQL.",
						 lead, shown(scan->text, from, to));
			problem->hint =
				pstrdup("Name the table or column in the statement itself; names cannot come from a result.");
			break;
		case PGD_SQL_DOLLAR_STRING:
			problem->message =
				"a reference inside a dollar-quoted string is not substituted";
			problem->detail =
				psprintf("%sinside a dollar-quoted string: a value spliced into it could end the string and run as SQL.",
						 lead);
			problem->hint =
				psprintf("Write the reference outside the dollar quotes, for example as an argument of a function: SELECT f(%s).",
						 ref);
			break;
		case PGD_SQL_DOLLAR_TAG:
			problem->message =
				"a reference used as a dollar-quote tag is not substituted";
			problem->detail =
				psprintf("%sright before a \"$\", where PostgreSQL reads %s%s as the tag of a dollar-quoted string.",
						 lead, shown(scan->text, pos, pos + reflen), "$");
			problem->hint =
				pstrdup("Choose a tag that is not the name of a result, such as $q$, or put a space after the reference.");
			break;
		case PGD_SQL_COMMENT:
			problem->message =
				"a reference inside a comment is not substituted";
			problem->detail =
				psprintf("%sinside a comment: a value spliced into it could end the comment and run as SQL.",
						 lead);
			problem->hint =
				pstrdup("Remove the reference from the comment, or write it without its \"$\".");
			break;
		case PGD_SQL_WORD:
			problem->message =
				"a reference inside an identifier is not substituted";
			problem->detail =
				psprintf("%sinside the word %s, which PostgreSQL reads as one identifier: names cannot come from a result.",
						 lead, shown(scan->text, from, to));
			problem->hint =
				pstrdup("Put a space or an operator between the word and the reference.");
			break;
		case PGD_SQL_CODE:
			elog(ERROR, "unexpected SQL context");
	}
	return true;
}
