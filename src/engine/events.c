/*-------------------------------------------------------------------------
 *
 * events.c
 *	  The append-only event history of instances (df_internal.events) and
 *	  df.history, which reads it.
 *
 * Events are written by the transitions themselves, in the transaction that
 * applies them (DESIGN.md §5 rule 3): a rolled-back step leaves no event,
 * and a committed transition always has its events.  Node starts and ends
 * are written by the same statement that updates the node (transition.c),
 * so an event costs one more row, not one more statement; the other kinds
 * (retries, signals, instance ends, cancels) go through pgd_event_add.
 * Rows stay small: a kind, ids, an attempt, a duration and a little JSON
 * detail (an error text truncated to PGD_EVENT_ERROR_LEN, a row count, a
 * signal name), never a step's result.
 *
 * df.history reads as the caller: the instance must be visible to it in
 * df.instances (row-level security decides); the events themselves are
 * read with the bootstrap superuser's privileges, since users have none on
 * df_internal.
 *
 * Locks: none beyond the row inserts; the callers hold the instance's runs
 * row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "engine/engine.h"
#include "core/settings.h"

/* The step task being run, so that its node's end event carries the attempt. */
static char current_node[PGD_ID_LEN + 1];
static int	current_attempt = 0;

void
pgd_event_set_attempt(const char *node_id, int attempt)
{
	if (node_id == NULL)
	{
		current_node[0] = '\0';
		current_attempt = 0;
		return;
	}
	strlcpy(current_node, node_id, sizeof(current_node));
	current_attempt = attempt;
}

/* The attempt to record for an event of node_id: known only for the running step. */
int
pgd_event_attempt(const char *node_id)
{
	if (node_id != NULL && current_node[0] != '\0' && strcmp(node_id, current_node) == 0)
		return current_attempt;
	return 0;
}

/*
 * Add one event.  detail is a JSON object as text, or NULL; node_id and
 * scope may be NULL; attempt 0 records NULL.  The duration of instance ends
 * is computed from the instance's creation.
 */
void
pgd_event_add(const char *instance_id, const char *kind, const char *node_id,
			  const char *scope, int attempt, const char *detail)
{
	char		attempt_s[16];

	snprintf(attempt_s, sizeof(attempt_s), "%d", attempt);
	PGD_EXEC("INSERT INTO df_internal.events "
			 "(instance_id, kind, node_id, scope, attempt, duration_ms, detail) "
			 "SELECT $1, $2, $3, $4, NULLIF($5::pg_catalog.int4, 0), "
			 "CASE WHEN $2 OPERATOR(pg_catalog.~) '^instance_(completed|failed|cancelled)$' THEN "
			 "(SELECT GREATEST(0, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() "
			 "OPERATOR(pg_catalog.-) i.created_at) OPERATOR(pg_catalog.*) 1000)::bigint) "
			 "FROM df.instances i WHERE i.id OPERATOR(pg_catalog.=) $1) END, "
			 "$6::pg_catalog.jsonb",
			 instance_id, kind, node_id, scope, attempt_s, detail);
}

/* {"<key>": "<text truncated>"} */
char *
pgd_event_detail(const char *key, const char *text)
{
	StringInfoData buf;
	DfJson	   *o = dfjson_make_object();
	char	   *t = pstrdup(text ? text : "");

	if (strlen(t) > PGD_EVENT_ERROR_LEN)
		t[pg_mbcliplen(t, strlen(t), PGD_EVENT_ERROR_LEN)] = '\0';
	dfjson_object_add(o, key, dfjson_make_string(t));
	initStringInfo(&buf);
	appendStringInfoString(&buf, dfjson_to_text(o));
	return buf.data;
}

/* ---------------------------------------------------------------------
 * df.history
 * ---------------------------------------------------------------------
 */
PG_FUNCTION_INFO_V1(pgd_history);
Datum
pgd_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	Oid			save_userid;
	int			save_sec;
	int			n,
				i;

	values[0] = PG_GETARG_DATUM(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_durable: SPI_connect failed");

	/* visibility as the caller */
	if (pgd_spi_exec("SELECT 1 FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) == 0)
	{
		SPI_finish();
		return (Datum) 0;
	}

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		n = pgd_spi_exec("SELECT e.at, e.kind, e.node_id::text, n.node_type, e.scope, e.attempt, "
						 "e.duration_ms, e.detail "
						 "FROM df_internal.events e LEFT JOIN df.nodes n "
						 "ON n.instance_id OPERATOR(pg_catalog.=) e.instance_id "
						 "AND n.id OPERATOR(pg_catalog.=) e.node_id "
						 "WHERE e.instance_id OPERATOR(pg_catalog.=) $1 ORDER BY e.id",
						 1, types, values, NULL, false);
		for (i = 0; i < n; i++)
		{
			Datum		out[8];
			bool		outnull[8];
			int			c;

			for (c = 0; c < 8; c++)
				out[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1,
									   &outnull[c]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
		}
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	SPI_finish();
	return (Datum) 0;
}
