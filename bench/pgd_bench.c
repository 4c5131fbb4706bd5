/*-------------------------------------------------------------------------
 *
 * pgd_bench.c
 *	  Benchmark client for pg_durable: step throughput of chains and of
 *	  fan-out/join workflows, one-step workflows per second, start-to-first-
 *	  step and step-to-step latency, and the server's single-row INSERT
 *	  commit rate measured with pgbench as the physical limit.  Prints one
 *	  table.
 *
 * How it measures:
 *	- Throughput: C client threads (one connection each) start their share
 *	  of the workflows with df.start in autocommit, then wait for each with
 *	  df.await_instance.  The figure is steps (or workflows) divided by the
 *	  wall time from the first df.start to the last completion, measured
 *	  by the client.  The graph is built once (balanced trees of ~> or &,
 *	  so that long chains stay far below the nesting limit) and passed to
 *	  df.start as a parameter.
 *	- Latency: every step is INSERT INTO bench_log VALUES
 *	  ('{sys_instance_id}', k, clock_timestamp()); the engine substitutes the
 *	  instance id.  Start-to-first-step is ts(k = 1) minus the time at which
 *	  the client saw the df.start commit return (CLOCK_REALTIME, the same
 *	  clock as the server's on this machine); step-to-step is ts(k + 1) -
 *	  ts(k).  Measured once with one client (start, await, repeat) and once
 *	  with C clients doing the same concurrently.
 *	- HTTP steps (--http-url): chains of GET <url>/echo against the local
 *	  test server (test/http_server.pl, started by bench/run), measured as
 *	  the other chains: HTTP steps per second.
 *	- Retries (--retry-workflows): the chain again, wrapped in a df.retry
 *	  that never has to retry, then the plain chain once more: the wrapped
 *	  chain's steps/s over the mean of the two plain runs around it (so
 *	  that the tables' growth between phases does not count), then
 *	  chains of --retry-steps SQL steps, each in a df.retry with a 10 ms
 *	  back-off, that fail at random half of the time (a shared sequence:
 *	  odd values fail, so a step fails once on average): retried steps per
 *	  second (the retries counted from the history) and steps per second.
 *	- Limits (--limit-workflows): the chain with each step under a
 *	  df.limit with a max_concurrent it never reaches, with a key per
 *	  instance (no two instances share a key's row lock) and with one key
 *	  for all, and (the floor of any wrapper node around each step) with
 *	  each step in a df.catch whose handler never runs, in three rounds
 *	  with a plain chain: the medians, and the
 *	  median of each round's time per step over its plain chain's.
 *	- Tracing (--otel-url): the chain with the OTLP export on (the HTTP
 *	  worker posts its spans to test/otlp_receiver.pl at URL, set with
 *	  ALTER SYSTEM and a reload; its cursor first moved to the end of the
 *	  history, so that it measures the steady state, not the backlog of
 *	  the phases before), between two runs with it off: the
 *	  traced chain's steps/s over the mean of the two untraced ones, the
 *	  spans exported and the events still to export when it ended.
 *	- Keyed locks (--lock-workflows): the chain with each step
 *	  inside a df.with_lock of a key of its own (uncontended), in the
 *	  rounds of the limits (each round's plain chain then runs with
 *	  --lock-workflows instances when --limit-workflows is 0): the median
 *	  steps/s and the median of each round's time per step over its plain
 *	  chain's, the cost of a step under a lock in plain steps (the target
 *	  is 1.3 at most).
 *	- Commit rate: pgbench -n -f <one INSERT> at the executors' concurrency
 *	  (the executors are the sessions that commit steps) and at the
 *	  clients' one, on the same server, in the same run; and the same
 *	  INSERT 32 to a transaction at the executors' concurrency (rows/s),
 *	  beside a chain whose steps are that INSERT.
 *
 * It changes the target database: it creates the tables bench_log and
 * bench_commit and leaves finished instances behind.  Run it against a
 * throwaway cluster (bench/run does) with pg_durable.enable_superuser_
 * instances = on, or as an ordinary role that may use schema df.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define PGDB_VERSION "1.0"
#define PGDB_ERRLEN 512
#define PGDB_MAXROWS 128
#define PGDB_ID_LEN 8
#define PGDB_MAX_WIDTHS 8

/*
 * The most nodes a workflow may have (DF_MAX_NODES in src/graph/graph.h,
 * the reference's limit).  A fan-out of w branches, a balanced tree of
 * binary JOINs, has 2w - 1 nodes.
 */
#define PGDB_MAX_NODES 10000	/* pg_durable.max_nodes's default */

typedef struct PgdbOptions
{
	const char *host;
	const char *port;
	const char *user;
	const char *dbname;
	int			clients;		/* concurrent client connections */
	int			chain_workflows;
	int			chain_steps;
	int			fanout_workflows;
	int			fanout_width;
	int			workflows;		/* one-step workflows */
	int			latency_workflows;
	int			event_count;	/* events of the event phase */
	int			latency_steps;
	const char *pgbench;		/* NULL: do not run pgbench */
	int			pgbench_seconds;
	int			statements;		/* top pg_stat_statements entries per phase */
	int			timeout;		/* seconds df.await_instance waits */
	const char *http_url;		/* base URL of test/http_server.pl, or NULL */
	int			http_workflows;
	int			http_steps;
	int			retry_workflows; /* chains of flaky steps in df.retry */
	int			retry_steps;
	int			limit_workflows; /* chains of steps each under a df.limit */
	const char *otel_url;		/* test/otlp_receiver.pl, or NULL */
	int			lock_workflows; /* chains of steps each under df.with_lock */
	int			widths[PGDB_MAX_WIDTHS];	/* one fan-out of each width */
	int			nwidths;
	int			map_rows;		/* df.map over this many rows vs a JOIN as wide */
	int			lanes_rows;		/* df.map in lanes mode over this many rows */
	int			lanes;			/* ... with this many lanes */
	int			http_map_items; /* df.map of this many GETs (with http_url) */
	int			max_nodes;		/* pg_durable.max_nodes set for every connection */
	bool		verbose;
} PgdbOptions;

typedef struct PgdbRow
{
	char		label[80];
	char		value[32];
	char		unit[24];
} PgdbRow;

/* The handle: options, control connection, error, collected figures. */
typedef struct Pgdb
{
	PgdbOptions opt;
	int			err;			/* 0, or 1 after an error; errstr says what */
	char		errstr[PGDB_ERRLEN];
	PGconn	   *conn;
	int			executors;
	char		server_version[32];
	char		sync_commit[16];
	char		fsync[16];
	bool		have_pgss;
	bool		await_call;		/* wait with CALL df.await, not the function */
	PgdbRow		rows[PGDB_MAXROWS];
	int			nrows;
	char	   *pgss_report;	/* appended text, or NULL */
	size_t		pgss_len;
} Pgdb;

/* One client thread of a phase. */
typedef struct PgdbClient
{
	Pgdb	   *b;
	PGconn	   *conn;
	const char *graph;
	int			first;			/* index of its first workflow */
	int			count;
	bool		sequential;		/* await each workflow before the next */
	char	  (*ids)[PGDB_ID_LEN + 1];
	int64_t    *commit_us;		/* CLOCK_REALTIME when df.start returned */
	double		deadline;		/* mono_now() after which awaits wait 1 s */
	int			failed;
	int			stuck;			/* still unfinished at the deadline */
	char		first_error[PGDB_ERRLEN];
	int			err;
	char		errstr[PGDB_ERRLEN];
} PgdbClient;

/* What a phase cost the server, per step: commits, XIDs, WAL bytes. */
typedef struct PgdbCost
{
	double		commits;
	double		xids;
	double		wal;
	double		batch_mean;		/* tasks per executor transaction */
	double		batch_p99;
	double		task_rows;		/* df_internal.tasks rows inserted */
	double		join_rows;		/* df_internal.joins rows inserted */
	double		node_updates;	/* df.nodes rows updated */
	double		node_key_reads; /* df.nodes_pkey entries read */
} PgdbCost;

typedef struct PgdbPhase
{
	double		seconds;		/* first start to last completion */
	int			failed;
	int			stuck;
	int			completed;
	char		first_error[PGDB_ERRLEN];
} PgdbPhase;

/* ---------------------------------------------------------------- utils */

static void
pgdb_set_error(int *err, char *errstr, const char *fmt,...)
{
	va_list		ap;

	*err = 1;
	va_start(ap, fmt);
	vsnprintf(errstr, PGDB_ERRLEN, fmt, ap);
	va_end(ap);
	/* libpq messages end in a newline */
	errstr[strcspn(errstr, "\n")] = '\0';
}

