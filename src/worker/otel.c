/*-------------------------------------------------------------------------
 *
 * otel.c
 *	  OTLP/HTTP JSON export of the spans, run by the HTTP worker
 *	  when pg_durable.otel_endpoint is set: POST <endpoint>/v1/traces.
 *
 * What is exported: every span ends at a history event (a node's end, a
 * retry, the instance's end; monitor/spans.c), so the export walks
 * df_internal.events by id.  A batch is the spans ended by the next
 * pg_durable.otel_batch_events history events after the cursor (8,192
 * by default), read in one statement by the BRIN index on events (id)
 * from a window of at most four batches' worth of ids (a start kept in its
 * end's row counts as an event; a batch the limit would cut between the
 * two ends before their row, span_sources.c); the backlog is the history
 * itself (bounded by retention), so exporting adds to the step path only
 * that index's summaries (a BRIN index, not a btree entry per event):
 * no other writes, no locks, no wake-ups.  A steps' burst only makes the
 * next batches fuller; while there is a backlog batches follow each other.
 *
 * The cursor (df_internal.otel_export.last_event_id) moves when the
 * collector accepted a batch (2xx), in a transaction of its own: at least
 * once; a crash between the answer and that commit exports the batch
 * again.  429, 5xx and connection errors keep the cursor and retry with a
 * doubling back-off (1 s to 60 s); another 4xx means the collector will
 * never take the batch: it is logged and skipped.
 *
 * Commit order.  Event ids come from a sequence, and a transaction may
 * commit an event with a lower id after one with a higher id was seen; a
 * cursor moved past the higher id would skip it.  So the export only goes
 * up to a horizon: at one scan it reads the sequence's last value L and
 * then draws an xid X of its own; every id <= L was drawn by a transaction
 * that already had an xid below X (an event is always written after that
 * transaction locked or wrote a row: its runs row, its instance), and once
 * a later snapshot's xmin reaches X all of them have ended, so every id <=
 * L is committed or never will be.  (Until 2026-12-01 X was a snapshot's
 * xmax, the latest completed xid plus one: a transaction running with a
 * higher xid could still commit an id <= L, and its spans were skipped.)  A long transaction
 * anywhere in the cluster therefore delays the export (never the steps).
 *
 * Between scans (SCAN_INTERVAL_MS apart when idle, PENDING_MS while the
 * horizon waits for running transactions) the exporter keeps, for every
 * instance it is exporting, the graph and the history read so far
 * (monitor/span_sources.c), which a scan feeds with its new events; an
 * instance leaves them once its end was exported.
 *
 * One transfer at a time, in a multi handle of its own, polled by the HTTP
 * worker's loop (pgd_otel_step) between its calls.
 *
 * Locks: the extension object (share, never waiting), the cursor row
 * (only this worker writes it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <curl/curl.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/json.h"
#include "common/spi.h"
#include "core/settings.h"
#include "core/unit.h"
#include "monitor/span_sources.h"
#include "monitor/spans.h"
#include "worker/worker.h"

#define WINDOW_IDS 4 /* ids a scan reads, in batches (build_batch) */
#define SCAN_INTERVAL_MS \
	2000 /* between scans; an instance is read once a scan */
#define PENDING_MS		 200 /* while the horizon waits for running transactions */
#define BACKOFF_MIN_MS	 1000
#define BACKOFF_MAX_MS	 60000
#define EXPORT_TIMEOUT_S 10
#define RESPONSE_KEEP	 512 /* bytes of an error answer kept for the log */

static CURLM			 *otel_multi = NULL;
static CURL				 *otel_easy = NULL;
static struct curl_slist *otel_hdrs = NULL;
static char				 *otel_body = NULL; /* malloc'd */
static char				  otel_answer[RESPONSE_KEEP + 1];
static size_t			  otel_answer_len = 0;
static char				  otel_errbuf[CURL_ERROR_SIZE];

/* the batch in flight: from (exclusive) .. through (inclusive) */
static int64 batch_from = 0;
static int64 batch_through = 0;
static int	 batch_spans = 0;

static TimestampTz next_scan = 0;
static int		   backoff_ms = 0;

/*
 * The instances being exported, kept between scans (span_sources.c) so
 * that a scan reads only the new events: dropped when their end was
 * exported, all of them when there are more than CACHE_MAX or a scan
 * failed.
 */
#define CACHE_MAX 8192
static PgdSpanSources *sources = NULL;

/* the horizon candidate of an earlier scan (see the file's comment) */
static bool	  have_candidate = false;
static int64  candidate_last = 0;
static uint64 candidate_xmax = 0;

