/*-------------------------------------------------------------------------
 *
 * lock_config.h
 *	  The settings of a LOCK node (df.with_lock,
 *	  docs/design/locks-and-limits.md §1), parsed and checked (lock_config.c).
 *
 * The node keeps them as one JSON object in its query:
 * {"keys": ["order:{order_id}", ...]} plus "mode": "shared" and
 * "wait_timeout": <seconds> only when they differ from the defaults
 * (exclusive, wait forever).  The keys are templates, substituted when the
 * node starts; their canonical order is that of the substituted text
 * (strcmp, byte order), the order in which they are taken.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_LOCK_CONFIG_H
#define PG_DURABLE_LOCK_CONFIG_H

#include "postgres.h"

#define DF_LOCK_MAX_KEYS	64
#define DF_LOCK_MAX_KEY_LEN 1000

typedef struct DfLockConfig
{
	int	   nkeys;
	char **keys;			/* the templates, as written */
	bool   shared;			/* mode 'shared' (else 'exclusive') */
	int64  wait_timeout_ms; /* -1: wait as long as it takes */
} DfLockConfig;

/* NULL when query is a LOCK node's acceptable settings (then in *cfg). */
extern char *df_lock_parse(const char *query, DfLockConfig *cfg);

/* NULL when key (a template, or a substituted key) is acceptable. */
extern char *df_lock_check_key(const char *key);

/* "exclusive" or "shared"; false for anything else. */
extern bool df_lock_mode_parse(const char *mode, bool *shared);

#endif /* PG_DURABLE_LOCK_CONFIG_H */
