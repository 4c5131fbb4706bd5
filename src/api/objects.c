/*-------------------------------------------------------------------------
 *
 * objects.c
 *	  Owners and grants of the coordination objects
 *	  (docs/design/tenancy.md): df.create_limit, df.create_lock_space,
 *	  df.create_topic, their df.drop_…, and df.grant_… / df.revoke_… for
 *	  these and for circuit breakers.
 *
 * A shared object belongs to the role that created it; only a member of
 * that role may drop it or change its grants, as only an owner may GRANT
 * on a table.  Creating one is itself a grant (EXECUTE on df.create_…,
 * revoked from PUBLIC): a shared name takes the place of the name in the
 * own space of every role granted it, so only trusted roles may make them.
 * The tables are the engine's; the fixed statements below run as the
 * bootstrap superuser with the caller's identity as a parameter.
 *
 * Locks: the object's row (FOR UPDATE while its grants change or it is
 * dropped).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "common/spi.h"
#include "core/standby.h"
#include "graph/event_config.h"
#include "graph/limit_config.h"
#include "graph/lock_config.h"

PG_FUNCTION_INFO_V1(pgd_create_limit);
PG_FUNCTION_INFO_V1(pgd_create_lock_space);
PG_FUNCTION_INFO_V1(pgd_create_topic);
PG_FUNCTION_INFO_V1(pgd_drop_limit);
PG_FUNCTION_INFO_V1(pgd_drop_lock_space);
PG_FUNCTION_INFO_V1(pgd_drop_topic);
PG_FUNCTION_INFO_V1(pgd_grant_circuit_breaker);
PG_FUNCTION_INFO_V1(pgd_revoke_circuit_breaker);
PG_FUNCTION_INFO_V1(pgd_grant_limit);
PG_FUNCTION_INFO_V1(pgd_revoke_limit);
PG_FUNCTION_INFO_V1(pgd_grant_lock_space);
PG_FUNCTION_INFO_V1(pgd_revoke_lock_space);
PG_FUNCTION_INFO_V1(pgd_grant_topic);
PG_FUNCTION_INFO_V1(pgd_revoke_topic);

/* One kind of object: its name in kind columns and in messages, its functions. */
typedef struct ObjectKind
{
	const char *kind;	/* df_internal.object_grants.kind */
	const char *noun;	/* in messages */
	const char *suffix; /* of df.create_…, df.grant_… */
} ObjectKind;

static const ObjectKind LIMIT_KIND = {"limit", "limit", "limit"};
static const ObjectKind LOCK_SPACE_KIND = {"lock_space", "lock space",
										   "lock_space"};
static const ObjectKind TOPIC_KIND = {"topic", "topic", "topic"};
static const ObjectKind BREAKER_KIND = {"circuit_breaker", "circuit breaker",
										"circuit_breaker"};

/* The name argument, checked for the kind. */
static char *
name_arg(FunctionCallInfo fcinfo, const ObjectKind *k, const char *func)
{
	char *name;
	char *problem = NULL;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: the %s name cannot be NULL", func, k->noun)));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (name[0] == '\0')
		problem = "The name cannot be empty.";
	else if (name[0] == '~')
		problem =
			"The name cannot start with '~', which begins the names of a role's own space.";
	else if (k == &LOCK_SPACE_KIND && strchr(name, ':') != NULL)
		problem =
			"A lock space is the text of its keys before the first ':', so its name cannot contain one.";
	else if (k == &TOPIC_KIND && df_topic_problem(name) != NULL)
		problem = psprintf("The %s.", df_topic_problem(name));
	else if (k == &LIMIT_KIND && strlen(name) > DF_LIMIT_KEY_MAX)
		problem =
			psprintf("The name is longer than a df.limit key may be (%d bytes).",
					 DF_LIMIT_KEY_MAX);
	else if (k == &LOCK_SPACE_KIND && strlen(name) > DF_LOCK_MAX_KEY_LEN)
		problem =
			psprintf("The name is longer than a lock key may be (%d bytes).",
					 DF_LOCK_MAX_KEY_LEN);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: invalid %s name \"%s\"", func, k->noun, name),
				 errdetail("%s", problem)));
	return name;
}

/*
 * Lock object name of kind k and check that the caller may manage it
 * (with the engine's rights): it exists and the caller is a member of its owner.
 */
