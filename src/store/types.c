/*-------------------------------------------------------------------------
 *
 * types.c
 *	  Text forms of the engine's enums (types.h) and small constructors,
 *	  and the JSON the store keeps of an outcome's error: $error, and the
 *	  detail of the history's events.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "common/json.h"

#include "store/types.h"

static const char *const task_kinds[] = {
	[PGD_TASK_START] = "start", [PGD_TASK_STEP] = "step",
	[PGD_TASK_TIMER] = "timer", [PGD_TASK_DELIVER] = "deliver",
	[PGD_TASK_HTTP] = "http",	[PGD_TASK_APPLY] = "apply",
};

static const char *const instance_statuses[] = {
	[PGD_INSTANCE_PENDING] = "pending",
	[PGD_INSTANCE_RUNNING] = "running",
	[PGD_INSTANCE_COMPLETED] = "completed",
	[PGD_INSTANCE_FAILED] = "failed",
	[PGD_INSTANCE_CANCELLED] = "cancelled",
	[PGD_INSTANCE_COMPENSATED] = "compensated",
};

static const char *const node_statuses[] = {
	[PGD_NODE_PENDING] = "pending",
	[PGD_NODE_RUNNING] = "running",
	[PGD_NODE_COMPLETED] = "completed",
	[PGD_NODE_FAILED] = "failed",
	[PGD_NODE_CANCELLED] = "cancelled",
};

static bool
parse_name(const char *const *names, int n, const char *name, int *out)
{
	int i;

	if (name == NULL)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
		{
			*out = i;
			return true;
		}
	return false;
}

const char *
pgd_task_kind_name(PgdTaskKind kind)
{
	return task_kinds[kind];
}

bool
pgd_task_kind_parse(const char *name, PgdTaskKind *kind)
{
	int i;

	if (!parse_name(task_kinds, lengthof(task_kinds), name, &i))
		return false;
	*kind = (PgdTaskKind) i;
	return true;
}

const char *
pgd_instance_status_name(PgdInstanceStatus status)
{
	return instance_statuses[status];
}

bool
pgd_instance_status_parse(const char *name, PgdInstanceStatus *status)
{
	int i;

	if (!parse_name(instance_statuses, lengthof(instance_statuses), name, &i))
		return false;
	*status = (PgdInstanceStatus) i;
	return true;
}

bool
pgd_node_status_parse(const char *name, PgdNodeStatus *status)
{
	int i;

	if (!parse_name(node_statuses, lengthof(node_statuses), name, &i))
		return false;
	*status = (PgdNodeStatus) i;
	return true;
}

PgdNodeStatus
pgd_node_status_of(const char *name)
{
	PgdNodeStatus status;

	if (name == NULL || !pgd_node_status_parse(name, &status))
		return PGD_NODE_ABSENT;
	return status;
}

bool
pgd_node_status_is_terminal(PgdNodeStatus status)
{
	return status == PGD_NODE_COMPLETED || status == PGD_NODE_FAILED;
}

bool
pgd_is_terminal(const char *status)
{
	PgdInstanceStatus s;

	return pgd_instance_status_parse(status, &s) &&
		(s == PGD_INSTANCE_COMPLETED || s == PGD_INSTANCE_FAILED ||
		 s == PGD_INSTANCE_CANCELLED || s == PGD_INSTANCE_COMPENSATED);
}

PgdOutcome
pgd_failure(const char *fmt, ...)
{
	PgdOutcome	   o = {0};
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list args;
		int		needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	o.ok = false;
	o.result = buf.data;
	return o;
}

static DfJson *
text_or_null(const char *s)
{
	return s ? dfjson_make_string(s) : dfjson_make_null();
}

/* The kind of an error code: what comes before its first colon. */
char *
pgd_error_kind(const char *code)
{
	const char *colon = strchr(code, ':');

	return colon ? pnstrdup(code, colon - code) : pstrdup(code);
}

/* {"kind": ..., "code": ..., "message": ..., "node": ...}: what $error is. */
char *
pgd_error_json(PgdOutcome outcome)
{
	DfJson *o = dfjson_make_object();

	dfjson_object_add(o, "kind",
					  outcome.code ?
						  dfjson_make_string(pgd_error_kind(outcome.code)) :
						  dfjson_make_string("error"));
	dfjson_object_add(o, "code", text_or_null(outcome.code));
	dfjson_object_add(o, "message", text_or_null(outcome.result));
	dfjson_object_add(o, "node", text_or_null(outcome.node));
	return dfjson_to_text(o);
}

/* The detail of a node_failed event: the truncated error, its code and kind. */
char *
pgd_event_error_detail(PgdOutcome outcome)
{
	DfJson *o = dfjson_make_object();
	char   *t = pstrdup(outcome.result ? outcome.result : "");

	if (strlen(t) > PGD_EVENT_ERROR_LEN)
		t[pg_mbcliplen(t, strlen(t), PGD_EVENT_ERROR_LEN)] = '\0';
	dfjson_object_add(o, "error", dfjson_make_string(t));
	if (outcome.code != NULL)
	{
		dfjson_object_add(o, "code", dfjson_make_string(outcome.code));
		dfjson_object_add(o, "kind",
						  dfjson_make_string(pgd_error_kind(outcome.code)));
	}
	return dfjson_to_text(o);
}

/* {"<key>": "<text truncated to PGD_EVENT_ERROR_LEN>"} */
char *
pgd_event_detail(const char *key, const char *text)
{
	DfJson *o = dfjson_make_object();
	char   *t = pstrdup(text ? text : "");

	if (strlen(t) > PGD_EVENT_ERROR_LEN)
		t[pg_mbcliplen(t, strlen(t), PGD_EVENT_ERROR_LEN)] = '\0';
	dfjson_object_add(o, key, dfjson_make_string(t));
	return dfjson_to_text(o);
}
