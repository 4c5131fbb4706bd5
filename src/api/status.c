/*-------------------------------------------------------------------------
 *
 * status.c
 *	  df.status, df.result, df.await_instance, df.wait_for_completion,
 *	  df.run, df.cancel and df.compensate.
 *
 * Reads run as the caller, so row-level security decides what is visible:
 * an instance the caller cannot see does not exist for these functions.
 * df.cancel then acts on the engine's private state with the bootstrap
 * superuser's privileges.
 *
 * df.await_instance sleeps on its latch, which the transaction that
 * finishes an instance sets at commit (wake.c): it returns as soon as the
 * finishing transaction commits, without polling.  It refuses at once to
 * wait for an instance that its own transaction has signalled or
 * cancelled: those reach the engine only at commit, so the instance could
 * not react before the wait ends (refuse_own_uncommitted).
 *
 * Inside a step, df.cancel refuses the step's own instance (see
 * refuse_own_instance); other instances it cancels with the step.
 *
 * Locks: df.cancel locks the instance's runs row, then its df.instances
 * row, like every transition; it never waits for a claimed task (SKIP
 * LOCKED) — a running step finds out under the runs lock.  df.compensate
 * locks the df.instances row of an instance that has ended (it
 * has no runs row), then makes its runs row anew (saga_resume.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/messages.h"
#include "common/overloads.h"
#include "common/spi.h"
#include "core/settings.h"
#include "dsl/dsl.h"
#include "engine/apply.h"
#include "store/store.h"
#include "store/types.h"
#include "core/wake.h"
#include "core/standby.h"
#include "orchestration/orchestration.h"
#include "steps/step_sql.h"

/* Status of an instance visible to the caller (fresh snapshot), or NULL. */
static char *
visible_status(const char *id)
{
	char *status = NULL;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (PGD_EXEC("SELECT status FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
				 id) > 0)
	{
		char *s = pgd_spi_getstring(0, 1);

		if (s)
		{
			status = SPI_palloc(strlen(s) + 1);
			strcpy(status, s);
		}
	}
	SPI_finish();
	return status;
}

