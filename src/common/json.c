/*-------------------------------------------------------------------------
 *
 * json.c
 *	  Parser, constructors and compact writer for the DfJson document model
 *	  declared in json.h.
 *
 * The parser is our own, not PostgreSQL's (common/jsonapi.h), on purpose.
 * It follows the JSON grammar (RFC 8259) in one loop that keeps the open
 * containers on an explicit heap stack instead of the C stack: a workflow
 * graph is JSON nested once per node, and a hostile or generated input a
 * hundred thousand levels deep must produce a clean "too deep" error from
 * graph validation, not a "stack depth limit exceeded" from here.  Memory
 * is the only bound on nesting.  Before parsing, one pass over the bytes
 * refuses NUL bytes and invalid UTF-8, so that string bytes can then be
 * copied through unchecked, most strings in one piece.
 *
 * pg_parse_json with a JsonSemAction building the same tree was tried
 * and rejected.  It gave the same trees and, mapped back, the
 * same messages on 190,000 mutated inputs, but:
 *	- it recurses once per level and its check_stack_depth() throws: on
 *	  PG 15 with the default 2 MB stack, between 10,000 and 20,000 levels
 *	  (PG 17's non-recursive incremental parser stops at 6,400).  Graphs
 *	  of any depth must parse, so that validation can refuse them with the
 *	  reference's depth message or name the bad node 100,000 levels down;
 *	  a depth pre-scan could only refuse them with another message;
 *	- it is slower.  Microseconds per parse, PG 15, -O2, both versions in
 *	  one run on one machine (median of 9): a 1,000-branch JOIN graph as
 *	  df.start gets it (41 kB) 231 here, 305 jsonapi;
 *	  {"rows":[{"a":1}],"row_count":1} 0.33 and 0.45; a 100 kB step result
 *	  600 and 822;
 *	- it gives error codes, not offsets, reads a whole token before checking
 *	  that one may stand there and reads a bad number or word to its end, so
 *	  keeping our messages meant re-reading the input after an error: the
 *	  result was no shorter than this parser;
 *	- in the backend it decodes \u escapes to the server encoding (PG 15
 *	  throws where that fails), while DfJson strings are UTF-8.
 *
 * Invariants:
 *	- the whole input is checked for NUL bytes and UTF-8 validity before
 *	  parsing, so every decoded string is valid UTF-8 without NULs;
 *	- object keys keep their input order, numbers keep their input text;
 *	- bad input never throws: the parser returns NULL and a message with the
 *	  byte offset where it went wrong.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/json.h"

typedef struct JsonParser
{
	const char *s;
	int			len;
	int			pos;
	char	   *err;
} JsonParser;

/* One open container while parsing: the container and, for objects, the key
 * whose value is being parsed. */
typedef struct JsonFrame
{
	DfJson *container;
	char   *key;
} JsonFrame;

/*
 * Describe the byte at the current position for an error message.  Printable
 * ASCII is quoted as is; anything else is shown as a code point or byte so
 * the message itself stays printable.
 */
static void
json_unexpected(JsonParser *p)
{
	unsigned char c;

	if (p->pos >= p->len)
	{
		p->err = pstrdup("unexpected end of input");
		return;
	}
	c = (unsigned char) p->s[p->pos];
	if (c >= 0x20 && c < 0x7f)
		p->err = psprintf("unexpected character '%c' at offset %d", c, p->pos);
	else if (c < 0x80)
		p->err =
			psprintf("unexpected character U+%04X at offset %d", c, p->pos);
	else
	{
		int l = pg_utf_mblen((const unsigned char *) &p->s[p->pos]);

		p->err = psprintf("unexpected character '%.*s' at offset %d", l,
						  &p->s[p->pos], p->pos);
	}
}

