/*-------------------------------------------------------------------------
 *
 * dsl_http.c
 *	  The HTTP steps of the DSL (df.http, df.http_multipart) and the checks
 *	  of their configs, shared with validation of hand-written graphs.
 *
 * The builders check what can be checked without the network: the URL
 * scheme (skipped for templated URLs containing '{', which are checked
 * again at execution), the method, header names and values (no CR/LF, so
 * no header injection), the timeout, and for multipart the shape of every
 * part.  Where the destination may go (allow-list, private addresses) is
 * decided at execution, not here.
 *
 * Config keys are written in the order url, method, body|parts, headers,
 * timeout_seconds; headers and parts are written compactly in jsonb's key
 * order.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "dsl/dsl.h"
#include "fmgr.h"
#include "common/json.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(pgd_http);
PG_FUNCTION_INFO_V1(pgd_http_multipart);

#define WHOLE_VALUE_REFERENCES "$name, $name?, $name.col, $name.col?, {var}"

static bool
has_crlf(const char *s)
{
	return strpbrk(s, "\r\n") != NULL;
}

char *
df_http_check_url(const char *url)
{
	const char *p = url;
	char	   *scheme;

	for (const unsigned char *c = (const unsigned char *) url; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return psprintf("Invalid URL '%s': it contains a control character", url);

	/* templated URLs ({var}) are checked when the step runs */
	if (strchr(url, '{') != NULL)
		return NULL;

	if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
		return psprintf("Invalid URL '%s': expected an absolute http:// or https:// URL", url);
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		   (*p >= '0' && *p <= '9') || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (*p != ':')
		return psprintf("Invalid URL '%s': expected an absolute http:// or https:// URL", url);
	scheme = pnstrdup(url, p - url);
	for (char *c = scheme; *c; c++)
		*c = pg_ascii_tolower((unsigned char) *c);
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		return psprintf("Blocked: unsupported URL scheme '%s'. Only http and https are allowed.",
						scheme);
	if (strncmp(p, "://", 3) != 0 || p[3] == '\0' || strchr("/?#", p[3]) != NULL)
		return psprintf("Invalid URL '%s': missing host", url);
	return NULL;
}

char *
df_http_check_method(const char *method, bool multipart, char **upper)
{
	static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
	static const char *const multipart_methods[] = {"POST", "PUT", "PATCH"};
	const char *const *valid = multipart ? multipart_methods : methods;
	int			nvalid = multipart ? lengthof(multipart_methods) : lengthof(methods);
	char	   *u = pstrdup(method);

	for (char *c = u; *c; c++)
		*c = pg_ascii_toupper((unsigned char) *c);
	for (int i = 0; i < nvalid; i++)
	{
		if (strcmp(u, valid[i]) == 0)
		{
			if (upper)
				*upper = u;
			return NULL;
		}
	}
	return psprintf("Invalid HTTP method: %s", method);
}

/* Headers: a JSON object; names and string values without CR/LF. */
char *
df_http_check_headers(const DfJson *headers)
{
	if (headers == NULL || headers->type == DFJ_NULL)
		return NULL;
	if (headers->type != DFJ_OBJECT)
		return pstrdup("headers must be a JSON object");
	for (int i = 0; i < headers->count; i++)
	{
		const DfJsonPair *h = &headers->pairs[i];

		if (h->key[0] == '\0')
			return pstrdup("header names cannot be empty");
		if (has_crlf(h->key))
			return psprintf("header name '%s' contains a CR or LF character", h->key);
		if (h->value->type == DFJ_STRING && has_crlf(h->value->str))
			return psprintf("header '%s' value contains a CR or LF character", h->key);
	}
	return NULL;
}

/* $n  $n?  $n.c  $n.c?  {v}: the only forms data_b64 may hold besides base64. */
static bool
is_whole_value_reference(const char *s)
{
	const char *p = s;

#define IDENT_START(c) (((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || (c) == '_')
#define IDENT_CHAR(c) (IDENT_START(c) || ((c) >= '0' && (c) <= '9'))
	if (*p == '{')
	{
		p++;
		if (!IDENT_START(*p))
			return false;
		while (IDENT_CHAR(*p))
			p++;
		return p[0] == '}' && p[1] == '\0';
	}
	if (*p != '$')
		return false;
	p++;
	if (!IDENT_START(*p))
		return false;
	while (IDENT_CHAR(*p))
		p++;
	if (*p == '.')
	{
		p++;
		if (!IDENT_START(*p))
			return false;
		while (IDENT_CHAR(*p))
			p++;
	}
	if (*p == '?')
		p++;
	return *p == '\0';
#undef IDENT_START
#undef IDENT_CHAR
}

