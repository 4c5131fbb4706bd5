/*-------------------------------------------------------------------------
 *
 * spaces.c
 *	  The names the engine gives the coordination objects a role uses
 *	  (docs/design/tenancy.md): a limit key, a lock key or a topic is the
 *	  name itself when a shared object of that name exists that the role
 *	  may use (df.create_limit, df.create_lock_space, df.create_topic and
 *	  their grants), else the name in the role's own space,
 *	  "~<role oid>/<name>".  Both are decided by the install script's
 *	  df_internal.space_name and df_internal.may_use, so that the SQL of the
 *	  bus sweep decides the same way.
 *
 * What a user sees of a name in its own space is the name as written
 * (pgd_space_display): the prefix never leaves the engine's tables.
 *
 * Locks: none (reads of df_internal.shared_objects and object_grants).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/acl.h"

#include "common/spi.h"
#include "store/store.h"
#include "store/store_internal.h"

static const char *const KIND_NAMES[] = {
	[PGD_SPACE_LIMIT] = "limit",
	[PGD_SPACE_LOCK] = "lock_space",
	[PGD_SPACE_TOPIC] = "topic",
	[PGD_SPACE_BREAKER] = "circuit_breaker",
};

/*
 * The statements of the spaces (statements.c runs them: store_exec); the
 * install script's functions read only the tenancy tables.
 */
#define T TEXTOID

enum
{
	SPACE_SHARED_EXISTS,
	SPACE_NAME,
	SPACE_BREAKER_OWNER,
	SPACE_MAY_USE,
	SPACE_SHARED_LIMIT,
	SPACE_STMTS
};

static const PgdStmtDef space_stmts[SPACE_STMTS] = {
	[SPACE_SHARED_EXISTS] =
		{"whether a shared object of a kind has a name",
		 0, REACH_ALL,
		 "SELECT 1 FROM df_internal.shared_objects "
		 "WHERE kind OPERATOR(pg_catalog.=) $1 "
		 "AND name OPERATOR(pg_catalog.=) $2",
		 2,
		 {T, T}},
	[SPACE_NAME] =
		{"the name a role's use of a name stands for",
		 0, REACH_ALL,
		 "SELECT df_internal.space_name($1, $2, $3::pg_catalog.oid, $4)",
		 4,
		 {T, T, T, T}},
	[SPACE_BREAKER_OWNER] =
		{"a circuit breaker's owner",
		 0, REACH_ALL,
		 "SELECT owner::pg_catalog.oid::pg_catalog.text "
		 "FROM df_internal.circuit_breakers "
		 "WHERE name OPERATOR(pg_catalog.=) $1",
		 1,
		 {T}},
	[SPACE_MAY_USE] =
		{"whether a role may use a shared object",
		 0, REACH_ALL,
		 "SELECT df_internal.may_use($1, $2, $3::pg_catalog.oid, $4)::text",
		 4,
		 {T, T, T, T}},
	[SPACE_SHARED_LIMIT] =
		{"a shared limit's settings",
		 0, REACH_ALL,
		 "SELECT max_concurrent::text, rate::text, burst::text "
		 "FROM df_internal.shared_objects "
		 "WHERE kind OPERATOR(pg_catalog.=) 'limit' AND name OPERATOR(pg_catalog.=) $1 "
		 "AND (max_concurrent IS NOT NULL OR rate IS NOT NULL)",
		 1,
		 {T}},
};

#undef T

static PgdStmtPlan space_plans[SPACE_STMTS];

/* Under a schema without the tables every name is used as written. */
static bool
spaces_exist(void)
{
	return pgd_internal_relation_exists("shared_objects");
}

/*
 * Whether a shared object of kind is named name (a lock key's space is the
 * key's text before its first ':').  Without one the name is in the role's
 * own space whatever the grants say, and the engine asks only this
 * primary-key probe of every key it uses: df_internal.may_use, a SQL
 * function run afresh by each call, would cost more than the step itself.
 */
static bool
shared_object_exists(PgdSpaceKind kind, const char *name)
{
	const char *colon = kind == PGD_SPACE_LOCK ? strchr(name, ':') : NULL;
	const char *object = colon ? pnstrdup(name, colon - name) : name;

	return STORE_EXEC(space_stmts, space_plans, SPACE_SHARED_EXISTS, KIND_NAMES[kind], object) == 1;
}

char *
pgd_store_space_name(PgdSpaceKind kind, const char *name, Oid role,
					 const char *privilege)
{
	Assert(kind != PGD_SPACE_BREAKER);
	if (!spaces_exist())
		return pstrdup(name);
	if (!shared_object_exists(kind, name))
		return psprintf("~%u/%s", role, name);
	if (STORE_EXEC(space_stmts, space_plans, SPACE_NAME, KIND_NAMES[kind], name, psprintf("%u", role), privilege) != 1)
		elog(ERROR, "df_internal.space_name returned no row");
	return pgd_spi_getstring(0, 1);
}

bool
pgd_store_may_use(PgdSpaceKind kind, const char *name, Oid role,
				  const char *privilege)
{
	if (!spaces_exist())
		return true;
	/* the owner's members, the usual case, without the SQL function */
	if (kind == PGD_SPACE_BREAKER &&
		STORE_EXEC(space_stmts, space_plans, SPACE_BREAKER_OWNER, name) == 1 &&
		has_privs_of_role(role, atooid(pgd_spi_getstring(0, 1))))
		return true;
	if (STORE_EXEC(space_stmts, space_plans, SPACE_MAY_USE, KIND_NAMES[kind], name, psprintf("%u", role), privilege) != 1)
		elog(ERROR, "df_internal.may_use returned no row");
	return strcmp(pgd_spi_getstring(0, 1), "true") == 0;
}

char *
pgd_store_limit_space(const char *key, Oid role, PgdSharedLimit *shared)
{
	char *name = pgd_store_space_name(PGD_SPACE_LIMIT, key, role, "use");

	memset(shared, 0, sizeof(*shared));
	if (name[0] == '~' ||
		STORE_EXEC(space_stmts, space_plans, SPACE_SHARED_LIMIT, name) != 1)
		return name;
	{
		char *mc = pgd_spi_getstring(0, 1);
		char *rate = pgd_spi_getstring(0, 2);
		char *burst = pgd_spi_getstring(0, 3);

		shared->found = true;
		shared->max_concurrent = mc ? atoi(mc) : 0;
		shared->rate = rate ? strtod(rate, NULL) : 0;
		shared->burst = burst ? atoi(burst) : 0;
	}
	return name;
}

const char *
pgd_space_display(const char *name)
{
	const char *p;

	if (name == NULL || name[0] != '~' || !isdigit((unsigned char) name[1]))
		return name;
	for (p = name + 1; isdigit((unsigned char) *p); p++)
		;
	return *p == '/' ? p + 1 : name;
}
