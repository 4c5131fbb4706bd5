/*-------------------------------------------------------------------------
 *
 * http_config.c
 *	  The checks of an HTTP or HTTP_MULTIPART node's config, shared by the
 *	  DSL's builders (dsl/dsl_http.c), validation of hand-written graphs
 *	  and the HTTP step that prepares the call (steps/step_http.c).
 *
 * They check what can be checked without the network: the URL
 * scheme (skipped for templated URLs containing '{', which are checked
 * again at execution), the method, header names and values (no CR/LF, so
 * no header injection), the timeout, and for multipart the shape of every
 * part.  Where the destination may go (allow-list, private addresses) is
 * decided at execution, not here.  Each check returns NULL when the value
 * is acceptable, else a palloc'd message (the reference's text where it
 * pins one, from common/messages.h): the builders raise it as an ERROR,
 * validation prefixes it with the node's path.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "common/json.h"
#include "common/messages.h"
#include "graph/http_config.h"
#include "graph/orch_config.h"

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
			return psprintf("invalid URL '%s': it contains a control character",
							url);

	/* templated URLs ({var}) are checked when the step runs */
	if (strchr(url, '{') != NULL)
		return NULL;

	if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
		return psprintf("invalid URL '%s': expected an absolute http:// or https:// URL",
						url);
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		   (*p >= '0' && *p <= '9') || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (*p != ':')
		return psprintf("invalid URL '%s': expected an absolute http:// or https:// URL",
						url);
	scheme = pnstrdup(url, p - url);
	for (char *c = scheme; *c; c++)
		*c = pg_ascii_tolower((unsigned char) *c);
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		return psprintf(PGD_MSG_HTTP_BAD_SCHEME, scheme);
	if (strncmp(p, "://", 3) != 0 || p[3] == '\0' ||
		strchr("/?#", p[3]) != NULL)
		return psprintf("invalid URL '%s': missing host", url);
	return NULL;
}

char *
df_http_check_method(const char *method, bool multipart, char **upper)
{
	static const char *const methods[] = {"GET", "POST", "PUT", "DELETE",
										  "PATCH"};
	static const char *const multipart_methods[] = {"POST", "PUT", "PATCH"};
	const char *const		*valid = multipart ? multipart_methods : methods;
	int	  nvalid = multipart ? lengthof(multipart_methods) : lengthof(methods);
	char *u = pstrdup(method);

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
	return psprintf(PGD_MSG_HTTP_BAD_METHOD, method);
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
			return psprintf("header name '%s' contains a CR or LF character",
							h->key);
		if (h->value->type == DFJ_STRING && has_crlf(h->value->str))
			return psprintf("header '%s' value contains a CR or LF character",
							h->key);
	}
	return NULL;
}

/* $n  $n?  $n.c  $n.c?  {v}: the only forms data_b64 may hold besides base64. */
static bool
is_whole_value_reference(const char *s)
{
	const char *p = s;

#define IDENT_START(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z') || (c) == '_')
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
	int n = 0;
	int pad = 0;

	for (const char *p = s; *p; p++)
	{
		char c = *p;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
			c == '\v')
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
				return psprintf("invalid character '%c' at offset %d", c,
								(int) (p - s));
			return psprintf("invalid byte 0x%02X at offset %d",
							(unsigned char) c, (int) (p - s));
		}
		if (pad > 0)
			return psprintf("padding '=' before the end at offset %d",
							(int) (p - s));
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
	const DfJson	 *name = dfjson_get(part, "name");
	const DfJson	 *data = dfjson_get(part, "data");
	const DfJson	 *b64 = dfjson_get(part, "data_b64");
	const char *const text_keys[] = {"filename", "content_type"};
	char			 *err;

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
			return psprintf("parts[%d] \"%s\" must be a string", i,
							text_keys[k]);
		if (has_crlf(v->str))
			return psprintf("parts[%d] %s contains a CR or LF character", i,
							text_keys[k]);
	}
	if (data != NULL && data->type == DFJ_NULL)
		data = NULL;
	if (b64 != NULL && b64->type == DFJ_NULL)
		b64 = NULL;
	if ((data == NULL) == (b64 == NULL))
		return psprintf("parts[%d] must have exactly one of \"data\" or \"data_b64\"",
						i);
	if (data != NULL && data->type != DFJ_STRING)
		return psprintf("parts[%d] \"data\" must be a string", i);
	if (b64 != NULL)
	{
		if (b64->type != DFJ_STRING)
			return psprintf("parts[%d] \"data_b64\" must be a string", i);
		if (is_whole_value_reference(b64->str))
			return NULL;
		if (strpbrk(b64->str, "${") != NULL)
			return psprintf(PGD_MSG_PART_DATA_B64, i);
		if ((err = df_http_check_base64(b64->str)) != NULL)
			return psprintf(PGD_MSG_INVALID_BASE64, name->str, err);
	}
	return NULL;
}

