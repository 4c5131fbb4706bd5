/*-------------------------------------------------------------------------
 *
 * engine.h
 *	  The durable engine: instance graphs in memory, the state transitions,
 *	  the step transaction and the wake-ups that connect them.
 *
 * Vocabulary.
 *	 scope		 an execution scope, named by its execution id: for the root
 *				 "<instance>::<generation>" (the generation grows with each
 *				 iteration of a root loop), for each JOIN/RACE branch
 *				 "<parent scope>::<branch root id>::1", and for the body of a
 *				 loop that is not the root "<parent scope>::<loop id>::<gen>".
 *				 A node's status_details is {"execution_id": <its scope>},
 *				 so a step of an old generation or a lost branch no longer
 *				 matches its node and is recognised as stale.  Named results
 *				 live per scope.
 *	 task		 a row of df_internal.tasks: "start" (an instance begins) or
 *				 "step" (a leaf node runs).  Compound nodes never have tasks:
 *				 they are started and finished by transitions.
 *
 * Locking rules (DESIGN.md §5): a transaction claims task rows with SKIP
 * LOCKED, runs user SQL, and only then locks the one df_internal.runs row of
 * the instance; every change to an instance's nodes, tasks, results and
 * status happens under that lock, except deleting the caller's own claimed
 * task.  Tasks claimed by others are never waited for (DELETE ... SKIP
 * LOCKED); their holders find out under the runs lock that they are dead.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_ENGINE_H
#define PG_DURABLE_ENGINE_H

#include "postgres.h"
#include "datatype/timestamp.h"
#include "utils/resowner.h"
#include "graph/graph.h"
#include "common/json.h"

#define PGD_ID_LEN 8

/* A node of an instance's graph as the engine sees it (immutable). */
typedef struct PgdNode
{
	char		id[PGD_ID_LEN + 1];
	DfNodeType	type;
	char	   *query;			/* as stored in df.nodes (config or SQL) */
	char	   *result_name;	/* NULL if none */
	int			parent;			/* index in PgdGraph.nodes, -1 for the root */
	int			left;			/* child indexes, -1 when absent */
	int			right;
	int			condition;
	int			nextras;
	int		   *extras;
} PgdNode;

/* The immutable structure of one instance, cached per process. */
typedef struct PgdGraph
{
	char		instance_id[PGD_ID_LEN + 1];
	int			root;			/* index of the root node */
	int			nnodes;
	PgdNode    *nodes;
	char	   *token;			/* identifies this incarnation of the id */
	MemoryContext cxt;			/* owns everything above */
} PgdGraph;

/* instance_graph.c */
extern PgdGraph *pgd_graph_get(const char *instance_id, const char *token);
extern int	pgd_graph_find(const PgdGraph *g, const char *node_id);
extern void pgd_graph_forget(const char *instance_id);

/* The outcome of a node. */
typedef struct PgdOutcome
{
	bool		ok;
	char	   *result;			/* ok: result JSON text; else the error text */
} PgdOutcome;

/* transition.c: run under the instance's runs lock, inside SPI */
extern void pgd_transition_start_instance(PgdGraph *g);
extern void pgd_transition_complete(PgdGraph *g, int node, const char *scope,
									PgdOutcome outcome);
extern bool pgd_node_is_live(PgdGraph *g, int node, const char *scope);
extern void pgd_loop_timer(PgdGraph *g, int loop, const char *loop_scope);
extern void pgd_end_instance(const char *instance_id);
extern char *pgd_parent_scope(PgdGraph *g, int node, const char *scope);
extern DfJson *pgd_visible_results(const char *instance_id, const char *scope);

/*
 * engine_sql.c: small SPI helpers for the engine's own statements.
 * read_only = true runs on the unit's snapshot, taken before the task was
 * claimed and before the runs lock: it may miss the very commit that made
 * the task ready.  Reads of engine state must pass false, which takes a
 * fresh snapshot per statement (read committed).
 */
extern int	pgd_spi_exec(const char *sql, int nargs, const Oid *types,
						 const Datum *values, const char *nulls, bool read_only);
extern int	pgd_exec(const char *sql, int nargs, const char *const *args);
extern char *pgd_spi_getstring(int row, int col);

/* Run a statement whose parameters $1..$n are all text (a NULL pointer is SQL NULL). */
#define PGD_EXEC(sql, ...) \
	pgd_exec((sql), (int) (sizeof((const char *[]) {__VA_ARGS__}) / sizeof(const char *)), \
			 (const char *[]) {__VA_ARGS__})
extern Datum pgd_text_datum(const char *s);
extern ErrorData *pgd_subxact_caught(MemoryContext oldcxt, ResourceOwner oldowner);
extern bool pgd_lock_run(const char *instance_id, char **status);


/* start.c: the submitter, checked again whenever the engine acts for it */
extern char *pgd_identity_problem(Oid roleid);
extern bool pgd_check_submitter_at_load(const char *instance_id, Oid submitter);

/* wake.c */
extern void pgd_wake_register_xact_callback(void);
extern void pgd_flush_node_writes(void);
extern void pgd_discard_node_writes(void);
extern bool pgd_node_writes_pending(void);
extern void pgd_wake_at_commit(int ntasks);
extern void pgd_task_ready_at_commit(int64 task_id);
extern void pgd_task_due_at_commit(TimestampTz due);
extern bool pgd_ready_pop(int64 *task_id);
extern bool pgd_queue_scan_due(TimestampTz now, long *sleep_ms);
extern uint64 pgd_queue_scan_begin(void);
extern void pgd_queue_rescan(void);
extern void pgd_queue_scanned(uint64 gen, TimestampTz earliest);
extern void pgd_http_wake_at_commit(void);
extern void pgd_http_worker_attach(void);
extern void pgd_instance_finished_at_commit(const char *instance_id);
extern void pgd_executor_attach(int slot);
extern void pgd_executor_set_idle(bool idle);
extern void pgd_executor_set_running(const char *instance_id, const char *scope);
extern void pgd_interrupt_at_commit(const char *instance_id, const char *scope);
extern void pgd_await_wait(long timeout_ms);
extern void pgd_await_prepare(const char *instance_id);
extern void pgd_await_cancel(void);

/* timers.c: SLEEP, WAIT_SCHEDULE, SIGNAL (run under the runs lock) */
extern void pgd_timer_node_start(PgdGraph *g, int n, const char *scope);
extern void pgd_timer_fire(PgdGraph *g, int n, const char *scope);
extern void pgd_signal_deliver(PgdGraph *g);

/* events.c: the event history (written under the runs lock) */
#define PGD_EVENT_ERROR_LEN 200
extern void pgd_event_add(const char *instance_id, const char *kind, const char *node_id,
						  const char *scope, int attempt, const char *detail);
extern char *pgd_event_detail(const char *key, const char *text);
extern void pgd_event_set_attempt(const char *node_id, int attempt);
extern int	pgd_event_attempt(const char *node_id);

/* maintenance.c */
extern bool pgd_log_allowed(void);

/* executor.c */
typedef struct PgdRunInfo
{
	Oid			submitted_by;
	char	   *label;
	char	   *vars;			/* jsonb text */
	char	   *status;
	char	   *token;
	char	   *database;		/* where the steps run; NULL = here */
} PgdRunInfo;
extern bool pgd_load_run(const char *instance_id, PgdRunInfo *run);
extern DfJson *pgd_step_vars(const char *instance_id, PgdRunInfo *run);
extern bool pgd_extension_exists(void);
extern void pgd_begin_unit(const char *activity);
extern void pgd_end_unit(void);

#endif							/* PG_DURABLE_ENGINE_H */
