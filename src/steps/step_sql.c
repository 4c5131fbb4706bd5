/*-------------------------------------------------------------------------
 *
 * step_sql.c
 *	  Runs the user's statement of a SQL step inside the step transaction.
 *
 * The statement runs in a subtransaction, as the submitting role, in a
 * security-restricted context (no SET ROLE, no temporary objects, ...),
 * under a fresh GUC nest level with df.in_workflow = true.  Whatever it SETs
 * is undone when it ends, so nothing leaks into the next step, which may
 * belong to another user.  The rows it returns become the step's result
 * JSON as the statement produces them (a DestReceiver, not SPI's tuple
 * table), inside the subtransaction, so that a result that cannot be
 * represented (an unsupported column type, more than
 * pg_durable.max_result_size of JSON) stops the statement at that row and
 * rolls back its effects together with failing the node.  With a row sink
 * (pgd_set_row_sink: the query of a df.map in lanes mode) the rows go to
 * the sink instead, 1,000 at a time, as the engine's role but inside the
 * same subtransaction, and the result only counts them.
 *
 * A step is one statement: text holding several is refused (the
 * reference runs it through the extended protocol, which refuses it too),
 * and so are transaction control statements, which cannot work inside the
 * step transaction.  Empty text (only comments or semicolons) succeeds
 * with no rows.
 *
 * Containment.  The executor is a long-lived session that runs steps of
 * every user one after the other, so nothing a step does may survive it
 * (the tests in security_containment.sql try each of these):
 *	 - settings (SET, SET LOCAL, set_config, RESET ALL): the GUC nest level
 *	   is popped with isCommit = false on success and on error;
 *	 - SET ROLE, SET SESSION AUTHORIZATION, temporary objects, LISTEN and
 *	   cursors WITH HOLD: refused by PostgreSQL itself in a
 *	   security-restricted operation under a local user id change;
 *	 - prepared statements, session-level advisory locks and the sequence
 *	   caches behind currval/lastval are not transactional: they are
 *	   dropped after every step, whatever its outcome, as DISCARD ALL would;
 *	 - df.in_workflow: a step could SET it to false, so "inside a workflow"
 *	   is decided by an internal flag (pgd_in_workflow), the setting only
 *	   adding to it.
 *
 * What a step sees: current_user, session_user (and SHOW
 * session_authorization) are the submitter, and is_superuser is the
 * submitter's (off, unless superuser instances are enabled); see
 * run_as_session_user.  pg_stat_activity still shows the executor's own
 * role (usename), and the authenticated user stays the worker role.
 * Before switching to the submitter, the role is looked up again: a role
 * dropped since df.start, no longer LOGIN, or now a superuser while
 * pg_durable.enable_superuser_instances is off fails the step with a clear
 * message instead of running as an OID that means nothing or too much.
 *
 * On error the subtransaction is rolled back and the error becomes the
 * outcome ("SQL execution failed: <message>").  Deadlocks, serialization
 * failures and lock timeouts are not failures of the node: the caller
 * re-queues the task (*retry), and so is a cancel "due to user request":
 * that is how wake.c interrupts a step that is no longer wanted, which then
 * finds out under the runs lock, or a stray interrupt meant for an earlier
 * step.  A statement_timeout fails the node.
 *
 * Logging.  With pg_durable.log_workflow_sql off, no text of the statement
 * reaches the server log from here: the process's activity names the step,
 * a log line written while the statement runs loses its context and
 * internal query (an emit_log_hook), and the failure lines of the callers
 * give the error code (pgd_step_error_for_log).
 *
 * Locks: whatever the user's statement takes, inside the subtransaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timeout.h"

#include "access/xact.h"
#include "commands/prepare.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "common/messages.h"
#include "common/spi.h"
#include "core/identity.h"
#include "core/settings.h"
#include "results/results.h"
#include "steps/step_plans.h"
#include "steps/step_sql.h"

#define ERRCODE_PGD_RESULT_CONVERSION MAKE_SQLSTATE('P', 'D', '0', '0', '1')

/* true while a step's statement runs; see pgd_in_workflow */
static bool in_step = false;

