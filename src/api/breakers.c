/*-------------------------------------------------------------------------
 *
 * breakers.c
 *	  The SQL functions of circuit breakers (docs/design/breakers.md):
 *	  df.create_circuit_breaker, df.drop_circuit_breaker,
 *	  df.reset_circuit_breaker, and the rows of the df.circuit_breakers view.
 *
 * Who may create one is a grant (EXECUTE on df.create_circuit_breaker,
 * revoked from PUBLIC, as for df.http); the creator owns it, and only a
 * member of the owner's role may drop or reset it, or grant its use
 * (api/objects.c).  Naming a breaker in a step needs its ownership or a
 * grant, checked at each admission (engine/breaker_admission.c).  The definitions and transitions are
 * engine tables the caller has no rights on: the fixed statements below
 * run as the bootstrap superuser, as df.start's do.
 *
 * Locks: the definition's row (DELETE on drop); the breakers' LWLock in
 * core/breaker_state.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/spi.h"
#include "core/breaker_state.h"
#include "core/standby.h"
#include "engine/breaker_admission.h"
#include "graph/orch_config.h"
#include "store/store.h"

PG_FUNCTION_INFO_V1(pgd_create_circuit_breaker);
PG_FUNCTION_INFO_V1(pgd_drop_circuit_breaker);
PG_FUNCTION_INFO_V1(pgd_reset_circuit_breaker);
PG_FUNCTION_INFO_V1(pgd_circuit_breakers);

static void
bad_arg(const char *func, const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s: %s", func, msg)));
}

static int
int_arg(FunctionCallInfo fcinfo, int argno, const char *func, const char *name,
		int lo, int hi)
{
	int v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: %s cannot be NULL", func, name)));
	v = PG_GETARG_INT32(argno);
	if (v < lo || v > hi)
		bad_arg(func,
				psprintf("%s must be between %d and %d, got %d", name, lo, hi,
						 v));
	return v;
}

/* A positive interval argument (NULL allowed when nullable); microseconds. */
static int64
interval_arg(FunctionCallInfo fcinfo, int argno, const char *func,
			 const char *name, bool nullable)
{
	Interval *iv;
	int64	  us;

	if (PG_ARGISNULL(argno))
	{
		if (!nullable)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s: %s cannot be NULL", func, name)));
		return -1;
	}
	iv = PG_GETARG_INTERVAL_P(argno);
	us = iv->time + (int64) iv->day * USECS_PER_DAY +
		(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
	if (us < 1000)
		bad_arg(func, psprintf("%s must be at least 1 millisecond", name));
	return us;
}

/*
 * record_on: a non-empty array of error patterns
 * (docs/design/failure-handling.md §2).
 */
static void
check_record_on(FunctionCallInfo fcinfo, int argno, const char *func)
{
	ArrayType *arr;
	Datum	  *elems;
	bool	  *nulls;
	int		   n;
	size_t	   len = 0;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: record_on cannot be NULL", func)));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		bad_arg(func, "record_on must be a one-dimensional array");
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls,
					  &n);
	if (n == 0)
		bad_arg(func, "record_on must name at least one error pattern");
	for (int i = 0; i < n; i++)
	{
		char *p;
		char *err;

		if (nulls[i])
			bad_arg(func, "record_on cannot contain NULL");
		p = TextDatumGetCString(elems[i]);
		if ((err = df_error_pattern_check(p)) != NULL)
			bad_arg(func, err);
		len += strlen(p) + 1;
	}
	if (len >= PGD_BREAKER_RECORD_ON_LEN)
		bad_arg(func,
				psprintf("record_on is too long (at most %d characters in all)",
						 PGD_BREAKER_RECORD_ON_LEN - 1));
}

static char *
name_arg(FunctionCallInfo fcinfo, const char *func)
{
	char *name;
	char *err;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: name cannot be NULL", func)));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if ((err = df_breaker_name_check(name)) != NULL)
		bad_arg(func, err);
	return name;
}

/*
 * The owner of breaker name, after checking the caller may manage it
 * (with the engine's rights).
 */
