/*-------------------------------------------------------------------------
 *
 * orch_config.h
 *	  The settings of the failure-handling wrapper nodes (RETRY, TIMEOUT,
 *	  CATCH, FAIL; docs/design/failure-handling.md) and the error codes and
 *	  patterns they work with (docs/design/failure-handling.md §2), parsed and
 *	  checked (orch_config.c).
 *
 * A wrapper keeps its settings as one JSON object in its query
 * (docs/design/failure-handling.md §1).  The builders write only the keys
 * that differ from the defaults, so df.retry(step) is
 * {"node_type":"RETRY","left_node":...,"query":"{}"}; the defaults live
 * here, in one place.  Durations are seconds (JSON
 * numbers, fractions allowed).
 *
 * Error codes: "sql:<SQLSTATE>", "http:<status>", "timeout", "connection",
 * "circuit_open", "queue_timeout", "lock_timeout", "lock_order_violation",
 * "fail", "cancelled".
 * The kind is the part before the colon.  A pattern matches a code
 * exactly, by prefix ("sql:08", "http:5xx", 'x' matching any digit) or by
 * kind ("sql", "timeout").
 *
 * Every parser returns NULL when the settings are acceptable, else a
 * palloc'd message naming what is wrong.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_ORCH_CONFIG_H
#define PG_DURABLE_ORCH_CONFIG_H

#include "postgres.h"

#include "common/json.h"
#include "graph/limit_config.h"

typedef enum DfJitter
{
	DF_JITTER_FULL,	 /* uniform in [0, delay] */
	DF_JITTER_EQUAL, /* uniform in [delay/2, delay] */
	DF_JITTER_NONE
} DfJitter;

/* The defaults of df.retry (docs/design/failure-handling.md §3). */
#define DF_RETRY_MAX_ATTEMPTS	 3
#define DF_RETRY_INITIAL_MS		 1000
#define DF_RETRY_BACKOFF_RATE	 2.0
#define DF_RETRY_MAX_INTERVAL_MS 100000
#define DF_RETRY_JITTER			 DF_JITTER_FULL

typedef struct DfRetryPolicy
{
	int		 max_attempts; /* counts the first try; 0 = unlimited */
	int64	 initial_ms;
	double	 backoff_rate;
	int64	 max_interval_ms;
	DfJitter jitter;
	int		 nretry_on; /* -1: not given (the default classification) */
	char   **retry_on;
	int		 nnon_retryable;
	char   **non_retryable;
	int64	 max_duration_ms;	 /* -1: none */
	int64	 attempt_timeout_ms; /* -1: none */
	bool	 subtree;			 /* mode 'subtree' (else 'step') */
	/* the instance-wide policy of df.start (a RETRY at the root) */
	bool instance_policy;
	bool on_failure_continue; /* a step that gives up completes with
									 * {"error": {...}} */
} DfRetryPolicy;

/* The parsed settings of a wrapper node (one of the four kinds). */
typedef struct DfWrapperConfig
{
	DfRetryPolicy retry;	  /* RETRY */
	int64		  timeout_ms; /* TIMEOUT */
	int			  nerrors;	  /* CATCH: -1 = every error */
	char		**errors;
	char		 *fail_message; /* FAIL */
	bool		  fail_retryable;
	bool		  saga_parallel; /* SAGA: the undos run all at once */
	bool		  saga_continue; /* SAGA: on_undo_failure 'continue' */
	char		 *breaker_name; /* BREAKER */
	DfLimitConfig limit; /* LIMIT (limit_config.h) */
} DfWrapperConfig;

extern void	 df_retry_defaults(DfRetryPolicy *p);
extern char *df_retry_parse(const char *query, DfRetryPolicy *p);
extern char *df_timeout_parse(const char *query, int64 *ms);
extern char *df_catch_parse(const char *query, int *nerrors, char ***errors);
extern char *df_fail_parse(const char *query, char **message, bool *retryable);
/* SAGA: {"parallel": true, "on_undo_failure": "stop" | "continue"}, both optional */
extern char *df_saga_parse(const char *query, bool *parallel,
						   bool *continue_on_failure);

/*
 * Circuit breakers: a breaker's name (1 to 63 letters, digits,
 * '_', '-', '.' or ':', starting with a letter or '_'), and the settings
 * of a BREAKER node, {"name": "<breaker>"}.
 */
#define DF_BREAKER_NAME_MAX 63
extern char *df_breaker_name_check(const char *name);
extern char *df_breaker_parse(const char *query, char **name);

/* Parse a wrapper's settings by node type name; NULL when fine. */
extern char *df_wrapper_parse(const char *type_name, const char *query,
							  DfWrapperConfig *cfg);

/* Jitter names: "full", "equal", "none". */
extern bool		   df_jitter_parse(const char *name, DfJitter *j);
extern const char *df_jitter_name(DfJitter j);

/* Error patterns and codes. */
extern char *df_error_pattern_check(const char *pattern);
extern bool	 df_error_matches(const char *pattern, const char *code);
extern bool	 df_error_matches_any(char *const *patterns, int n,
								  const char *code);
extern char *df_error_kind(const char *code);

/*
 * The default classification (docs/design/failure-handling.md §2):
 * retried unless non-retryable (SQL classes 22, 23, 28, 3D, 3F, 42; fail;
 * circuit_open; HTTP 4xx other than 408 and 429).  A NULL code (a failure
 * of the engine itself, a bad substitution) is not retried.
 */
extern bool df_error_retryable_by_default(const char *code);

/* Seconds as JSON number text ("1", "0.25"); from microseconds. */
extern char *df_seconds_text(int64 us);

/* A JSON number of seconds -> milliseconds; false when not a number >= 0. */
extern bool df_seconds_ms(const DfJson *v, int64 *ms);

#endif /* PG_DURABLE_ORCH_CONFIG_H */