PG_FUNCTION_INFO_V1(pgd_status);
Datum
pgd_status(PG_FUNCTION_ARGS)
{
	char *status = visible_status(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	if (status == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(status));
}

PG_FUNCTION_INFO_V1(pgd_result);
Datum
pgd_result(PG_FUNCTION_ARGS)
{
	Oid	  types[1] = {TEXTOID};
	Datum values[1];
	text *result = NULL;

	values[0] = PG_GETARG_DATUM(0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * The root's result when it completed (0.2.6's rule; a cancelled
	 * instance has none, even when its last step's completion was recorded
	 * as it ended: inbox_record.c); for a compensated
	 * instance without one, what was compensated: the root's compensation
	 * summary {"error", "undos"}.
	 */
	if (pgd_spi_exec("SELECT CASE WHEN n.status OPERATOR(pg_catalog.=) 'completed' "
					 "THEN n.result::text "
					 "ELSE (n.status_details OPERATOR(pg_catalog.->) 'compensation')::text END "
					 "FROM df.instances i "
					 "JOIN df.nodes n ON n.instance_id OPERATOR(pg_catalog.=) i.id "
					 "AND n.id OPERATOR(pg_catalog.=) i.root_node "
					 "WHERE i.id OPERATOR(pg_catalog.=) $1 "
					 "AND ((n.status OPERATOR(pg_catalog.=) 'completed' "
					 "AND i.status OPERATOR(pg_catalog.<>) 'cancelled') "
					 "OR i.status OPERATOR(pg_catalog.=) 'compensated')",
					 1, types, values, NULL, true) > 0)
	{
		char *s = pgd_spi_getstring(0, 1);

		if (s)
			result =
				(text *) SPI_datumTransfer(PointerGetDatum(cstring_to_text(s)),
										   false, -1);
	}
	SPI_finish();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

/*
 * Run call(id, arg) with the bootstrap superuser's rights, inside SPI: the
 * engine's statements on df_internal, whoever calls.
 */
typedef void (*EngineCall)(const char *id, void *arg);

static void
as_engine(EngineCall call, const char *id, void *arg)
{
	PgdCaller caller;

	pgd_engine_rights(&caller);
	call(id, arg);
	pgd_caller_again(&caller);
}

typedef struct Uncommitted
{
	bool started;
	bool signals;
	bool cancel;
} Uncommitted;

static void
uncommitted_call(const char *id, void *arg)
{
	Uncommitted *u = (Uncommitted *) arg;

	pgd_store_uncommitted_by_me(id, &u->started, &u->signals, &u->cancel);
}

/*
 * Starts, signals and cancels take effect at commit (reference §6): a
 * transaction that starts an instance and then waits for it, or signals it
 * and then waits for it, would wait
 * out its whole timeout, and one that cancels it would report a cancel
 * that a rollback still undoes.  Say so at once instead.
 */
static void
refuse_own_uncommitted(const char *fn, const char *id)
{
	Uncommitted u;

	as_engine(uncommitted_call, id, &u);

	if (u.started)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s() cannot wait for instance %s: this transaction started it and has not committed",
						fn, id),
				 errdetail("df.start() with transaction_mode 'caller' hands the instance to the engine when "
						   "the transaction that calls it commits, so it cannot run while this transaction "
						   "waits for it."),
				 errhint("Commit the transaction before waiting (in psql, send df.start and "
						 "df.await_instance as separate statements), or start it with "
						 "transaction_mode => 'new', which starts it at once.")));

	if (u.cancel)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s() cannot wait for instance %s: this transaction cancelled it and has not committed",
						fn, id),
				 errdetail("df.cancel() takes effect when the transaction that calls it commits; "
						   "until then the instance is not cancelled, and a rollback undoes the cancel."),
				 errhint("Commit the transaction, then wait for the instance.")));
	if (u.signals)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s() cannot wait for instance %s: this transaction has sent it signals that are "
						"delivered only when it commits",
						fn, id),
				 errdetail("df.signal() is delivered when the transaction that calls it commits, so the "
						   "instance cannot react to the signal while this transaction waits for it."),
				 errhint("Commit the transaction before waiting, or send the signal with "
						 "df.signal(instance_id, signal_name, signal_data, transaction_mode => 'new'), "
						 "which sends it at once.")));
}

/*
 * Commit the transaction of a procedure called where it may (a top-level
 * CALL outside a transaction block), which releases the snapshots of the
 * CALL's portal: the wait then holds none, and no xmin, while it sleeps
 * (pgd_await_call).  The transaction has written nothing: its commit
 * writes no WAL.
 */
static void
release_call_snapshot(void)
{
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	SPI_commit();
	if (!IsTransactionState())
		SPI_start_transaction();
	SPI_finish();
}

/*
 * Wait for instance id to finish, for up to timeout_seconds; its status.
 * nonatomic: called by a procedure that may commit (pgd_await_call).
 */
static char *
await_instance(const char *fn, const char *id, int timeout_seconds,
			   bool nonatomic)
{
	TimestampTz deadline;
	char *volatile status = NULL;

	if (pgd_in_workflow())
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg(PGD_MSG_AWAIT_IN_WORKFLOW, fn),
				 errhint("Compose the waiting into the workflow instead (df.wait_for_signal, df.sleep).")));
	if (timeout_seconds <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_TIMEOUT_NOT_POSITIVE)));

	refuse_own_uncommitted(fn, id);

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   (int64) timeout_seconds * 1000);
	pgd_await_prepare(id);
	PG_TRY();
	{
		for (;;)
		{
			long remaining;

			status = visible_status(id);
			if (status == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg(PGD_MSG_AWAIT_NOT_FOUND, id)));
			if (pgd_is_terminal(status))
				break;
			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														deadline);
			if (remaining <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_QUERY_CANCELED),
						 errmsg(PGD_MSG_AWAIT_TIMEOUT, timeout_seconds, id,
								status)));
			/*
			 * A procedure's wait keeps no snapshot while it sleeps: the
			 * commit drops the one its read left to the CALL's portal
			 */
			if (nonatomic)
				release_call_snapshot();
			pgd_await_wait(remaining);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		pgd_await_cancel();
	}
	PG_END_TRY();
	pgd_note_helper_result(fn, status);
	return status;
}

