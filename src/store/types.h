/*-------------------------------------------------------------------------
 *
 * types.h
 *	  The engine's vocabulary: ids, outcomes, task kinds and the statuses of
 *	  instances and nodes, as enums instead of strings.
 *
 * Vocabulary.
 *	 scope		 an execution scope, named by its execution id: for the root
 *				 "<instance>::<generation>" (the generation grows with each
 *				 iteration of a root loop), for each JOIN/RACE branch
 *				 "<parent scope>::<branch root id>::<gen>" (the generation
 *				 grows only when the branch root is a loop: the loop and
 *				 its body run in the branch's scope), and for the body of
 *				 any other loop "<parent scope>::<loop id>::<gen>"
 *				 (scope.c).  A node's status_details is {"execution_id":
 *				 <its scope>}, so a step of an old generation or a lost
 *				 branch no longer matches its node and is recognised as
 *				 stale.  Named results live per scope.
 *	 task		 a row of df_internal.tasks (PgdTaskKind).  Compound nodes
 *				 never have tasks: transitions start and finish them.
 *
 * The text forms are the ones stored in the tables (df.instances.status,
 * df.nodes.status, df_internal.tasks.kind) and shown to users.
 *
 * Locks: none; pure functions (types.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STORE_TYPES_H
#define PG_DURABLE_STORE_TYPES_H

#include "postgres.h"

/* Instance and node ids: 8 characters (df.start makes them). */
#define PGD_ID_LEN 8

/*
 * The outcome of a node.  A failure may carry its error code
 * (docs/design/failure-handling.md §2: "sql:<SQLSTATE>", "http:<status>",
 * "timeout", "connection", "fail", ...; NULL when the engine itself failed the
 * node) and, for an HTTP 429/503, the server's Retry-After in milliseconds (0:
 * none).  Brace initializers leave both unset.
 */
typedef struct PgdOutcome
{
	bool  ok;
	char *result;	 /* ok: result JSON text; else the error text */
	char *code;		 /* failed: the error code, or NULL */
	char *node;		 /* failed: the node that failed first (set by apply.c) */
	bool  retryable; /* failed: df.fail(retryable => true) */
	int64 retry_after_ms;
	bool  compensated; /* failed: a SAGA's body, whose undos ran */
	bool  final;	   /* failed: never retried (df.fail_task(retryable => false)) */
} PgdOutcome;

/*
 * What a task row asks for.  Every task is deleted by the transaction that
 * consumes it; an 'http' task first takes a lease (worker/http_worker.c).
 */
typedef enum PgdTaskKind
{
	PGD_TASK_START,	  /* made by the start sweep, a prepared df.start,
								 * an engine error in a marker's start or an
								 * older schema (a start is otherwise a marker,
								 * wake.h); -> the root starts */
	PGD_TASK_STEP,	  /* a SQL leaf runs; -> the node completes, or
								 * the task is put back (user deadlock) */
	PGD_TASK_TIMER,	  /* a SLEEP, WAIT_SCHEDULE, signal timeout or
								 * loop iteration fell due; -> the node moves on */
	PGD_TASK_DELIVER, /* df.signal: buffered signals meet their waits */
	PGD_TASK_HTTP,	  /* an HTTP leaf; claimed only by the HTTP worker */
	PGD_TASK_APPLY	  /* completions wait in the inbox */
} PgdTaskKind;

/*
 * df.instances.status.  pending -> running (the start: a marker or a start
 * task) -> completed | failed (the root finishes) | cancelled (df.cancel,
 * from pending or running) | compensated (the root failed and the
 * registered undos ran; the instance stays running while they run).  The
 * last four are terminal: no transition moves an instance on, but for
 * df.compensate, which takes a failed instance whose compensation a failed
 * undo stopped back to running (orchestration/saga_resume.c).
 */
