/*-------------------------------------------------------------------------
 *
 * json.h
 *	  A small JSON document model for pg_durable.
 *
 * The engine and the DSL need JSON that keeps object keys in the order they
 * were written, keeps numbers exactly as written, and reports malformed
 * input as a message instead of throwing.  jsonb does none of these, so we
 * carry our own tree.  Everything is palloc'd in CurrentMemoryContext.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_JSON_H
#define PG_DURABLE_JSON_H

#include "postgres.h"
#include "lib/stringinfo.h"

typedef enum DfJsonType
{
	DFJ_NULL,
	DFJ_BOOL,
	DFJ_NUMBER,
	DFJ_STRING,
	DFJ_ARRAY,
	DFJ_OBJECT
} DfJsonType;

typedef struct DfJson DfJson;

typedef struct DfJsonPair
{
	char   *key; /* NUL-terminated, UTF-8 */
	DfJson *value;
} DfJsonPair;

struct DfJson
{
	DfJsonType	type;
	bool		boolean; /* DFJ_BOOL */
	char	   *str;	 /* DFJ_STRING: decoded text; DFJ_NUMBER: the
								 * number's text exactly as written */
	int			count;	 /* DFJ_ARRAY: items; DFJ_OBJECT: pairs */
	DfJson	  **items;	 /* DFJ_ARRAY */
	DfJsonPair *pairs;	 /* DFJ_OBJECT, in input order */
};

/*
 * Parse text of the given length.  Returns NULL and sets *errmsg to a
 * palloc'd message (e.g. "unexpected character 'x' at offset 12",
 * "unexpected end of input") on
 * malformed input; never throws for bad input (it may throw for stack depth
 * or out-of-memory).  Rejects trailing garbage, NUL bytes, invalid UTF-8 and
 * \u0000 escapes.
 */
extern DfJson *dfjson_parse(const char *text, int len, char **errmsg);

/* Object member by key (last one wins on duplicates); NULL if absent or v is not an object. */
extern DfJson *dfjson_get(const DfJson *v, const char *key);

/* Constructors. */
extern DfJson *dfjson_make_null(void);
extern DfJson *dfjson_make_bool(bool b);
extern DfJson *dfjson_make_string(const char *s);
extern DfJson *dfjson_make_number(const char *text);
extern DfJson *dfjson_make_object(void);
extern DfJson *dfjson_make_array(void);
extern void	   dfjson_object_add(DfJson *obj, const char *key,
								 DfJson *value); /* appends */
extern void	   dfjson_array_add(DfJson *arr, DfJson *value);

/*
 * An integral number that fits int64 ("5", "-3"; not "5.0" or "5e1").
 * False when v is not such a number.
 */
extern bool dfjson_get_int64(const DfJson *v, int64 *out);

/* Compact serialization ({"a":1,"b":[true,null]}), keys in stored order. */
extern void	 dfjson_write(StringInfo buf, const DfJson *v);
extern char *dfjson_to_text(const DfJson *v);

/* Append s as a JSON string literal (quotes and escapes). */
extern void dfjson_write_string(StringInfo buf, const char *s);

#endif /* PG_DURABLE_JSON_H */
