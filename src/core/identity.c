/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  Who may start workflows, and whether the engine may still act for
 *	  the role that started one.
 *
 * df.start checks the caller (LOGIN, the superuser guard); the engine
 * checks the submitter again whenever it acts for it (loading an instance,
 * every step), since the role may have been dropped, lost LOGIN or become
 * a superuser since.
 *
 * Locks: none (syscache lookups).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "utils/syscache.h"

#include "common/messages.h"
#include "core/identity.h"
#include "core/settings.h"

static char *
role_name(Oid roleid)
{
	return GetUserNameFromId(roleid, false);
}

void
pgd_check_start_identity(Oid userid)
{
	HeapTuple tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(userid));
	bool	  canlogin;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", userid);
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);

	if (!canlogin)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg(PGD_MSG_NO_LOGIN, role_name(userid))));

	if (superuser_arg(userid) && !pgd_enable_superuser_instances)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg(PGD_MSG_SUPERUSER_DISABLED, role_name(userid))));
}

/*
 * Why the engine must not act for a submitter any more, or NULL.  df.start
 * checked the role, but it may have been dropped, lost LOGIN or become a
 * superuser since; steps and the load of an instance check again.
 */
char *
pgd_identity_problem(Oid roleid)
{
	HeapTuple	   tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(roleid));
	Form_pg_authid role;
	char		  *problem = NULL;

	if (!HeapTupleIsValid(tup))
		return psprintf("the role that submitted this instance (OID %u) no longer exists; "
						"its steps cannot run. Start the workflow again as an existing role.",
						roleid);
	role = (Form_pg_authid) GETSTRUCT(tup);
	if (!role->rolcanlogin)
		problem =
			psprintf("role \"%s\" that submitted this instance no longer has LOGIN "
					 "privilege; its steps cannot run.",
					 NameStr(role->rolname));
	else if (role->rolsuper && !pgd_enable_superuser_instances)
		problem =
			psprintf("role \"%s\" that submitted this instance is a superuser, but "
					 "pg_durable.enable_superuser_instances is off; its steps cannot run.",
					 NameStr(role->rolname));
	ReleaseSysCache(tup);
	return problem;
}