/* Standard base64 with padding; ASCII whitespace is ignored. */
char *
df_http_check_base64(const char *s)
{
	int			n = 0;
	int			pad = 0;

	for (const char *p = s; *p; p++)
	{
		char		c = *p;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
			continue;
		if (c == '=')
		{
			pad++;
			n++;
			continue;
		}
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (c >= '0' && c <= '9') || c == '+' || c == '/'))
		{
			if ((unsigned char) c >= 0x20 && (unsigned char) c < 0x7f)
				return psprintf("invalid character '%c' at offset %d", c, (int) (p - s));
			return psprintf("invalid byte 0x%02X at offset %d", (unsigned char) c, (int) (p - s));
		}
		if (pad > 0)
			return psprintf("padding '=' before the end at offset %d", (int) (p - s));
		n++;
	}
	if (pad > 2)
		return psprintf("%d padding characters, at most 2 are allowed", pad);
	if (n % 4 != 0)
		return psprintf("length %d is not a multiple of 4", n);
	return NULL;
}

/* One multipart part; i is its position for messages. */
static char *
check_part(const DfJson *part, int i)
{
	const DfJson *name = dfjson_get(part, "name");
	const DfJson *data = dfjson_get(part, "data");
	const DfJson *b64 = dfjson_get(part, "data_b64");
	const char *const text_keys[] = {"filename", "content_type"};
	char	   *err;

	if (part->type != DFJ_OBJECT)
		return psprintf("parts[%d] must be a JSON object", i);
	if (name == NULL || name->type != DFJ_STRING || name->str[0] == '\0')
		return psprintf("parts[%d] must have a non-empty string \"name\"", i);
	if (has_crlf(name->str))
		return psprintf("parts[%d] name contains a CR or LF character", i);
	for (int k = 0; k < lengthof(text_keys); k++)
	{
		const DfJson *v = dfjson_get(part, text_keys[k]);

		if (v == NULL || v->type == DFJ_NULL)
			continue;
		if (v->type != DFJ_STRING)
			return psprintf("parts[%d] \"%s\" must be a string", i, text_keys[k]);
		if (has_crlf(v->str))
			return psprintf("parts[%d] %s contains a CR or LF character", i, text_keys[k]);
	}
	if (data != NULL && data->type == DFJ_NULL)
		data = NULL;
	if (b64 != NULL && b64->type == DFJ_NULL)
		b64 = NULL;
	if ((data == NULL) == (b64 == NULL))
		return psprintf("parts[%d] must have exactly one of \"data\" or \"data_b64\"", i);
	if (data != NULL && data->type != DFJ_STRING)
		return psprintf("parts[%d] \"data\" must be a string", i);
	if (b64 != NULL)
	{
		if (b64->type != DFJ_STRING)
			return psprintf("parts[%d] \"data_b64\" must be a string", i);
		if (is_whole_value_reference(b64->str))
			return NULL;
		if (strpbrk(b64->str, "${") != NULL)
			return psprintf("parts[%d] \"data_b64\" must be base64 or a single whole-value reference (%s)",
							i, WHOLE_VALUE_REFERENCES);
		if ((err = df_http_check_base64(b64->str)) != NULL)
			return psprintf("Invalid base64 in part '%s': %s", name->str, err);
	}
	return NULL;
}

char *
df_http_check_parts(const DfJson *parts)
{
	char	   *err;

	if (parts == NULL || parts->type == DFJ_NULL)
		return pstrdup("parts is required and cannot be NULL");
	if (parts->type != DFJ_ARRAY)
		return pstrdup("parts must be a JSON array of part objects");
	if (parts->count == 0)
		return pstrdup("parts must contain at least one part");
	for (int i = 0; i < parts->count; i++)
		if ((err = check_part(parts->items[i], i)) != NULL)
			return err;
	return NULL;
}

static char *
check_timeout(const DfJson *v)
{
	int64		t;

	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (!dfjson_get_int64(v, &t))
		return pstrdup("timeout_seconds must be a whole number of seconds");
	if (t <= 0)
		return pstrdup("Timeout must be positive");
	if (t > PG_INT32_MAX)
		return pstrdup("timeout_seconds is out of range");
	return NULL;
}