static size_t
answer_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	size_t n = size * nmemb;
	size_t room = RESPONSE_KEEP - otel_answer_len;

	memcpy(otel_answer + otel_answer_len, ptr, Min(n, room));
	otel_answer_len += Min(n, room);
	otel_answer[otel_answer_len] = '\0';
	return n;
}

static void
json_kv_string(StringInfo b, const char *key, const char *value)
{
	appendStringInfoString(b, "{\"key\":");
	dfjson_write_string(b, key);
	appendStringInfoString(b, ",\"value\":{\"stringValue\":");
	dfjson_write_string(b, value);
	appendStringInfoString(b, "}}");
}

/* An attribute of the span's JSON object as an OTLP KeyValue. */
static void
json_kv(StringInfo b, const char *key, const DfJson *v)
{
	if (v->type == DFJ_NUMBER && strchr(v->str, '.') == NULL &&
		strchr(v->str, 'e') == NULL && strchr(v->str, 'E') == NULL)
	{
		appendStringInfoString(b, "{\"key\":");
		dfjson_write_string(b, key);
		appendStringInfo(b, ",\"value\":{\"intValue\":\"%s\"}}", v->str);
	}
	else if (v->type == DFJ_BOOL)
	{
		appendStringInfoString(b, "{\"key\":");
		dfjson_write_string(b, key);
		appendStringInfo(b, ",\"value\":{\"boolValue\":%s}}",
						 v->boolean ? "true" : "false");
	}
	else if (v->type == DFJ_STRING)
		json_kv_string(b, key, v->str);
	else
		json_kv_string(b, key, dfjson_to_text(v));
}

static int64
unix_nanos(TimestampTz ts)
{
	return (ts +
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
				USECS_PER_DAY) *
		1000;
}

static void
write_span(StringInfo b, const PgdSpanSet *set, const PgdSpan *s)
{
	/* OTLP SpanKind: 1 INTERNAL, 2 SERVER, 3 CLIENT, 4 PRODUCER, 5 CONSUMER */
	int kind = s->kind == PGD_SPAN_SERVER ? 2 :
		s->kind == PGD_SPAN_CLIENT		  ? 3 :
		s->kind == PGD_SPAN_PRODUCER	  ? 4 :
		s->kind == PGD_SPAN_CONSUMER	  ? 5 :
											1;

	appendStringInfo(b, "{\"traceId\":\"%s\",\"spanId\":\"%s\",",
					 set->trace_id, s->span_id);
	if (s->parent_id[0] != '\0')
		appendStringInfo(b, "\"parentSpanId\":\"%s\",", s->parent_id);
	appendStringInfoString(b, "\"name\":");
	dfjson_write_string(b, s->name);
	appendStringInfo(b,
					 ",\"kind\":%d,\"startTimeUnixNano\":\"" INT64_FORMAT
					 "\",\"endTimeUnixNano\":\"" INT64_FORMAT
					 "\",\"attributes\":[",
					 kind, unix_nanos(s->start), unix_nanos(s->end));
	for (int i = 0; i < s->attrs->count; i++)
	{
		if (i > 0)
			appendStringInfoChar(b, ',');
		json_kv(b, s->attrs->pairs[i].key, s->attrs->pairs[i].value);
	}
	/* OTLP StatusCode: 0 UNSET, 1 OK, 2 ERROR */
	appendStringInfo(b, "],\"status\":{\"code\":%d",
					 s->status == PGD_SPAN_OK		 ? 1 :
						 s->status == PGD_SPAN_ERROR ? 2 :
													   0);
	if (s->status_message)
	{
		appendStringInfoString(b, ",\"message\":");
		dfjson_write_string(b, s->status_message);
	}
	appendStringInfoString(b, "}}");
}

static void
cache_reset(void)
{
	pgd_span_sources_destroy(sources);
	sources = NULL;
}

/*
 * (inside a unit) the cursor, its row created on first use; false when the
 * schema has no cursor table yet (0.3.0, until ALTER EXTENSION UPDATE).
 */
static bool
read_cursor(int64 *cursor)
{
	char *v;

	pgd_exec("SELECT pg_catalog.to_regclass('df_internal.otel_export') IS NOT NULL",
			 0, NULL);
	v = pgd_spi_getstring(0, 1);
	if (v == NULL || strcmp(v, "t") != 0)
		return false;
	pgd_exec("INSERT INTO df_internal.otel_export (id) VALUES (1) ON CONFLICT DO NOTHING",
			 0, NULL);
	pgd_exec("SELECT last_event_id FROM df_internal.otel_export WHERE id OPERATOR(pg_catalog.=) 1",
			 0, NULL);
	v = pgd_spi_getstring(0, 1);
	*cursor = v ? strtoll(v, NULL, 10) : 0;
	return true;
}

