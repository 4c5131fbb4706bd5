/*-------------------------------------------------------------------------
 *
 * limit_config.h
 *	  The settings of a LIMIT node (df.limit, docs/design/locks-and-limits.md
 *	  §4), parsed and checked (limit_config.c).
 *
 * The query is {"key": <template>, "max_concurrent": n, "rate": r,
 * "burst": b, "queue_timeout": seconds}; key is required, with at least
 * one of max_concurrent and rate; burst (default 1) only with rate.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_LIMIT_CONFIG_H
#define PG_DURABLE_LIMIT_CONFIG_H

#include "postgres.h"

#define DF_LIMIT_BURST_DEFAULT 1
#define DF_LIMIT_RATE_MAX	   1e6
#define DF_LIMIT_KEY_MAX	   1000 /* bytes, the template and the key it gives */

typedef struct DfLimitConfig
{
	char  *key;				 /* a template of {vars} and $results */
	int	   max_concurrent;	 /* 0: no concurrency limit */
	double rate;			 /* admissions per second; 0: no rate limit */
	int	   burst;			 /* the bucket's size (rate only) */
	int64  queue_timeout_ms; /* -1: wait as long as it takes */
} DfLimitConfig;

/* Parse a LIMIT node's query; NULL when fine, else what is wrong. */
extern char *df_limit_parse(const char *query, DfLimitConfig *cfg);

/*
 * The checks shared by the builder and the parser; NULL when fine.
 * max_concurrent and burst < 0 mean "not given", rate < 0 too (NaN is
 * refused).
 */
extern char *df_limit_check(const char *key, int64 max_concurrent, double rate,
							int64 burst);

#endif /* PG_DURABLE_LIMIT_CONFIG_H */
