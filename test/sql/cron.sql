-- Cron expressions: every syntax form, every error, and next-tick computation
-- (df_internal.cron_next, the function the engine arms WAIT_SCHEDULE timers with).
SET timezone = 'UTC';
SET DateStyle = 'ISO, YMD';

-- next tick for one expression after a fixed time, with the weekday
CREATE FUNCTION cron_t(e text, after timestamptz) RETURNS text LANGUAGE sql AS $$
	SELECT COALESCE(to_char(df_internal.cron_next(e, after), 'YYYY-MM-DD HH24:MI:SS Dy'), 'NULL')
$$;

-- the error text of an expression (and proof that the errcode is invalid_parameter_value)
CREATE FUNCTION cron_err(e text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM df_internal.cron_next(e, '2024-01-01 00:00:00+00');
	RETURN 'ok';
EXCEPTION WHEN invalid_parameter_value THEN
	RETURN SQLERRM;
END
$$;

-- 2024-01-01 is a Monday.
-- every syntax form of one field
SELECT e, after, cron_t(e, after) AS next
FROM (VALUES
	('* * * * *',            '2024-01-01 00:00:00+00'::timestamptz),  -- strictly after
	('* * * * *',            '2024-01-01 00:00:30.5+00'),             -- second 0 of the next minute
	('* * * * *',            '2024-01-01 00:00:59.999999+00'),
	('30 * * * *',           '2024-01-01 10:29:59+00'),               -- N
	('30 * * * *',           '2024-01-01 10:30:00+00'),
	('10-12 * * * *',        '2024-01-01 10:11:00+00'),               -- N-M
	('10-12 * * * *',        '2024-01-01 10:12:00+00'),
	('*/15 * * * *',         '2024-01-01 10:46:00+00'),               -- */S
	('10-40/10 * * * *',     '2024-01-01 10:35:00+00'),               -- N-M/S
	('10-40/10 * * * *',     '2024-01-01 10:40:00+00'),
	('50/5 * * * *',         '2024-01-01 10:51:00+00'),               -- N/S = N-59/S
	('50/5 * * * *',         '2024-01-01 10:55:00+00'),
	('5,20,45 * * * *',      '2024-01-01 10:20:00+00'),               -- list
	('5,20,45 * * * *',      '2024-01-01 10:45:00+00'),
	('0-10/10,58 * * * *',   '2024-01-01 10:10:00+00'),               -- list of ranges with steps
	('0 9-17/4 * * *',       '2024-01-01 13:00:00+00'),               -- hour range with step
	('  */5   *  *	* *  ', '2024-01-01 10:01:00+00'),                -- extra spaces and a tab
	('0 0 * * *',            '2023-12-31 23:59:59+00')                -- year rollover at midnight
) AS t(e, after);

-- names: months and days, any case, also as range ends
SELECT e, after, cron_t(e, after) AS next
FROM (VALUES
	('0 0 1 jan *',          '2024-03-01 00:00:00+00'::timestamptz),
	('0 0 1 Mar-MAY *',      '2024-06-15 00:00:00+00'),
	('0 0 1 mar-may *',      '2024-03-15 00:00:00+00'),
	('0 0 1 JAN,jul *',      '2024-02-01 00:00:00+00'),
	('0 0 1 FEB-DEC/5 *',    '2024-03-01 00:00:00+00'),               -- FEB, JUL, DEC
	('0 0 1 FEB-DEC/5 *',    '2024-07-01 00:00:00+00'),
	('0 9 * * mon-fri',      '2024-01-05 09:00:00+00'),               -- Friday -> Monday
	('0 9 * * MON-FRI',      '2024-01-01 09:00:00+00'),
	('0 9 * * Sun',          '2024-01-01 00:00:00+00'),
	('0 9 * * sat,SUN',      '2024-01-01 00:00:00+00'),
	('0 9 * * WED/2',        '2024-01-01 00:00:00+00')                -- WED, FRI (3-7/2: 3,5,7)
) AS t(e, after);

-- day of week: 0 and 7 are both Sunday; ranges and steps over 0-7
SELECT e, cron_t(e, '2024-01-01 00:00:00+00') AS next
FROM (VALUES ('0 12 * * 0'), ('0 12 * * 7'), ('0 12 * * 6-7'), ('0 12 * * 1'),
	('0 12 * * 5/2'), ('0 12 * * 0-7'), ('0 12 * * 7,3')) AS t(e);
-- five successive ticks of '0 12 * * 5-7' (Fri, Sat, Sun, Fri, ...)
WITH RECURSIVE ticks(n, t) AS (
	SELECT 1, df_internal.cron_next('0 12 * * 5-7', '2024-01-01 00:00:00+00')
	UNION ALL
	SELECT n + 1, df_internal.cron_next('0 12 * * 5-7', t) FROM ticks WHERE n < 5
)
SELECT n, to_char(t, 'YYYY-MM-DD HH24:MI Dy') FROM ticks;
-- weekdays at 09:00 across a weekend
WITH RECURSIVE ticks(n, t) AS (
	SELECT 1, df_internal.cron_next('0 9 * * MON-FRI', '2024-01-04 12:00:00+00')
	UNION ALL
	SELECT n + 1, df_internal.cron_next('0 9 * * MON-FRI', t) FROM ticks WHERE n < 4
)
SELECT n, to_char(t, 'YYYY-MM-DD HH24:MI Dy') FROM ticks;

-- Vixie rule: both day fields restricted => either matches; one of them '*' => both must
SELECT e, after, cron_t(e, after) AS next
FROM (VALUES
	('0 0 13 * 5',           '2024-01-01 00:00:00+00'::timestamptz),  -- Fri 5th (a Friday)
	('0 0 13 * 5',           '2024-01-12 00:00:00+00'),               -- Sat 13th (the 13th)
	('0 0 13 * FRI',         '2024-09-01 00:00:00+00'),               -- Fri 6th
	('0 0 13 * *',           '2024-01-01 00:00:00+00'),               -- day-of-week '*': the 13th only
	('0 0 * * 5',            '2024-01-06 00:00:00+00'),               -- day-of-month '*': Fridays only
	('0 0 */2 * 5',          '2024-01-05 00:00:00+00'),               -- '*/2' counts as '*': odd days AND Friday
	('0 0 1-31/2 * 5',       '2024-01-05 00:00:00+00')                -- restricted: odd days OR Friday
) AS t(e, after);

-- month lengths, Feb 29 and leap years, month and year rollover
SELECT e, after, cron_t(e, after) AS next
FROM (VALUES
	('0 0 29 2 *',           '2023-01-01 00:00:00+00'::timestamptz),  -- 2024 is a leap year
	('0 0 29 2 *',           '2024-02-29 00:00:00+00'),               -- next: 2028
	('0 0 29 2 *',           '2096-03-01 00:00:00+00'),               -- 2100 is not a leap year: 2104
	('0 0 29 * *',           '2023-02-01 00:00:00+00'),               -- Feb 2023 has no 29th
	('0 0 31 * *',           '2024-01-31 00:00:00+00'),               -- Feb has none, Mar 31
	('0 0 31 * *',           '2024-03-31 00:00:00+00'),               -- Apr has 30 days: May 31
	('0 0 1 * *',            '2024-01-31 12:00:00+00'),               -- month rollover
	('0 0 1 1 *',            '2024-06-01 00:00:00+00'),               -- year rollover
	('59 23 31 12 *',        '2024-12-31 23:59:00+00'),               -- a year later
	('0 0 30 2 *',           '2024-01-01 00:00:00+00'),               -- never
	('0 0 31 2 *',           '2024-01-01 00:00:00+00'),               -- never
	('0 0 31 4,6,9,11 *',    '2024-01-01 00:00:00+00')                -- never
) AS t(e, after);

-- steps that cross midnight
SELECT e, after, cron_t(e, after) AS next
FROM (VALUES
	('0 */5 * * *',          '2024-01-01 20:30:00+00'::timestamptz),  -- 0,5,10,15,20 -> next day 00:00
	('*/7 23 * * *',         '2024-01-01 23:56:00+00'),               -- 23:56 is the last -> next day 23:00
	('*/25 * * * *',         '2024-12-31 23:50:00+00')                -- 0,25,50 -> new year 00:00
) AS t(e, after);

-- infinities and NULL
SELECT df_internal.cron_next('* * * * *', 'infinity') AS inf,
       df_internal.cron_next('* * * * *', '-infinity') AS neg_inf,
       df_internal.cron_next(NULL, now()) AS null_expr;

-- no tick for years is still fast: one search over the whole horizon, 2,000 times
SELECT count(*) FILTER (WHERE df_internal.cron_next('0 0 31 2 *', t) IS NULL) AS none_found
FROM generate_series('2024-01-01 00:00:00+00'::timestamptz, '2024-01-01 00:00:00+00'::timestamptz + interval '1999 hours', interval '1 hour') AS t;

-- every error
SELECT e, cron_err(e) AS error
FROM (VALUES
	(''), ('   '),
	('* * * *'), ('* * * * * *'), ('@daily'),
	('60 * * * *'), ('* 24 * * *'), ('* * 0 * *'), ('* * 32 * *'),
	('* * * 0 *'), ('* * * 13 *'), ('* * * * 8'), ('99999999999 * * * *'),
	('* */0 * * *'), ('*/00 * * * *'), ('*/61 * * * *'), ('* * * * */9'), ('*/x * * * *'), ('5/ * * * *'),
	('* * * * FOO'), ('* * * FOO *'), ('* * * JANUARY *'), ('MON * * * *'), ('* * MON * *'),
	('* * * 5-2 *'), ('* * * * FRI-MON'), ('30-10 * * * *'),
	('1,,2 * * * *'), ('1, * * * *'), (',1 * * * *'),
	('1-2-3 * * * *'), ('-5 * * * *'), ('5- * * * *'), ('*-5 * * * *'),
	('5x * * * *'), ('1.5 * * * *'), ('* * * * MON/x')
) AS t(e);

-- the error as a client sees it
SELECT df_internal.cron_next('* * * * FOO', now());
SELECT df_internal.cron_next('1 2 3 4', now());

DROP FUNCTION cron_t(text, timestamptz);
DROP FUNCTION cron_err(text);