static inline void
json_skip_ws(JsonParser *p)
{
	while (p->pos < p->len)
	{
		char c = p->s[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

/*
 * Reject NUL bytes and invalid UTF-8 up front, so that the rest of the
 * parser can copy string bytes through unchecked.
 */
static bool
json_check_encoding(JsonParser *p)
{
	const unsigned char *s = (const unsigned char *) p->s;
	int					 i = 0;

	while (i < p->len)
	{
		int l;

		if (s[i] == 0)
		{
			p->err = psprintf("invalid NUL byte at offset %d", i);
			return false;
		}
		if (s[i] < 0x80)
		{
			i++;
			continue;
		}
		l = pg_utf_mblen(&s[i]);
		if (i + l > p->len || !pg_utf8_islegal(&s[i], l))
		{
			p->err = psprintf("invalid UTF-8 byte sequence at offset %d", i);
			return false;
		}
		i += l;
	}
	return true;
}

/* Four hex digits at pos; -1 when they are not there. */
static int
json_hex4(JsonParser *p, int pos)
{
	int v = 0;

	if (pos + 4 > p->len)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		char c = p->s[pos + i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * A string literal starting at the opening quote.  Escapes are decoded to
 * UTF-8; \u0000 is refused because the result must fit a C string and a
 * PostgreSQL text value.
 */
/*
 * A \uXXXX escape (or a surrogate pair of them) at p->pos, appended to buf
 * as UTF-8.  Leaves p->pos where the caller's "+= 2" moves past the escape;
 * false with p->err on a bad escape.
 */
static bool
json_parse_unicode_escape(JsonParser *p, StringInfo buf)
{
	int			  at = p->pos;
	int			  cp = json_hex4(p, p->pos + 2);
	unsigned char utf8[8];

	if (cp < 0)
	{
		p->err = psprintf("invalid \\u escape at offset %d", at);
		return false;
	}
	p->pos += 4; /* now at the last hex digit - 1 */
	if (cp == 0)
	{
		p->err = psprintf("\\u0000 is not allowed at offset %d", at);
		return false;
	}
	if (cp >= 0xDC00 && cp <= 0xDFFF)
	{
		p->err = psprintf("invalid Unicode surrogate pair at offset %d", at);
		return false;
	}
	if (cp >= 0xD800 && cp <= 0xDBFF)
	{
		int lo = -1;

		if (p->pos + 3 < p->len && p->s[p->pos + 2] == '\\' &&
			p->s[p->pos + 3] == 'u')
			lo = json_hex4(p, p->pos + 4);
		if (lo < 0xDC00 || lo > 0xDFFF)
		{
			p->err =
				psprintf("invalid Unicode surrogate pair at offset %d", at);
			return false;
		}
		cp = surrogate_pair_to_codepoint(cp, lo);
		p->pos += 6;
	}
	memset(utf8, 0, sizeof(utf8));
	unicode_to_utf8((pg_wchar) cp, utf8);
	appendStringInfoString(buf, (char *) utf8);
	return true;
}

static char *
json_parse_string(JsonParser *p)
{
	StringInfoData buf;

	Assert(p->s[p->pos] == '"');
	p->pos++;

	/* fast path: most strings have no escapes; copy them in one piece */
	for (int i = p->pos; i < p->len; i++)
	{
		unsigned char c = (unsigned char) p->s[i];

		if (c == '"')
		{
			char *out = pnstrdup(&p->s[p->pos], i - p->pos);

			p->pos = i + 1;
			return out;
		}
		if (c == '\\' || c < 0x20)
			break;
	}

	initStringInfo(&buf);
	for (;;)
	{
		int			  start = p->pos;
		unsigned char c;

		/* copy a run of ordinary bytes at once */
		while (p->pos < p->len)
		{
			c = (unsigned char) p->s[p->pos];
			if (c == '"' || c == '\\' || c < 0x20)
				break;
			p->pos++;
		}
		if (p->pos > start)
			appendBinaryStringInfo(&buf, &p->s[start], p->pos - start);
		if (p->pos >= p->len)
		{
			p->err = pstrdup("unexpected end of input");
			return NULL;
		}
		c = (unsigned char) p->s[p->pos];
		if (c == '"')
		{
			p->pos++;
			return buf.data;
		}
		if (c < 0x20)
		{
			p->err =
				psprintf("unescaped control character U+%04X in string at offset %d",
						 c, p->pos);
			return NULL;
		}
		/* backslash */
		if (p->pos + 1 >= p->len)
		{
			p->err = pstrdup("unexpected end of input");
			return NULL;
		}
		c = (unsigned char) p->s[p->pos + 1];
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				appendStringInfoChar(&buf, (char) c);
				break;
			case 'b':
				appendStringInfoChar(&buf, '\b');
				break;
			case 'f':
				appendStringInfoChar(&buf, '\f');
				break;
			case 'n':
				appendStringInfoChar(&buf, '\n');
				break;
			case 'r':
				appendStringInfoChar(&buf, '\r');
				break;
			case 't':
				appendStringInfoChar(&buf, '\t');
				break;
			case 'u':
				if (!json_parse_unicode_escape(p, &buf))
					return NULL;
				break;
			default:
				if (c >= 0x20 && c < 0x7f)
					p->err = psprintf("invalid escape '\\%c' at offset %d", c,
									  p->pos);
				else
					p->err = psprintf("invalid escape at offset %d", p->pos);
				return NULL;
		}
		p->pos += 2;
	}
}

/* A number, kept as its text; the grammar is RFC 8259's, nothing looser. */
static DfJson *
json_parse_number(JsonParser *p)
{
	int			start = p->pos;
	const char *s = p->s;

#define DIGIT_AT(i) ((i) < p->len && s[i] >= '0' && s[i] <= '9')
	if (p->pos < p->len && s[p->pos] == '-')
		p->pos++;
	if (!DIGIT_AT(p->pos))
	{
		json_unexpected(p);
		return NULL;
	}
	if (s[p->pos] == '0')
		p->pos++;
	else
		while (DIGIT_AT(p->pos))
			p->pos++;
	if (p->pos < p->len && s[p->pos] == '.')
	{
		p->pos++;
		if (!DIGIT_AT(p->pos))
		{
			json_unexpected(p);
			return NULL;
		}
		while (DIGIT_AT(p->pos))
			p->pos++;
	}
	if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E'))
	{
		p->pos++;
		if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
			p->pos++;
		if (!DIGIT_AT(p->pos))
		{
			json_unexpected(p);
			return NULL;
		}
		while (DIGIT_AT(p->pos))
			p->pos++;
	}
#undef DIGIT_AT
	return dfjson_make_number(pnstrdup(&s[start], p->pos - start));
}

static bool
json_match_word(JsonParser *p, const char *word)
{
	int l = strlen(word);

	for (int i = 0; i < l; i++)
	{
		if (p->pos + i >= p->len || p->s[p->pos + i] != word[i])
		{
			p->pos += i;
			json_unexpected(p);
			return false;
		}
	}
	p->pos += l;
	return true;
}

/* A scalar value at the current position (not '{' or '['). */
static DfJson *
json_parse_scalar(JsonParser *p)
{
	char c;

	if (p->pos >= p->len)
	{
		json_unexpected(p);
		return NULL;
	}
	c = p->s[p->pos];
	switch (c)
	{
		case '"':
		{
			char *s = json_parse_string(p);

			return s ? dfjson_make_string(s) : NULL;
		}
		case 't':
			return json_match_word(p, "true") ? dfjson_make_bool(true) : NULL;
		case 'f':
			return json_match_word(p, "false") ? dfjson_make_bool(false) :
												 NULL;
		case 'n':
			return json_match_word(p, "null") ? dfjson_make_null() : NULL;
		default:
			if (c == '-' || (c >= '0' && c <= '9'))
				return json_parse_number(p);
			json_unexpected(p);
			return NULL;
	}
}

/* An object key and its colon: "key" ws ':' */
static char *
json_parse_key(JsonParser *p)
{
	char *key;

	json_skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != '"')
	{
		json_unexpected(p);
		return NULL;
	}
	key = json_parse_string(p);
	if (key == NULL)
		return NULL;
	json_skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != ':')
	{
		json_unexpected(p);
		return NULL;
	}
	p->pos++;
	return key;
}

DfJson *
dfjson_parse(const char *text, int len, char **errmsg)
{
	JsonParser p;
	JsonFrame *stack;
	int		   depth = 0;
	int		   stack_size = 16;

	p.s = text;
	p.len = len;
	p.pos = 0;
	p.err = NULL;
	*errmsg = NULL;

	if (!json_check_encoding(&p))
	{
		*errmsg = p.err;
		return NULL;
	}

	stack = palloc(sizeof(JsonFrame) * stack_size);
	for (;;)
	{
		DfJson *v;

		/* expecting a value */
		CHECK_FOR_INTERRUPTS();
		json_skip_ws(&p);
		if (p.pos < p.len && (p.s[p.pos] == '{' || p.s[p.pos] == '['))
		{
			bool is_object = (p.s[p.pos] == '{');
			char close = is_object ? '}' : ']';

			v = is_object ? dfjson_make_object() : dfjson_make_array();
			p.pos++;
			json_skip_ws(&p);
			if (p.pos < p.len && p.s[p.pos] == close)
				p.pos++; /* empty container: complete */
			else
			{
				if (depth == stack_size)
				{
					stack_size *= 2;
					stack =
						repalloc_huge(stack, sizeof(JsonFrame) * stack_size);
				}
				stack[depth].container = v;
				stack[depth].key = NULL;
				if (is_object &&
					(stack[depth].key = json_parse_key(&p)) == NULL)
					goto fail;
				depth++;
				continue;
			}
		}
		else if ((v = json_parse_scalar(&p)) == NULL)
			goto fail;

		/* v is complete: attach it to its container, closing as we go */
		for (;;)
		{
			JsonFrame *top;

			if (depth == 0)
			{
				json_skip_ws(&p);
				if (p.pos < p.len)
				{
					json_unexpected(&p);
					goto fail;
				}
				return v;
			}
			top = &stack[depth - 1];
			if (top->container->type == DFJ_OBJECT)
				dfjson_object_add(top->container, top->key, v);
			else
				dfjson_array_add(top->container, v);
			json_skip_ws(&p);
			if (p.pos < p.len && p.s[p.pos] == ',')
			{
				p.pos++;
				if (top->container->type == DFJ_OBJECT &&
					(top->key = json_parse_key(&p)) == NULL)
					goto fail;
				break; /* parse the next value */
			}
			if (p.pos < p.len &&
				p.s[p.pos] == (top->container->type == DFJ_OBJECT ? '}' : ']'))
			{
				p.pos++;
				v = top->container;
				depth--;
				continue;
			}
			json_unexpected(&p);
			goto fail;
		}
	}

fail:
	*errmsg = p.err;
	return NULL;
}

DfJson *
dfjson_get(const DfJson *v, const char *key)
{
	if (v == NULL || v->type != DFJ_OBJECT)
		return NULL;
	for (int i = v->count - 1; i >= 0; i--)
		if (strcmp(v->pairs[i].key, key) == 0)
			return v->pairs[i].value;
	return NULL;
}

static DfJson *
dfjson_alloc(DfJsonType type)
{
	DfJson *v = palloc0(sizeof(DfJson));

	v->type = type;
	return v;
}

DfJson *
dfjson_make_null(void)
{
	return dfjson_alloc(DFJ_NULL);
}

DfJson *
dfjson_make_bool(bool b)
{
	DfJson *v = dfjson_alloc(DFJ_BOOL);

	v->boolean = b;
	return v;
}

DfJson *
dfjson_make_string(const char *s)
{
	DfJson *v = dfjson_alloc(DFJ_STRING);

	v->str = pstrdup(s);
	return v;
}

DfJson *
dfjson_make_number(const char *text)
{
	DfJson *v = dfjson_alloc(DFJ_NUMBER);

	v->str = pstrdup(text);
	return v;
}

DfJson *
dfjson_make_object(void)
{
	return dfjson_alloc(DFJ_OBJECT);
}

DfJson *
dfjson_make_array(void)
{
	return dfjson_alloc(DFJ_ARRAY);
}

/*
 * The containers carry no capacity field: the capacity is implied by the
 * count (4, then doubling), so growth happens exactly when count reaches a
 * power of two of at least 4.
 */
static bool
dfjson_needs_growth(int count, int *newcap)
{
	if (count == 0)
	{
		*newcap = 4;
		return true;
	}
	if (count >= 4 && (count & (count - 1)) == 0)
	{
		*newcap = count * 2;
		return true;
	}
	return false;
}

void
dfjson_object_add(DfJson *obj, const char *key, DfJson *value)
{
	int newcap;

	Assert(obj->type == DFJ_OBJECT);
	if (dfjson_needs_growth(obj->count, &newcap))
	{
		if (obj->pairs == NULL)
			obj->pairs = palloc(sizeof(DfJsonPair) * newcap);
		else
			obj->pairs =
				repalloc_huge(obj->pairs, sizeof(DfJsonPair) * newcap);
	}
	obj->pairs[obj->count].key = pstrdup(key);
	obj->pairs[obj->count].value = value;
	obj->count++;
}

void
dfjson_array_add(DfJson *arr, DfJson *value)
{
	int newcap;

	Assert(arr->type == DFJ_ARRAY);
	if (dfjson_needs_growth(arr->count, &newcap))
	{
		if (arr->items == NULL)
			arr->items = palloc(sizeof(DfJson *) * newcap);
		else
			arr->items = repalloc_huge(arr->items, sizeof(DfJson *) * newcap);
	}
	arr->items[arr->count++] = value;
}

void
dfjson_write_string(StringInfo buf, const char *s)
{
	escape_json(buf, s);
}

/*
 * Recursive: documents written here are built by the DSL or come from jsonb
 * (whose own parser bounds the depth), so the C stack is the right limit.
 */
void
dfjson_write(StringInfo buf, const DfJson *v)
{
	check_stack_depth();
	switch (v->type)
	{
		case DFJ_NULL:
			appendStringInfoString(buf, "null");
			break;
		case DFJ_BOOL:
			appendStringInfoString(buf, v->boolean ? "true" : "false");
			break;
		case DFJ_NUMBER:
			appendStringInfoString(buf, v->str);
			break;
		case DFJ_STRING:
			dfjson_write_string(buf, v->str);
			break;
		case DFJ_ARRAY:
			appendStringInfoChar(buf, '[');
			for (int i = 0; i < v->count; i++)
			{
				if (i > 0)
					appendStringInfoChar(buf, ',');
				dfjson_write(buf, v->items[i]);
			}
			appendStringInfoChar(buf, ']');
			break;
		case DFJ_OBJECT:
			appendStringInfoChar(buf, '{');
			for (int i = 0; i < v->count; i++)
			{
				if (i > 0)
					appendStringInfoChar(buf, ',');
				dfjson_write_string(buf, v->pairs[i].key);
				appendStringInfoChar(buf, ':');
				dfjson_write(buf, v->pairs[i].value);
			}
			appendStringInfoChar(buf, '}');
			break;
	}
}

char *
dfjson_to_text(const DfJson *v)
{
	StringInfoData buf;

	initStringInfo(&buf);
	dfjson_write(&buf, v);
	return buf.data;
}

bool
dfjson_get_int64(const DfJson *v, int64 *out)
{
	const char *s;
	uint64		acc = 0;
	bool		neg = false;

	if (v == NULL || v->type != DFJ_NUMBER)
		return false;
	s = v->str;
	if (*s == '-')
	{
		neg = true;
		s++;
	}
	if (*s == '\0')
		return false;
	for (; *s; s++)
	{
		if (*s < '0' || *s > '9')
			return false;
		if (acc > (PG_UINT64_MAX - (*s - '0')) / 10)
			return false;
		acc = acc * 10 + (*s - '0');
	}
	if (neg)
	{
		if (acc > (uint64) PG_INT64_MAX + 1)
			return false;
		*out = (int64) (0 - acc);
	}
	else
	{
		if (acc > (uint64) PG_INT64_MAX)
			return false;
		*out = (int64) acc;
	}
	return true;
}
