/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  The pure decisions of df.retry (docs/design/failure-handling.md §3):
 *	  whether an error is retried, how long to wait before the next
 *	  attempt, and when to give up.
 *
 * Delay before attempt n+1: min(max_interval, initial_interval ×
 * backoff_rate^(n−1)); jitter 'full' draws in [0, delay], 'equal' in
 * [delay/2, delay], 'none' keeps it.  A Retry-After (HTTP 429/503) makes
 * it at least that long, still capped at max_interval; a circuit_open
 * refusal waits at least until the breaker's half-open time, uncapped.  The caller draws
 * the random number, so the same inputs always give the same answer.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "orchestration/orchestration.h"

bool
pgd_retry_classify(const DfRetryPolicy *p, const char *code)
{
	if (code == NULL)
		return false;
	if (df_error_matches_any(p->non_retryable, p->nnon_retryable, code))
		return false;
	if (p->nretry_on >= 0)
		return df_error_matches_any(p->retry_on, p->nretry_on, code);
	return df_error_retryable_by_default(code);
}

int64
pgd_retry_delay_ms(const DfRetryPolicy *p, int attempt, double draw)
{
	double d = (double) p->initial_ms * pow(p->backoff_rate, attempt - 1);

	if (isnan(d) || d > (double) p->max_interval_ms)
		d = (double) p->max_interval_ms;
	switch (p->jitter)
	{
		case DF_JITTER_FULL:
			d = d * draw;
			break;
		case DF_JITTER_EQUAL:
			d = d / 2.0 + (d / 2.0) * draw;
			break;
		case DF_JITTER_NONE:
			break;
	}
	return (int64) floor(d);
}

PgdRetryVerdict
pgd_retry_decide(const DfRetryPolicy *p, int attempt, const char *code,
				 bool retryable_fail, int64 retry_after_ms, int64 elapsed_ms,
				 double draw, int64 *delay_ms)
{
	*delay_ms = 0;
	if (!pgd_retry_classify(p, code) &&
		!(retryable_fail && code != NULL && strcmp(code, "fail") == 0 &&
		  !df_error_matches_any(p->non_retryable, p->nnon_retryable, code)))
		return PGD_RETRY_NOT_RETRYABLE;
	if (p->max_attempts > 0 && attempt >= p->max_attempts)
		return PGD_RETRY_EXHAUSTED;
	*delay_ms = pgd_retry_delay_ms(p, attempt, draw);
	/* a breaker's half-open time is not capped: sooner it would be refused again */
	if (retry_after_ms > *delay_ms)
		*delay_ms = strcmp(code, "circuit_open") == 0 ?
			retry_after_ms :
			Min(retry_after_ms, p->max_interval_ms);
	if (p->max_duration_ms >= 0 && elapsed_ms + *delay_ms > p->max_duration_ms)
		return PGD_RETRY_OUT_OF_TIME;
	return PGD_RETRY_AGAIN;
}