typedef enum PgdInstanceStatus
{
	PGD_INSTANCE_PENDING,
	PGD_INSTANCE_RUNNING,
	PGD_INSTANCE_COMPLETED,
	PGD_INSTANCE_FAILED,
	PGD_INSTANCE_CANCELLED,
	PGD_INSTANCE_COMPENSATED /* the body failed and its undos ran */
} PgdInstanceStatus;

/* An instance's df_internal.runs row. */
typedef struct PgdRunInfo
{
	Oid				  submitted_by;
	char			 *label;
	char			 *vars; /* jsonb text */
	PgdInstanceStatus status;
	char			 *token;	/* created_at: this incarnation of the id */
	char			 *database; /* where the steps run; NULL = here */
} PgdRunInfo;

/*
 * df.nodes.status.  pending -> running (the node starts in a scope) ->
 * completed | failed.  A loop body node goes back to running in its next
 * generation; the stamp (status_details) says which generation a row
 * belongs to.  A node still running when its instance ends becomes
 * cancelled (pgd_store_cancel_running_nodes): its work was stopped, and
 * an ended instance shows no node running.
 */
typedef enum PgdNodeStatus
{
	PGD_NODE_PENDING,
	PGD_NODE_RUNNING,
	PGD_NODE_COMPLETED,
	PGD_NODE_FAILED,
	PGD_NODE_CANCELLED,
	PGD_NODE_ABSENT /* no row; or a status the engine does not know */
} PgdNodeStatus;

/* A set of statuses, for the previous status a change of status allows. */
#define PGD_STATUS_MASK(s) (1 << (s))
#define PGD_INSTANCE_ENDED \
	(PGD_STATUS_MASK(PGD_INSTANCE_COMPLETED) | \
	 PGD_STATUS_MASK(PGD_INSTANCE_FAILED) | \
	 PGD_STATUS_MASK(PGD_INSTANCE_CANCELLED) | \
	 PGD_STATUS_MASK(PGD_INSTANCE_COMPENSATED))

/* The terminal instance statuses as a SQL list, for "status NOT IN (...)". */
#define PGD_SQL_TERMINAL_STATUSES \
	"('completed', 'failed', 'cancelled', 'compensated')"

extern const char *pgd_task_kind_name(PgdTaskKind kind);
extern bool		   pgd_task_kind_parse(const char *name, PgdTaskKind *kind);
extern const char *pgd_instance_status_name(PgdInstanceStatus status);
extern bool		   pgd_instance_status_parse(const char		   *name,
											 PgdInstanceStatus *status);
extern bool pgd_node_status_parse(const char *name, PgdNodeStatus *status);
/* A node's status from its text: PGD_NODE_ABSENT for NULL or an unknown one. */
extern PgdNodeStatus pgd_node_status_of(const char *name);
/* completed or failed: nothing moves the node on in its execution */
extern bool pgd_node_status_is_terminal(PgdNodeStatus status);

/*
 * Is this status (of an instance or a node, as text) a terminal one?
 * completed, failed, cancelled, compensated; NULL is not.
 */
extern bool pgd_is_terminal(const char *status);

/* A failed outcome with a formatted message. */
extern PgdOutcome pgd_failure(const char *fmt, ...) pg_attribute_printf(1, 2);

/* An event's error detail is cut to this many bytes (at a character boundary). */
#define PGD_EVENT_ERROR_LEN 200

/* The kind of an error code: what comes before its first colon. */
extern char *pgd_error_kind(const char *code);
/* {"kind": ..., "code": ..., "message": ..., "node": ...}: what $error is. */
extern char *pgd_error_json(PgdOutcome outcome);
/* {"<key>": "<text cut to PGD_EVENT_ERROR_LEN>"}: an event's detail */
extern char *pgd_event_detail(const char *key, const char *text);
/* The detail of a node_failed event: the cut error, its code and kind. */
extern char *pgd_event_error_detail(PgdOutcome outcome);

#endif /* PG_DURABLE_STORE_TYPES_H */
