/*-------------------------------------------------------------------------
 *
 * explain_map.c
 *	  df.explain(id) of an instance with MAP nodes: how many
 *	  children each MAP made and the state of each, shown on the MAP's line
 *	  ("items 50: 48 completed, 1 running, 1 pending").
 *
 * The children are df.nodes rows that df.map added; which MAP each belongs
 * to is df_internal.map_items.  Visibility as df.history's: the caller has
 * already seen the instance in df.instances (row-level security decides),
 * and the links are then read with the bootstrap superuser's privileges,
 * since users have none on df_internal.  A child's state is its root row's
 * physical status.
 *
 * Locks: none (plain reads).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "common/json.h"
#include "common/spi.h"
#include "monitor/monitor.h"

/* MAP node map_id: "items N: a completed, b running, ..." or NULL for none made. */
static char *
items_text(const char *instance_id, const char *map_id)
{
	Oid			   types[2] = {TEXTOID, TEXTOID};
	Datum		   values[2];
	Oid			   save_userid;
	int			   save_sec;
	volatile int   n = 0;
	StringInfoData buf;
	volatile long  total = 0;

	values[0] = pgd_text_datum(instance_id);
	values[1] = pgd_text_datum(map_id);
	initStringInfo(&buf);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		n = pgd_spi_exec("SELECT x.s, x.cnt FROM (SELECT COALESCE(c.status, 'pending') AS s, "
						 "pg_catalog.count(*) AS cnt "
						 "FROM df_internal.map_items mi LEFT JOIN df.nodes c "
						 "ON c.instance_id OPERATOR(pg_catalog.=) mi.instance_id "
						 "AND c.id OPERATOR(pg_catalog.=) mi.node_id "
						 "WHERE mi.instance_id OPERATOR(pg_catalog.=) $1 "
						 "AND mi.map_node OPERATOR(pg_catalog.=) $2 GROUP BY 1) x "
						 "ORDER BY pg_catalog.array_position("
						 "'{completed,failed,running,pending}'::text[], x.s) NULLS LAST, x.s",
						 2, types, values, NULL, true);
		for (int i = 0; i < n; i++)
		{
			appendStringInfo(&buf, "%s%s %s", i > 0 ? ", " : "",
							 pgd_spi_getstring(i, 2), pgd_spi_getstring(i, 1));
			total += atol(pgd_spi_getstring(i, 2));
		}
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	SPI_finish();
	if (n == 0)
		return NULL;
	return psprintf("items %ld: %s", total, buf.data);
}

char *
pgd_explain_map_config(const char *instance_id, const char *map_id,
					   const char *query)
{
	char   *err = NULL;
	DfJson *cfg = query ? dfjson_parse(query, strlen(query), &err) : NULL;
	char   *items = items_text(instance_id, map_id);

	if (items == NULL)
		return (char *) query;
	if (cfg == NULL || cfg->type != DFJ_OBJECT)
		cfg = dfjson_make_object();
	dfjson_object_add(cfg, "items", dfjson_make_string(items));
	return dfjson_to_text(cfg);
}