/* the emit_log_hook that was there before step_log_hook */
static emit_log_hook_type prev_emit_log_hook = NULL;
static bool				  step_log_hook_installed = false;

/*
 * Where the statement's rows go: straight into the result JSON, so that a
 * result past pg_durable.max_result_size stops the statement at the row
 * that crosses it instead of after SPI has collected every row.
 */
typedef struct StepDest
{
	DestReceiver	  pub;
	MemoryContext	  cxt; /* the builder and its text */
	PgdResultBuilder *builder;
	MemoryContext	  keep_cxt; /* with a sink: typeinfo (cxt is reset per chunk) */
	TupleDesc		  typeinfo;
	/* with a row sink: the rows go there, in chunks of STEP_SINK_CHUNK */
	const PgdRowSink *sink;
	int64			  sent;	   /* rows flushed */
	int				  pending; /* rows in the builder */
	Oid				  engine_userid;
	int				  engine_sec;
} StepDest;

#define STEP_SINK_CHUNK 1000

/* the sink of the next statement (pgd_set_row_sink) */
static PgdRowSink next_sink;
static bool		  next_sink_set = false;

void
pgd_set_row_sink(const PgdRowSink *sink)
{
	next_sink_set = sink != NULL;
	if (sink != NULL)
		next_sink = *sink;
}

/* The rows in the builder go to the sink, as the engine's own role. */
static void
step_dest_flush(StepDest *d)
{
	Oid			  userid;
	int			  sec;
	MemoryContext old;
	char		 *chunk;

	if (d->pending == 0)
		return;
	old = MemoryContextSwitchTo(d->cxt);
	chunk = pgd_result_finish(d->builder);
	d->builder = NULL;
	MemoryContextSwitchTo(old);
	GetUserIdAndSecContext(&userid, &sec);
	SetUserIdAndSecContext(d->engine_userid, d->engine_sec);
	d->sink->flush(d->sink->arg, d->sent, chunk);
	SetUserIdAndSecContext(userid, sec);
	d->sent += d->pending;
	d->pending = 0;
	MemoryContextReset(d->cxt);
	old = MemoryContextSwitchTo(d->cxt);
	d->builder =
		pgd_result_begin(d->typeinfo, (Size) pgd_max_result_size * 1024);
	MemoryContextSwitchTo(old);
}

static void
step_dest_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	StepDest	 *d = (StepDest *) self;
	MemoryContext old = MemoryContextSwitchTo(d->cxt);

	if (d->builder != NULL)
		pgd_result_discard(d->builder);
	d->builder = pgd_result_begin(typeinfo, (Size) pgd_max_result_size * 1024);
	d->pending = 0;
	MemoryContextSwitchTo(old);
	if (d->sink != NULL)
	{
		old = MemoryContextSwitchTo(d->keep_cxt);
		d->typeinfo = CreateTupleDescCopy(typeinfo);
		MemoryContextSwitchTo(old);
	}
}

static bool
step_dest_receive(TupleTableSlot *slot, DestReceiver *self)
{
	StepDest *d = (StepDest *) self;
	char	 *err;

	slot_getallattrs(slot);
	if (!pgd_result_add_row(d->builder, slot->tts_values, slot->tts_isnull,
							&err))
		ereport(ERROR,
				(errcode(ERRCODE_PGD_RESULT_CONVERSION), errmsg("%s", err)));
	if (d->sink != NULL && ++d->pending >= STEP_SINK_CHUNK)
		step_dest_flush(d);
	return true;
}

static void
step_dest_noop(DestReceiver *self)
{
}

/*
 * Whether the caller runs inside a workflow step.  The setting
 * df.in_workflow = 'true' counts too (the reference's only signal, and what
 * tests use outside the engine), but a step cannot turn the flag off.
 */