static void
move_cursor(int64 from, int64 through, int nspans)
{
	char f[32], t[32], n[32];

	snprintf(f, sizeof(f), INT64_FORMAT, from);
	snprintf(t, sizeof(t), INT64_FORMAT, through);
	snprintf(n, sizeof(n), "%d", nspans);
	PGD_EXEC("UPDATE df_internal.otel_export SET last_event_id = $2::pg_catalog.int8, "
			 "exported_spans = exported_spans OPERATOR(pg_catalog.+) $3::pg_catalog.int8, "
			 "updated_at = pg_catalog.now() "
			 "WHERE id OPERATOR(pg_catalog.=) 1 AND last_event_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8",
			 f, t, n);
}

/*
 * (inside a unit) the highest event id the export may reach now; takes a
 * new candidate when the old one is reached.
 */
static int64
horizon(int64 cursor)
{
	int64  bound = cursor;
	uint64 xmin;
	char  *v;

	pgd_exec("SELECT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text::int8",
			 0, NULL);
	xmin = strtoull(pgd_spi_getstring(0, 1), NULL, 10);
	if (have_candidate && xmin >= candidate_xmax)
	{
		bound = Max(cursor, candidate_last);
		have_candidate = false;
	}
	if (!have_candidate)
	{
		/* first the sequence, then our xid (the order matters) */
		pgd_exec("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
				 "FROM df_internal.events_id_seq",
				 0, NULL);
		v = pgd_spi_getstring(0, 1);
		candidate_last = v ? strtoll(v, NULL, 10) : 0;
		/*
		 * An xid of our own, drawn after the sequence was read: every
		 * transaction that drew an id <= last has a lower one.  (A
		 * snapshot's xmax would not do: it is the latest completed xid
		 * plus one, and a running transaction can have an xid above it.)
		 * Only when there is something new, and not in a transaction
		 * that had an xid before the read (the cursor row's first
		 * insert); its commit need not wait for the WAL flush.
		 */
		have_candidate = candidate_last > bound &&
			!TransactionIdIsValid(GetTopTransactionIdIfAny());
		if (have_candidate)
		{
			pgd_exec("SELECT pg_catalog.pg_current_xact_id()::text::int8", 0,
					 NULL);
			candidate_xmax = strtoull(pgd_spi_getstring(0, 1), NULL, 10);
			pgd_exec("SET LOCAL synchronous_commit TO off", 0, NULL);
		}
	}
	return bound;
}

/*
 * (inside a unit) the body of the next batch in *body, or NULL when there
 * is nothing to send; *through: the last event id it covers (the cursor
 * moves there, at once when nothing is to be sent).
 */