/* The config of a hand-written HTTP or HTTP_MULTIPART node. */
char *
df_http_check_config(const char *query, bool multipart)
{
	const char *tname = multipart ? "HTTP_MULTIPART" : "HTTP";
	DfJson	   *cfg;
	DfJson	   *v;
	char	   *err;

	cfg = dfjson_parse(query, strlen(query), &err);
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		return psprintf("%s query must be a JSON config object {\"url\": ..., \"method\": ..., ...}", tname);
	v = dfjson_get(cfg, "url");
	if (v == NULL || v->type != DFJ_STRING)
		return psprintf("%s config requires a string \"url\"", tname);
	if ((err = df_http_check_url(v->str)) != NULL)
		return err;
	v = dfjson_get(cfg, "method");
	if (v != NULL && v->type != DFJ_NULL)
	{
		if (v->type != DFJ_STRING)
			return psprintf("%s config \"method\" must be a string", tname);
		if ((err = df_http_check_method(v->str, multipart, NULL)) != NULL)
			return err;
	}
	if (multipart)
	{
		if ((err = df_http_check_parts(dfjson_get(cfg, "parts"))) != NULL)
			return err;
	}
	else
	{
		v = dfjson_get(cfg, "body");
		if (v != NULL && v->type != DFJ_NULL && v->type != DFJ_STRING)
			return pstrdup("HTTP config \"body\" must be a string or null");
	}
	if ((err = df_http_check_headers(dfjson_get(cfg, "headers"))) != NULL)
		return err;
	return check_timeout(dfjson_get(cfg, "timeout_seconds"));
}

/* jsonb argument as our JSON model (jsonb's key order), or NULL for SQL NULL. */
static DfJson *
jsonb_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *text;
	char	   *err;
	DfJson	   *v;

	if (PG_ARGISNULL(argno))
		return NULL;
	text = DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(argno)));
	v = dfjson_parse(text, strlen(text), &err);
	if (v == NULL)
		elog(ERROR, "could not re-read jsonb output: %s", err);
	return v;
}

static void
http_error(const char *msg)
{
	if (msg != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", msg)));
}

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s is required and cannot be NULL", what)));
}

/*
 * Shared by both builders: url, method, the body or parts already in cfg's
 * caller, headers and timeout.  Arguments: 0 url, 1 method, 3 headers,
 * 4 timeout_seconds; argument 2 is the body or the parts.
 */
static Datum
http_build(FunctionCallInfo fcinfo, bool multipart)
{
	char	   *url;
	char	   *method;
	DfJson	   *cfg;
	DfJson	   *headers;
	DfJson	   *parts = NULL;
	DfNode	   *node;

	require_arg(fcinfo, 0, "url");
	url = text_to_cstring(PG_GETARG_TEXT_PP(0));
	http_error(df_http_check_url(url));
	require_arg(fcinfo, 1, "method");
	http_error(df_http_check_method(text_to_cstring(PG_GETARG_TEXT_PP(1)),
									multipart, &method));
	if (multipart)
	{
		parts = jsonb_arg(fcinfo, 2);
		http_error(df_http_check_parts(parts));
	}
	headers = jsonb_arg(fcinfo, 3);
	http_error(df_http_check_headers(headers));
	require_arg(fcinfo, 4, "timeout_seconds");
	if (PG_GETARG_INT32(4) <= 0)
		http_error("Timeout must be positive");

	cfg = dfjson_make_object();
	dfjson_object_add(cfg, "url", dfjson_make_string(url));
	dfjson_object_add(cfg, "method", dfjson_make_string(method));
	if (multipart)
		dfjson_object_add(cfg, "parts", parts);
	else
		dfjson_object_add(cfg, "body", PG_ARGISNULL(2) ? dfjson_make_null() :
						  dfjson_make_string(text_to_cstring(PG_GETARG_TEXT_PP(2))));
	dfjson_object_add(cfg, "headers", headers ? headers : dfjson_make_null());
	dfjson_object_add(cfg, "timeout_seconds",
					  dfjson_make_number(psprintf("%d", PG_GETARG_INT32(4))));

	node = df_node_new(multipart ? DF_NODE_HTTP_MULTIPART : DF_NODE_HTTP);
	node->query = dfjson_to_text(cfg);
	PG_RETURN_TEXT_P(cstring_to_text(df_graph_to_text(node)));
}

Datum
pgd_http(PG_FUNCTION_ARGS)
{
	return http_build(fcinfo, false);
}

Datum
pgd_http_multipart(PG_FUNCTION_ARGS)
{
	return http_build(fcinfo, true);
}