bool
pgd_in_workflow(void)
{
	const char *v;

	if (in_step)
		return true;
	v = GetConfigOption("df.in_workflow", true, false);
	return v != NULL && strcmp(v, "true") == 0;
}

/*
 * Drop the session state a statement can create that neither a
 * subtransaction rollback nor the GUC nest level undoes.  These are the
 * parts of DISCARD ALL that are safe inside a transaction; the others are
 * refused in a security-restricted operation in the first place.
 */
static void
discard_step_session_state(void)
{
	DropAllPreparedStatements();
	LockReleaseSession(USER_LOCKMETHOD);
	ResetSequenceCaches();
}

/*
 * Make the submitter the session user too, for the GUC nest level just
 * opened: session_user, SHOW session_authorization and is_superuser then
 * report the submitter, not the worker role, so that policies and functions
 * keyed on them are not fooled.  It is what SET SESSION AUTHORIZATION does
 * (the worker role, a superuser, is the authenticated user, so it may), as
 * a saved setting of the nest level: popping the level restores the worker
 * role as the session user, on success (pgd_run_user_sql pops it once the
 * security restriction is lifted, as SetSessionAuthorization requires) and
 * on error, when the subtransaction's rollback pops it after restoring the
 * outer user id and security context.  The step itself cannot change
 * either: SET SESSION AUTHORIZATION and SET ROLE are refused under a local
 * user id change.
 */