char *
df_http_check_parts(const DfJson *parts)
{
	char *err;

	if (parts == NULL || parts->type == DFJ_NULL)
		return pstrdup(PGD_MSG_PARTS_NULL);
	if (parts->type != DFJ_ARRAY)
		return pstrdup(PGD_MSG_PARTS_NOT_ARRAY);
	if (parts->count == 0)
		return pstrdup(PGD_MSG_PARTS_EMPTY);
	for (int i = 0; i < parts->count; i++)
		if ((err = check_part(parts->items[i], i)) != NULL)
			return err;
	return NULL;
}

static char *
check_timeout(const DfJson *v)
{
	int64 t;

	if (v == NULL || v->type == DFJ_NULL)
		return NULL;
	if (!dfjson_get_int64(v, &t))
		return pstrdup("timeout_seconds must be a whole number of seconds");
	if (t <= 0)
		return pstrdup(PGD_MSG_TIMEOUT_NOT_POSITIVE);
	if (t > PG_INT32_MAX)
		return pstrdup("timeout_seconds is out of range");
	return NULL;
}

/*
 * df.http(fail_on): a comma-separated list of status codes or classes
 * ("4xx,5xx", "402,409"); *normalized (when given) gets it without spaces.
 */
char *
df_http_check_fail_on(const char *fail_on, char **normalized)
{
	StringInfoData buf;
	const char	  *p = fail_on;

	initStringInfo(&buf);
	while (*p)
	{
		char tok[8];
		int	 len = 0;

		while (*p == ' ')
			p++;
		while (*p && *p != ',' && *p != ' ' && len < 7)
			tok[len++] = *p++;
		tok[len] = '\0';
		while (*p == ' ')
			p++;
		if (len != 3 || tok[0] < '1' || tok[0] > '5' ||
			strspn(tok + 1, "0123456789x") != 2 ||
			(tok[1] == 'x' && tok[2] != 'x') || (*p != ',' && *p != '\0'))
			return psprintf("fail_on must list HTTP status codes or classes separated by commas "
							"(like '4xx,5xx' or '402,409'), got '%s'",
							fail_on);
		if (buf.len > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoString(&buf, tok);
		if (*p == ',')
		{
			p++;
			if (*p == '\0')
				return psprintf("fail_on must not end with a comma, got '%s'",
								fail_on);
		}
	}
	if (buf.len == 0)
		return pstrdup("fail_on must list at least one HTTP status code or class");
	if (normalized)
		*normalized = buf.data;
	return NULL;
}

/* Does status match a fail_on list (already checked)? */
bool
df_http_fail_on_matches(const char *fail_on, long status)
{
	char		code[8];
	const char *p = fail_on;

	snprintf(code, sizeof(code), "%03ld", status);
	while (*p)
	{
		if ((p[0] == code[0]) && (p[1] == 'x' || p[1] == code[1]) &&
			(p[2] == 'x' || p[2] == code[2]))
			return true;
		p += 3;
		if (*p == ',')
			p++;
	}
	return false;
}

/*
 * df.http(idempotency_key): a template of the key the step sends instead
 * of the engine's; it ends up in a header line, so no CR or LF.
 */
char *
df_http_check_idempotency_key(const char *key)
{
	if (key[0] == '\0')
		return pstrdup("idempotency_key cannot be empty");
	if (has_crlf(key))
		return pstrdup("idempotency_key contains a CR or LF character");
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
		return psprintf("%s query must be a JSON config object {\"url\": ..., \"method\": ..., ...}",
						tname);
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
	v = dfjson_get(cfg, "fail_on");
	if (v != NULL && v->type != DFJ_NULL)
	{
		if (v->type != DFJ_STRING)
			return psprintf("%s config \"fail_on\" must be a string", tname);
		if ((err = df_http_check_fail_on(v->str, NULL)) != NULL)
			return err;
	}
	v = dfjson_get(cfg, "idempotency_key");
	if (v != NULL && v->type != DFJ_NULL)
	{
		if (v->type != DFJ_STRING)
			return psprintf("%s config \"idempotency_key\" must be a string",
							tname);
		if ((err = df_http_check_idempotency_key(v->str)) != NULL)
			return err;
	}
	/* df.http(breaker => name) */
	v = dfjson_get(cfg, "breaker");
	if (v != NULL && v->type != DFJ_NULL)
	{
		if (v->type != DFJ_STRING)
			return psprintf("%s config \"breaker\" must be a string", tname);
		if ((err = df_breaker_name_check(v->str)) != NULL)
			return err;
	}
	return check_timeout(dfjson_get(cfg, "timeout_seconds"));
}