static void
check_owner(const char *func, const char *name, Oid caller)
{
	Oid owner;

	if (PGD_EXEC("SELECT owner::oid FROM df_internal.circuit_breakers "
				 "WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
				 name) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("circuit breaker \"%s\" does not exist", name)));
	owner = (Oid) strtoul(pgd_spi_getstring(0, 1), NULL, 10);
	if (!has_privs_of_role(caller, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s: permission denied for circuit breaker \"%s\"",
						func, name),
				 errdetail("Only a member of the role that created it may change or drop it.")));
}

/*
 * df.create_circuit_breaker(name, failure_rate_threshold, minimum_calls,
 * window_size, wait_duration, half_open_calls, slow_call_duration,
 * slow_call_rate_threshold, record_on)
 */
Datum
pgd_create_circuit_breaker(PG_FUNCTION_ARGS)
{
	const char *f = "df.create_circuit_breaker";
	char	   *name;
	int			window;
	int			minimum;
	Oid			caller = GetUserId();
	PgdCaller	save;
	Oid	  types[9] = {TEXTOID, INT4OID,		INT4OID, INT4OID,	  INTERVALOID,
					  INT4OID, INTERVALOID, INT4OID, TEXTARRAYOID};
	Datum values[10];
	char  nulls[10];
	Oid	  ctypes[10];

	pgd_refuse_on_standby(f, "create a circuit breaker");
	name = name_arg(fcinfo, f);
	int_arg(fcinfo, 1, f, "failure_rate_threshold", 1, 100);
	minimum =
		int_arg(fcinfo, 2, f, "minimum_calls", 1, PGD_BREAKER_WINDOW_MAX);
	window = int_arg(fcinfo, 3, f, "window_size", 1, PGD_BREAKER_WINDOW_MAX);
	if (minimum > window)
		bad_arg(f,
				psprintf("minimum_calls (%d) cannot be larger than window_size (%d): the breaker could never open",
						 minimum, window));
	interval_arg(fcinfo, 4, f, "wait_duration", false);
	int_arg(fcinfo, 5, f, "half_open_calls", 1, PGD_BREAKER_PROBES_MAX);
	interval_arg(fcinfo, 6, f, "slow_call_duration", true);
	int_arg(fcinfo, 7, f, "slow_call_rate_threshold", 1, 100);
	check_record_on(fcinfo, 8, f);

	for (int i = 0; i < 9; i++)
	{
		values[i] = i == 0 ? PointerGetDatum(cstring_to_text(name)) :
							 PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
		ctypes[i] = types[i];
	}
	values[9] = ObjectIdGetDatum(caller);
	nulls[9] = ' ';
	ctypes[9] = OIDOID;

	pgd_engine_rights(&save);
	if (pgd_spi_exec("INSERT INTO df_internal.circuit_breakers (name, "
					 "failure_rate_threshold, minimum_calls, window_size, "
					 "wait_duration, half_open_calls, slow_call_duration, "
					 "slow_call_rate_threshold, record_on, owner) "
					 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::regrole) "
					 "ON CONFLICT (name) DO NOTHING",
					 10, ctypes, values, nulls, false) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("circuit breaker \"%s\" already exists", name),
				 errhint("Drop it with df.drop_circuit_breaker first to change its settings.")));
	/* a slot left by a breaker of that name that was dropped is stale */
	pgd_breaker_forget(MyDatabaseId, name);
	pgd_caller_again(&save);
	PG_RETURN_VOID();
}

Datum
pgd_drop_circuit_breaker(PG_FUNCTION_ARGS)
{
	const char *f = "df.drop_circuit_breaker";
	char	   *name;
	Oid			caller = GetUserId();
	PgdCaller	save;

	pgd_refuse_on_standby(f, "drop a circuit breaker");
	name = name_arg(fcinfo, f);
	pgd_engine_rights(&save);
	check_owner(f, name, caller);
	PGD_EXEC("DELETE FROM df_internal.circuit_breaker_transitions "
			 "WHERE name OPERATOR(pg_catalog.=) $1",
			 name);
	PGD_EXEC("DELETE FROM df_internal.circuit_breakers "
			 "WHERE name OPERATOR(pg_catalog.=) $1",
			 name);
	PGD_EXEC("DELETE FROM df_internal.object_grants "
			 "WHERE kind OPERATOR(pg_catalog.=) 'circuit_breaker' "
			 "AND name OPERATOR(pg_catalog.=) $1",
			 name);
	pgd_breaker_forget(MyDatabaseId, name);
	pgd_caller_again(&save);
	PG_RETURN_VOID();
}