static void
run_as_session_user(Oid submitter)
{
	char *name = GetUserNameFromId(submitter, false);

	(void) set_config_option("session_authorization", name, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

bool
pgd_lost_lock_race(int sqlerrcode)
{
	return sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
		sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
}

/* The attempt_timeout of the next statement (pgd_set_attempt_timeout). */
static int64 attempt_timeout_ms = 0;

void
pgd_set_attempt_timeout(int64 ms)
{
	attempt_timeout_ms = ms;
}

/*
 * The error code of a failed statement (docs/design/failure-handling.md §2):
 * "sql:<SQLSTATE>", or "timeout" when statement_timeout cancelled it (a
 * retry's attempt_timeout).
 */
char *
pgd_sql_error_code(const ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
		edata->message_id != NULL &&
		strcmp(edata->message_id,
			   "canceling statement due to statement timeout") == 0)
		return pstrdup("timeout");
	return psprintf("sql:%s", unpack_sql_state(edata->sqlerrcode));
}

/*
 * Disarm the attempt's timer.  A timer that fired after the statement's
 * last interrupt check (an AFTER trigger's last expression, say) sent this
 * process a cancel (StatementTimeoutHandler) that nothing has seen, and
 * disabling the timer forgets why it was sent: it would cancel the
 * engine's next statement "due to user request", at every attempt of the
 * step.  The statement has finished, as PostgreSQL lets a client's
 * statement finish that ends before it sees its statement_timeout, and
 * the cancel goes with the timer.
 */
static void
disarm_attempt_timeout(void)
{
	disable_timeout(STATEMENT_TIMEOUT, true);
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
		QueryCancelPending = false;
}

/*
 * With pg_durable.log_workflow_sql off, a log line written while a step's
 * statement runs loses what holds the statement's text: the context (SPI's
 * "SQL statement ..." line, and those of the functions it called) and the
 * internal query of a syntax error.  Its message stays.
 */
static void
step_log_hook(ErrorData *edata)
{
	if (in_step && !pgd_log_workflow_sql)
	{
		edata->context = NULL;
		edata->internalquery = NULL;
		edata->internalpos = 0;
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
pgd_report_step_activity(const char *query, const char *what)
{
	if (pgd_log_workflow_sql)
		pgstat_report_activity(STATE_RUNNING, query);
	else
		pgstat_report_activity(STATE_RUNNING, what);
}

char *
pgd_step_error_for_log(const char *message, const char *code)
{
	if (pgd_log_workflow_sql)
		return pstrdup(message ? message : "");
	return psprintf("error code %s (pg_durable.log_workflow_sql is off)",
					code ? code : "none");
}

/*
 * The $name at the 1-based character position pos of the step's text, the
 * place of a syntax error: a reference that matched no result stays as
 * written (0.2.6's rule) and PostgreSQL then stumbles on it.  NULL when
 * no $name stands there.
 */
static char *
dollar_name_at(const char *query, int pos)
{
	int			len = strlen(query);
	int			off = pg_mbcharcliplen(query, len, pos - 1);
	const char *p = query + off;
	const char *q;

	if (off >= len || p[0] != '$' ||
		!((p[1] >= 'A' && p[1] <= 'Z') || (p[1] >= 'a' && p[1] <= 'z') ||
		  p[1] == '_'))
		return NULL;
	for (q = p + 1; (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
		 (*q >= '0' && *q <= '9') || *q == '_';
		 q++)
		;
	return pnstrdup(p, q - p);
}

/*
 * Where in query a syntax error stands (1-based; 0: not known): the
 * statement's own position when this file parsed it, SPI's internal one
 * when SPI did.
 */
static int
syntax_error_position(const ErrorData *edata, const char *query)
{
	if (edata->cursorpos > 0)
		return edata->cursorpos;
	if (edata->internalpos > 0 && edata->internalquery != NULL &&
		strcmp(edata->internalquery, query) == 0)
		return edata->internalpos;
	return 0;
}

/*
 * Whether the text holds more than one statement.  Statements are separated
 * by semicolons, so a text without one, or with one only at its end, holds
 * one at most and is not parsed here; SPI parses it once.
 */
static bool
holds_several_statements(const char *query)
{
	const char *semicolon = strchr(query, ';');

	if (semicolon == NULL)
		return false;
	if (strspn(semicolon + 1, " \t\n\r\f\v") == strlen(semicolon + 1))
		return false;
	return list_length(pg_parse_query(query)) > 1;
}

PgdOutcome
pgd_run_user_sql(const char *query, Oid submitter, bool *retry, int *sqlstate)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	PgdOutcome	  outcome = {false, NULL};
	StepDest	  dest;
	const PgdRowSink *sink = NULL;
	Oid			  save_userid;
	int			  save_sec;
	bool		  save_in_step;

	*retry = false;
	*sqlstate = 0;
	/* the sink holds for this call only, however it ends */
	if (next_sink_set)
		sink = &next_sink;
	next_sink_set = false;

	/* installed here, in the processes that run steps, once */
	if (!step_log_hook_installed)
	{
		prev_emit_log_hook = emit_log_hook;
		emit_log_hook = step_log_hook;
		step_log_hook_installed = true;
	}

	outcome.result = pgd_identity_problem(submitter);
	if (outcome.result != NULL)
		return outcome;

	memset(&dest, 0, sizeof(dest));
	dest.pub.receiveSlot = step_dest_receive;
	dest.pub.rStartup = step_dest_startup;
	dest.pub.rShutdown = step_dest_noop;
	dest.pub.rDestroy = step_dest_noop;
	/* not DestSPI, which would make SPI check a tuple table it never built */
	dest.pub.mydest = DestNone;
	dest.keep_cxt = AllocSetContextCreate(oldcxt, "pg_durable step result",
										  ALLOCSET_DEFAULT_SIZES);
	dest.cxt = AllocSetContextCreate(dest.keep_cxt, "pg_durable step rows",
									 ALLOCSET_DEFAULT_SIZES);
	dest.sink = sink;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	dest.engine_userid = save_userid;
	dest.engine_sec = save_sec;
	save_in_step = in_step;
	in_step = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		SPIExecuteOptions options;
		SPIPlanPtr		  plan;
		int				  nest;
		int				  rc;

		nest = NewGUCNestLevel();
		run_as_session_user(submitter);
		SetUserIdAndSecContext(submitter,
							   save_sec | SECURITY_LOCAL_USERID_CHANGE |
								   SECURITY_RESTRICTED_OPERATION);
		(void) set_config_option("df.in_workflow", "true", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		/* not inside another step's statement, whose plan may be in use */
		plan = save_in_step ? NULL : pgd_step_plan_find(query, submitter);
		if (plan == NULL)
		{
			/* one statement, as the reference's extended-protocol query allows */
			if (holds_several_statements(query))
				ereport(ERROR,
						(errcode(ERRCODE_SYNTAX_ERROR),
						 errmsg("a SQL step is one statement, and this text holds several: "
								"chain them as steps (~>) or put them in a function")));
			if (!save_in_step)
				plan = pgd_step_plan_prepare_if_repeated(query, submitter);
		}
		memset(&options, 0, sizeof(options));
		options.dest = &dest.pub;
		/*
		 * df.retry(attempt_timeout): this attempt's bound.  SPI does not arm
		 * statement_timeout (only a client's statement does), so the timer
		 * is armed here; it cancels the statement as statement_timeout
		 * would ("canceling statement due to statement timeout": code
		 * "timeout").
		 */
		if (attempt_timeout_ms > 0)
			enable_timeout_after(STATEMENT_TIMEOUT,
								 (int) Min(attempt_timeout_ms, PG_INT32_MAX));
		rc = plan != NULL ? SPI_execute_plan_extended(plan, &options) :
							SPI_execute_extended(query, &options);
		if (attempt_timeout_ms > 0)
			disarm_attempt_timeout();
		if (rc == SPI_ERROR_TRANSACTION)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
					 errmsg("transaction control statements cannot be used in a workflow step: "
							"pg_durable commits each step together with its checkpoint")));
		if (rc == SPI_ERROR_COPY)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("COPY to or from the client cannot be used in a workflow step")));
		if (rc < 0)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("could not run the statement (%s)",
							SPI_result_code_string(rc))));
		outcome.ok = true;
		if (dest.sink != NULL)
		{
			if (dest.builder != NULL)
				step_dest_flush(&dest);
			outcome.result = MemoryContextStrdup(
				oldcxt, psprintf("{\"items\":" INT64_FORMAT "}", dest.sent));
		}
		else
			outcome.result =
				MemoryContextStrdup(oldcxt,
									dest.builder == NULL ?
										pgd_result_empty() :
										pgd_result_finish(dest.builder));
		SPI_finish();

		/* this order: the session user is restored outside the restriction */
		SetUserIdAndSecContext(save_userid, save_sec);
		AtEOXact_GUC(false, nest);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData *edata;
		char	  *unresolved;
		int		   pos;

		if (attempt_timeout_ms > 0)
			disarm_attempt_timeout();
		edata = pgd_subxact_caught(oldcxt, oldowner);

		*sqlstate = edata->sqlerrcode;
		*retry = pgd_lost_lock_race(edata->sqlerrcode) ||
			(edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
			 edata->message_id != NULL &&
			 strcmp(edata->message_id,
					"canceling statement due to user request") == 0);
		outcome.ok = false;
		outcome.code = pgd_sql_error_code(edata);
		if (edata->sqlerrcode == ERRCODE_PGD_RESULT_CONVERSION)
			outcome.result = pstrdup(edata->message);
		else if (edata->sqlerrcode == ERRCODE_SYNTAX_ERROR &&
				 (pos = syntax_error_position(edata, query)) > 0 &&
				 (unresolved = dollar_name_at(query, pos)) != NULL)
			outcome.result =
				psprintf(PGD_MSG_SQL_EXECUTION_FAILED,
						 psprintf("%s (%s matched no result of the workflow, so it was left as written)",
								  edata->message, unresolved));
		else
			outcome.result =
				psprintf(PGD_MSG_SQL_EXECUTION_FAILED, edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();

	MemoryContextDelete(dest.keep_cxt);
	in_step = save_in_step;
	discard_step_session_state();
	return outcome;
}
