/*-------------------------------------------------------------------------
 *
 * breaker_admission.c
 *	  Circuit breakers in the engine (docs/design/breakers.md):
 *	  the admission of a call, the record of its outcome, and the two
 *	  tables behind the shared-memory machine (core/breaker_state.c):
 *	  df_internal.circuit_breakers holds the definitions,
 *	  df_internal.circuit_breaker_transitions every change of state; the
 *	  latest transition of a breaker (since its creation) is its state when
 *	  it is loaded again, so an open breaker stays open across a restart.
 *
 * A breaker is loaded into shared memory by the first call that needs it.
 * The transitions are written in the transaction that made them; if it
 * rolls back, shared memory keeps the new state and the table the old one
 * until the next transition (only a crash in between loses it).
 *
 * A call is admitted only for a role that owns the breaker or was granted
 * it (df.grant_circuit_breaker; docs/design/tenancy.md): the submitter of
 * the instance whose step calls.
 *
 * A half-open permit taken by a transaction that rolls back (a batch step
 * given back, a failed claim) is given back at the abort, so the step's
 * next run can take it again instead of waiting for it to expire.
 *
 * Locks: none of its own; the transitions are inserts, so no engine
 * transaction waits for another one here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "engine/breaker_admission.h"
#include "graph/orch_config.h"
#include "store/store.h"

#define SQL_LOAD \
	"SELECT b.failure_rate_threshold, b.minimum_calls, b.window_size, " \
	"(extract(epoch FROM b.wait_duration) * 1000)::int8, b.half_open_calls, " \
	"(extract(epoch FROM b.slow_call_duration) * 1000)::int8, " \
	"b.slow_call_rate_threshold, pg_catalog.array_to_string(b.record_on, ','), " \
	"t.to_state, t.opened_at, t.open_until " \
	"FROM df_internal.circuit_breakers b LEFT JOIN LATERAL (" \
	"SELECT x.to_state, x.opened_at, x.open_until " \
	"FROM df_internal.circuit_breaker_transitions x " \
	"WHERE x.name OPERATOR(pg_catalog.=) b.name " \
	"AND x.at OPERATOR(pg_catalog.>=) b.created_at " \
	"ORDER BY x.at DESC LIMIT 1) t ON true " \
	"WHERE b.name OPERATOR(pg_catalog.=) $1"

#define SQL_PERSIST \
	"INSERT INTO df_internal.circuit_breaker_transitions " \
	"(name, at, from_state, to_state, opened_at, open_until, failure_rate, " \
	"calls, reason, by_role) VALUES ($1, $2::timestamptz, $3, $4, $5::timestamptz, " \
	"$6::timestamptz, $7::float8, $8::int4, $9, " \
	"NULLIF($10::pg_catalog.oid, 0)::pg_catalog.regrole)"

/*
 * The history a breaker keeps: its latest HISTORY_KEEP transitions, trimmed
 * when it closes, skipping rows another transaction holds (never waiting).
 */
#define HISTORY_KEEP "1000"
#define SQL_TRIM \
	"DELETE FROM df_internal.circuit_breaker_transitions WHERE id IN (" \
	"SELECT id FROM df_internal.circuit_breaker_transitions " \
	"WHERE name OPERATOR(pg_catalog.=) $1 ORDER BY at DESC OFFSET " HISTORY_KEEP \
	" " \
	"FOR UPDATE SKIP LOCKED)"

