/*-------------------------------------------------------------------------
 *
 * lock_config.c
 *	  Parse and check the settings of a LOCK node (lock_config.h): the keys
 *	  (templates), the mode and the wait timeout.  df.with_lock writes
 *	  them, df.start's validation and the graph cache read them back, so a
 *	  builder can never write what df.start would refuse.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/json.h"
#include "graph/lock_config.h"
#include "graph/orch_config.h"

bool
df_lock_mode_parse(const char *mode, bool *shared)
{
	if (strcmp(mode, "exclusive") == 0)
		*shared = false;
	else if (strcmp(mode, "shared") == 0)
		*shared = true;
	else
		return false;
	return true;
}

char *
df_lock_check_key(const char *key)
{
	if (key[0] == '\0')
		return pstrdup("a lock key cannot be empty");
	if (strlen(key) > DF_LOCK_MAX_KEY_LEN)
		return psprintf("a lock key is %zu bytes, more than the %d allowed",
						strlen(key), DF_LOCK_MAX_KEY_LEN);
	return NULL;
}

char *
df_lock_parse(const char *query, DfLockConfig *cfg)
{
	char   *err = NULL;
	DfJson *o;
	DfJson *keys;
	DfJson *v;

	memset(cfg, 0, sizeof(*cfg));
	cfg->wait_timeout_ms = -1;
	if (query == NULL ||
		(o = dfjson_parse(query, strlen(query), &err)) == NULL ||
		o->type != DFJ_OBJECT)
		return pstrdup("LOCK query must be a JSON object {\"keys\": [...], ...}");
	for (int i = 0; i < o->count; i++)
	{
		const char *k = o->pairs[i].key;

		if (strcmp(k, "keys") != 0 && strcmp(k, "mode") != 0 &&
			strcmp(k, "wait_timeout") != 0)
			return psprintf("LOCK query has an unknown key \"%s\" (known: keys, mode, wait_timeout)",
							k);
	}
	keys = dfjson_get(o, "keys");
	if (keys == NULL || keys->type != DFJ_ARRAY || keys->count == 0)
		return pstrdup("LOCK query needs \"keys\": a non-empty array of strings");
	if (keys->count > DF_LOCK_MAX_KEYS)
		return psprintf("LOCK takes at most %d keys, got %d", DF_LOCK_MAX_KEYS,
						keys->count);
	cfg->nkeys = keys->count;
	cfg->keys = palloc(sizeof(char *) * keys->count);
	for (int i = 0; i < keys->count; i++)
	{
		DfJson *k = keys->items[i];

		if (k->type != DFJ_STRING)
			return psprintf("LOCK key %d must be a string", i + 1);
		if ((err = df_lock_check_key(k->str)) != NULL)
			return psprintf("LOCK key %d: %s", i + 1, err);
		cfg->keys[i] = k->str;
	}
	v = dfjson_get(o, "mode");
	if (v != NULL &&
		(v->type != DFJ_STRING || !df_lock_mode_parse(v->str, &cfg->shared)))
		return pstrdup("LOCK mode must be 'exclusive' or 'shared'");
	v = dfjson_get(o, "wait_timeout");
	if (v != NULL &&
		(!df_seconds_ms(v, &cfg->wait_timeout_ms) ||
		 cfg->wait_timeout_ms <= 0))
		return pstrdup("LOCK wait_timeout must be a number of seconds greater than zero");
	return NULL;
}