static char *
build_batch(int64 cursor, int64 bound, int64 *through, int *nspans)
{
	char		 **instances;
	int			   ninstances = 0;
	StringInfoData body;
	bool		   first = true;
	int64		   window;

	*nspans = 0;
	*through = cursor;
	if (bound <= cursor)
		return NULL;
	if (sources != NULL && pgd_span_sources_count(sources) > CACHE_MAX)
		cache_reset();
	if (sources == NULL)
		sources = pgd_span_sources_create(TopMemoryContext);
	/*
	 * At most WINDOW_IDS batches' worth of ids at a time: the BRIN index
	 * on events (id) gives the pages of the whole window, whose rows are
	 * then sorted, so a catch-up must not read the backlog at every batch.
	 */
	window = (int64) pgd_otel_batch_events * WINDOW_IDS;
	instances =
		pgd_span_sources_read(sources, cursor,
							  bound - cursor > window ? cursor + window :
														bound,
							  pgd_otel_batch_events, through, &ninstances);

	initStringInfo(&body);
	appendStringInfoString(&body,
						   "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
	json_kv_string(&body, "service.name",
				   pgd_otel_service_name && pgd_otel_service_name[0] ?
					   pgd_otel_service_name :
					   "pg_durable");
	appendStringInfoString(&body,
						   "]},\"scopeSpans\":[{\"scope\":{\"name\":\"pg_durable\",\"version\":\"" PG_DURABLE_VERSION
						   "\"},\"spans\":[");
	for (int k = 0; k < ninstances; k++)
	{
		PgdSpanSet *set = pgd_span_sources_spans(sources, instances[k]);

		for (int i = 0; set != NULL && i < set->nspans; i++)
		{
			PgdSpan *s = &set->spans[i];

			if (!s->ended || s->end_event <= cursor || s->end_event > *through)
				continue;
			if (!first)
				appendStringInfoChar(&body, ',');
			first = false;
			write_span(&body, set, s);
			(*nspans)++;
		}
		/* an instance whose end is in this batch is read for the last time */
		if (set == NULL ||
			(set->spans[0].ended && set->spans[0].end_event <= *through))
			pgd_span_sources_forget(sources, instances[k]);
	}
	appendStringInfoString(&body, "]}]}]}");
	return *nspans > 0 ? body.data : NULL;
}

/* The headers of pg_durable.otel_headers ("a=b,c=d"); malformed pairs are skipped. */
static struct curl_slist *
export_headers(void)
{
	struct curl_slist *h =
		curl_slist_append(NULL, "Content-Type: application/json");
	char *list = pstrdup(pgd_otel_headers ? pgd_otel_headers : "");
	char *save = NULL;

	/*
	 * No "Expect: 100-continue" (curl's default for a body over 1 MB): a
	 * round trip less per batch, and no 1 s wait at a collector that does
	 * not answer it.
	 */
	h = curl_slist_append(h, "Expect:");

	for (char *pair = strtok_r(list, ",", &save); pair;
		 pair = strtok_r(NULL, ",", &save))
	{
		char *eq = strchr(pair, '=');
		char *name = pair;

		if (eq == NULL || strpbrk(pair, "\r\n:") != NULL)
			continue;
		*eq = '\0';
		while (*name == ' ')
			name++;
		if (*name == '\0')
			continue;
		{
			char *line = psprintf("%s: %s", name, eq + 1);

			h = curl_slist_append(h, line);
			pfree(line);
		}
	}
	pfree(list);
	return h;
}

static void
free_transfer(void)
{
	if (otel_easy)
	{
		curl_multi_remove_handle(otel_multi, otel_easy);
		curl_easy_cleanup(otel_easy);
		otel_easy = NULL;
	}
	if (otel_hdrs)
		curl_slist_free_all(otel_hdrs);
	otel_hdrs = NULL;
	free(otel_body);
	otel_body = NULL;
}

static bool
start_export(const char *body)
{
	size_t n = strlen(pgd_otel_endpoint);
	char  *url;

	/* "<endpoint>/v1/traces", without a doubled slash */
	if (n > 0 && pgd_otel_endpoint[n - 1] == '/')
		url = psprintf("%sv1/traces", pgd_otel_endpoint);
	else
		url = psprintf("%s/v1/traces", pgd_otel_endpoint);

	if (otel_multi == NULL && (otel_multi = curl_multi_init()) == NULL)
		return false;
	if ((otel_easy = curl_easy_init()) == NULL ||
		(otel_body = strdup(body)) == NULL)
	{
		free_transfer();
		return false;
	}
	otel_hdrs = export_headers();
	otel_answer_len = 0;
	otel_answer[0] = '\0';
	otel_errbuf[0] = '\0';
	curl_easy_setopt(otel_easy, CURLOPT_URL, url);
	curl_easy_setopt(otel_easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(otel_easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(otel_easy, CURLOPT_TIMEOUT, (long) EXPORT_TIMEOUT_S);
	curl_easy_setopt(otel_easy, CURLOPT_PROXY, "");
	curl_easy_setopt(otel_easy, CURLOPT_USERAGENT,
					 "pg_durable/" PG_DURABLE_VERSION);
	curl_easy_setopt(otel_easy, CURLOPT_HTTPHEADER, otel_hdrs);
	curl_easy_setopt(otel_easy, CURLOPT_POSTFIELDS, otel_body);
	curl_easy_setopt(otel_easy, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t) strlen(otel_body));
	curl_easy_setopt(otel_easy, CURLOPT_WRITEFUNCTION, answer_cb);
	curl_easy_setopt(otel_easy, CURLOPT_ERRORBUFFER, otel_errbuf);
	if (curl_multi_add_handle(otel_multi, otel_easy) != CURLM_OK)
	{
		free_transfer();
		return false;
	}
	return true;
}

static void
back_off(const char *why)
{
	backoff_ms =
		backoff_ms == 0 ? BACKOFF_MIN_MS : Min(backoff_ms * 2, BACKOFF_MAX_MS);
	next_scan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), backoff_ms);
	if (pgd_log_allowed())
		ereport(LOG,
				(errmsg("could not export spans to the OpenTelemetry collector at %s: %s",
						pgd_otel_endpoint, why),
				 errdetail("The export is retried in %d ms; no span is lost.",
						   backoff_ms)));
}

