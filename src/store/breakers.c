/*-------------------------------------------------------------------------
 *
 * breakers.c
 *	  The store of the circuit breakers (docs/design/breakers.md): a
 *	  breaker's definition with its latest transition, read when the
 *	  breaker is loaded into shared memory (core/breaker_state.c), and its
 *	  transitions, written in the transaction that made them.
 *	  df_internal.circuit_breakers holds the definitions,
 *	  df_internal.circuit_breaker_transitions every change of state; the
 *	  latest transition of a breaker (since its creation) is its state when
 *	  it is loaded again, so an open breaker stays open across a restart.
 *	  Admission and the outcomes of calls are the engine's
 *	  (engine/breaker_admission.c); the SQL functions are api/breakers.c's.
 *
 * Locks: none of its own; the transitions are inserts, and the trim of a
 * breaker's history skips rows another transaction holds (never waiting),
 * so no engine transaction waits for another one here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/breaker_state.h"
#include "store/store.h"
#include "store/store_internal.h"

/*
 * The history a breaker keeps: its latest BREAKER_HISTORY_KEEP transitions,
 * trimmed when it closes.
 */
#define BREAKER_HISTORY_KEEP "1000"

#define T TEXTOID

/* The statements of the breakers' tables (statements.c runs them: store_exec). */
enum
{
	BREAKER_LOAD,
	BREAKER_TRANSITION_ADD,
	BREAKER_HISTORY_TRIM,
	BREAKER_STMTS
};

static const PgdStmtDef breaker_stmts[BREAKER_STMTS] = {
	[BREAKER_LOAD] =
		{"a breaker's definition and its latest transition since its creation",
		 0, REACH_ALL,
		 "SELECT b.failure_rate_threshold, b.minimum_calls, b.window_size, "
		 "(extract(epoch FROM b.wait_duration) * 1000)::int8, b.half_open_calls, "
		 "(extract(epoch FROM b.slow_call_duration) * 1000)::int8, "
		 "b.slow_call_rate_threshold, pg_catalog.array_to_string(b.record_on, ','), "
		 "t.to_state, t.opened_at, t.open_until "
		 "FROM df_internal.circuit_breakers b LEFT JOIN LATERAL ("
		 "SELECT x.to_state, x.opened_at, x.open_until "
		 "FROM df_internal.circuit_breaker_transitions x "
		 "WHERE x.name OPERATOR(pg_catalog.=) b.name "
		 "AND x.at OPERATOR(pg_catalog.>=) b.created_at "
		 "ORDER BY x.at DESC LIMIT 1) t ON true "
		 "WHERE b.name OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[BREAKER_TRANSITION_ADD] =
		{"a breaker's change of state",
		 0, REACH_ALL,
		 "INSERT INTO df_internal.circuit_breaker_transitions "
		 "(name, at, from_state, to_state, opened_at, open_until, failure_rate, "
		 "calls, reason, by_role) VALUES ($1, $2::timestamptz, $3, $4, $5::timestamptz, "
		 "$6::timestamptz, $7::float8, $8::int4, $9, "
		 "NULLIF($10::pg_catalog.oid, 0)::pg_catalog.regrole)",
		 10,
		 {T, T, T, T, T, T, T, T, T, T}},
	[BREAKER_HISTORY_TRIM] =
		{"a breaker's transitions but its latest ones dropped, skipping rows another transaction holds",
		 0, REACH_ALL,
		 "DELETE FROM df_internal.circuit_breaker_transitions WHERE id IN ("
		 "SELECT id FROM df_internal.circuit_breaker_transitions "
		 "WHERE name OPERATOR(pg_catalog.=) $1 ORDER BY at DESC OFFSET " BREAKER_HISTORY_KEEP
		 " FOR UPDATE SKIP LOCKED)",
		 1,
		 {T}},
};

#undef T

static PgdStmtPlan breaker_plans[BREAKER_STMTS];

static TimestampTz
parse_ts(const char *s)
{
	if (s == NULL)
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
												   CStringGetDatum(s),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
}

static char *
ts_text(TimestampTz t)
{
	return t == 0 ? NULL : pstrdup(timestamptz_to_str(t));
}

bool
pgd_store_breaker_load(const char *name, PgdBreakerSettings *s,
					   PgdBreakerState *state, TimestampTz *opened_at,
					   TimestampTz *open_until)
{
	char *v;

	if (STORE_EXEC(breaker_stmts, breaker_plans, BREAKER_LOAD, name) != 1)
		return false;
	memset(s, 0, sizeof(*s));
	s->failure_rate_threshold = atoi(pgd_spi_getstring(0, 1));
	s->minimum_calls = atoi(pgd_spi_getstring(0, 2));
	s->window_size = atoi(pgd_spi_getstring(0, 3));
	s->wait_ms = strtoll(pgd_spi_getstring(0, 4), NULL, 10);
	s->half_open_calls = atoi(pgd_spi_getstring(0, 5));
	v = pgd_spi_getstring(0, 6);
	s->slow_call_ms = v ? strtoll(v, NULL, 10) : -1;
	s->slow_call_rate_threshold = atoi(pgd_spi_getstring(0, 7));
	strlcpy(s->record_on, pgd_spi_getstring(0, 8), sizeof(s->record_on));
	v = pgd_spi_getstring(0, 9);
	*state = PGD_BREAKER_CLOSED;
	if (v != NULL && !pgd_breaker_state_from_name(v, state))
		*state = PGD_BREAKER_CLOSED;
	*opened_at = parse_ts(pgd_spi_getstring(0, 10));
	*open_until = parse_ts(pgd_spi_getstring(0, 11));
	return true;
}

static void
transition_add(const char *name, const PgdBreakerTransition *tr, Oid role)
{
	STORE_EXEC(breaker_stmts, breaker_plans, BREAKER_TRANSITION_ADD, name,
			   ts_text(tr->at), pgd_breaker_state_name(tr->from),
			   pgd_breaker_state_name(tr->to), ts_text(tr->opened_at),
			   ts_text(tr->open_until),
			   tr->failure_rate >= 0 ? psprintf("%.2f", tr->failure_rate) : NULL,
			   psprintf("%d", tr->calls), tr->reason, psprintf("%u", role));
}

void
pgd_store_breaker_persist(const char *name, const PgdBreakerChanges *ch,
						  Oid role)
{
	for (int i = 0; i < ch->n; i++)
	{
		transition_add(name, &ch->t[i], role);
		if (ch->t[i].to == PGD_BREAKER_CLOSED)
			STORE_EXEC(breaker_stmts, breaker_plans, BREAKER_HISTORY_TRIM, name);
	}
}
