/*-------------------------------------------------------------------------
 *
 * results_truthy.c
 *	  Truthiness of a step result, which decides IF arms and loop
 *	  while-conditions (reference §1.7).
 *
 * A result with a "rows" array is a SQL result: no rows is false, else the
 * value of the first key of the first row decides (a first row that is an
 * object without keys is false, one that is not an object decides
 * itself).  Any other result is judged whole:
 *	null false; a boolean itself; a number true unless it is zero (any
 *	spelling: 0, -0, 0.0, 0e5); an array or object true unless empty;
 *	a string by the string rule.
 * String rule: trim ASCII whitespace; empty is false; true/t/yes are true
 * and false/f/no are false, case-insensitively; a decimal number (sign,
 * digits with an optional point, optional exponent: what a float parser
 * accepts) is true unless it is zero; any other text is true.
 *
 * The rule is applied once, to the first value: a first column holding an
 * object with a "rows" key is just a non-empty object, so no recursion.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "results/results.h"

#define TRUTHY_ISSPACE(c) \
	((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' || \
	 (c) == '\f' || (c) == '\v')
#define TRUTHY_ISDIGIT(c) ((c) >= '0' && (c) <= '9')

/*
 * Whether s[0..len) is a decimal number; *zero says whether its value is
 * zero (every mantissa digit is 0).  JSON numbers are a subset.
 */
static bool
parse_decimal(const char *s, int len, bool *zero)
{
	int i = 0;
	int digits = 0;

	*zero = true;
	if (i < len && (s[i] == '+' || s[i] == '-'))
		i++;
	for (; i < len && TRUTHY_ISDIGIT(s[i]); i++, digits++)
		if (s[i] != '0')
			*zero = false;
	if (i < len && s[i] == '.')
		for (i++; i < len && TRUTHY_ISDIGIT(s[i]); i++, digits++)
			if (s[i] != '0')
				*zero = false;
	if (digits == 0)
		return false;
	if (i < len && (s[i] == 'e' || s[i] == 'E'))
	{
		int expdigits = 0;

		i++;
		if (i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		for (; i < len && TRUTHY_ISDIGIT(s[i]); i++)
			expdigits++;
		if (expdigits == 0)
			return false;
	}
	return i == len;
}

static bool
word_is(const char *s, int len, const char *word)
{
	return (int) strlen(word) == len && pg_strncasecmp(s, word, len) == 0;
}

static bool
truthy_string(const char *s)
{
	const char *end = s + strlen(s);
	int			len;
	bool		zero;

	while (s < end && TRUTHY_ISSPACE(*s))
		s++;
	while (end > s && TRUTHY_ISSPACE(end[-1]))
		end--;
	len = end - s;
	if (len == 0)
		return false;
	if (word_is(s, len, "true") || word_is(s, len, "t") ||
		word_is(s, len, "yes"))
		return true;
	if (word_is(s, len, "false") || word_is(s, len, "f") ||
		word_is(s, len, "no"))
		return false;
	if (parse_decimal(s, len, &zero))
		return !zero;
	return true;
}

/* The whole-value rule. */
static bool
truthy_value(const DfJson *v)
{
	bool zero;

	if (v == NULL)
		return false;
	switch (v->type)
	{
		case DFJ_NULL:
			return false;
		case DFJ_BOOL:
			return v->boolean;
		case DFJ_NUMBER:
			if (!parse_decimal(v->str, strlen(v->str), &zero))
				return true; /* cannot happen for a parsed number */
			return !zero;
		case DFJ_STRING:
			return truthy_string(v->str);
		case DFJ_ARRAY:
		case DFJ_OBJECT:
			return v->count > 0;
	}
	return false;
}

bool
pgd_truthy(const DfJson *result)
{
	const DfJson *rows = dfjson_get(result, "rows");
	const DfJson *row;

	if (rows == NULL || rows->type != DFJ_ARRAY)
		return truthy_value(result);
	if (rows->count == 0)
		return false;
	row = rows->items[0];
	if (row->type != DFJ_OBJECT)
		return truthy_value(row);
	if (row->count == 0)
		return false;
	return truthy_value(row->pairs[0].value);
}

bool
pgd_truthy_text(const char *text)
{
	char   *err = NULL;
	DfJson *doc;

	if (text == NULL)
		return false;
	doc = dfjson_parse(text, strlen(text), &err);
	if (doc == NULL)
		return truthy_string(text);
	return pgd_truthy(doc);
}