static void persist_one(const char *name, const PgdBreakerTransition *tr,
						Oid role);

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
pgd_breaker_load(const char *name, PgdBreakerSettings *s,
				 PgdBreakerState *state, TimestampTz *opened_at,
				 TimestampTz *open_until)
{
	char *v;

	if (PGD_EXEC(SQL_LOAD, name) != 1)
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

void
pgd_breaker_persist(const char *name, const PgdBreakerChanges *ch, Oid role)
{
	for (int i = 0; i < ch->n; i++)
	{
		persist_one(name, &ch->t[i], role);
		if (ch->t[i].to == PGD_BREAKER_CLOSED)
			PGD_EXEC(SQL_TRIM, name);
	}
}

static void
persist_one(const char *name, const PgdBreakerTransition *tr, Oid role)
{
	PGD_EXEC(SQL_PERSIST, name, ts_text(tr->at),
			 pgd_breaker_state_name(tr->from), pgd_breaker_state_name(tr->to),
			 ts_text(tr->opened_at), ts_text(tr->open_until),
			 tr->failure_rate >= 0 ? psprintf("%.2f", tr->failure_rate) : NULL,
			 psprintf("%d", tr->calls), tr->reason, psprintf("%u", role));
}

/*
 * The probes admitted by the current transaction, with the subtransaction
 * that admitted each (past MAX_PENDING the permit is left to expire).
 */
#define MAX_PENDING 32
typedef struct PendingProbe
{
	PgdBreakerTicket t;
	SubTransactionId sub;
} PendingProbe;

static PendingProbe pending[MAX_PENDING];
static int			npending = 0;
static bool			callbacks_set = false;

static void
release_from(SubTransactionId sub)
{
	int kept = 0;

	for (int i = 0; i < npending; i++)
	{
		if (pending[i].sub >= sub)
			pgd_breaker_release(&pending[i].t);
		else
			pending[kept++] = pending[i];
	}
	npending = kept;
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		release_from(InvalidSubTransactionId);
	else if (event == XACT_EVENT_COMMIT ||
			 event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PREPARE)
		npending = 0;
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		release_from(mySubid);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		for (int i = 0; i < npending; i++)
			if (pending[i].sub >= mySubid)
				pending[i].sub = parentSubid;
}

static void
remember_probe(const PgdBreakerTicket *t)
{
	if (!callbacks_set)
	{
		RegisterXactCallback(xact_callback, NULL);
		RegisterSubXactCallback(subxact_callback, NULL);
		callbacks_set = true;
	}
	if (npending < MAX_PENDING)
	{
		pending[npending].t = *t;
		pending[npending].sub = GetCurrentSubTransactionId();
		npending++;
	}
}

/* The slot of breaker name, loaded from its tables if need be; -1: none. */
static int
slot_of(const char *name)
{
	int				   slot = pgd_breaker_find(MyDatabaseId, name);
	PgdBreakerSettings s;
	PgdBreakerState	   state;
	TimestampTz		   opened_at;
	TimestampTz		   open_until;

	if (slot >= 0)
		return slot;
	if (!pgd_breaker_load(name, &s, &state, &opened_at, &open_until))
		return -1;
	return pgd_breaker_install(MyDatabaseId, name, &s, state, opened_at,
							   open_until);
}

bool
pgd_breaker_admit_call(const char *name, Oid role, PgdBreakerTicket *t,
					   PgdOutcome *refusal)
{
	TimestampTz		  now = GetCurrentTimestamp();
	PgdBreakerChanges ch;
	TimestampTz		  until = 0;
	PgdBreakerAdmit	  r = PGD_BREAKER_NOT_LOADED;

	memset(refusal, 0, sizeof(*refusal));
	/* a slot can be given to another breaker between the find and the admission */
	for (int tries = 0; tries < 3 && r == PGD_BREAKER_NOT_LOADED; tries++)
	{
		int slot = slot_of(name);

		if (slot < 0)
		{
			*refusal =
				pgd_failure("circuit breaker \"%s\" does not exist", name);
			return false;
		}

		/*
		 * Only its owner's members and the roles granted it may count calls
		 * in a breaker (docs/design/tenancy.md): another role's failures
		 * must not open it.  Refused so, the call is not made and nothing
		 * is recorded.
		 */
		if (tries == 0 &&
			!pgd_store_may_use(PGD_SPACE_BREAKER, name, role, "use"))
		{
			char *who = GetUserNameFromId(role, true);

			*refusal =
				pgd_failure("circuit breaker \"%s\" is not granted to role \"%s\"",
							name, who ? who : "?");
			refusal->code = pstrdup("breaker_not_granted");
			return false;
		}
		r = pgd_breaker_admit(slot, MyDatabaseId, name, now, t, &ch, &until);
	}
	if (r == PGD_BREAKER_NOT_LOADED)
		elog(ERROR, "circuit breaker \"%s\" could not be loaded", name);
	pgd_breaker_persist(name, &ch, role);
	if (r == PGD_BREAKER_ADMITTED)
	{
		t->role = role;
		if (t->probe)
			remember_probe(t);
		return true;
	}
	refusal->ok = false;
	refusal->code = pstrdup("circuit_open");
	refusal->result = psprintf("circuit breaker \"%s\" is open until %s", name,
							   timestamptz_to_str(until));
	refusal->retry_after_ms = Max((until - now + 999) / 1000, 1);
	return false;
}

/*
 * The code the breaker judges an outcome by: a failure's code; for a
 * completed HTTP step the status of its envelope, which step_http.c writes
 * first ({"status":429,...}), read without parsing the whole body.
 */
static const char *
outcome_code(const PgdOutcome *o)
{
	static const char prefix[] = "{\"status\":";
	char			 *end;
	long			  status;

	if (!o->ok)
		return o->code;
	if (o->result == NULL ||
		strncmp(o->result, prefix, sizeof(prefix) - 1) != 0)
		return NULL;
	status = strtol(o->result + sizeof(prefix) - 1, &end, 10);
	if (end == o->result + sizeof(prefix) - 1 || *end != ',' || status < 100 ||
		status > 999)
		return NULL;
	return psprintf("http:%ld", status);
}

static bool
recorded_as_failure(const char *record_on, const char *code)
{
	char *list = pstrdup(record_on);
	char *save = NULL;

	if (code == NULL)
		return false;
	for (char *p = strtok_r(list, ",", &save); p != NULL;
		 p = strtok_r(NULL, ",", &save))
		if (df_error_matches(p, code))
			return true;
	return false;
}

void
pgd_breaker_record_call(const PgdBreakerTicket *t, const PgdOutcome *outcome)
{
	TimestampTz		   now = GetCurrentTimestamp();
	PgdBreakerSettings s;
	PgdBreakerChanges  ch;
	bool			   failed;
	bool			   slow;

	if (!t->active || !pgd_breaker_settings(t->slot, t->name, &s))
		return;
	failed = recorded_as_failure(s.record_on, outcome_code(outcome));
	slow = s.slow_call_ms >= 0 && (now - t->started) / 1000 >= s.slow_call_ms;
	pgd_breaker_record(t, failed, slow, now, &ch);
	pgd_breaker_persist(t->name, &ch, t->role);
}
