/*-------------------------------------------------------------------------
 *
 * cron.h
 *	  Five-field cron expressions: parsing and next-tick computation.
 *
 * Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
 * JAN-DEC), day of week (0-7, 0 and 7 = Sunday, or SUN-SAT).  Each field is
 * a comma list of '*', N, N-M, with an optional /step; names are
 * case-insensitive.  Day of month and day of week combine as in Vixie cron:
 * when both are restricted, a day matches if either matches.  Ticks are at
 * second 0, in UTC.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_CRON_H
#define PG_DURABLE_CRON_H

#include "postgres.h"
#include "datatype/timestamp.h"

typedef struct DfCron
{
	uint64 minutes; /* bit i set = minute i */
	uint32 hours;
	uint32 days_of_month;  /* bits 1..31 */
	uint16 months;		   /* bits 1..12 */
	uint8  days_of_week;   /* bits 0..6, Sunday = 0 */
	bool   dom_restricted; /* field was not '*' */
	bool   dow_restricted;
} DfCron;

/*
 * Parse expr.  Returns false and sets *errmsg (palloc'd, without the
 * "Invalid cron expression '<e>': " prefix, e.g. "expected 5 fields, got 4"
 * or "minute field: value 60 out of range 0-59") on error.
 */
extern bool df_cron_parse(const char *expr, DfCron *cron, char **errmsg);

/*
 * The first tick strictly after 'after' (UTC).  Returns false when none
 * exists within the next several years (e.g. "0 0 31 2 *").
 */
extern bool df_cron_next(const DfCron *cron, TimestampTz after,
						 TimestampTz *next);

#endif /* PG_DURABLE_CRON_H */