static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t
real_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
say(Pgdb *b, const char *fmt,...)
{
	va_list		ap;

	if (!b->opt.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "pgd_bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* A growing string, for the DSL expressions. */
typedef struct PgdbBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} PgdbBuf;

static void
buf_append(PgdbBuf *s, const char *fmt,...)
{
	va_list		ap;
	int			n;

	for (;;)
	{
		size_t		room = s->cap - s->len;

		va_start(ap, fmt);
		n = vsnprintf(s->data ? s->data + s->len : NULL, s->data ? room : 0, fmt, ap);
		va_end(ap);
		if (s->data && (size_t) n < room)
		{
			s->len += n;
			return;
		}
		s->cap = (s->cap + n + 1) * 2;
		s->data = realloc(s->data, s->cap);
		if (s->data == NULL)
		{
			fprintf(stderr, "pgd_bench: out of memory\n");
			exit(1);
		}
	}
}

static void
add_row(Pgdb *b, const char *unit, const char *value, const char *fmt,...)
{
	PgdbRow    *r;
	va_list		ap;

	if (b->nrows == PGDB_MAXROWS)
	{
		fprintf(stderr, "%s: more than %d figures: the rest are not printed\n",
				"pgd_bench", PGDB_MAXROWS);
		return;
	}
	r = &b->rows[b->nrows++];
	va_start(ap, fmt);
	vsnprintf(r->label, sizeof(r->label), fmt, ap);
	va_end(ap);
	snprintf(r->value, sizeof(r->value), "%s", value);
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
}

static const char *
fmt_num(char *out, double v)
{
	if (isnan(v))
		snprintf(out, 32, "n/a");
	else if (v >= 100)
		snprintf(out, 32, "%.0f", v);
	else if (v >= 10)
		snprintf(out, 32, "%.1f", v);
	else
		snprintf(out, 32, "%.2f", v);
	return out;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double
percentile(const double *v, int n, double p)
{
	int			i;

	if (n == 0)
		return NAN;
	i = (int) ceil(p / 100.0 * n) - 1;
	if (i < 0)
		i = 0;
	if (i >= n)
		i = n - 1;
	return v[i];
}

/* ----------------------------------------------------------- connections */

static PGconn *
pgdb_connect(Pgdb *b, int *err, char *errstr)
{
	char		options[64];
	const char *keys[] = {"host", "port", "user", "dbname", "application_name", "options", NULL};
	const char *vals[] = {b->opt.host, b->opt.port, b->opt.user, b->opt.dbname, "pgd_bench", options, NULL};
	PGconn	   *conn;

	/* a fan-out wider than the default node limit needs it raised (superuser) */
	if (b->opt.max_nodes > PGDB_MAX_NODES)
		snprintf(options, sizeof(options), "-c pg_durable.max_nodes=%d", b->opt.max_nodes);
	else
		options[0] = '\0';
	conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		pgdb_set_error(err, errstr, "could not connect: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* Run a command that returns nothing we need; false (and errstr) on error. */
static bool
exec_ok(PGconn *conn, const char *sql, int *err, char *errstr)
{
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		pgdb_set_error(err, errstr, "%s: %s", sql, PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	PQclear(res);
	return true;
}

/* First column of the first row of a query, malloc'd, or NULL on error. */
static char *
query_value(Pgdb *b, const char *sql)
{
	PGresult   *res = PQexec(b->conn, sql);
	char	   *v;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1)
	{
		pgdb_set_error(&b->err, b->errstr, "%s: %s", sql, PQresultErrorMessage(res));
		PQclear(res);
		return NULL;
	}
	v = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* The CPU seconds (user + system, from /proc) process pid has used; NAN if unknown. */
static double
proc_cpu(int pid)
{
	char		path[64];
	char		line[1024];
	FILE	   *f;
	double		cpu = NAN;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return NAN;
	if (fgets(line, sizeof(line), f) != NULL)
	{
		/* after the command's ")": fields 3.. ; utime and stime are 14 and 15 */
		char	   *p = strrchr(line, ')');
		unsigned long long ut,
					st;

		if (p != NULL &&
			sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
			cpu = (double) (ut + st) / (double) sysconf(_SC_CLK_TCK);
	}
	fclose(f);
	return cpu;
}

/*
 * The CPU of the server's processes (those of pg_stat_activity) over a
 * phase: start() records what each has used, used() what they used since
 * (the processes still there); the HTTP worker, which runs the OTLP
 * export, apart.  NAN when /proc cannot be read (another machine).
 */
#define PGDB_MAX_PIDS 512
typedef struct PgdbCpu
{
	int			n;
	int			http;			/* index of the HTTP worker, -1 */
	int			pid[PGDB_MAX_PIDS];
	double		cpu0[PGDB_MAX_PIDS];
} PgdbCpu;

static void
cpu_start(Pgdb *b, PgdbCpu *c)
{
	PGresult   *res = PQexec(b->conn, "SELECT pid, backend_type = 'pg_durable http worker' "
								 "FROM pg_stat_activity");

	c->n = 0;
	c->http = -1;
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && c->n < PGDB_MAX_PIDS; i++)
		{
			c->pid[c->n] = atoi(PQgetvalue(res, i, 0));
			c->cpu0[c->n] = proc_cpu(c->pid[c->n]);
			if (PQgetvalue(res, i, 1)[0] == 't')
				c->http = c->n;
			c->n++;
		}
	PQclear(res);
}

/* CPU seconds since cpu_start: of every process (*all), of the HTTP worker (returned) */
static double
cpu_used(PgdbCpu *c, double *all)
{
	double		http = NAN;

	*all = 0;
	for (int i = 0; i < c->n; i++)
	{
		double		d = proc_cpu(c->pid[i]) - c->cpu0[i];

		if (isnan(d))
			continue;
		*all += d;
		if (i == c->http)
			http = d;
	}
	if (c->n == 0)
		*all = NAN;
	return http;
}

/* pg_durable.otel_endpoint = url (NULL: off), reloaded; the HTTP worker reads it at once. */
static bool
set_otel_endpoint(Pgdb *b, const char *url)
{
	char		sql[1024];

	if (url)
		snprintf(sql, sizeof(sql), "ALTER SYSTEM SET pg_durable.otel_endpoint = '%s'", url);
	else
		snprintf(sql, sizeof(sql), "ALTER SYSTEM RESET pg_durable.otel_endpoint");
	if (!exec_ok(b->conn, sql, &b->err, b->errstr))
		return false;
	if (!exec_ok(b->conn, "SELECT pg_reload_conf()", &b->err, b->errstr))
		return false;
	usleep(500 * 1000);
	return true;
}

/* --------------------------------------------------------------- graphs */

/*
 * A DSL expression that joins leaves lo..hi-1 with op, as a balanced tree:
 * a chain of 1,000 steps nests 10 levels deep, not 1,000.
 */
static void
balanced(PgdbBuf *s, const char *op, int lo, int hi, void (*leaf) (PgdbBuf *, int))
{
	int			mid;

	if (hi - lo == 1)
	{
		leaf(s, lo);
		return;
	}
	mid = lo + (hi - lo) / 2;
	buf_append(s, "(");
	balanced(s, op, lo, mid, leaf);
	buf_append(s, " %s ", op);
	balanced(s, op, mid, hi, leaf);
	buf_append(s, ")");
}

static void
noop_leaf(PgdbBuf *s, int k)
{
	(void) k;
	buf_append(s, "'SELECT 1'");
}

/* the statement pgbench runs for the commit rate */
#define BENCH_INSERT "INSERT INTO bench_commit VALUES (1, now())"

static void
insert_leaf(PgdbBuf *s, int k)
{
	(void) k;
	buf_append(s, "'%s'", BENCH_INSERT);
}

static void
log_leaf(PgdbBuf *s, int k)
{
	buf_append(s, "$s$INSERT INTO bench_log VALUES ('{sys_instance_id}', %d, clock_timestamp())$s$",
			   k + 1);
}

/* HTTP steps call the local test server's /echo (bench/run starts it). */
#define BREAKER_ROUNDS 3
static const char *http_leaf_url = NULL;

static void
http_leaf(PgdbBuf *s, int k)
{
	buf_append(s, "df.http($u$%s/echo?k=%d$u$, 'GET')", http_leaf_url, k + 1);
}

/*
 * The same call through a closed circuit breaker: the HTTP
 * node's config names breaker "bench" (what df.http(breaker => ...) builds).
 */
static void
http_breaker_leaf(PgdbBuf *s, int k)
{
	buf_append(s, "(SELECT jsonb_set(j, '{query}', to_jsonb(jsonb_set((j->>'query')::jsonb, "
			   "'{breaker}', '\"bench\"')::text))::text FROM (SELECT df.http($u$%s/echo?k=%d$u$, "
			   "'GET')::jsonb AS j) s)", http_leaf_url, k + 1);
}

/* A step that fails half of the time (odd values of a shared sequence), retried after 10 ms. */
static void
flaky_leaf(PgdbBuf *s, int k)
{
	(void) k;
	/* (not CASE ... THEN 1 / 0: the planner folds the constant and always fails) */
	buf_append(s, "df.retry($s$SELECT 1 / (nextval('bench_flaky') %% 2)::int$s$, "
			   "max_attempts => 0, initial_interval => '10 ms', jitter => 'none', "
			   "retry_on => '{sql:22012}')");
}

#define PGDB_LIMIT_ROUNDS 3

static double
median3(const double *v)
{
	double		a = v[0],
				b = v[1],
				c = v[2];

	if ((a <= b && b <= c) || (c <= b && b <= a))
		return b;
	if ((b <= a && a <= c) || (c <= a && a <= b))
		return a;
	return c;
}

/* A step under a df.limit that never makes it wait: a key of its instance's own. */
static void
limit_own_leaf(PgdbBuf *s, int k)
{
	(void) k;
	buf_append(s, "df.limit('SELECT 1', 'bench:{sys_instance_id}', 1000000)");
}

/* The floor of any wrapper node around each step: a df.catch whose handler never runs. */
static void
catch_leaf(PgdbBuf *s, int k)
{
	(void) k;
	buf_append(s, "df.catch('SELECT 1', 'SELECT 2')");
}

/* The same with one key for every instance (its row lock is shared). */
static void
limit_shared_leaf(PgdbBuf *s, int k)
{
	(void) k;
	buf_append(s, "df.limit('SELECT 1', 'bench', 1000000)");
}

/* A step under a keyed lock of its own: the key names the instance and the step. */
static void
lock_leaf(PgdbBuf *s, int k)
{
	buf_append(s, "df.with_lock('SELECT 1', ARRAY['{sys_instance_id}:%d'])", k + 1);
}

/* Wrap the whole graph in a df.retry (build_graph_in). */
static const char *graph_prefix = "";
static const char *graph_suffix = "";

/* The workflow's JSON, built by the server's own DSL; malloc'd, or NULL. */
static char *
build_graph(Pgdb *b, const char *op, int n, void (*leaf) (PgdbBuf *, int))
{
	PgdbBuf		s = {0};
	char	   *graph;

	buf_append(&s, "SELECT %s(", graph_prefix);
	balanced(&s, op, 0, n, leaf);
	buf_append(&s, ")%s::text", graph_suffix);
	graph = query_value(b, s.data);
	free(s.data);
	return graph;
}

/* --------------------------------------------------------------- phases */

static void
client_failed_instance(PgdbClient *c, const char *id, const char *status)
{
	const char *params[1] = {id};
	PGresult   *res;

	c->failed++;
	if (c->first_error[0])
		return;
	res = PQexecParams(c->conn,
					   "SELECT coalesce((SELECT error FROM df.nodes WHERE instance_id = $1 "
					   "AND error IS NOT NULL LIMIT 1), '')",
					   1, NULL, params, NULL, NULL, 0);
	snprintf(c->first_error, PGDB_ERRLEN, "instance %s is %s%s%s", id, status,
			 PQresultStatus(res) == PGRES_TUPLES_OK && PQgetvalue(res, 0, 0)[0] ? ": " : "",
			 PQresultStatus(res) == PGRES_TUPLES_OK ? PQgetvalue(res, 0, 0) : "");
	PQclear(res);
}

static bool
client_await(PgdbClient *c, int i)
{
	char		timeout[16];
	const char *params[2] = {c->ids[i], timeout};
	PGresult   *res;
	double		left = c->deadline - mono_now();

	snprintf(timeout, sizeof(timeout), "%d", left > 1 ? (int) ceil(left) : 1);
	res = PQexecPrepared(c->conn, "await", 2, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
		strstr(PQresultErrorMessage(res), "Timeout after") != NULL)
	{
		/* unfinished at the deadline: count it, report it, go on */
		if (c->stuck++ == 0 && !c->first_error[0])
			snprintf(c->first_error, PGDB_ERRLEN, "%s", PQresultErrorMessage(res));
		c->first_error[strcspn(c->first_error, "\n")] = '\0';
		PQclear(res);
		return true;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgdb_set_error(&c->err, c->errstr, "df.await_instance: %s", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "completed") != 0)
		client_failed_instance(c, c->ids[i], PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

static void *
client_main(void *arg)
{
	PgdbClient *c = arg;
	const char *params[1] = {c->graph};
	int			i;

	for (i = c->first; i < c->first + c->count; i++)
	{
		PGresult   *res = PQexecPrepared(c->conn, "start", 1, params, NULL, NULL, 0);

		c->commit_us[i] = real_now_us();
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			pgdb_set_error(&c->err, c->errstr, "df.start: %s", PQresultErrorMessage(res));
			PQclear(res);
			return NULL;
		}
		snprintf(c->ids[i], PGDB_ID_LEN + 1, "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		if (c->sequential && !client_await(c, i))
			return NULL;
	}
	if (!c->sequential)
		for (i = c->first; i < c->first + c->count; i++)
			if (!client_await(c, i))
				return NULL;
	return NULL;
}

/*
 * Elapsed time of a phase some of whose workflows never finished: from the
 * first df.start to the last completed_at (the start time of the finishing
 * transaction, so a step's duration early at most).
 */
static void
server_elapsed(Pgdb *b, char (*ids)[PGDB_ID_LEN + 1], int nflows, int64_t t0_us, PgdbPhase *out)
{
	PgdbBuf		arr = {0};
	const char *params[1];
	PGresult   *res;
	int			i;

	buf_append(&arr, "{");
	for (i = 0; i < nflows; i++)
		if (ids[i][0])
			buf_append(&arr, "%s%s", arr.len > 1 ? "," : "", ids[i]);
	buf_append(&arr, "}");
	params[0] = arr.data;
	res = PQexecParams(b->conn,
					   "SELECT count(*), (extract(epoch FROM max(completed_at)) * 1000000)::bigint "
					   "FROM df.instances WHERE id = ANY ($1::text[]) AND status = 'completed'",
					   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && !PQgetisnull(res, 0, 1))
	{
		out->completed = atoi(PQgetvalue(res, 0, 0));
		out->seconds = (strtoll(PQgetvalue(res, 0, 1), NULL, 10) - t0_us) / 1e6;
	}
	PQclear(res);
	free(arr.data);
}

/*
 * Start nflows copies of graph from nclients connections and wait for all
 * of them.  ids and commit_us (nflows + 1 entries) receive each instance.
 */
static bool
run_phase(Pgdb *b, const char *graph, int nflows, int nclients, bool sequential,
		  char (*ids)[PGDB_ID_LEN + 1], int64_t *commit_us, PgdbPhase *out)
{
	PgdbClient *cl = calloc(nclients, sizeof(PgdbClient));
	pthread_t  *th = calloc(nclients, sizeof(pthread_t));
	double		t0;
	int64_t		t0_us;
	int			i,
				next = 0;
	bool		ok = true;

	memset(out, 0, sizeof(*out));
	if (nclients > nflows)
		nclients = nflows;
	for (i = 0; i < nclients; i++)
	{
		PGresult   *res;

		cl[i].b = b;
		cl[i].graph = graph;
		cl[i].sequential = sequential;
		cl[i].ids = ids;
		cl[i].commit_us = commit_us;
		cl[i].first = next;
		cl[i].count = nflows / nclients + (i < nflows % nclients ? 1 : 0);
		next += cl[i].count;
		cl[i].conn = pgdb_connect(b, &b->err, b->errstr);
		if (cl[i].conn == NULL)
		{
			ok = false;
			nclients = i;
			break;
		}
		res = PQprepare(cl[i].conn, "start", "SELECT df.start($1)", 1, NULL);
		if (PQresultStatus(res) == PGRES_COMMAND_OK)
		{
			PQclear(res);
			res = PQprepare(cl[i].conn, "await",
							b->await_call ? "CALL df.await($1, $2::int)" :
							"SELECT df.await_instance($1, $2::int)", 2, NULL);
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			pgdb_set_error(&b->err, b->errstr, "prepare: %s", PQresultErrorMessage(res));
			ok = false;
		}
		PQclear(res);
		if (!ok)
		{
			nclients = i + 1;
			break;
		}
	}

	t0 = mono_now();
	t0_us = real_now_us();
	if (ok)
		for (i = 0; i < nclients; i++)
		{
			cl[i].deadline = t0 + b->opt.timeout;
			pthread_create(&th[i], NULL, client_main, &cl[i]);
		}
	for (i = 0; ok && i < nclients; i++)
		pthread_join(th[i], NULL);
	out->seconds = mono_now() - t0;

	for (i = 0; i < nclients; i++)
	{
		if (cl[i].err && !b->err)
		{
			b->err = 1;
			snprintf(b->errstr, PGDB_ERRLEN, "%s", cl[i].errstr);
		}
		out->failed += cl[i].failed;
		out->stuck += cl[i].stuck;
		if (cl[i].first_error[0] && !out->first_error[0])
			snprintf(out->first_error, PGDB_ERRLEN, "%s", cl[i].first_error);
		PQfinish(cl[i].conn);
	}
	free(cl);
	free(th);
	out->completed = nflows - out->failed - out->stuck;
	if (out->failed > 0 || out->stuck > 0)
	{
		fprintf(stderr, "pgd_bench: %d workflow(s) failed and %d did not finish within %d s; first: %s\n",
				out->failed, out->stuck, b->opt.timeout, out->first_error);
		/* the client waited for the deadline: time the completed ones by the server's clock */
		if (ok && !b->err)
			server_elapsed(b, ids, nflows, t0_us, out);
	}
	return ok && !b->err;
}

/* ------------------------------------------------- pg_stat_statements */

static void
pgss_reset(Pgdb *b)
{
	if (b->have_pgss && b->opt.statements > 0)
		exec_ok(b->conn, "SELECT pg_stat_statements_reset()", &b->err, b->errstr);
}

/* Append the statements that took the most time since the last reset. */
static void
pgss_collect(Pgdb *b, const char *phase)
{
	char		sql[1024];
	PGresult   *res;
	PgdbBuf		s = {0};
	int			i;

	if (!b->have_pgss || b->opt.statements <= 0)
		return;
	snprintf(sql, sizeof(sql),
			 "SELECT calls, round(total_exec_time::numeric, 0), "
			 "round((100 * total_exec_time / nullif(sum(total_exec_time) OVER (), 0))::numeric, 1), "
			 "round(mean_exec_time::numeric, 3), "
			 "left(regexp_replace(query, '\\s+', ' ', 'g'), 90) "
			 "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
			 "WHERE datname = current_database()) "
			 "ORDER BY total_exec_time DESC LIMIT %d", b->opt.statements);
	res = PQexec(b->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "pgd_bench: pg_stat_statements: %s", PQresultErrorMessage(res));
		PQclear(res);
		return;
	}
	if (b->pgss_report)
		buf_append(&s, "%s", b->pgss_report);
	buf_append(&s, "\nTop statements by execution time during: %s\n", phase);
	buf_append(&s, "%9s %9s %6s %9s  %s\n", "calls", "total ms", "%", "mean ms", "query");
	for (i = 0; i < PQntuples(res); i++)
		buf_append(&s, "%9s %9s %6s %9s  %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
				   PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), PQgetvalue(res, i, 4));
	PQclear(res);
	free(b->pgss_report);
	b->pgss_report = s.data;
}

/* ---------------------------------------------------------- the figures */

static bool
setup(Pgdb *b)
{
	char	   *v;

	if (!exec_ok(b->conn,
				 "SET client_min_messages = warning;"
				 "CREATE TABLE IF NOT EXISTS bench_log (instance_id text, k int, ts timestamptz);"
				 "CREATE TABLE IF NOT EXISTS bench_commit (v int, ts timestamptz);"
				 "CREATE SEQUENCE IF NOT EXISTS bench_flaky;"
				 "TRUNCATE bench_log, bench_commit", &b->err, b->errstr))
		return false;
	if ((v = query_value(b, "SHOW server_version")) == NULL)
		return false;
	snprintf(b->server_version, sizeof(b->server_version), "%s", v);
	free(v);
	if ((v = query_value(b, "SHOW synchronous_commit")) == NULL)
		return false;
	snprintf(b->sync_commit, sizeof(b->sync_commit), "%s", v);
	free(v);
	if ((v = query_value(b, "SHOW fsync")) == NULL)
		return false;
	snprintf(b->fsync, sizeof(b->fsync), "%s", v);
	free(v);
	if ((v = query_value(b, "SELECT count(*) FROM pg_stat_activity "
						 "WHERE application_name = 'pg_durable executor'")) == NULL)
		return false;
	b->executors = atoi(v);
	free(v);
	if (b->executors == 0)
	{
		pgdb_set_error(&b->err, b->errstr,
					   "no pg_durable executor is running in this cluster; check "
					   "shared_preload_libraries and pg_durable.database");
		return false;
	}
	if ((v = query_value(b, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'")) == NULL)
		return false;
	b->have_pgss = atoi(v) > 0;
	free(v);
	return true;
}

/*
 * pgbench -n -f <INSERT> at the given concurrency, rows INSERTs to a
 * transaction; rows inserted per second (commits per second for one), or
 * NAN.
 */
static double
run_pgbench(Pgdb *b, int clients, int rows)
{
	char		script[] = "/tmp/pgd_bench_XXXXXX";
	char		nclients[16],
				secs[16];
	const char *argv[24];
	int			argc = 0,
				fd,
				pipefd[2],
				status;
	pid_t		pid;
	PgdbBuf		out = {0};
	char		chunk[4096];
	ssize_t		n;
	const char *tps;
	PgdbBuf		body = {0};

	if (rows > 1)
		buf_append(&body, "BEGIN;\n");
	for (int k = 0; k < rows; k++)
		buf_append(&body, "%s;\n", BENCH_INSERT);
	if (rows > 1)
		buf_append(&body, "COMMIT;\n");
	fd = mkstemp(script);
	if (fd < 0 || write(fd, body.data, strlen(body.data)) != (ssize_t) strlen(body.data))
	{
		fprintf(stderr, "pgd_bench: could not write the pgbench script: %s\n", strerror(errno));
		free(body.data);
		return NAN;
	}
	free(body.data);
	close(fd);
	snprintf(nclients, sizeof(nclients), "%d", clients);
	snprintf(secs, sizeof(secs), "%d", b->opt.pgbench_seconds);
	argv[argc++] = b->opt.pgbench;
	argv[argc++] = "-n";
	argv[argc++] = "-f";
	argv[argc++] = script;
	argv[argc++] = "-c";
	argv[argc++] = nclients;
	argv[argc++] = "-j";
	argv[argc++] = nclients;
	argv[argc++] = "-T";
	argv[argc++] = secs;
	if (b->opt.host)
	{
		argv[argc++] = "-h";
		argv[argc++] = b->opt.host;
	}
	if (b->opt.port)
	{
		argv[argc++] = "-p";
		argv[argc++] = b->opt.port;
	}
	if (b->opt.user)
	{
		argv[argc++] = "-U";
		argv[argc++] = b->opt.user;
	}
	if (b->opt.dbname)
		argv[argc++] = b->opt.dbname;
	argv[argc] = NULL;

	say(b, "pgbench: %d clients, %d INSERT(s) a transaction, %s s", clients, rows, secs);
	if (pipe(pipefd) != 0 || (pid = fork()) < 0)
	{
		fprintf(stderr, "pgd_bench: could not run pgbench: %s\n", strerror(errno));
		unlink(script);
		return NAN;
	}
	if (pid == 0)
	{
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execvp(argv[0], (char *const *) argv);
		fprintf(stderr, "could not execute %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], chunk, sizeof(chunk) - 1)) > 0)
	{
		chunk[n] = '\0';
		buf_append(&out, "%s", chunk);
	}
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	unlink(script);

	tps = out.data ? strstr(out.data, "tps = ") : NULL;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || tps == NULL)
	{
		fprintf(stderr, "pgd_bench: pgbench failed:\n%s\n", out.data ? out.data : "");
		free(out.data);
		return NAN;
	}
	{
		double		v = strtod(tps + 6, NULL);

		free(out.data);
		return v * rows;
	}
}

/*
 * The server's counters: commits of this database, the cluster's WAL
 * position, the next XID, and the table statistics of the engine's writes.  Backends publish their counts at most
 * once a second, and an idle executor only when its latch wakes it, so the
 * configuration reload (which wakes every backend) and a pause come first,
 * as in bench/peers.  XIDs need no flush; they count write transactions and
 * subtransactions alike.
 */
static bool
counters(Pgdb *b, PgdbCost *out)
{
	PGresult   *res;

	res = PQexec(b->conn, "SELECT pg_reload_conf()");
	PQclear(res);
	usleep(1300 * 1000);
	res = PQexec(b->conn,
				 "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), "
				 "pg_current_wal_lsn() - '0/0', "
				 "pg_snapshot_xmax(pg_current_snapshot())::text::bigint, "
				 "(SELECT n_tup_ins FROM pg_stat_all_tables WHERE relid = 'df_internal.tasks'::regclass), "
				 "(SELECT n_tup_ins FROM pg_stat_all_tables WHERE relid = 'df_internal.joins'::regclass), "
				 "(SELECT n_tup_upd FROM pg_stat_all_tables WHERE relid = 'df.nodes'::regclass), "
				 "(SELECT idx_tup_read FROM pg_stat_all_indexes WHERE indexrelid = 'df.nodes_pkey'::regclass)");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgdb_set_error(&b->err, b->errstr, "counters: %s", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	out->commits = atof(PQgetvalue(res, 0, 0));
	out->wal = atof(PQgetvalue(res, 0, 1));
	out->xids = atof(PQgetvalue(res, 0, 2));
	out->task_rows = atof(PQgetvalue(res, 0, 3));
	out->join_rows = atof(PQgetvalue(res, 0, 4));
	out->node_updates = atof(PQgetvalue(res, 0, 5));
	out->node_key_reads = atof(PQgetvalue(res, 0, 6));
	PQclear(res);
	return true;
}

/*
 * The executors' batch sizes (df_internal.batch_sizes(), counts since the
 * server started): batch_sizes_mark keeps them, batch_sizes_since returns
 * the mean and p99 of the batches committed after the mark.  NAN when the
 * server has no such function or no batch was committed.
 */
static void
batch_sizes_mark(Pgdb *b)
{
	PGresult   *res = PQexec(b->conn,
							 "DROP TABLE IF EXISTS pg_temp.pgdb_batches; "
							 "CREATE TEMP TABLE pgdb_batches AS SELECT * FROM df_internal.batch_sizes()");

	PQclear(res);
}

static void
batch_sizes_since(Pgdb *b, PgdbCost *out)
{
	PGresult   *res = PQexec(b->conn,
							 "WITH d AS (SELECT n.tasks, n.batches - coalesce(o.batches, 0) AS batches "
							 "FROM df_internal.batch_sizes() n LEFT JOIN pg_temp.pgdb_batches o USING (tasks)), "
							 "c AS (SELECT tasks, batches, sum(batches) OVER (ORDER BY tasks) AS cum, "
							 "sum(batches) OVER () AS total FROM d WHERE batches > 0) "
							 "SELECT sum(tasks * batches)::float8 / sum(batches), "
							 "min(tasks) FILTER (WHERE cum >= 0.99 * total) FROM c");

	out->batch_mean = out->batch_p99 = NAN;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!PQgetisnull(res, 0, 0))
	{
		out->batch_mean = atof(PQgetvalue(res, 0, 0));
		out->batch_p99 = atof(PQgetvalue(res, 0, 1));
	}
	PQclear(res);
}

static bool throughput_phase_cost(Pgdb *b, const char *name, const char *op, int width,
								  int nflows, void (*leaf) (PgdbBuf *, int),
								  double *steps_per_s, double *flows_per_s, PgdbCost *cost);

static bool
throughput_phase_of(Pgdb *b, const char *name, const char *op, int width, int nflows,
					void (*leaf) (PgdbBuf *, int), double *steps_per_s, double *flows_per_s)
{
	return throughput_phase_cost(b, name, op, width, nflows, leaf, steps_per_s, flows_per_s, NULL);
}

static bool
throughput_phase_cost(Pgdb *b, const char *name, const char *op, int width, int nflows,
					  void (*leaf) (PgdbBuf *, int), double *steps_per_s, double *flows_per_s,
					  PgdbCost *cost)
{
	PgdbCost	before = {0},
				after = {0};
	char	   *graph = build_graph(b, op, width, leaf);
	char		(*ids)[PGDB_ID_LEN + 1];
	int64_t    *commit_us;
	PgdbPhase	ph;
	bool		ok;

	if (graph == NULL)
		return false;
	ids = calloc(nflows + 1, sizeof(*ids));
	commit_us = calloc(nflows + 1, sizeof(int64_t));
	say(b, "%s: %d workflows of %d step(s), %d clients", name, nflows, width, b->opt.clients);
	pgss_reset(b);
	if (cost && !counters(b, &before))
		return false;
	if (cost)
		batch_sizes_mark(b);
	ok = run_phase(b, graph, nflows, b->opt.clients, false, ids, commit_us, &ph);
	if (ok && cost)
	{
		double		steps = (double) width * (ph.completed > 0 ? ph.completed : 1);

		if (!counters(b, &after))
			return false;
		/* df.start and the instance's end are counted in, as in bench/peers */
		cost->commits = (after.commits - before.commits) / steps;
		cost->xids = (after.xids - before.xids) / steps;
		cost->wal = (after.wal - before.wal) / steps;
		cost->task_rows = (after.task_rows - before.task_rows) / steps;
		cost->join_rows = (after.join_rows - before.join_rows) / steps;
		cost->node_updates = (after.node_updates - before.node_updates) / steps;
		cost->node_key_reads = after.node_updates > before.node_updates ?
			(after.node_key_reads - before.node_key_reads) /
			(after.node_updates - before.node_updates) : NAN;
		batch_sizes_since(b, cost);
	}
	if (ok)
		pgss_collect(b, name);
	*steps_per_s = ok && ph.completed > 0 ? (double) width * ph.completed / ph.seconds : NAN;
	*flows_per_s = ok && ph.completed > 0 ? ph.completed / ph.seconds : NAN;
	say(b, "%s: %.2f s", name, ph.seconds);
	if (ok && ph.stuck + ph.failed > 0)
	{
		char		v[32];

		snprintf(v, sizeof(v), "%d", ph.stuck);
		add_row(b, "workflows", v, "%s: unfinished after %d s (of %d)", name, b->opt.timeout, nflows);
		snprintf(v, sizeof(v), "%d", ph.failed);
		if (ph.failed)
			add_row(b, "workflows", v, "%s: failed (of %d)", name, nflows);
	}
	free(graph);
	free(ids);
	free(commit_us);
	return ok;
}

static bool
throughput_phase(Pgdb *b, const char *name, const char *op, int width, int nflows,
				 double *steps_per_s, double *flows_per_s)
{
	return throughput_phase_of(b, name, op, width, nflows, noop_leaf, steps_per_s, flows_per_s);
}

typedef struct PgdbIdTime
{
	char		id[PGDB_ID_LEN + 1];
	int64_t		us;
} PgdbIdTime;

static int
cmp_id(const void *a, const void *b)
{
	return strcmp(((const PgdbIdTime *) a)->id, ((const PgdbIdTime *) b)->id);
}

/* Latency figures from the bench_log rows the steps wrote. */
static bool
latency_phase(Pgdb *b, int nclients, const char *label)
{
	int			nflows = b->opt.latency_workflows;
	int			nsteps = b->opt.latency_steps;
	char	   *graph;
	char		(*ids)[PGDB_ID_LEN + 1];
	int64_t    *commit_us;
	PgdbIdTime *starts;
	double	   *first,
			   *next;
	int			nfirst = 0,
				nnext = 0,
				i;
	PgdbPhase	ph;
	PGresult   *res;
	char		v[32];

	if (nflows <= 0 || nsteps <= 0)
		return true;
	if (!exec_ok(b->conn, "TRUNCATE bench_log", &b->err, b->errstr))
		return false;
	graph = build_graph(b, "~>", nsteps, log_leaf);
	if (graph == NULL)
		return false;
	ids = calloc(nflows + 1, sizeof(*ids));
	commit_us = calloc(nflows + 1, sizeof(int64_t));
	say(b, "latency: %d workflows of %d steps, %d client(s)", nflows, nsteps, nclients);
	if (!run_phase(b, graph, nflows, nclients, true, ids, commit_us, &ph))
		return false;
	free(graph);
	if (ph.stuck + ph.failed > 0)
	{
		snprintf(v, sizeof(v), "%d", ph.stuck);
		add_row(b, "workflows", v, "latency (%s): unfinished after %d s (of %d)", label,
				b->opt.timeout, nflows);
	}

	starts = calloc(nflows, sizeof(PgdbIdTime));
	for (i = 0; i < nflows; i++)
	{
		memcpy(starts[i].id, ids[i], sizeof(starts[i].id));
		starts[i].us = commit_us[i];
	}
	qsort(starts, nflows, sizeof(PgdbIdTime), cmp_id);

	res = PQexec(b->conn, "SELECT instance_id, k, (extract(epoch FROM ts) * 1000000)::bigint "
				 "FROM bench_log ORDER BY instance_id, k");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgdb_set_error(&b->err, b->errstr, "reading bench_log: %s", PQresultErrorMessage(res));
		PQclear(res);
		return false;
	}
	first = calloc(PQntuples(res) + 1, sizeof(double));
	next = calloc(PQntuples(res) + 1, sizeof(double));
	for (i = 0; i < PQntuples(res); i++)
	{
		const char *id = PQgetvalue(res, i, 0);
		int			k = atoi(PQgetvalue(res, i, 1));
		int64_t		ts = strtoll(PQgetvalue(res, i, 2), NULL, 10);

		if (k == 1)
		{
			PgdbIdTime	key,
					   *hit;

			snprintf(key.id, sizeof(key.id), "%s", id);
			hit = bsearch(&key, starts, nflows, sizeof(PgdbIdTime), cmp_id);
			if (hit)
				first[nfirst++] = (ts - hit->us) / 1000.0;
		}
		else if (i > 0 && strcmp(PQgetvalue(res, i - 1, 0), id) == 0 &&
				 atoi(PQgetvalue(res, i - 1, 1)) == k - 1)
			next[nnext++] = (ts - strtoll(PQgetvalue(res, i - 1, 2), NULL, 10)) / 1000.0;
	}
	PQclear(res);
	qsort(first, nfirst, sizeof(double), cmp_double);
	qsort(next, nnext, sizeof(double), cmp_double);

	add_row(b, "ms", fmt_num(v, percentile(first, nfirst, 50)), "start-to-first-step p50 (%s)", label);
	add_row(b, "ms", fmt_num(v, percentile(first, nfirst, 99)), "start-to-first-step p99 (%s)", label);
	add_row(b, "ms", fmt_num(v, percentile(next, nnext, 50)), "step-to-step p50 (%s)", label);
	add_row(b, "ms", fmt_num(v, percentile(next, nnext, 99)), "step-to-step p99 (%s)", label);
	if (nfirst < ph.completed || nnext < ph.completed * (nsteps - 1))
		fprintf(stderr, "pgd_bench: latency (%s): %d of %d first steps and %d of %d step pairs logged\n",
				label, nfirst, nflows, nnext, nflows * (nsteps - 1));
	free(first);
	free(next);
	free(starts);
	free(ids);
	free(commit_us);
	return true;
}

/*
 * Commits, XIDs and WAL bytes per step of a phase, the sizes of the
 * executors' batches (tasks per transaction: steps, and the start, timer
 * and deliver tasks among them), and the rows the engine wrote per step
 * (task rows, JOIN counter rows, node updates) with the entries of
 * df.nodes' primary key read per node update: how many rows a batch keeps
 * in memory instead, and whether a node write reads only its own node.
 */
static void
cost_rows(Pgdb *b, const char *name, const PgdbCost *c)
{
	char		v[32];

	add_row(b, "tasks", fmt_num(v, c->batch_mean), "%s: batch size, mean", name);
	add_row(b, "tasks", fmt_num(v, c->batch_p99), "%s: batch size, p99", name);
	add_row(b, "", fmt_num(v, c->commits), "%s: commits per step", name);
	add_row(b, "", fmt_num(v, c->xids), "%s: XIDs per step", name);
	add_row(b, "bytes", fmt_num(v, c->wal), "%s: WAL per step", name);
	add_row(b, "rows", fmt_num(v, c->task_rows), "%s: task rows inserted per step", name);
	add_row(b, "rows", fmt_num(v, c->join_rows), "%s: JOIN counter rows inserted per step", name);
	add_row(b, "rows", fmt_num(v, c->node_updates), "%s: node row updates per step", name);
	add_row(b, "entries", fmt_num(v, c->node_key_reads),
			"%s: df.nodes_pkey entries read per node update", name);
}

/*
 * One fan-out of each width, alone on the server: total seconds from
 * df.start to its completion, and milliseconds per branch.  A linear
 * engine keeps the time per branch flat as the width grows.
 * Widths whose graph is over the node limit are reported as not run.
 */
static bool
width_phases(Pgdb *b)
{
	PgdbOptions *o = &b->opt;
	double		first_per_branch = NAN,
				last_per_branch = NAN;
	int			first_width = 0,
				last_width = 0;
	int			saved_timeout = o->timeout;
	int			k;

	for (k = 0; k < o->nwidths; k++)
	{
		int			w = o->widths[k];
		char		name[48];
		char		v[32];
		char	   *graph;
		char		ids[2][PGDB_ID_LEN + 1];
		int64_t		commit_us[2];
		PgdbPhase	ph;
		bool		ok;

		if (2 * (long) w - 1 > o->max_nodes)
		{
			add_row(b, "", "not run", "width %d: %d nodes, over the %d-node limit",
					w, 2 * w - 1, o->max_nodes);
			continue;
		}
		graph = build_graph(b, "&", w, noop_leaf);
		if (graph == NULL)
			return false;
		snprintf(name, sizeof(name), "width %d", w);
		say(b, "%s: one fan-out of %d branches", name, w);
		/* an unfinished fan-out is reported, not awaited forever */
		o->timeout = saved_timeout > w / 10 ? saved_timeout : w / 10;
		pgss_reset(b);
		memset(ids, 0, sizeof(ids));
		/*
		 * Waited for by CALL df.await, which holds no snapshot while it
		 * waits: df.await_instance's statement keeps the xmin horizon
		 * where it was for the whole fan-out, no entry the engine deletes
		 * meanwhile can be removed or skipped, and the looks at the
		 * instance's inbox walk them all (quadratic: t/042, README
		 * Performance)
		 */
		b->await_call = true;
		ok = run_phase(b, graph, 1, 1, false, ids, commit_us, &ph);
		b->await_call = false;
		o->timeout = saved_timeout;
		free(graph);
		if (!ok)
			return false;
		pgss_collect(b, name);
		if (ph.completed != 1)
		{
			add_row(b, "", ph.stuck ? "unfinished" : "failed", "width %d: %s", w,
					ph.first_error[0] ? ph.first_error : "did not complete");
			continue;
		}
		say(b, "%s: %.2f s", name, ph.seconds);
		add_row(b, "s", fmt_num(v, ph.seconds), "width %d: one fan-out, start to completion", w);
		add_row(b, "ms/branch", fmt_num(v, 1000.0 * ph.seconds / w), "width %d: time per branch", w);
		if (first_width == 0)
		{
			first_width = w;
			first_per_branch = ph.seconds / w;
		}
		last_width = w;
		last_per_branch = ph.seconds / w;
	}
	if (last_width > first_width)
	{
		char		v[32];

		add_row(b, "", fmt_num(v, last_per_branch / first_per_branch),
				"time per branch, width %d / width %d", last_width, first_width);
	}
	return true;
}

/* One run of graph alone on the server: seconds from df.start to completion, or NAN. */
static double
single_run(Pgdb *b, const char *name, const char *graph, int width)
{
	PgdbOptions *o = &b->opt;
	int			saved_timeout = o->timeout;
	char		ids[2][PGDB_ID_LEN + 1];
	int64_t		commit_us[2];
	PgdbPhase	ph;
	bool		ok;

	say(b, "%s", name);
	o->timeout = saved_timeout > width / 10 ? saved_timeout : width / 10;
	memset(ids, 0, sizeof(ids));
	pgss_reset(b);
	ok = run_phase(b, graph, 1, 1, false, ids, commit_us, &ph);
	o->timeout = saved_timeout;
	if (ok)
		pgss_collect(b, name);
	if (!ok || ph.completed != 1)
	{
		add_row(b, "", ph.stuck ? "unfinished" : "failed", "%s: %s", name,
				ph.first_error[0] ? ph.first_error : "did not complete");
		return NAN;
	}
	return ph.seconds;
}

/*
 * Dynamic fan-out: one df.map over map_rows rows, each row's
 * step a 'SELECT 1', against one static JOIN of as many 'SELECT 1'
 * branches, alone on the server, MAP_RUNS runs of each (alternating), the
 * median.  Steps/s counts the fan-out's steps (the MAP's query is one
 * more step, not counted).  The target: the map within 1.2x of the JOIN.
 */
#define MAP_RUNS 5

static bool
map_phases(Pgdb *b)
{
	int			rows = b->opt.map_rows;
	char	   *join = build_graph(b, "&", rows, noop_leaf);
	char	   *map;
	char		sql[256];
	double		tj[MAP_RUNS], tm[MAP_RUNS];
	char		v[32];
	char		name[64];

	if (join == NULL)
		return false;
	snprintf(sql, sizeof(sql),
			 "SELECT df.map('SELECT g AS n FROM generate_series(1, %d) g', 'SELECT 1')::text",
			 rows);
	if ((map = query_value(b, sql)) == NULL)
		return false;
	for (int r = 0; r < MAP_RUNS; r++)
	{
		snprintf(name, sizeof(name), "map: JOIN of %d branches, run %d", rows, r + 1);
		tj[r] = single_run(b, name, join, rows);
		snprintf(name, sizeof(name), "map: df.map over %d rows, run %d", rows, r + 1);
		tm[r] = single_run(b, name, map, rows);
		if (isnan(tj[r]) || isnan(tm[r]))
		{
			free(join);
			free(map);
			return true;
		}
	}
	free(join);
	free(map);
	qsort(tj, MAP_RUNS, sizeof(double), cmp_double);
	qsort(tm, MAP_RUNS, sizeof(double), cmp_double);
	add_row(b, "steps/s", fmt_num(v, rows / tj[MAP_RUNS / 2]),
			"map: static JOIN of %d branches (median of %d)", rows, MAP_RUNS);
	add_row(b, "steps/s", fmt_num(v, rows / tm[MAP_RUNS / 2]),
			"map: df.map over %d rows (median of %d)", rows, MAP_RUNS);
	add_row(b, "", fmt_num(v, tm[MAP_RUNS / 2] / tj[MAP_RUNS / 2]),
			"map: df.map time / JOIN time (target <= 1.2)");
	return true;
}

/* The largest private resident set (RssAnon, kB) of the executors now; 0 if unknown. */
static long
executors_rss_anon(Pgdb *b)
{
	PGresult   *res = PQexec(b->conn,
							 "SELECT pid FROM pg_stat_activity "
							 "WHERE backend_type = 'pg_durable executor'");
	long		peak = 0;

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res); i++)
		{
			char		path[64];
			char		line[256];
			FILE	   *f;
			long		kb;

			snprintf(path, sizeof(path), "/proc/%s/status", PQgetvalue(res, i, 0));
			if ((f = fopen(path, "r")) == NULL)
				continue;
			while (fgets(line, sizeof(line), f) != NULL)
				if (sscanf(line, "RssAnon: %ld", &kb) == 1 && kb > peak)
					peak = kb;
			fclose(f);
		}
	PQclear(res);
	return peak;
}

/*
 * One df.map in lanes mode over rows rows of generate_series (column n),
 * each row running step (SQL text, $item.n for its number) in lanes lanes,
 * collect => false, from df.start to the end of the instance: *secs, the
 * instance's last status, and the executors' largest private resident set
 * (RssAnon) sampled every 200 ms while it runs.  Polled by short queries,
 * so that no snapshot holds the xmin horizon back.  False on a lost
 * connection.
 */
static bool
run_lanes_map(Pgdb *b, const char *step, int rows, int lanes,
			  char *status, size_t status_len, double *secs, long *rss)
{
	PgdbOptions *o = &b->opt;
	PgdbBuf		sql = {0};
	char		poll[128];
	char	   *id;
	char	   *v;
	int64_t		t0 = real_now_us(),
				deadline;

	status[0] = '\0';
	buf_append(&sql, "SELECT df.start(df.map('SELECT g AS n FROM generate_series(1, %d) g', "
			   "%s, %d, collect => false))", rows, step, lanes);
	id = query_value(b, sql.data);
	free(sql.data);
	if (id == NULL)
		return false;
	/* at least the timeout, and 4 ms a row */
	deadline = t0 + (int64_t) (o->timeout > rows / 250 ? o->timeout : rows / 250) * 1000000;
	snprintf(poll, sizeof(poll), "SELECT status FROM df.instances WHERE id = '%s'", id);
	free(id);
	while (real_now_us() < deadline)
	{
		long		r;

		if ((v = query_value(b, poll)) == NULL)
			return false;
		snprintf(status, status_len, "%s", v);
		free(v);
		if (rss != NULL && (r = executors_rss_anon(b)) > *rss)
			*rss = r;
		if (strcmp(status, "running") != 0 && strcmp(status, "pending") != 0)
			break;
		usleep(200000);
	}
	*secs = (real_now_us() - t0) / 1e6;
	return true;
}

#define LANES_STEP "'INSERT INTO bench_commit (v, ts) VALUES ($item.n, clock_timestamp())'"
#define LANES_REF_ROWS 10000

/*
 * df.map in lanes mode over lanes_rows rows, each row's step one
 * single-row INSERT into bench_commit: rows (steps) per second, WAL per
 * row, and the executors' peak private RSS against the same before it
 * started.  Side by side with it, in the same run: a chain just before
 * (the rate it is measured against), and over more than LANES_REF_ROWS
 * rows, a map of LANES_REF_ROWS just before, for the time per row as the
 * rows grow.
 */
static bool
lanes_phase(Pgdb *b)
{
	PgdbOptions *o = &b->opt;
	int			rows = o->lanes_rows;
	char	   *v;
	double		wal0,
				wal1,
				secs,
				ref_secs = 0,
				chain = NAN,
				chain_flows;
	long		rss0 = executors_rss_anon(b),
				rss = rss0;
	char		status[32];
	char		num[32];

	if (o->chain_workflows > 0 &&
		!throughput_phase(b, "chain beside the lanes", "~>", o->chain_steps,
						  o->chain_workflows, &chain, &chain_flows))
		return false;
	if (rows > LANES_REF_ROWS)
	{
		say(b, "lanes: df.map over %d rows, %d lanes", LANES_REF_ROWS, o->lanes);
		if (!run_lanes_map(b, LANES_STEP, LANES_REF_ROWS, o->lanes, status, sizeof(status),
						   &ref_secs, NULL))
			return false;
		if (strcmp(status, "completed") != 0)
			ref_secs = 0;
	}
	if ((v = query_value(b, "SELECT pg_current_wal_lsn() - '0/0'")) == NULL)
		return false;
	wal0 = atof(v);
	free(v);
	say(b, "lanes: df.map over %d rows, %d lanes", rows, o->lanes);
	if (!run_lanes_map(b, LANES_STEP, rows, o->lanes, status, sizeof(status), &secs, &rss))
		return false;
	if (strcmp(status, "completed") != 0)
	{
		add_row(b, "", status[0] ? status : "unfinished",
				"lanes: df.map over %d rows did not complete", rows);
		return true;
	}
	if ((v = query_value(b, "SELECT pg_current_wal_lsn() - '0/0'")) == NULL)
		return false;
	wal1 = atof(v);
	free(v);
	say(b, "lanes: %.2f s", secs);
	add_row(b, "steps/s", fmt_num(num, rows / secs),
			"lanes: df.map over %d rows, %d lanes, one INSERT a row, collect => false", rows, o->lanes);
	add_row(b, "bytes", fmt_num(num, (wal1 - wal0) / rows), "lanes: WAL per row");
	add_row(b, "MB", fmt_num(num, rss / 1024.0),
			"lanes: executors' peak private RSS while it ran (%.1f MB before)", rss0 / 1024.0);
	if (!isnan(chain))
	{
		add_row(b, "steps/s", fmt_num(num, chain), "lanes: a chain just before, %d workflows x %d steps",
				o->chain_workflows, o->chain_steps);
		add_row(b, "", fmt_num(num, rows / secs / chain),
				"lanes: rows/s / steps/s of a chain just before (target >= 0.8)");
	}
	if (ref_secs > 0)
		add_row(b, "", fmt_num(num, (secs / rows) / (ref_secs / LANES_REF_ROWS)),
				"lanes: time per row, %d rows / %d rows (target <= 1.2)", rows, LANES_REF_ROWS);
	return true;
}

#define HTTP_MAP_LANES	 64
#define HTTP_CLIENT_CONN 32

/*
 * Calls to a service at the service's speed: a df.map of http_map_items
 * GETs of the test server's /echo in HTTP_MAP_LANES lanes, beside the rate
 * a plain concurrent client gets from the same server just before: curl
 * with HTTP_CLIENT_CONN keep-alive connections (--parallel) fetching as
 * many URLs.  Not run without curl.
 */
static bool
http_map_phase(Pgdb *b)
{
	PgdbOptions *o = &b->opt;
	int			items = o->http_map_items;
	char		cmd[512];
	char		step[256];
	char		status[32];
	char		num[32];
	double		client_secs,
				map_secs;
	int64_t		t0;

	snprintf(cmd, sizeof(cmd),
			 "curl -sf --no-progress-meter --parallel --parallel-max %d '%s/echo?k=[1-%d]' > /dev/null",
			 HTTP_CLIENT_CONN, o->http_url, items);
	say(b, "HTTP map: %s", cmd);
	t0 = real_now_us();
	if (system(cmd) != 0)
	{
		add_row(b, "", "not run", "HTTP map: curl failed or is not installed");
		return true;
	}
	client_secs = (real_now_us() - t0) / 1e6;
	snprintf(step, sizeof(step), "df.http($u$%s/echo?k=$item.n$u$, 'GET')", o->http_url);
	say(b, "HTTP map: df.map over %d GETs, %d lanes", items, HTTP_MAP_LANES);
	if (!run_lanes_map(b, step, items, HTTP_MAP_LANES, status, sizeof(status), &map_secs, NULL))
		return false;
	add_row(b, "req/s", fmt_num(num, items / client_secs),
			"HTTP map: curl, %d GETs, %d connections", items, HTTP_CLIENT_CONN);
	if (strcmp(status, "completed") != 0)
	{
		add_row(b, "", status[0] ? status : "unfinished",
				"HTTP map: df.map over %d GETs did not complete", items);
		return true;
	}
	add_row(b, "items/s", fmt_num(num, items / map_secs),
			"HTTP map: df.map, %d GETs, %d lanes", items, HTTP_MAP_LANES);
	add_row(b, "", fmt_num(num, client_secs / map_secs),
			"HTTP map: df.map's rate / curl's");
	return true;
}

/*
 * Event to subscriber: a subscription whose workflow logs
 * clock_timestamp() in its first step; one client publishes event_count
 * events, one every 5 ms, each in its own transaction, and the latency is
 * the step's time minus the client's clock when it sent the publishing
 * statement (the same machine's clock): an upper bound that includes the
 * publish and its commit.  With track_commit_timestamp = on it is measured
 * from the event's commit instead (from the statement's return it would be
 * about 0: the subscriber's step runs while the reply travels).
 */
static bool
event_phase(Pgdb *b)
{
	int			n = b->opt.event_count;
	int64_t    *commit_us;
	double	   *lat;
	int			nlat = 0,
				i;
	char		v[32];
	PGresult   *res;
	char	   *cnt;
	bool		by_commit = false;
	const char *from_what;
	int64_t		deadline;

	if (n <= 0)
		return true;
	if (!exec_ok(b->conn,
				 "SET client_min_messages = warning;"
				 "CREATE TABLE IF NOT EXISTS bench_event (event_id bigint, ts timestamptz);"
				 "TRUNCATE bench_event;"
				 "SELECT df.unsubscribe('bench_event');"
				 "SELECT df.subscribe('bench_event', 'bench', "
				 "'INSERT INTO bench_event SELECT $event.event_id::bigint, clock_timestamp()')",
				 &b->err, b->errstr))
		return false;
	say(b, "event: %d events, 1 client", n);
	commit_us = calloc(n + 1, sizeof(int64_t));
	for (i = 0; i < n; i++)
	{
		char		sql[96];

		snprintf(sql, sizeof(sql), "SELECT df.publish_event('bench', '{\"i\": %d}')", i);
		commit_us[i] = real_now_us();
		res = PQexec(b->conn, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			pgdb_set_error(&b->err, b->errstr, "%s: %s", sql, PQresultErrorMessage(res));
			PQclear(res);
			free(commit_us);
			return false;
		}
		PQclear(res);
		usleep(5000);
	}
	deadline = real_now_us() + (int64_t) b->opt.timeout * 1000000;
	while ((cnt = query_value(b, "SELECT count(*) FROM bench_event")) != NULL &&
		   atoi(cnt) < n && real_now_us() < deadline)
	{
		free(cnt);
		usleep(10000);
	}
	free(cnt);
	/*
	 * the events' order is the publishing order: event i is the i-th id (the
	 * topic is in the publishing role's own space, ~<oid>/bench)
	 */
	/* the commit times, when the server keeps them (else NULL: the call's time) */
	if ((cnt = query_value(b, "SHOW track_commit_timestamp")) == NULL)
	{
		free(commit_us);
		return false;
	}
	by_commit = strcmp(cnt, "on") == 0;
	free(cnt);
	res = PQexec(b->conn,
				 by_commit ?
				 "SELECT (extract(epoch FROM s.ts) * 1000000)::bigint, "
				 "row_number() OVER (ORDER BY e.id) - 1, "
				 "(extract(epoch FROM pg_xact_commit_timestamp(e.xmin)) * 1000000)::bigint "
				 "FROM df_internal.bus_events e JOIN bench_event s ON s.event_id = e.id "
				 "WHERE e.topic ~ '^(~[0-9]+/)?bench$'" :
				 "SELECT (extract(epoch FROM s.ts) * 1000000)::bigint, "
				 "row_number() OVER (ORDER BY e.id) - 1, NULL::bigint "
				 "FROM df_internal.bus_events e JOIN bench_event s ON s.event_id = e.id "
				 "WHERE e.topic ~ '^(~[0-9]+/)?bench$'");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pgdb_set_error(&b->err, b->errstr, "reading bench_event: %s", PQresultErrorMessage(res));
		PQclear(res);
		free(commit_us);
		return false;
	}
	lat = calloc(PQntuples(res) + 1, sizeof(double));
	for (i = 0; i < PQntuples(res); i++)
	{
		int			k = atoi(PQgetvalue(res, i, 1));

		int64_t		from = k >= 0 && k < n ? commit_us[k] : 0;

		if (!PQgetisnull(res, i, 2))
			from = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		if (k >= 0 && k < n)
			lat[nlat++] = (strtoll(PQgetvalue(res, i, 0), NULL, 10) - from) / 1000.0;
	}
	PQclear(res);
	qsort(lat, nlat, sizeof(double), cmp_double);
	from_what = by_commit ? "event commit" : "publish_event call";
	add_row(b, "ms", fmt_num(v, percentile(lat, nlat, 50)), "%s to subscriber's first step p50 (1 client)", from_what);
	add_row(b, "ms", fmt_num(v, percentile(lat, nlat, 99)), "%s to subscriber's first step p99 (1 client)", from_what);
	if (nlat < n)
		fprintf(stderr, "pgd_bench: event: %d of %d subscriber steps logged\n", nlat, n);
	free(lat);
	free(commit_us);
	return exec_ok(b->conn, "SELECT df.unsubscribe('bench_event')", &b->err, b->errstr);
}

static bool
pgdb_run(Pgdb *b)
{
	const PgdbOptions *o = &b->opt;
	double		commit_w = NAN,
				commit_c = NAN,
				rows32_w = NAN,
				insert_chain = NAN,
				chain = NAN,
				fan = NAN,
				flows = NAN,
				http = NAN,
				http_breaker = NAN,
				wrapped = NAN,
				chain2 = NAN,
				flaky = NAN,
				retries = NAN,
				lplain[PGDB_LIMIT_ROUNDS],
				lown[PGDB_LIMIT_ROUNDS],
				lshared[PGDB_LIMIT_ROUNDS],
				lrown[PGDB_LIMIT_ROUNDS],
				lcatch[PGDB_LIMIT_ROUNDS],
				lrcatch[PGDB_LIMIT_ROUNDS],
				lrshared[PGDB_LIMIT_ROUNDS],
				traced = NAN,
				untraced = NAN,
				traced_spans = NAN,
				traced_backlog = NAN,
				export_cpu = NAN,
				server_cpu = NAN,
				llock[PGDB_LIMIT_ROUNDS],
				lrlock[PGDB_LIMIT_ROUNDS],
				dummy;
	int			rounds_flows = o->limit_workflows > 0 ? o->limit_workflows :
		o->lock_workflows;
	bool		ok;
	char		v[32];
	char		latlabel[32];
	PgdbCost	chain_cost = {0},
				fan_cost = {0},
				flows_cost = {0};

	if (!setup(b))
		return false;

	if (o->pgbench)
	{
		commit_w = run_pgbench(b, b->executors, 1);
		commit_c = o->clients == b->executors ? commit_w : run_pgbench(b, o->clients, 1);
		if (o->chain_workflows > 0)
			rows32_w = run_pgbench(b, b->executors, 32);
		if (!exec_ok(b->conn, "TRUNCATE bench_commit", &b->err, b->errstr))
			return false;
	}

	/* warm-up: caches, plans of every executor, first extension of the tables */
	if (!throughput_phase(b, "warm-up", "~>", 5, 4 * b->executors, &dummy, &dummy))
		return false;

	if (o->chain_workflows > 0 &&
		!throughput_phase_cost(b, "chain", "~>", o->chain_steps, o->chain_workflows, noop_leaf,
							   &chain, &dummy, &chain_cost))
		return false;
	/* measured only with a chain to compare (rows32_w) */
	if (!isnan(rows32_w) &&
		!throughput_phase_of(b, "chain of INSERT steps", "~>", o->chain_steps, o->chain_workflows,
							 insert_leaf, &insert_chain, &dummy))
		return false;
	if (o->fanout_workflows > 0 &&
		!throughput_phase_cost(b, "fan-out/join", "&", o->fanout_width, o->fanout_workflows,
							   noop_leaf, &fan, &dummy, &fan_cost))
		return false;
	if (o->workflows > 0 &&
		!throughput_phase_cost(b, "one-step workflows", "~>", 1, o->workflows, noop_leaf, &dummy,
							   &flows, &flows_cost))
		return false;
	if (o->http_url != NULL && o->http_workflows > 0)
	{
		double		plain[BREAKER_ROUNDS],
					through[BREAKER_ROUNDS];

		http_leaf_url = o->http_url;
		/*
		 * Scenario "breaker": the chain plain and through a closed breaker,
		 * alternating, BREAKER_ROUNDS times; the medians (a shared machine
		 * makes single runs vary by more than the difference).
		 */
		if (!exec_ok(b->conn,
					 "SET client_min_messages = warning;"
					 "SELECT df.drop_circuit_breaker(name) FROM df.circuit_breakers WHERE name = 'bench';"
					 "SELECT df.create_circuit_breaker('bench')", &b->err, b->errstr))
			return false;
		for (int r = 0; r < BREAKER_ROUNDS; r++)
			if (!throughput_phase_of(b, "HTTP chain", "~>", o->http_steps, o->http_workflows,
									 http_leaf, &plain[r], &dummy) ||
				!throughput_phase_of(b, "HTTP chain through a breaker", "~>", o->http_steps,
									 o->http_workflows, http_breaker_leaf, &through[r], &dummy))
				return false;
		qsort(plain, BREAKER_ROUNDS, sizeof(double), cmp_double);
		qsort(through, BREAKER_ROUNDS, sizeof(double), cmp_double);
		http = plain[BREAKER_ROUNDS / 2];
		http_breaker = through[BREAKER_ROUNDS / 2];
	}

	if (o->retry_workflows > 0 && o->chain_workflows > 0)
	{
		/* the same chain inside a df.retry that never retries */
		graph_prefix = "df.retry";
		graph_suffix = "";
		ok = throughput_phase(b, "chain in df.retry", "~>", o->chain_steps,
							  o->chain_workflows, &wrapped, &dummy);
		graph_prefix = "";
		if (!ok ||
			!throughput_phase(b, "chain again", "~>", o->chain_steps,
							  o->chain_workflows, &chain2, &dummy))
			return false;
	}
	if (o->retry_workflows > 0)
	{
		char	   *before = query_value(b, "SELECT count(*) FROM df_internal.events "
										 "WHERE kind = 'retry_scheduled'");
		char	   *after;

		if (before == NULL)
			return false;
		if (!throughput_phase_of(b, "flaky chain", "~>", o->retry_steps, o->retry_workflows,
								 flaky_leaf, &flaky, &dummy))
			return false;
		after = query_value(b, "SELECT count(*) FROM df_internal.events "
							"WHERE kind = 'retry_scheduled'");
		if (after == NULL)
			return false;
		retries = strtod(after, NULL) - strtod(before, NULL);
		free(before);
		free(after);
	}

	/*
	 * Each step under a df.limit that never waits, in rounds of a plain
	 * chain, the chain with a key per instance and with one key, so that
	 * the load of a shared machine weighs on the three alike; the figures
	 * are the medians over the rounds, the ratios those of each round's
	 * plain chain over its limited ones.
	 */
	for (int r = 0; rounds_flows > 0 && r < PGDB_LIMIT_ROUNDS; r++)
	{
		lown[r] = lshared[r] = lcatch[r] = llock[r] = NAN;
		if (!throughput_phase(b, "plain chain", "~>", o->chain_steps, rounds_flows,
							  &lplain[r], &dummy))
			return false;
		if (o->limit_workflows > 0 &&
			(!throughput_phase_of(b, "chain under df.limit, own keys", "~>", o->chain_steps,
								  o->limit_workflows, limit_own_leaf, &lown[r], &dummy) ||
			 !throughput_phase_of(b, "chain under df.limit, one key", "~>", o->chain_steps,
								  o->limit_workflows, limit_shared_leaf, &lshared[r], &dummy) ||
			 !throughput_phase_of(b, "chain under df.catch", "~>", o->chain_steps,
								  o->limit_workflows, catch_leaf, &lcatch[r], &dummy)))
			return false;
		if (o->lock_workflows > 0 &&
			!throughput_phase_of(b, "chain under df.with_lock", "~>", o->chain_steps,
								 o->lock_workflows, lock_leaf, &llock[r], &dummy))
			return false;
		lrcatch[r] = lplain[r] / lcatch[r];
		lrown[r] = lplain[r] / lown[r];
		lrshared[r] = lplain[r] / lshared[r];
		lrlock[r] = lplain[r] / llock[r];
	}

	if (o->otel_url != NULL && o->chain_workflows > 0)
	{
		char	   *spans0 = query_value(b, "SELECT coalesce((SELECT exported_spans FROM "
										 "df_internal.otel_export), 0)");
		char	   *spans1,
				   *backlog;
		PgdbCpu		cpu;

		/*
		 * Steady state: the export starts at the end of the history, not
		 * with the backlog of the phases before (a first configuration
		 * exports all of the history that retention kept).
		 */
		if (spans0 == NULL ||
			!exec_ok(b->conn, "INSERT INTO df_internal.otel_export (id, last_event_id) "
					 "SELECT 1, coalesce(max(id), 0) FROM df_internal.events "
					 "ON CONFLICT (id) DO UPDATE SET last_event_id = excluded.last_event_id",
					 &b->err, b->errstr) ||
			!set_otel_endpoint(b, o->otel_url))
			return false;
		cpu_start(b, &cpu);
		ok = throughput_phase(b, "chain, spans exported", "~>", o->chain_steps,
							  o->chain_workflows, &traced, &dummy);
		backlog = query_value(b, "SELECT count(*) FROM df_internal.events WHERE id > "
							  "coalesce((SELECT last_event_id FROM df_internal.otel_export), 0)");
		if (!ok || backlog == NULL)
			return false;
		usleep(3000 * 1000);	/* let the export catch up before counting */
		spans1 = query_value(b, "SELECT coalesce((SELECT exported_spans FROM "
							 "df_internal.otel_export), 0)");
		export_cpu = cpu_used(&cpu, &server_cpu);
		if (spans1 == NULL || !set_otel_endpoint(b, NULL) ||
			!throughput_phase(b, "chain, untraced", "~>", o->chain_steps,
							  o->chain_workflows, &untraced, &dummy))
			return false;
		traced_spans = strtod(spans1, NULL) - strtod(spans0, NULL);
		traced_backlog = strtod(backlog, NULL);
		free(spans0);
		free(spans1);
		free(backlog);
	}

	if (o->chain_workflows > 0)
		add_row(b, "steps/s", fmt_num(v, chain), "chain: %d workflows x %d steps, %d clients",
				o->chain_workflows, o->chain_steps, o->clients);
	if (o->otel_url != NULL && o->chain_workflows > 0)
	{
		add_row(b, "steps/s", fmt_num(v, traced), "chain with the OTLP export on");
		add_row(b, "steps/s", fmt_num(v, untraced), "chain again, export off");
		add_row(b, "", fmt_num(v, traced / ((chain + untraced) / 2)),
				"chain with export / mean of the chains without");
		add_row(b, "spans", fmt_num(v, traced_spans), "spans exported (3 s after the traced chain)");
		add_row(b, "events", fmt_num(v, traced_backlog),
				"history events not yet exported when the traced chain ended");
		add_row(b, "s", fmt_num(v, export_cpu * 10000 / traced_spans),
				"HTTP worker CPU per 10,000 spans exported (from /proc)");
		add_row(b, "", fmt_num(v, export_cpu / server_cpu),
				"HTTP worker CPU / the server's CPU, traced chain and catch-up");
	}
	if (o->lock_workflows > 0)
	{
		add_row(b, "steps/s", fmt_num(v, median3(llock)),
				"lock: %d chains, each step in a df.with_lock of its own key (median of %d)",
				o->lock_workflows, PGDB_LIMIT_ROUNDS);
		add_row(b, "", fmt_num(v, median3(lrlock)),
				"a step under df.with_lock / a plain step (median of each round's ratio)");
	}
	if (o->retry_workflows > 0 && o->chain_workflows > 0)
	{
		add_row(b, "steps/s", fmt_num(v, wrapped), "chain in a df.retry that never retries");
		add_row(b, "steps/s", fmt_num(v, chain2), "chain again, after it");
		add_row(b, "", fmt_num(v, wrapped / ((chain + chain2) / 2)),
				"chain in df.retry / mean of the plain chains");
	}
	if (o->retry_workflows > 0)
	{
		add_row(b, "retries", fmt_num(v, retries),
				"flaky steps: %d workflows x %d, 10 ms back-off", o->retry_workflows,
				o->retry_steps);
		add_row(b, "retries/s", fmt_num(v, flaky > 0 ? retries * flaky /
										 ((double) o->retry_workflows * o->retry_steps) : NAN),
				"flaky steps: retried steps per second");
		add_row(b, "steps/s", fmt_num(v, flaky), "flaky steps: completed steps per second");
	}
	if (o->limit_workflows > 0)
	{
		add_row(b, "steps/s", fmt_num(v, median3(lplain)),
				"limit: plain chain, %d workflows x %d steps (median of %d)",
				o->limit_workflows, o->chain_steps, PGDB_LIMIT_ROUNDS);
		add_row(b, "steps/s", fmt_num(v, median3(lown)),
				"limit: each step in df.limit, a key per instance");
		add_row(b, "steps/s", fmt_num(v, median3(lshared)),
				"limit: each step in df.limit, one key for all");
		add_row(b, "", fmt_num(v, median3(lrown)),
				"limit: time per step, key per instance / plain (target <= 1.3)");
		add_row(b, "", fmt_num(v, median3(lrshared)),
				"limit: time per step, one key / plain");
		add_row(b, "", fmt_num(v, median3(lrcatch)),
				"limit: time per step in a df.catch (any wrapper's floor) / plain");
	}
	if (o->fanout_workflows > 0)
		add_row(b, "steps/s", fmt_num(v, fan), "fan-out/join: %d workflows x %d branches",
				o->fanout_workflows, o->fanout_width);
	if (o->workflows > 0)
		add_row(b, "workflows/s", fmt_num(v, flows), "one-step workflows: %d, %d clients",
				o->workflows, o->clients);
	if (o->chain_workflows > 0)
		cost_rows(b, "chain", &chain_cost);
	if (o->fanout_workflows > 0)
		cost_rows(b, "fan-out/join", &fan_cost);
	if (o->workflows > 0)
		cost_rows(b, "one-step workflows", &flows_cost);
	if (o->http_url != NULL && o->http_workflows > 0)
	{
		add_row(b, "steps/s", fmt_num(v, http),
				"HTTP steps: %d workflows x %d GET, local server (median of %d)",
				o->http_workflows, o->http_steps, BREAKER_ROUNDS);
		add_row(b, "steps/s", fmt_num(v, http_breaker),
				"HTTP steps through a closed circuit breaker (median of %d)", BREAKER_ROUNDS);
		add_row(b, "", fmt_num(v, http_breaker / http),
				"breaker: HTTP steps with a breaker / without");
	}

	if (o->nwidths > 0 && !width_phases(b))
		return false;
	if (o->map_rows > 0 && !map_phases(b))
		return false;
	if (o->lanes_rows > 0 && !lanes_phase(b))
		return false;
	if (o->http_url != NULL && o->http_map_items > 0 && !http_map_phase(b))
		return false;

	if (!latency_phase(b, 1, "1 client"))
		return false;
	if (o->clients > 1)
	{
		snprintf(latlabel, sizeof(latlabel), "%d clients", o->clients);
		if (!latency_phase(b, o->clients, latlabel))
			return false;
	}

	if (!event_phase(b))
		return false;

	if (o->pgbench)
	{
		add_row(b, "commits/s", fmt_num(v, commit_w), "pgbench 1-row INSERT commit rate, %d clients",
				b->executors);
		if (o->clients != b->executors)
			add_row(b, "commits/s", fmt_num(v, commit_c),
					"pgbench 1-row INSERT commit rate, %d clients", o->clients);
		if (o->chain_workflows > 0)
			add_row(b, "", fmt_num(v, chain / commit_w), "chain steps/s / commit rate (%d)", b->executors);
		if (o->fanout_workflows > 0)
			add_row(b, "", fmt_num(v, fan / commit_w), "fan-out steps/s / commit rate (%d)", b->executors);
		if (o->workflows > 0)
			add_row(b, "", fmt_num(v, flows / commit_c), "workflows/s / commit rate (%d)", o->clients);
		if (!isnan(rows32_w))
		{
			add_row(b, "rows/s", fmt_num(v, rows32_w),
					"pgbench 1-row INSERT, 32 to a transaction, %d clients", b->executors);
			add_row(b, "steps/s", fmt_num(v, insert_chain),
					"chain of that INSERT as steps, %d workflows x %d steps", o->chain_workflows,
					o->chain_steps);
			add_row(b, "", fmt_num(v, insert_chain / rows32_w),
					"INSERT chain steps/s / pgbench rows/s 32 to a transaction (target >= 0.5)");
		}
	}
	return true;
}

static void
print_table(Pgdb *b)
{
	int			i;

	printf("\npg_durable benchmark: PostgreSQL %s, %d executors, %d clients, "
		   "synchronous_commit = %s, fsync = %s\n\n",
		   b->server_version, b->executors, b->opt.clients, b->sync_commit, b->fsync);
	printf("| %-52s | %10s | %-11s |\n", "figure", "value", "unit");
	printf("|-%.52s-|-%.10s:|-%.11s-|\n",
		   "------------------------------------------------------------",
		   "------------------------------------------------------------",
		   "------------------------------------------------------------");
	for (i = 0; i < b->nrows; i++)
		printf("| %-52s | %10s | %-11s |\n", b->rows[i].label, b->rows[i].value, b->rows[i].unit);
	if (b->pgss_report)
		printf("%s", b->pgss_report);
	fflush(stdout);
}

/* ------------------------------------------------------------------ main */

static void
usage(const char *progname)
{
	printf("%s measures pg_durable's step throughput, workflows per second and latency\n"
		   "and compares them with the server's commit rate (pgbench).\n\n", progname);
	printf("Usage:\n  %s [OPTION]...\n\n", progname);
	printf("Connection options:\n"
		   "  -h, --host=HOSTNAME         database server host or socket directory\n"
		   "  -p, --port=PORT             database server port\n"
		   "  -U, --username=USERNAME     user name to connect as\n"
		   "  -d, --dbname=DBNAME         database that holds pg_durable (pg_durable.database)\n\n");
	printf("Benchmark options:\n"
		   "  -c, --clients=NUM           concurrent client connections (default: 4)\n"
		   "      --chain-workflows=NUM   chain workflows run concurrently (default: 1000)\n"
		   "      --chain-steps=NUM       sequential SELECT 1 steps per chain (default: 20)\n"
		   "      --fanout-workflows=NUM  fan-out/join workflows (default: 300)\n"
		   "      --fanout-width=NUM      parallel SELECT 1 branches per join (default: 20)\n"
		   "      --workflows=NUM         one-step workflows started as fast as possible (default: 6000)\n"
		   "      --latency-workflows=NUM workflows per latency measurement (default: 300)\n"
		   "      --latency-steps=NUM     logging steps per latency workflow (default: 5)\n"
		   "      --events=NUM            events published to a subscription, one at a time,\n"
		   "                              for the event latency (default: 200; 0: none)\n"
		   "      --pgbench=PATH          pgbench to run for the commit rate (default: pgbench)\n"
		   "      --no-pgbench            do not measure the commit rate\n"
		   "      --pgbench-seconds=NUM   length of each pgbench run (default: 30)\n"
		   "      --statements=NUM        print the NUM statements that took most time in each\n"
		   "                              phase (needs pg_stat_statements; default: 0)\n"
		   "      --timeout=SECS          longest wait for the workflows of one phase; those still\n"
		   "                              unfinished then are counted, not awaited (default: 60)\n"
		   "      --http-url=URL          base URL of test/http_server.pl: also measure HTTP steps\n"
		   "                              (GET URL/echo; the server needs pg_durable.http_allow_private)\n"
		   "      --http-workflows=NUM    HTTP chain workflows (default: 400)\n"
		   "      --http-steps=NUM        HTTP steps per chain (default: 5)\n"
		   "      --retry-workflows=NUM   chains of steps that fail half of the time, each in a\n"
		   "                              df.retry with a 10 ms back-off; also runs the chain\n"
		   "                              inside a df.retry that never retries (default: 300; 0: none)\n"
		   "      --retry-steps=NUM       steps per such chain (default: 5)\n"
		   "      --limit-workflows=NUM   chains of --chain-steps steps, each under a df.limit that\n"
		   "                              never waits, in 3 rounds with a plain chain (default: 300; 0: none)\n"
		   "      --otel-url=URL          an OTLP/HTTP receiver (test/otlp_receiver.pl): also run the\n"
		   "                              chain with pg_durable.otel_endpoint = URL (needs superuser)\n"
		   "      --lock-workflows=NUM    chains whose every step is in a df.with_lock of its own\n"
		   "                              key, then as many plain chains (default: 300; 0: none)\n"
		   "      --widths=LIST           one fan-out of each width, e.g. 1000,2000 (default:\n"
		   "                              1000,2000,5000,10000; 0 skips; a width over the\n"
		   "                              10,000-node limit is reported as not run)\n"
		   "      --map-rows=NUM          one df.map over NUM rows against one JOIN of NUM\n"
		   "                              branches, 5 runs each (default: 1000; 0: none)\n"
		   "      --lanes-rows=NUM        one df.map in lanes mode over NUM rows, one INSERT\n"
		   "                              a row (default: 100000; 0: none)\n"
		   "      --lanes=NUM             its lanes, max_concurrent (default: 32)\n"
		   "      --http-map-items=NUM    with --http-url: one df.map of NUM GETs in 64 lanes,\n"
		   "                              and curl's rate with 32 connections (default: 10000)\n"
		   "  -v, --verbose               say what runs, on stderr\n"
		   "  -V, --version               output version information, then exit\n"
		   "  -?, --help                  show this help, then exit\n\n");
	printf("A count of 0 skips that measurement.  The target database is changed: it gets\n"
		   "the tables bench_log and bench_commit and keeps the finished instances.\n");
}

static int
parse_count(const char *arg, const char *name, int min)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > 1000000)
	{
		fprintf(stderr, "pgd_bench: invalid value \"%s\" for --%s (an integer from %d)\n",
				arg, name, min);
		exit(2);
	}
	return (int) v;
}

/* --widths: a comma-separated list of widths (at least 2), or 0 for none */
static void
parse_widths(PgdbOptions *o, const char *arg)
{
	char	   *copy = strdup(arg);
	char	   *tok;
	char	   *save = NULL;

	o->nwidths = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		int			w = parse_count(tok, "widths", 0);

		if (w == 0)
			continue;
		if (w < 2 || o->nwidths == PGDB_MAX_WIDTHS)
		{
			fprintf(stderr, "pgd_bench: --widths takes up to %d widths of at least 2, or 0\n",
					PGDB_MAX_WIDTHS);
			exit(2);
		}
		o->widths[o->nwidths++] = w;
	}
	free(copy);
}

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"host", required_argument, NULL, 'h'},
		{"port", required_argument, NULL, 'p'},
		{"username", required_argument, NULL, 'U'},
		{"dbname", required_argument, NULL, 'd'},
		{"clients", required_argument, NULL, 'c'},
		{"chain-workflows", required_argument, NULL, 1},
		{"chain-steps", required_argument, NULL, 2},
		{"fanout-workflows", required_argument, NULL, 3},
		{"fanout-width", required_argument, NULL, 4},
		{"workflows", required_argument, NULL, 5},
		{"latency-workflows", required_argument, NULL, 6},
		{"latency-steps", required_argument, NULL, 7},
		{"pgbench", required_argument, NULL, 8},
		{"no-pgbench", no_argument, NULL, 9},
		{"pgbench-seconds", required_argument, NULL, 10},
		{"statements", required_argument, NULL, 11},
		{"timeout", required_argument, NULL, 12},
		{"http-url", required_argument, NULL, 13},
		{"http-workflows", required_argument, NULL, 14},
		{"http-steps", required_argument, NULL, 15},
		{"retry-workflows", required_argument, NULL, 16},
		{"retry-steps", required_argument, NULL, 17},
		{"widths", required_argument, NULL, 18},
		{"map-rows", required_argument, NULL, 19},
		{"lanes-rows", required_argument, NULL, 45},
		{"lanes", required_argument, NULL, 46},
		{"http-map-items", required_argument, NULL, 47},
		{"limit-workflows", required_argument, NULL, 20},
		{"otel-url", required_argument, NULL, 21},
		{"events", required_argument, NULL, 40},
		{"lock-workflows", required_argument, NULL, 22},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, '?'},
		{NULL, 0, NULL, 0}
	};
	const char *progname = "pgd_bench";
	Pgdb		b;
	int			c;
	bool		ok;

	memset(&b, 0, sizeof(b));
	b.opt.clients = 4;
	b.opt.chain_workflows = 1000;
	b.opt.chain_steps = 20;
	b.opt.fanout_workflows = 300;
	b.opt.fanout_width = 20;
	b.opt.workflows = 6000;
	b.opt.latency_workflows = 300;
	b.opt.event_count = 200;
	b.opt.latency_steps = 5;
	b.opt.pgbench = "pgbench";
	b.opt.pgbench_seconds = 30;
	b.opt.timeout = 60;
	b.opt.http_workflows = 400;
	b.opt.http_steps = 5;
	b.opt.retry_workflows = 300;
	b.opt.retry_steps = 5;
	b.opt.limit_workflows = 300;
	b.opt.lock_workflows = 300;
	parse_widths(&b.opt, "1000,2000,5000,10000");
	b.opt.map_rows = 1000;
	b.opt.lanes_rows = 100000;
	b.opt.lanes = 32;
	b.opt.http_map_items = 10000;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0))
	{
		usage(progname);
		exit(0);
	}
	while ((c = getopt_long(argc, argv, "h:p:U:d:c:vV?", long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'h':
				b.opt.host = optarg;
				break;
			case 'p':
				b.opt.port = optarg;
				break;
			case 'U':
				b.opt.user = optarg;
				break;
			case 'd':
				b.opt.dbname = optarg;
				break;
			case 'c':
				b.opt.clients = parse_count(optarg, "clients", 1);
				break;
			case 1:
				b.opt.chain_workflows = parse_count(optarg, "chain-workflows", 0);
				break;
			case 2:
				b.opt.chain_steps = parse_count(optarg, "chain-steps", 1);
				break;
			case 3:
				b.opt.fanout_workflows = parse_count(optarg, "fanout-workflows", 0);
				break;
			case 4:
				b.opt.fanout_width = parse_count(optarg, "fanout-width", 2);
				break;
			case 5:
				b.opt.workflows = parse_count(optarg, "workflows", 0);
				break;
			case 40:
				b.opt.event_count = parse_count(optarg, "events", 0);
				break;
			case 6:
				b.opt.latency_workflows = parse_count(optarg, "latency-workflows", 0);
				break;
			case 7:
				b.opt.latency_steps = parse_count(optarg, "latency-steps", 1);
				break;
			case 8:
				b.opt.pgbench = optarg;
				break;
			case 9:
				b.opt.pgbench = NULL;
				break;
			case 10:
				b.opt.pgbench_seconds = parse_count(optarg, "pgbench-seconds", 1);
				break;
			case 11:
				b.opt.statements = parse_count(optarg, "statements", 0);
				break;
			case 12:
				b.opt.timeout = parse_count(optarg, "timeout", 1);
				break;
			case 13:
				b.opt.http_url = optarg;
				break;
			case 14:
				b.opt.http_workflows = parse_count(optarg, "http-workflows", 0);
				break;
			case 15:
				b.opt.http_steps = parse_count(optarg, "http-steps", 1);
				break;
			case 16:
				b.opt.retry_workflows = parse_count(optarg, "retry-workflows", 0);
				break;
			case 17:
				b.opt.retry_steps = parse_count(optarg, "retry-steps", 1);
				break;
			case 20:
				b.opt.limit_workflows = parse_count(optarg, "limit-workflows", 0);
				break;
			case 18:
				parse_widths(&b.opt, optarg);
				break;
			case 19:
				b.opt.map_rows = parse_count(optarg, "map-rows", 0);
				break;
			case 45:
				b.opt.lanes_rows = parse_count(optarg, "lanes-rows", 0);
				break;
			case 46:
				b.opt.lanes = parse_count(optarg, "lanes", 1);
				break;
			case 47:
				b.opt.http_map_items = parse_count(optarg, "http-map-items", 0);
				break;
			case 21:
				b.opt.otel_url = optarg;
				break;
			case 22:
				b.opt.lock_workflows = parse_count(optarg, "lock-workflows", 0);
				break;
			case 'v':
				b.opt.verbose = true;
				break;
			case 'V':
				printf("pgd_bench %s\n", PGDB_VERSION);
				exit(0);
			case '?':
				if (strcmp(argv[optind - 1], "-?") == 0 || strcmp(argv[optind - 1], "--help") == 0)
				{
					usage(progname);
					exit(0);
				}
				fprintf(stderr, "Try \"%s --help\" for more information.\n", progname);
				exit(2);
		}
	}
	if (optind < argc)
	{
		fprintf(stderr, "%s: too many command-line arguments (first is \"%s\")\n",
				progname, argv[optind]);
		fprintf(stderr, "Try \"%s --help\" for more information.\n", progname);
		exit(2);
	}

	/* the widest fan-out's balanced tree: 2w - 1 nodes */
	b.opt.max_nodes = PGDB_MAX_NODES;
	for (c = 0; c < b.opt.nwidths; c++)
		if (2 * b.opt.widths[c] - 1 > b.opt.max_nodes)
			b.opt.max_nodes = 2 * b.opt.widths[c] - 1;
	b.conn = pgdb_connect(&b, &b.err, b.errstr);
	ok = b.conn != NULL && pgdb_run(&b);
	if (b.nrows > 0)
		print_table(&b);
	if (!ok)
		fprintf(stderr, "%s: %s\n", progname, b.errstr);
	PQfinish(b.conn);
	free(b.pgss_report);
	return ok ? 0 : 1;
}
