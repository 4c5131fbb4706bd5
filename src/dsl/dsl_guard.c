/*-------------------------------------------------------------------------
 *
 * dsl_guard.c
 *	  Detects the result of a helper (df.setvar, df.unsetvar, df.clearvars,
 *	  later df.await_instance) being used as a workflow step.
 *
 * SELECT df.seq(df.setvar('a', '1'), 'SELECT 1') looks reasonable but would
 * turn the helper's 'OK' into a SQL step.  The helpers note what they
 * returned, stamped with the current statement; a composer that receives
 * exactly that text in the same statement reports the mistake.  The
 * reference tracks this with a LOCAL setting; a backend-local note stamped
 * with the local transaction id and statement start time does the same
 * without touching the GUC machinery.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"

#include "common/compat.h"
#include "common/messages.h"
#include "dsl/dsl.h"

#define MAX_NOTES 8

typedef struct HelperNote
{
	const char *helper; /* static string */
	char		result[32];
} HelperNote;

static HelperNote		  notes[MAX_NOTES];
static int				  nnotes = 0;
static LocalTransactionId notes_lxid = InvalidLocalTransactionId;
static TimestampTz		  notes_stmt = 0;

static bool
notes_current(void)
{
	return nnotes > 0 && notes_lxid == PGD_MY_LXID &&
		notes_stmt == GetCurrentStatementStartTimestamp();
}

void
pgd_note_helper_result(const char *helper, const char *result)
{
	int i;

	if (!notes_current())
	{
		nnotes = 0;
		notes_lxid = PGD_MY_LXID;
		notes_stmt = GetCurrentStatementStartTimestamp();
	}
	for (i = 0; i < nnotes; i++)
		if (strcmp(notes[i].result, result) == 0)
			return;
	if (nnotes < MAX_NOTES)
	{
		notes[nnotes].helper = helper;
		strlcpy(notes[nnotes].result, result, sizeof(notes[nnotes].result));
		nnotes++;
	}
}

void
pgd_check_not_helper_result(const char *operand)
{
	int i;

	if (!notes_current())
		return;
	for (i = 0; i < nnotes; i++)
		if (strcmp(notes[i].result, operand) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg(PGD_MSG_HELPER_AS_STEP, notes[i].helper,
							notes[i].helper),
					 errdetail("Its result '%s' was passed to a workflow composer in the same statement.",
							   operand)));
}
