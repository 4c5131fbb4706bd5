/*-------------------------------------------------------------------------
 *
 * signal.c
 *	  df.signal: send a signal to an instance.
 *
 * Signals are buffered (a deliberate divergence from the reference, which
 * drops a signal sent before the wait exists): the signal goes into the
 * instance's mailbox with a "deliver" task, in the caller's transaction, and
 * the engine hands it to a waiting SIGNAL node (engine/apply.c,
 * engine/timers.c).  Nothing of the instance is locked
 * (docs/design/architecture.md §5 rule 2).  The instance must be visible to
 * the caller (row-level security decides) and not have ended: have its runs
 * row, whatever df.instances.status says.
 *
 * In caller mode (the default) the signal is sent when the caller's
 * transaction commits, like df.start in caller mode and NOTIFY: a
 * transaction that rolls back sends nothing, and one that signals an
 * instance cannot wait for the instance to react (df.await_instance
 * refuses at once: status.c).  transaction_mode => 'new' (the overload
 * with four arguments) sends it at once from a background session that
 * commits on its own (new_txn.c), as the reference does.
 *
 * Locks: none; a read of the runs row and row inserts only (as the bootstrap superuser, since users
 * have no privileges on df_internal).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "api/api.h"
#include "common/messages.h"
#include "common/json.h"
#include "common/spi.h"
#include "core/standby.h"
#include "store/store.h"
#include "store/types.h"

PG_FUNCTION_INFO_V1(pgd_signal);
Datum
pgd_signal(PG_FUNCTION_ARGS)
{
	char	  *id = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	  *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	  *data = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	  *status = NULL;
	char	  *err = NULL;
	bool	   is_json;
	PgdRunInfo run;
	Oid		   types[1] = {TEXTOID};
	Datum	   values[1];
	PgdCaller  caller;

	pgd_refuse_on_standby("df.signal", "send a signal");
	if (id[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("instance id cannot be empty")));
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_SIGNAL_NAME_EMPTY)));
	if (PG_NARGS() > 3)
	{
		char *mode = text_to_cstring(PG_GETARG_TEXT_PP(3));

		if (pg_strcasecmp(mode, "new") == 0)
		{
			pgd_signal_in_new_transaction(id, name, data);
			PG_RETURN_TEXT_P(cstring_to_text("OK"));
		}
		if (pg_strcasecmp(mode, "caller") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid transaction_mode \"%s\" for df.signal(): expected 'caller' or 'new'",
							mode)));
	}

	/* visibility as the caller (row-level security decides) */
	values[0] = pgd_text_datum(id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (pgd_spi_exec("SELECT status FROM df.instances WHERE id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL, false) > 0)
		status = pgd_spi_getstring(0, 1);
	if (status == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg(PGD_MSG_INSTANCE_NOT_FOUND, id)));

	is_json = dfjson_parse(data, strlen(data), &err) != NULL;

	/*
	 * Whether it has ended is the engine's word (its runs row), not
	 * df.instances.status, which the owner may UPDATE.
	 */
	pgd_engine_rights(&caller);
	if (!pgd_store_load_run(id, &run))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(PGD_MSG_SIGNAL_TERMINAL, id,
						pgd_is_terminal(status) ? status : "finished")));
	pgd_store_signal_send(id, name, data, is_json);
	pgd_caller_again(&caller);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text("OK"));
}