PG_FUNCTION_INFO_V1(pgd_await_instance);
Datum
pgd_await_instance(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(await_instance("df.await_instance",
													text_to_cstring(PG_GETARG_TEXT_PP(0)),
													PG_GETARG_INT32(1),
													false)));
}

PG_FUNCTION_INFO_V1(pgd_wait_for_completion);
Datum
pgd_wait_for_completion(PG_FUNCTION_ARGS)
{
	ereport(WARNING,
			(errmsg("df.wait_for_completion() is deprecated"),
			 errhint("Use df.await_instance(instance_id, timeout_seconds).")));
	PG_RETURN_TEXT_P(cstring_to_text(await_instance("df.wait_for_completion",
													text_to_cstring(PG_GETARG_TEXT_PP(0)),
													PG_GETARG_INT32(1),
													false)));
}

/*
 * CALL df.await(instance_id, timeout_seconds, status): df.await_instance
 * as a procedure, which waits without holding back the xmin horizon.  A
 * function keeps the snapshot of the statement that called it, and with it
 * its backend's xmin, for as long as it waits: meanwhile VACUUM removes no
 * row deleted anywhere in the database, nor do index scans learn to skip
 * them.  The engine's queues (its tasks, its inbox) then keep every entry
 * they had, and each look at an instance walks them all: a 5,000-branch
 * fan-out awaited by df.await_instance spent 0.12 ms per branch in one
 * such look alone, against 0.004 ms at 1,000 branches (perf).
 * A top-level CALL outside a transaction block may commit: the procedure
 * commits before it waits, which drops the CALL's snapshot.  Elsewhere (a
 * transaction block, a function or DO block) it cannot, and waits as
 * df.await_instance does.
 */
PG_FUNCTION_INFO_V1(pgd_await_call);
Datum
pgd_await_call(PG_FUNCTION_ARGS)
{
	bool nonatomic = fcinfo->context != NULL &&
		IsA(fcinfo->context, CallContext) &&
		!((CallContext *) fcinfo->context)->atomic;
	TupleDesc desc;
	Datum	  value;
	bool	  isnull = false;
	char	 *id;
	char	 *status;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.await(): instance_id must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("df.await(): timeout_seconds must not be NULL")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "df.await() must return a row");
	/* the argument's copy outlives the commit (the CALL's context does) */
	id = text_to_cstring(PG_GETARG_TEXT_PP(0));
	status = await_instance("df.await", id, PG_GETARG_INT32(1), nonatomic);
	value = CStringGetTextDatum(status);
	desc = BlessTupleDesc(desc);
	return HeapTupleGetDatum(heap_form_tuple(desc, &value, &isnull));
}

PG_FUNCTION_INFO_V1(pgd_run);
Datum
pgd_run(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(
		"df.run() is not needed: pg_durable executors run instances as soon as they are started"));
}

/*
 * A step may cancel other instances (the cancel commits with the step), but
 * not its own: the step's transaction would end the instance, its
 * transition would then find the instance gone and roll back the whole
 * step, cancel included, leaving the instance running with no task.
 * Refused, the step fails with this error as its outcome.
 */
static void
refuse_own_instance(const char *id)
{
	const char *own =
		pgd_in_workflow() ? pgd_executor_running_instance() : NULL;

	if (own != NULL && strcmp(own, id) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("df.cancel() cannot cancel the instance of the step that calls it"),
				 errdetail("Instance %s is running this step; its end is decided by its graph, "
						   "when the step commits.",
						   id),
				 errhint("Let the step fail (the instance fails with it), end a loop with df.break(), "
						 "or call df.cancel() from outside the workflow.")));
}

/*
 * Run call(id, arg) on an instance the caller can see (and that is not the
 * calling step's own), with the bootstrap superuser's rights, inside SPI.
 */