static void
check_owner(const ObjectKind *k, const char *func, const char *name,
			Oid caller)
{
	int n;
	Oid owner;

	if (k == &BREAKER_KIND)
		n = PGD_EXEC("SELECT owner::pg_catalog.oid FROM df_internal.circuit_breakers "
					 "WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
					 name);
	else
		n = PGD_EXEC("SELECT owner::pg_catalog.oid FROM df_internal.shared_objects "
					 "WHERE kind OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 "
					 "FOR UPDATE",
					 k->kind, name);
	if (n != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s: %s \"%s\" does not exist", func, k->noun, name),
				 errhint("Create it with df.create_%s first.", k->suffix)));
	owner = (Oid) strtoul(pgd_spi_getstring(0, 1), NULL, 10);
	if (!has_privs_of_role(caller, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s: permission denied for %s \"%s\"", func, k->noun,
						name),
				 errdetail("Only a member of the role that created it may drop it or change its grants.")));
}

static void
create_object(FunctionCallInfo fcinfo, const ObjectKind *k, const char *func,
			  const char *max_concurrent, const char *rate, const char *burst)
{
	char	*name;
	Oid		 caller = GetUserId();
	PgdCaller save;

	pgd_refuse_on_standby(func, psprintf("create a %s", k->noun));
	name = name_arg(fcinfo, k, func);
	pgd_engine_rights(&save);
	if (PGD_EXEC("INSERT INTO df_internal.shared_objects "
				 "(kind, name, owner, max_concurrent, rate, burst) "
				 "VALUES ($1, $2, $3::pg_catalog.oid::pg_catalog.regrole, $4::int, "
				 "$5::pg_catalog.float8, $6::int) "
				 "ON CONFLICT (kind, name) DO NOTHING",
				 k->kind, name, psprintf("%u", caller), max_concurrent, rate,
				 burst) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("%s: %s \"%s\" already exists", func, k->noun, name),
				 errhint("Its owner can grant it to you with df.grant_%s.",
						 k->suffix)));
	pgd_caller_again(&save);
}

static void
drop_object(FunctionCallInfo fcinfo, const ObjectKind *k, const char *func)
{
	char	*name;
	PgdCaller save;

	pgd_refuse_on_standby(func, psprintf("drop a %s", k->noun));
	name = name_arg(fcinfo, k, func);
	pgd_engine_rights(&save);
	check_owner(k, func, name, save.userid);
	PGD_EXEC("DELETE FROM df_internal.object_grants "
			 "WHERE kind OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2",
			 k->kind, name);
	PGD_EXEC("DELETE FROM df_internal.shared_objects "
			 "WHERE kind OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2",
			 k->kind, name);
	pgd_caller_again(&save);
}

/* The grantee argument as an oid text: 0 for PUBLIC. */
static char *
grantee_arg(FunctionCallInfo fcinfo, const char *func)
{
	char *role;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: the role cannot be NULL", func),
				 errhint("Name a role, or PUBLIC for every role.")));
	role = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (pg_strcasecmp(role, "public") == 0)
		return "0";
	return psprintf("%u", get_role_oid(role, false));
}

/* The privileges argument (a topic's): publish and/or subscribe. */
static char **
privileges_arg(FunctionCallInfo fcinfo, int argno, const char *func, int *n)
{
	ArrayType *arr;
	Datum	  *elems;
	bool	  *nulls;
	char	 **out;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: privileges cannot be NULL", func),
				 errhint("Name publish, subscribe or both.")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls,
					  n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: privileges cannot be empty", func),
				 errhint("Name publish, subscribe or both.")));
	out = palloc(sizeof(char *) * *n);
	for (int i = 0; i < *n; i++)
	{
		out[i] = nulls[i] ? "" : TextDatumGetCString(elems[i]);
		if (strcmp(out[i], "publish") != 0 && strcmp(out[i], "subscribe") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: unknown topic privilege \"%s\"", func,
							out[i]),
					 errdetail("A topic's privileges are publish (df.publish_event, df.publish) and subscribe (df.subscribe, df.wait_for_event).")));
	}
	return out;
}

