/*-------------------------------------------------------------------------
 *
 * trace.c
 *	  W3C trace context: the traceparent a caller gives to df.start, new
 *	  trace ids, and derived span ids.
 *
 * A span id is the first 16 hex digits of md5("<trace id>:<scope>:<node>:
 * <attempt>") (the root span: md5("<trace id>:root")).  Every process that
 * needs one (the HTTP worker sending traceparent, df.instance_spans, the
 * exporter) computes the same id from what history already holds, so a
 * step writes nothing for tracing.  md5 is not used for secrecy here, only
 * to spread the bits; a span id that came out all zeros (invalid in W3C) is
 * replaced by its last digit set to 1.
 *
 * Locks: none (pure functions).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/md5.h"

#include "common/json.h"
#include "common/trace.h"

bool
pgd_is_lower_hex(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool
all_zeros(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] != '0')
			return false;
	return true;
}

const char *
pgd_trace_parse(const char *s, PgdTraceParent *out)
{
	size_t len = strlen(s);

	/*
	 * version-traceid-parentid-flags; a later version may append fields
	 * after a dash, version 00 may not (W3C Trace Context §3.2).
	 */
	if (len < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return "it must look like 00-<32 hex digits>-<16 hex digits>-<2 hex digits>";
	if (!pgd_is_lower_hex(s, 2) || !pgd_is_lower_hex(s + 3, 32) ||
		!pgd_is_lower_hex(s + 36, 16) || !pgd_is_lower_hex(s + 53, 2))
		return "its fields must be lower-case hex digits";
	if (strncmp(s, "ff", 2) == 0)
		return "version ff is invalid";
	if (len > 55 && (strncmp(s, "00", 2) == 0 || s[55] != '-'))
		return "it has trailing characters";
	if (all_zeros(s + 3, 32))
		return "its trace id is all zeros";
	if (all_zeros(s + 36, 16))
		return "its parent span id is all zeros";
	memcpy(out->trace_id, s + 3, 32);
	out->trace_id[32] = '\0';
	memcpy(out->span_id, s + 36, 16);
	out->span_id[16] = '\0';
	memcpy(out->flags, s + 53, 2);
	out->flags[2] = '\0';
	return NULL;
}

void
pgd_trace_new_id(char *out)
{
	uint8 bytes[16];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random trace id")));
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", bytes[i]);
	if (all_zeros(out, PGD_TRACE_ID_LEN))
		out[PGD_TRACE_ID_LEN - 1] = '1';
}

static void
hash_hex(const char *text, char *out, int n)
{
	char		hex[33];
	const char *errstr = NULL;

	if (!pg_md5_hash(text, strlen(text), hex, &errstr))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not derive a trace or span id: %s",
						errstr ? errstr : "md5 failed")));
	memcpy(out, hex, n);
	out[n] = '\0';
	if (all_zeros(out, n))
		out[n - 1] = '1';
}

void
pgd_trace_fallback_id(const char *instance_id, char *out)
{
	char *text = psprintf("pg_durable instance %s", instance_id);

	hash_hex(text, out, PGD_TRACE_ID_LEN);
	pfree(text);
}

void
pgd_trace_span_id(const char *trace_id, const char *scope, const char *node_id,
				  int attempt, char *out)
{
	char *text = node_id == NULL ?
		psprintf("%s:root", trace_id) :
		psprintf("%s:%s:%s:%d", trace_id, scope ? scope : "", node_id,
				 attempt);

	hash_hex(text, out, PGD_SPAN_ID_LEN);
	pfree(text);
}

char *
pgd_trace_parent_of(DfJson *vars, const char *instance_id, const char *scope,
					const char *node_id, int attempt)
{
	DfJson	   *v = dfjson_get(vars, "sys_trace_id");
	DfJson	   *f = dfjson_get(vars, "sys_trace_flags");
	char		trace_id[PGD_TRACE_ID_LEN + 1];
	char		span_id[PGD_SPAN_ID_LEN + 1];
	const char *flags = PGD_TRACE_FLAGS_SAMPLED;

	if (v && v->type == DFJ_STRING && strlen(v->str) == PGD_TRACE_ID_LEN)
		strlcpy(trace_id, v->str, sizeof(trace_id));
	else
		pgd_trace_fallback_id(instance_id, trace_id);
	if (f && f->type == DFJ_STRING && strlen(f->str) == 2)
		flags = f->str;
	pgd_trace_span_id(trace_id, scope, node_id, attempt, span_id);
	return psprintf("00-%s-%s-%s", trace_id, span_id, flags);
}