Datum
pgd_reset_circuit_breaker(PG_FUNCTION_ARGS)
{
	const char		 *f = "df.reset_circuit_breaker";
	char			 *name;
	Oid				  caller = GetUserId();
	PgdCaller		  save;
	PgdBreakerChanges ch;
	TimestampTz		  now = GetCurrentTimestamp();

	pgd_refuse_on_standby(f, "reset a circuit breaker");
	name = name_arg(fcinfo, f);
	pgd_engine_rights(&save);
	check_owner(f, name, caller);
	pgd_breaker_reset(MyDatabaseId, name, now, &ch);
	if (ch.n == 0)
	{
		/* not loaded here: the persisted state is what a reset replaces */
		PgdBreakerSettings s;
		TimestampTz		   opened_at;
		TimestampTz		   open_until;

		PgdBreakerTransition *tr = &ch.t[0];

		memset(&ch, 0, sizeof(ch));
		if (!pgd_store_breaker_load(name, &s, &tr->from, &opened_at, &open_until))
			elog(ERROR, "circuit breaker \"%s\" vanished", name);
		ch.n = 1;
		tr->to = PGD_BREAKER_CLOSED;
		tr->at = now;
		tr->failure_rate = -1;
		tr->reason = "reset";
	}
	pgd_store_breaker_persist(name, &ch, caller);
	pgd_caller_again(&save);
	PG_RETURN_VOID();
}

static Datum
ts_or_null(TimestampTz t, bool *isnull)
{
	*isnull = t == 0;
	return TimestampTzGetDatum(t);
}

static Datum
rate_or_null(double r, bool *isnull)
{
	*isnull = r < 0;
	return Float8GetDatum(r);
}

/*
 * The rows of df.circuit_breakers: name, state, failure_rate,
 * calls_in_window, opened_at, open_until, half_open_permits_left,
 * slow_call_rate, owner.  A breaker no call has needed since the server
 * started is loaded now, from its persisted state.
 */
Datum
pgd_circuit_breakers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz	   now = GetCurrentTimestamp();
	PgdCaller	   save;
	int			   n;
	char		 **names;
	char		 **owners;

	InitMaterializedSRF(fcinfo, 0);
	pgd_engine_rights(&save);
	n = pgd_spi_exec("SELECT name, owner::text FROM df_internal.circuit_breakers "
					 "ORDER BY name",
					 0, NULL, NULL, NULL, false);
	names = palloc(sizeof(char *) * Max(n, 1));
	owners = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		names[i] = pgd_spi_getstring(i, 1);
		owners[i] = pgd_spi_getstring(i, 2);
	}
	for (int i = 0; i < n; i++)
	{
		PgdBreakerView v;
		Datum		   out[9];
		bool		   isnull[9] = {0};

		if (!pgd_breaker_view(MyDatabaseId, names[i], now, &v))
		{
			PgdBreakerSettings s;
			PgdBreakerState	   state;
			TimestampTz		   opened_at;
			TimestampTz		   open_until;

			if (!pgd_store_breaker_load(names[i], &s, &state, &opened_at,
								  &open_until))
				continue; /* dropped meanwhile */
			pgd_breaker_install(MyDatabaseId, names[i], &s, state, opened_at,
								open_until);
			if (!pgd_breaker_view(MyDatabaseId, names[i], now, &v))
				continue;
		}
		out[0] = PointerGetDatum(cstring_to_text(names[i]));
		out[1] =
			PointerGetDatum(cstring_to_text(pgd_breaker_state_name(v.state)));
		out[2] = rate_or_null(v.failure_rate, &isnull[2]);
		out[3] = Int32GetDatum(v.calls);
		out[4] = ts_or_null(v.opened_at, &isnull[4]);
		out[5] = ts_or_null(v.open_until, &isnull[5]);
		out[6] = Int32GetDatum(v.permits_left);
		isnull[6] = v.permits_left < 0;
		out[7] = rate_or_null(v.slow_rate, &isnull[7]);
		out[8] = PointerGetDatum(cstring_to_text(owners[i]));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, isnull);
	}
	pgd_caller_again(&save);
	return (Datum) 0;
}
