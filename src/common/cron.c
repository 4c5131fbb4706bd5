/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  Five-field cron expressions: the parser behind df.wait_for_schedule
 *	  and the next-tick computation the engine uses to arm its timers.
 *
 * Syntax (see cron.h): "minute hour day-of-month month day-of-week",
 * fields separated by any run of whitespace.  Each field is a comma list of
 * items; an item is '*', N, N-M, optionally followed by /S.  "N/S" means
 * "N-max/S" as in Vixie cron.  Month and day-of-week also accept the
 * three-letter English names (JAN-DEC, SUN-SAT, any case), also as range
 * ends (MON-FRI).  Day of week is numbered 0-7 with 0 and 7 both Sunday:
 * this is standard cron numbering and a deliberate divergence from the
 * reference, whose parser uses 1-7 with 1 = Sunday.
 *
 * Day matching follows Vixie cron: a day-of-month or day-of-week field
 * whose text starts with '*' (a '*' with a step too) is "unrestricted"; when
 * both are restricted a day matches if either field matches, otherwise
 * both must match.
 *
 * Invariants: a DfCron produced by df_cron_parse has at least one bit set
 * in every field, and days_of_week only uses bits 0..6 (7 is folded into
 * 0).  df_cron_next works on Julian day numbers and minutes of the day, in
 * UTC, and advances by month, day and hour, never minute by minute across
 * days, so a search over the full horizon costs a few thousand cheap
 * iterations at most.
 *
 * Locks: none; pure functions (pgd_cron_next is IMMUTABLE).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "common/cron.h"
#include "common/messages.h"

