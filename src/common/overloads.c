/*-------------------------------------------------------------------------
 *
 * overloads.c
 *	  df.loop, df.http, df.start and df.cancel keep the identities they had
 *	  in pg_durable 0.2.6 (df.start(text, text, text, text) ...), so that a
 *	  GRANT or REVOKE written for 0.2.6 names a function that exists.  Their
 *	  further options live in an overload of the same name: the 0.2.6
 *	  parameters, the first one varchar instead of text, then the options
 *	  (sql/pg_durable.sql).  Both identities are one C function, which reads
 *	  the options when PG_NARGS() says they were passed.
 *
 *	  A privilege on the 0.2.6 function keeps its meaning: the overload runs
 *	  only for a role that may execute the 0.2.6 function as well, so that a
 *	  REVOKE of df.start(text, text, text, text) stops every df.start.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "common/compat.h"
#include "common/overloads.h"

/* The 0.2.6 function an overload stands beside, or InvalidOid. */
static Oid
compat_function(Oid overload, int compat_nargs)
{
	Oid	 *argtypes;
	int	  nargs;
	List *name;

	(void) get_func_signature(overload, &argtypes, &nargs);
	if (nargs < compat_nargs || argtypes[0] != VARCHAROID)
		return InvalidOid;
	argtypes[0] = TEXTOID;
	name = list_make2(makeString(get_namespace_name(get_func_namespace(overload))),
					  makeString(get_func_name(overload)));
	return LookupFuncName(name, compat_nargs, argtypes, true);
}

/*
 * Called by the C function behind both identities: when it runs as the
 * overload (more than compat_nargs arguments), the current user must hold
 * EXECUTE on the 0.2.6 function too, or gets the error calling that
 * function would have given.  The 0.2.6 function's OID is kept for the call
 * site in fn_extra.
 */
void
pgd_require_compat_execute(FunctionCallInfo fcinfo, int compat_nargs)
{
	Oid *compat;

	if (PG_NARGS() <= compat_nargs || fcinfo->flinfo == NULL)
		return;
	compat = (Oid *) fcinfo->flinfo->fn_extra;
	if (compat == NULL)
	{
		compat = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Oid));
		*compat = compat_function(fcinfo->flinfo->fn_oid, compat_nargs);
		fcinfo->flinfo->fn_extra = compat;
	}
	if (OidIsValid(*compat) &&
		pgd_proc_aclcheck(*compat, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(*compat));
}