static void
run_as_engine(const char *id, EngineCall call, void *arg)
{
	if (visible_status(id) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg(PGD_MSG_INSTANCE_NOT_FOUND, id)));
	refuse_own_instance(id);
	as_engine(call, id, arg);
}

typedef struct CancelArgs
{
	const char *reason;
	bool		compensate;
	bool		cancelled;	  /* out: the instance was live and is cancelled */
	bool		compensating; /* out: it had ended, and its undos run now */
} CancelArgs;

/*
 * An instance that has ended is not cancelled; with compensate, one that
 * failed with undos left, or that a plain cancel ended, runs them
 * (df.compensate).
 */
static void
cancel_call(const char *id, void *arg)
{
	CancelArgs *a = (CancelArgs *) arg;
	char	   *problem;

	a->cancelled = pgd_apply_cancel(id, a->reason, a->compensate);
	a->compensating = !a->cancelled && a->compensate &&
		pgd_saga_try_resume(id, &problem);
}

PG_FUNCTION_INFO_V1(pgd_cancel);
Datum
pgd_cancel(PG_FUNCTION_ARGS)
{
	char	  *id = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CancelArgs a;

	pgd_refuse_on_standby("df.cancel", "cancel an instance");
	pgd_require_compat_execute(fcinfo, 2);
	a.reason = text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* compensate: the third argument (df.cancel(text, text) has two) */
	a.compensate = PG_NARGS() > 2 && PG_GETARG_BOOL(2);
	a.cancelled = a.compensating = false;
	run_as_engine(id, cancel_call, &a);
	if (a.cancelled)
		PG_RETURN_TEXT_P(cstring_to_text(psprintf(PGD_MSG_INSTANCE_CANCELLED,
												  id, a.reason)));
	{
		char *status = visible_status(id);

		if (a.compensating)
			PG_RETURN_TEXT_P(cstring_to_text(psprintf("Instance %s not cancelled: it had already ended; its registered undos run now",
													  id)));
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("Instance %s not cancelled: it had already ended (%s)",
												  id, status ? status : "gone")));
	}
}

static void
compensate_call(const char *id, void *arg)
{
	(void) arg;
	pgd_saga_resume(id);
}

/* df.compensate(id): resume a compensation a failed undo stopped. */
PG_FUNCTION_INFO_V1(pgd_compensate);
Datum
pgd_compensate(PG_FUNCTION_ARGS)
{
	char *id = text_to_cstring(PG_GETARG_TEXT_PP(0));

	pgd_refuse_on_standby("df.compensate", "compensate an instance");
	run_as_engine(id, compensate_call, NULL);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("Instance %s is compensating again",
											  id)));
}

/*
 * df_internal.write_held(): what the executor's batch under way holds in
 * memory instead of rows (node writes, step tasks, JOIN counts, an
 * instance's start, keyed locks and limit slots), written now, with the
 * engine's rights.  df.check() calls it first: a step that calls df.check()
 * is then told of no problem that its batch's commit would not leave.
 * Outside a batch nothing is held.
 */
static void
write_held_call(const char *id, void *arg)
{
	pgd_store_write_held_all();
}

PG_FUNCTION_INFO_V1(pgd_write_held);
Datum
pgd_write_held(PG_FUNCTION_ARGS)
{
	as_engine(write_held_call, NULL, NULL);
	PG_RETURN_VOID();
}

/*
 * df_internal.running_step(): the instance and scope of the step this
 * process runs now, NULLs outside a step.  df.check() called by a step
 * leaves out what that step's own run looks like meanwhile: its node
 * running with its task taken, its instance with no other pending work.
 */
PG_FUNCTION_INFO_V1(pgd_running_step);
Datum
pgd_running_step(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {true, true};
	const char *instance_id =
		pgd_in_workflow() ? pgd_executor_running_instance() : NULL;
	const char *scope = pgd_executor_running_scope();

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "df_internal.running_step() must return a record");
	if (instance_id != NULL && scope != NULL)
	{
		values[0] = CStringGetTextDatum(instance_id);
		values[1] = CStringGetTextDatum(scope);
		nulls[0] = nulls[1] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  values, nulls)));
}