/* ASCII only: the server's locale must not change what a cron field means */
#define CRON_ISSPACE(c) \
	((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' || \
	 (c) == '\f' || (c) == '\v')
#define CRON_ISDIGIT(c) ((c) >= '0' && (c) <= '9')
#define CRON_ISALPHA(c) \
	(((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z'))

/*
 * How far df_cron_next looks ahead.  Eight years covers every Feb 29, even
 * across a century year that is not a leap year (2096 -> 2104).
 */
#define CRON_HORIZON_DAYS (8 * 366)

typedef struct CronField
{
	const char		  *name; /* for messages: "minute field: ..." */
	int				   min;
	int				   max;
	const char *const *names; /* accepted names, value = min + index; or
								 * NULL */
	int				   nnames;
} CronField;

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR",
										  "MAY", "JUN", "JUL", "AUG",
										  "SEP", "OCT", "NOV", "DEC"};

static const char *const dow_names[] = {"SUN", "MON", "TUE", "WED",
										"THU", "FRI", "SAT"};

static const CronField cron_fields[5] = {{"minute", 0, 59, NULL, 0},
										 {"hour", 0, 23, NULL, 0},
										 {"day-of-month", 1, 31, NULL, 0},
										 {"month", 1, 12, month_names, 12},
										 {"day-of-week", 0, 7, dow_names, 7}};

static bool cron_parse_value(const CronField *f, const char *tok, int *value,
							 char **errmsg);
static bool cron_parse_item(const CronField *f, char *item, uint64 *bits,
							char **errmsg);
static bool cron_parse_field(const CronField *f, const char *text,
							 uint64 *bits, char **errmsg);

/*
 * One value of a field: a decimal number in range, or (month, day of week)
 * a three-letter name.
 */
static bool
cron_parse_value(const CronField *f, const char *tok, int *value,
				 char **errmsg)
{
	const char *p;

	if (*tok == '\0')
	{
		*errmsg = psprintf("%s field: missing value", f->name);
		return false;
	}

	if (CRON_ISDIGIT(*tok))
	{
		int64 v = 0;

		for (p = tok; *p; p++)
		{
			if (!CRON_ISDIGIT(*p))
			{
				*errmsg =
					psprintf("%s field: invalid value '%s'", f->name, tok);
				return false;
			}
			/* saturate: anything this large is out of range anyway */
			if (v < 1000000)
				v = v * 10 + (*p - '0');
		}
		if (v < f->min || v > f->max)
		{
			*errmsg = psprintf("%s field: value %s out of range %d-%d",
							   f->name, tok, f->min, f->max);
			return false;
		}
		*value = (int) v;
		return true;
	}

	if (CRON_ISALPHA(*tok) && f->names != NULL)
	{
		int i;

		for (i = 0; i < f->nnames; i++)
		{
			if (pg_strcasecmp(tok, f->names[i]) == 0)
			{
				*value = f->min + i;
				return true;
			}
		}
		*errmsg = psprintf("%s field: unknown name '%s'", f->name, tok);
		return false;
	}

	*errmsg = psprintf("%s field: invalid value '%s'", f->name, tok);
	return false;
}

/*
 * One comma-separated item: '*', N, N-M, each with an optional /S.  The
 * item text is modified in place (split at '/' and '-').
 */
static bool
cron_parse_item(const CronField *f, char *item, uint64 *bits, char **errmsg)
{
	char *slash;
	char *dash;
	int	  lo;
	int	  hi;
	int	  step = 1;
	int	  v;

	if (*item == '\0')
	{
		*errmsg = psprintf("%s field: empty list item", f->name);
		return false;
	}

	slash = strchr(item, '/');
	if (slash != NULL)
	{
		const char *s = slash + 1;
		int64		sv = 0;
		const char *p;

		*slash = '\0';
		if (*s == '\0')
		{
			*errmsg = psprintf("%s field: missing step after '/'", f->name);
			return false;
		}
		for (p = s; *p; p++)
		{
			if (!CRON_ISDIGIT(*p))
			{
				*errmsg = psprintf("%s field: invalid step '%s'", f->name, s);
				return false;
			}
			if (sv < 1000000)
				sv = sv * 10 + (*p - '0');
		}
		if (sv == 0)
		{
			*errmsg = psprintf("%s field: invalid step %s", f->name, s);
			return false;
		}
		if (sv > f->max - f->min + 1)
		{
			*errmsg = psprintf("%s field: step %s out of range 1-%d", f->name,
							   s, f->max - f->min + 1);
			return false;
		}
		step = (int) sv;
	}

	if (strcmp(item, "*") == 0)
	{
		lo = f->min;
		hi = f->max;
	}
	else
	{
		dash = strchr(item, '-');
		if (dash != NULL)
		{
			char *lotok = item;
			char *hitok = dash + 1;

			*dash = '\0';
			if (strchr(hitok, '-') != NULL)
			{
				*dash = '-';
				*errmsg =
					psprintf("%s field: invalid range '%s'", f->name, item);
				return false;
			}
			if (*lotok == '\0' || *hitok == '\0')
			{
				*dash = '-';
				*errmsg =
					psprintf("%s field: incomplete range '%s'", f->name, item);
				return false;
			}
			if (!cron_parse_value(f, lotok, &lo, errmsg) ||
				!cron_parse_value(f, hitok, &hi, errmsg))
				return false;
			if (lo > hi)
			{
				*errmsg = psprintf("%s field: range %s-%s is reversed",
								   f->name, lotok, hitok);
				return false;
			}
		}
		else
		{
			if (!cron_parse_value(f, item, &lo, errmsg))
				return false;
			/* "N/S" means "N-max/S"; a plain N is just N */
			hi = (slash != NULL) ? f->max : lo;
		}
	}

	for (v = lo; v <= hi; v += step)
		*bits |= UINT64CONST(1) << v;
	return true;
}

/* A whole field: a comma list of items. */
static bool
cron_parse_field(const CronField *f, const char *text, uint64 *bits,
				 char **errmsg)
{
	char *copy = pstrdup(text);
	char *item = copy;

	*bits = 0;
	for (;;)
	{
		char *comma = strchr(item, ',');

		if (comma != NULL)
			*comma = '\0';
		if (!cron_parse_item(f, item, bits, errmsg))
			return false;
		if (comma == NULL)
			break;
		item = comma + 1;
	}
	pfree(copy);
	return true;
}

bool
df_cron_parse(const char *expr, DfCron *cron, char **errmsg)
{
	char	   *fields[5];
	int			nfields = 0;
	const char *p = expr;
	uint64		bits[5];
	int			i;

	memset(cron, 0, sizeof(DfCron));

	/* split on runs of whitespace; count every field to report the number */
	for (;;)
	{
		const char *start;

		while (*p && CRON_ISSPACE(*p))
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p && !CRON_ISSPACE(*p))
			p++;
		if (nfields < 5)
			fields[nfields] = pnstrdup(start, p - start);
		nfields++;
	}

	if (nfields == 0)
	{
		*errmsg =
			pstrdup("expression is empty; expected 5 fields (minute hour day-of-month month day-of-week)");
		return false;
	}
	if (nfields != 5)
	{
		*errmsg =
			psprintf("expected 5 fields (minute hour day-of-month month day-of-week), got %d",
					 nfields);
		return false;
	}

	for (i = 0; i < 5; i++)
	{
		if (!cron_parse_field(&cron_fields[i], fields[i], &bits[i], errmsg))
			return false;
	}

	cron->minutes = bits[0];
	cron->hours = (uint32) bits[1];
	cron->days_of_month = (uint32) bits[2];
	cron->months = (uint16) bits[3];
	/* 7 is another name for Sunday */
	cron->days_of_week = (uint8) ((bits[4] | (bits[4] >> 7)) & 0x7F);
	cron->dom_restricted = (fields[2][0] != '*');
	cron->dow_restricted = (fields[4][0] != '*');
	return true;
}

/* Does the day (Gregorian y-m-d, Julian day jd) match the day fields? */
static bool
cron_day_matches(const DfCron *cron, int jd, int mday)
{
	bool dom_ok = (cron->days_of_month & (((uint32) 1) << mday)) != 0;
	bool dow_ok = (cron->days_of_week & (1 << j2day(jd))) != 0;

	if (cron->dom_restricted && cron->dow_restricted)
		return dom_ok || dow_ok;
	return dom_ok && dow_ok;
}

bool
df_cron_next(const DfCron *cron, TimestampTz after, TimestampTz *next)
{
	int64 minute_no;
	int64 day_no;
	int	  jd;
	int	  minute_of_day;
	int	  end_jd;

	if (TIMESTAMP_NOT_FINITE(after))
		return false;

	/* the first whole minute strictly after 'after' (floor division) */
	minute_no = after / USECS_PER_MINUTE;
	if (after % USECS_PER_MINUTE < 0)
		minute_no--;
	minute_no++;

	day_no = minute_no / MINS_PER_HOUR / HOURS_PER_DAY;
	if (minute_no % (MINS_PER_HOUR * HOURS_PER_DAY) < 0)
		day_no--;
	minute_of_day = (int) (minute_no - day_no * MINS_PER_HOUR * HOURS_PER_DAY);
	jd = (int) (day_no + POSTGRES_EPOCH_JDATE);
	end_jd = jd + CRON_HORIZON_DAYS;

	while (jd <= end_jd)
	{
		int year;
		int month;
		int mday;
		int hour;

		j2date(jd, &year, &month, &mday);

		if ((cron->months & (1 << month)) == 0)
		{
			/* skip to the first day of the next month */
			if (month == 12)
				jd = date2j(year + 1, 1, 1);
			else
				jd = date2j(year, month + 1, 1);
			minute_of_day = 0;
			continue;
		}

		if (cron_day_matches(cron, jd, mday))
		{
			for (hour = minute_of_day / MINS_PER_HOUR; hour < HOURS_PER_DAY;
				 hour++)
			{
				int minute;

				if ((cron->hours & (((uint32) 1) << hour)) == 0)
					continue;
				minute = (hour == minute_of_day / MINS_PER_HOUR) ?
					minute_of_day % MINS_PER_HOUR :
					0;
				for (; minute < MINS_PER_HOUR; minute++)
				{
					if (cron->minutes & (UINT64CONST(1) << minute))
					{
						TimestampTz result;

						result = (TimestampTz) (jd - POSTGRES_EPOCH_JDATE) *
								USECS_PER_DAY +
							(TimestampTz) (hour * MINS_PER_HOUR + minute) *
								USECS_PER_MINUTE;
						if (!IS_VALID_TIMESTAMP(result))
							return false;
						*next = result;
						return true;
					}
				}
			}
		}

		jd++;
		minute_of_day = 0;
	}
	return false;
}

PG_FUNCTION_INFO_V1(pgd_cron_next);

/*
 * df_internal.cron_next(cron_expr text, after timestamptz) -> timestamptz
 *
 * The next tick strictly after 'after', or NULL when there is none within
 * the horizon.  An invalid expression is an error with the reference's
 * message.
 */
Datum
pgd_cron_next(PG_FUNCTION_ARGS)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(1);
	DfCron		cron;
	char	   *detail = NULL;
	TimestampTz next;

	if (!df_cron_parse(expr, &cron, &detail))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PGD_MSG_INVALID_CRON, expr, detail)));

	if (!df_cron_next(&cron, after, &next))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(next);
}
