/*-------------------------------------------------------------------------
 *
 * breaker_admission.c
 *	  Circuit breakers in the engine (docs/design/breakers.md):
 *	  the admission of a call and the record of its outcome, on the
 *	  shared-memory machine (core/breaker_state.c), whose definitions and
 *	  transitions the store reads and writes (store/breakers.c).
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
	if (!pgd_store_breaker_load(name, &s, &state, &opened_at, &open_until))
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
	pgd_store_breaker_persist(name, &ch, role);
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
	pgd_store_breaker_persist(t->name, &ch, t->role);
}