/* The collector answered (or the transfer failed): move on or back off. */
static void
finish_export(CURLcode rc, MemoryContext cxt)
{
	long status = 0;

	curl_easy_getinfo(otel_easy, CURLINFO_RESPONSE_CODE, &status);
	free_transfer();
	if (rc != CURLE_OK)
	{
		back_off(otel_errbuf[0] ? otel_errbuf : curl_easy_strerror(rc));
		return;
	}
	if (status == 429 || status >= 500 || status < 200)
	{
		back_off(psprintf("HTTP status %ld", status));
		return;
	}
	if (status >= 300)
		ereport(WARNING,
				(errmsg("the OpenTelemetry collector at %s refused %d spans with HTTP status %ld",
						pgd_otel_endpoint, batch_spans, status),
				 errdetail("The collector said: %s", otel_answer),
				 errhint("The batch is skipped; check pg_durable.otel_endpoint and pg_durable.otel_headers.")));
	backoff_ms = 0;
	PG_TRY();
	{
		if (pgd_begin_engine_unit("pg_durable: OTLP export cursor"))
		{
			move_cursor(batch_from, batch_through,
						status < 300 ? batch_spans : 0);
			pgd_end_unit();
		}
		next_scan = 0; /* there may be more */
	}
	PG_CATCH();
	{
		pgd_unit_recover(cxt);
		next_scan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
	}
	PG_END_TRY();
}

/*
 * (a unit of work) the next batch, copied into cxt, or NULL when there is
 * nothing to send; the cursor moves over events that end no span to send.
 */
static char *
scan_unit(MemoryContext cxt)
{
	int64 cursor, bound, through;
	int	  nspans;
	char *body = NULL;

	if (!pgd_begin_engine_unit("pg_durable: OTLP export"))
		return NULL;
	if (!read_cursor(&cursor))
	{
		pgd_end_unit();
		next_scan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 10000);
		return NULL;
	}
	/* the window's BRIN scan is small: no parallel workers (slots) for it */
	pgd_exec("SET LOCAL max_parallel_workers_per_gather = 0", 0, NULL);
	bound = horizon(cursor);
	body = build_batch(cursor, bound, &through, &nspans);
	/*
	 * Nothing to send until the transactions of the candidate's snapshot
	 * end: look again soon rather than a whole interval later (a fast
	 * export otherwise trails the history by two intervals).
	 */
	if (body == NULL && have_candidate)
		next_scan =
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(), PENDING_MS);
	if (body == NULL && through < bound)
		next_scan = 0; /* the window ended before the horizon: go on */
	if (body == NULL && through > cursor)
		move_cursor(cursor, through, 0);
	else if (body != NULL)
	{
		body = MemoryContextStrdup(cxt, body);
		batch_from = cursor;
		batch_through = through;
		batch_spans = nspans;
	}
	pgd_end_unit();
	return body;
}

/* Scan and start the next batch. */
static void
scan(MemoryContext cxt)
{
	char *volatile body = NULL;

	next_scan =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SCAN_INTERVAL_MS);
	PG_TRY();
	{
		body = scan_unit(cxt);
	}
	PG_CATCH();
	{
		pgd_unit_recover(cxt);
		body = NULL;
		cache_reset();
		next_scan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
	}
	PG_END_TRY();
	if (body != NULL)
	{
		if (start_export(body))
			next_scan = 0;
		else
			back_off("could not start the transfer");
	}
}

long
pgd_otel_step(MemoryContext cxt)
{
	MemoryContext old;
	long		  wait;

	if (pgd_otel_endpoint == NULL || pgd_otel_endpoint[0] == '\0')
	{
		if (otel_easy)
			free_transfer();
		have_candidate = false;
		cache_reset();
		return -1;
	}
	old = MemoryContextSwitchTo(cxt);
	if (otel_easy != NULL)
	{
		sigset_t all, saved;
		int		 running;
		CURLMsg *msg;
		int		 left;

		/* (signals blocked: curl's resolver threads inherit the mask) */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &saved);
		curl_multi_perform(otel_multi, &running);
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
		while ((msg = curl_multi_info_read(otel_multi, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE && msg->easy_handle == otel_easy)
			{
				finish_export(msg->data.result, cxt);
				break;
			}
	}
	if (otel_easy == NULL && GetCurrentTimestamp() >= next_scan)
		scan(cxt);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
	if (otel_easy != NULL)
		return 10; /* a transfer in flight: poll it */
	wait = (long) ((next_scan - GetCurrentTimestamp()) / 1000);
	return Max(1L, wait);
}