static void
grant_object(FunctionCallInfo fcinfo, const ObjectKind *k, const char *func,
			 bool grant)
{
	char	   *name;
	char	   *grantee;
	char	  **privs;
	int			nprivs = 1;
	const char *use = "use";
	PgdCaller	save;

	pgd_refuse_on_standby(func, psprintf("%s a %s", grant ? "grant" : "revoke", k->noun));
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: the %s name cannot be NULL", func, k->noun)));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	grantee = grantee_arg(fcinfo, func);
	privs = k == &TOPIC_KIND ? privileges_arg(fcinfo, 2, func, &nprivs) :
							   (char **) &use;
	pgd_engine_rights(&save);
	check_owner(k, func, name, save.userid);
	for (int i = 0; i < nprivs; i++)
	{
		if (grant)
			PGD_EXEC("INSERT INTO df_internal.object_grants "
					 "(kind, name, grantee, privilege, granted_by) "
					 "VALUES ($1, $2, $3::pg_catalog.oid::pg_catalog.regrole, $4, "
					 "$5::pg_catalog.oid::pg_catalog.regrole) "
					 "ON CONFLICT DO NOTHING",
					 k->kind, name, grantee, privs[i],
					 psprintf("%u", save.userid));
		else
			PGD_EXEC("DELETE FROM df_internal.object_grants "
					 "WHERE kind OPERATOR(pg_catalog.=) $1 AND name OPERATOR(pg_catalog.=) $2 "
					 "AND grantee OPERATOR(pg_catalog.=) $3::pg_catalog.oid "
					 "AND privilege OPERATOR(pg_catalog.=) $4",
					 k->kind, name, grantee, privs[i]);
	}
	pgd_caller_again(&save);
}

/* df.create_limit(key, max_concurrent, rate, burst) */
Datum
pgd_create_limit(PG_FUNCTION_ARGS)
{
	const char *f = "df.create_limit";
	char	   *mc = NULL;
	char	   *rate = NULL;
	char	   *burst = NULL;

	pgd_refuse_on_standby(f, "create a limit");

	if (PG_ARGISNULL(1) && PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: a limit needs max_concurrent, rate or both", f)));
	if (!PG_ARGISNULL(1))
	{
		if (PG_GETARG_INT32(1) < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: max_concurrent must be at least 1", f)));
		mc = psprintf("%d", PG_GETARG_INT32(1));
	}
	if (!PG_ARGISNULL(2))
	{
		float8 r = PG_GETARG_FLOAT8(2);

		if (!(r > 0) || isinf(r))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: rate must be a positive number of admissions per second",
							f)));
		rate = psprintf("%.17g", r);
		burst = "1";
	}
	if (!PG_ARGISNULL(3))
	{
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: burst needs a rate", f)));
		if (PG_GETARG_INT32(3) < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: burst must be at least 1", f)));
		burst = psprintf("%d", PG_GETARG_INT32(3));
	}
	create_object(fcinfo, &LIMIT_KIND, f, mc, rate, burst);
	PG_RETURN_VOID();
}

Datum
pgd_create_lock_space(PG_FUNCTION_ARGS)
{
	create_object(fcinfo, &LOCK_SPACE_KIND, "df.create_lock_space", NULL, NULL,
				  NULL);
	PG_RETURN_VOID();
}

Datum
pgd_create_topic(PG_FUNCTION_ARGS)
{
	create_object(fcinfo, &TOPIC_KIND, "df.create_topic", NULL, NULL, NULL);
	PG_RETURN_VOID();
}

Datum
pgd_drop_limit(PG_FUNCTION_ARGS)
{
	drop_object(fcinfo, &LIMIT_KIND, "df.drop_limit");
	PG_RETURN_VOID();
}

Datum
pgd_drop_lock_space(PG_FUNCTION_ARGS)
{
	drop_object(fcinfo, &LOCK_SPACE_KIND, "df.drop_lock_space");
	PG_RETURN_VOID();
}

Datum
pgd_drop_topic(PG_FUNCTION_ARGS)
{
	drop_object(fcinfo, &TOPIC_KIND, "df.drop_topic");
	PG_RETURN_VOID();
}

Datum
pgd_grant_circuit_breaker(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &BREAKER_KIND, "df.grant_circuit_breaker", true);
	PG_RETURN_VOID();
}

Datum
pgd_revoke_circuit_breaker(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &BREAKER_KIND, "df.revoke_circuit_breaker", false);
	PG_RETURN_VOID();
}

Datum
pgd_grant_limit(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &LIMIT_KIND, "df.grant_limit", true);
	PG_RETURN_VOID();
}

Datum
pgd_revoke_limit(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &LIMIT_KIND, "df.revoke_limit", false);
	PG_RETURN_VOID();
}

Datum
pgd_grant_lock_space(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &LOCK_SPACE_KIND, "df.grant_lock_space", true);
	PG_RETURN_VOID();
}

Datum
pgd_revoke_lock_space(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &LOCK_SPACE_KIND, "df.revoke_lock_space", false);
	PG_RETURN_VOID();
}

Datum
pgd_grant_topic(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &TOPIC_KIND, "df.grant_topic", true);
	PG_RETURN_VOID();
}

Datum
pgd_revoke_topic(PG_FUNCTION_ARGS)
{
	grant_object(fcinfo, &TOPIC_KIND, "df.revoke_topic", false);
	PG_RETURN_VOID();
}
