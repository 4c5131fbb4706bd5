/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The engine store (statements.c): every statement the engine runs against
 *	  its tables, each with a name and one way to call it, and the buffer
 *	  of node writes that goes out with one statement.
 *
 * The transition code decides (transition.c) and its driver (apply.c)
 * calls these functions to write; the workers call them to claim and
 * lease tasks.  Nothing outside the store writes an engine table, except
 * df.start's own inserts of the instance it creates (api/start.c).
 *
 * Everything runs inside SPI, in the caller's transaction.  What a
 * function returns (strings, arrays) is allocated in SPI's context and
 * lasts until the caller's SPI_finish, unless it takes a memory context
 * of its own.  Node writes
 * are buffered (pgd_store_node_running / _done) and written by the next
 * statement of the store or by pgd_store_flush; a transaction that would
 * commit with writes still buffered is refused by the store's commit hook.
 *
 * Locks: pgd_store_lock_run takes the instance's df_internal.runs row (FOR
 * UPDATE); task claims and deletes of others' tasks use SKIP LOCKED
 * (docs/design/architecture.md §5 rule 1).  Every other write concerns rows of
 * the instance whose runs row the caller holds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STORE_H
#define PG_DURABLE_STORE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/relcache.h"

#include "core/breaker_state.h"
#include "core/task_ref.h"
#include "store/types.h"

/* A claimed task, with its instance's runs row read in the same statement. */
typedef struct PgdClaim
{
	PgdTaskRef	task; /* a row, a held task or a start's marker */
	char	   *instance_id;
	char	   *node_id; /* NULL for start and deliver tasks */
	char	   *scope;
	PgdTaskKind kind;
	int			attempts;
	int			engine_errors;	   /* claims rolled back by an engine error */
	char	   *last_engine_error; /* the last one's message, or NULL */
	bool		has_run;		   /* false: the instance has no runs row */
	PgdRunInfo	run;
} PgdClaim;

/* A df.nodes row as loaded for the graph cache. */
typedef struct PgdStoredNode
{
	char *id;
	char *type;
	char *query;
	char *result_name;
	char *left;
	char *right;
} PgdStoredNode;

/* A due HTTP task, for the HTTP worker's claim. */
typedef struct PgdHttpDue
{
	int64 id;
	char *instance_id;
	char *node_id;
	char *scope;
	int	  attempts;
} PgdHttpDue;

/* One problem df.check() reports (df_internal.check_rows()). */
typedef struct PgdProblem
{
	char *instance_id;
	char *problem;
	char *node_id;
	char *scope;
	char *detail;
} PgdProblem;

/* --- instances and their runs rows --- */
extern bool pgd_store_lock_run(const char		 *instance_id,
							   PgdInstanceStatus *status);
extern bool pgd_store_load_run(const char *instance_id, PgdRunInfo *run);
extern bool pgd_store_instance_trace(const char *instance_id, char **trace_id,
									 char **traceparent, char **tracestate);
extern void pgd_store_instance_started(const char *instance_id,
									   const char *scope);
extern bool pgd_store_instance_finished(const char		 *instance_id,
										PgdInstanceStatus status);
/*
 * The one change of an instance's status (df.instances, and the runs row
 * while it runs): from a status of from_mask (PGD_STATUS_MASK of each; an
 * instance without a runs row counts as ended) to to; a cassert build
 * asserts the previous status.  False when its df.instances row is gone.
 */
extern bool pgd_store_set_instance_status(const char *instance_id,
										  int from_mask, PgdInstanceStatus to);
extern Oid	pgd_store_instance_submitter(const char *instance_id);
extern void pgd_store_end_instance(const char *instance_id);
extern void pgd_store_cancel_running_nodes(const char *instance_id);
extern int	pgd_store_load_nodes(const char *instance_id, char **root_id,
								 PgdStoredNode **rows);

/* --- tasks --- */
extern void pgd_store_task_add(const char *instance_id, const char *node_id,
							   const char *scope, PgdTaskKind kind);
extern void pgd_store_timer_add(const char *instance_id, const char *node_id,
								const char *scope, TimestampTz at);
extern void pgd_store_task_requeue(const PgdClaim *task, TimestampTz at);
extern void pgd_store_task_delete(int64 task_id);
extern void pgd_store_drop_scope(const char *instance_id, const char *scope);
extern void pgd_store_deliver_tasks_drop(const char *instance_id);
extern void pgd_store_drop_wait_timer(const char *instance_id,
									  const char *node_id, const char *scope);
extern bool pgd_store_claim(PgdTaskRef task, PgdClaim *claim);
/* starts by marker (tasks.c) */
extern void pgd_store_start_ready(const char *instance_id);
/*
 * The start sweep in batches of at most PGD_START_SWEEP_BATCH runs rows, one
 * transaction each, so that no transaction of it runs long however many
 * starts are pending.
 */
#define PGD_START_SWEEP_BATCH 1000
extern int	pgd_store_start_sweep(const char *after, int max,
								  char next[PGD_ID_LEN + 1]);

/*
 * How long ready work may wait for an executor before df.check() and the
 * log report it, and how much has waited longer (tasks.c).
 */
#define PGD_READY_STALE_S 120
extern void pgd_store_stale_ready(int secs, int64 *tasks, int64 *starts);

/*
 * The hold of a restore (restore_hold.c, docs/design/restores.md): is this
 * database's work held; record that a restore loaded rows into table_name
 * (true when this made the hold, false when it was there already).
 */
extern bool pgd_store_restore_held(void);
extern bool pgd_store_restore_hold_add(const char *table_name);

/* step tasks an executor's batch holds before they are rows (tasks.c) */
extern void	 pgd_store_hold_step_tasks(bool hold);
extern void	 pgd_store_write_held_all(void);
extern void	 pgd_store_write_held_tasks(void);
extern void	 pgd_store_forget_held_tasks(const char *instance_id);
extern PgdTaskRef pgd_store_held_task_next(void);
extern PgdTaskRef pgd_store_held_task_made_here(const char *instance_id);
extern PgdTaskRef pgd_store_held_branch_next(void);
extern PgdTaskRef pgd_store_write_held_task(PgdTaskRef held);
extern void pgd_store_task_engine_error(PgdTaskRef task, const char *error);
extern bool	 pgd_store_oldest_ready(TimestampTz now, int64 *task_id);
extern bool	 pgd_store_oldest_ready_except(const Oid *roles, int nroles,
										   TimestampTz now, int64 *task_id);
extern bool	 pgd_store_next_due(TimestampTz now, TimestampTz *at);

/* --- HTTP leases --- */
extern int	 pgd_store_http_due(int max, PgdHttpDue **rows);
extern char *pgd_store_http_lease(int64 task_id, int seconds);
extern bool	 pgd_store_http_lease_held(int64 task_id, const char *token);
extern bool	 pgd_store_http_next_due(long *ms);
extern int	 pgd_store_http_leases_void(void);

/* --- nodes --- */
extern void pgd_store_node_running(const char *instance_id,
								   const char *node_id, const char *scope);
extern void pgd_store_node_done(const char *instance_id, const char *node_id,
								const char *scope, PgdOutcome outcome);
/* a started node's wait (a JSON object) into its held start's status_details */
extern bool pgd_store_node_waiting(const char *instance_id,
								   const char *node_id, const char *scope,
								   const char *json);
extern void pgd_store_flush(void);
/* a batch holds its node writes until it writes them before its commit */
extern void pgd_store_hold_writes(bool hold);
extern void pgd_store_write_node_writes(void);
/*
 * Has the table a trigger of the user's (not a foreign key's, not
 * pg_durable's own root-node check) that fires on event (TRIGGER_TYPE_INSERT
 * or TRIGGER_TYPE_UPDATE)?  Then the engine writes its rows by statements,
 * so that it fires, instead of straight into the heap (node_rows.c).
 */
extern bool pgd_store_user_trigger(Relation rel, int16 event);
/*
 * The one change of a node's status (node_writes.c): from a status of
 * from_mask (PGD_STATUS_MASK of each, asserted in a cassert build) to to,
 * completed or failed as outcome says; pgd_store_node_running and
 * pgd_store_node_done call it with the statuses a node may come from.
 */
extern void pgd_store_set_node_status(const char *instance_id,
									  const char *node_id, const char *scope,
									  int from_mask, PgdNodeStatus to,
									  PgdOutcome outcome);
extern void pgd_store_node_state(const char *instance_id, const char *node_id,
								 PgdNodeStatus *status, char **result);
/* ... of the nodes ids[0..n-1], in one statement (a JOIN's branches) */
extern void pgd_store_node_states(const char		*instance_id,
								  const char *const *ids, int n,
								  PgdNodeStatus *statuses, char **results);
extern int	pgd_store_node_stamps(const char		*instance_id,
								  const char *const *node_ids, int n,
								  char ***ids, PgdNodeStatus **statuses,
								  char ***stamps);

/* --- history --- */
extern void	 pgd_store_event_add(const char *instance_id, const char *kind,
								 const char *node_id, const char *scope,
								 int attempt, const char *detail);
extern void	 pgd_store_set_attempt(const char *node_id, int attempt);

/* --- sagas (sagas.c) --- */

/*
 * The undo of COMPENSATED node node_id, whose forward step completed in
 * scope, with the named results visible there (JSON text); returns its
 * sequence number, the completion order.
 */
extern int64 pgd_store_undo_register(const char *instance_id,
									 const char *node_id, const char *scope,
									 const char *results);

/* An undo a compensation took (pgd_store_undo_claim). */
typedef struct PgdUndoRow
{
	int64 seq;
	char *node_id;	/* the COMPENSATED node */
	char *scope;	/* the scope its forward step ran in */
	char *results;	/* the named results visible then (JSON text) */
	int	  attempts; /* the times it was taken, this one included */
} PgdUndoRow;

/*
 * The latest registered undo whose forward scope lies within 'within'
 * (all of them when all) becomes running (one more attempt), taken by the
 * compensation named owner; returns how many, in *rows.
 */
extern int pgd_store_undo_claim(const char *instance_id, const char *within,
								const char *owner, bool all,
								PgdUndoRow **rows);

/* Undo seq ended: 'done' or 'failed' (with error); returns its compensation. */
extern char *pgd_store_undo_finish(const char *instance_id, int64 seq, bool ok,
								   const char *error);

/* Is an undo registered within the scope and not run yet? */
extern bool pgd_store_undo_pending(const char *instance_id,
								   const char *within);

/* The undos of compensation owner still running, and those that failed. */
extern void pgd_store_undo_tally(const char *instance_id, const char *owner,
								 int *running, int *failed);

/*
 * The undos compensation owner (NULL: any) ran, latest registered first:
 * their COMPENSATED nodes, and NULL or the error of each that failed.
 */
extern int pgd_store_undos_done(const char *instance_id, const char *owner,
								char ***node_ids, char ***errors);

/*
 * Undos within the scope that were running (abandoned) and, when
 * failed_too, failed ones are registered again; their compensations.
 */
extern int pgd_store_undo_requeue(const char *instance_id, const char *within,
								  bool failed_too, char ***owners);

/* df.compensate: the stopped instance runs again; NULL, or what is wrong. */
extern char *pgd_store_instance_resume(const char *instance_id);

/* --- node MAP, df.map (map_items.c) --- */

/* The copies of a MAP's step template for a run of new items. */
typedef struct PgdMapCopy
{
	int	   nnodes; /* rows to insert into df.nodes */
	char **ids;
	char **types;
	char **queries; /* NULL items are SQL NULLs, and so below */
	char **result_names;
	char **lefts;
	char **rights;
	int	   nitems; /* the new items, in order: */
	char **roots;  /* ... the root of each one's copy */
} PgdMapCopy;

/* Every MAP child of the instance: map node, item number, child root; by map and item. */
extern int pgd_store_map_items_load(const char *instance_id, char ***maps,
									int **items, char ***children);

/* Insert the copies as df.nodes rows and list them as items first_item.. of map_id. */
extern void pgd_store_map_add(const char *instance_id, const char *map_id,
							  int first_item, const PgdMapCopy *copy);

/* Each item's row, the named result "item" in the scope its child runs in. */
extern void pgd_store_map_items_bind(const char *instance_id, int n,
									 const char *const *scopes,
									 const char *const *items);

/* The counters of a MAP execution (df_internal.maps): open, count, close. */
extern void pgd_store_map_open(const char *instance_id, const char *map_id,
							   const char *scope, int total, int started);
extern bool pgd_store_map_child_done(const char *instance_id,
									 const char *map_id, const char *scope,
									 int *total, int *started, int *finished);
extern void pgd_store_map_started(const char *instance_id, const char *map_id,
								  const char *scope, int started);
extern void pgd_store_map_close(const char *instance_id, const char *map_id,
								const char *scope);
/* ... read (-1 each when there is no row), for df.explain */
extern void pgd_store_map_counts(const char *instance_id, const char *map_id,
								 const char *scope, int *total, int *started,
								 int *finished);

/* The named results of the children node_ids of a MAP running in scope ($item among them) go. */
extern void pgd_store_map_drop_results(const char *instance_id,
									   const char *scope, int n,
									   const char *const *node_ids);

/* The results of the child roots node_ids as one JSON array, in that order. */
extern char *pgd_store_map_results(const char *instance_id, int n,
								   const char *const *node_ids);

/*
 * Lanes mode (df.map with collect): the query's rows in df_internal.map_rows,
 * keyed by the MAP execution (map node, scope) and item number.
 * rows_add: a chunk ({"rows": [...]}) from item first on, written from
 * inside the query's statement.  row_bind: item's row becomes the named
 * result "item" in item_scope (false: no such row).  row_done: the item's
 * row keeps keep (its result, or its error when failed), or goes when keep
 * is NULL.  lane_done: one more item finished (and failed), and the lane
 * takes the next item (*next, -1 for none: all started, or more than
 * tolerated failed).  item_results_drop: the named results of an ended
 * item's own scope ($item among them).  rows_size:
 * the bytes of the kept results as one array; rows_results: that array,
 * or with failures the failed items' errors; rows_drop: every row goes.
 */
extern void pgd_store_map_rows_add(const char *instance_id,
								   const char *map_id, const char *scope,
								   int64 first, const char *chunk);
extern bool pgd_store_map_row_bind(const char *instance_id,
								   const char *map_id, const char *scope,
								   int item, const char *item_scope);
extern void pgd_store_map_row_done(const char *instance_id,
								   const char *map_id, const char *scope,
								   int item, const char *keep, bool failed);
extern bool pgd_store_map_lane_done(const char *instance_id,
									const char *map_id, const char *scope,
									bool failed, int tolerated, int *total,
									int *finished, int *nfailed, int *next);
extern void pgd_store_map_item_results_drop(const char *instance_id,
											const char *item_scope);
extern int64 pgd_store_map_rows_size(const char *instance_id,
									 const char *map_id, const char *scope);
extern char *pgd_store_map_rows_results(const char *instance_id,
										const char *map_id, const char *scope,
										bool failures);
extern void pgd_store_map_rows_drop(const char *instance_id,
									const char *map_id, const char *scope);

/* --- the event bus (event_bus.c) --- */

/*
 * Take the first event the instance may still take of topic whose payload
 * contains filter (JSON text), of an xid at or above after_xid when given:
 * it is recorded as taken and *result is the EVENT node's result
 * {"topic","key","payload","published_at","event_id"}.  *horizon is the
 * xmin of the snapshot that looked, for the wait when there was none.
 */
extern bool pgd_store_event_take(const char *instance_id, const char *topic,
								 const char *filter, const char *after_xid,
								 char **result, char **horizon);

/* An EVENT wait, registered with the horizon of the look that found nothing. */
extern void pgd_store_event_wait_add(const char *instance_id,
									 const char *node_id, const char *scope,
									 const char *horizon);

/* The instance's registered EVENT waits, oldest first, with their horizons. */
extern int pgd_store_event_waits(const char *instance_id, char ***node_ids,
								 char ***scopes, char ***horizons);

/*
 * A deliver task for every instance whose EVENT wait a visible event
 * matches; returns how many, -1 when the schema has no bus (an older
 * version of the extension).
 */
extern int pgd_store_event_sweep(void);

/* Remove the events published more than retention_days ago (-1: no bus). */
extern int pgd_store_event_retention(int retention_days);

/* --- JOIN counters and loop state --- */
/*
 * A branch of a JOIN of width branches ended: how many still run (the
 * counter is made by the first end and deleted by the last).
 */
extern int	pgd_store_join_count(const char *instance_id, const char *node_id,
								 const char *scope, int width);
extern void pgd_store_join_close(const char *instance_id, const char *node_id,
								 const char *scope);
extern void pgd_store_joins_drop_scope(const char *instance_id,
									   const char *scope);
extern void pgd_store_loop_open(const char *instance_id, const char *node_id,
								const char *scope);
extern void pgd_store_loop_forget(const char *instance_id, const char *node_id,
								  const char *scope);
extern int	pgd_store_loop_next_generation(const char *instance_id,
										   const char *node_id,
										   const char *scope);
extern void pgd_store_loop_move_scope(const char *instance_id,
									  const char *node_id,
									  const char *from_scope,
									  const char *to_scope);
extern bool pgd_store_loop_count_iteration(const char  *instance_id,
										   const char  *node_id,
										   const char  *scope,
										   int64	   *iterations,
										   TimestampTz *started);

/* --- named results --- */
extern void pgd_store_result_save(const char *instance_id, const char *scope,
								  const char *name, const char *value);
extern void pgd_store_results_merge(const char *instance_id,
									const char *from_scope,
									const char *to_scope, bool keep);
/* Has the instance any named result, in any scope? */
extern bool pgd_store_has_results(const char *instance_id);
extern void pgd_store_results_move(const char *instance_id,
								   const char *from_scope,
								   const char *to_scope);
extern void pgd_store_results_drop_below(const char *instance_id,
										 const char *scope);
extern int	pgd_store_results_in(const char		   *instance_id,
								 const char *const *scopes, int nscopes,
								 char ***names, char ***values);

/* --- signals and waits --- */
extern bool pgd_store_signal_take(const char *instance_id, const char *name,
								  char **payload);
extern void pgd_store_signal_send(const char *instance_id, const char *name,
								  const char *data, bool is_json);
extern void pgd_store_wait_add(const char *instance_id, const char *node_id,
							   const char *scope, const char *name);
extern bool pgd_store_wait_remove(const char *instance_id, const char *node_id,
								  const char *scope);
extern void pgd_store_uncommitted_by_me(const char *instance_id, bool *started,
										bool *signals, bool *cancel);
extern bool pgd_store_wait_matched(const char *instance_id, char **node_id,
								   char **scope, char **name);

/* --- executor 0: readiness and heartbeat; maintenance --- */

/*
 * The version executor 0 writes into _worker_ready.schema_version when it
 * starts (the reference's 1).  df.start refuses new work while the row
 * holds another value: operators use that to stop intake.
 */
#define PGD_ENGINE_SCHEMA_VERSION 1

extern char *pgd_store_announce_ready(void);
extern bool	 pgd_store_ready_version(int *version);
extern bool	 pgd_store_heartbeat(const char *epoch_id);
extern int	 pgd_store_retention_batch(int days, int keep, int batch);
extern int	 pgd_store_problems(MemoryContext cxt, PgdProblem **problems);
extern bool	 pgd_store_problem_still_there(const char *instance_id,
										   const char *problem,
										   const char *node_id);
extern void	 pgd_store_drop_tasks_of_finished(const char *instance_id);
extern bool	 pgd_store_restore_step_task(const char *instance_id,
										 const char *node_id,
										 const char *scope);
extern bool	 pgd_store_restore_timer(const char *instance_id,
									 const char *node_id, const char *scope);

/* --- the wrapper nodes of orchestration/ (wrapper_state.c) --- */
extern void	 pgd_store_node_error(const char *instance_id, const char *node_id,
								  PgdOutcome outcome);
extern void	 pgd_store_node_details_merge(const char *instance_id,
										  const char *node_id,
										  const char *json);
extern char *pgd_store_node_details(const char *instance_id,
									const char *node_id);
extern void	 pgd_store_step_retry_at(const char *instance_id,
									 const char *node_id, const char *scope,
									 TimestampTz at);
extern int64 pgd_store_http_retry_at(const char *instance_id,
									 const char *node_id, const char *scope,
									 TimestampTz at);
extern void	 pgd_store_node_tasks_drop(const char *instance_id,
									   const char *node_id, const char *scope);
extern void	 pgd_store_http_tasks_gone(const int64 *ids, int n, bool *gone);
extern void	 pgd_store_node_error_code(const char *instance_id,
									   const char *node_id,
									   PgdOutcome *outcome);

/* --- keyed locks (lock_keys.c) --- */
typedef struct PgdLockEntry
{
	char *key;
	bool  held;
	int64 token; /* 0 while waiting */
} PgdLockEntry;

/* Take key for a LOCK node execution: true when held, else it waits (queued). */
extern bool pgd_store_lock_take(const char *instance_id, const char *node_id,
								const char *scope, const char *key,
								bool shared, int64 *token);
/* The entries of one LOCK node execution, in key order. */
extern int pgd_store_lock_entries(const char *instance_id, const char *node_id,
								  const char *scope, PgdLockEntry **entries);
/* The largest key the nodes node_ids (comma-separated) of the instance hold; NULL: none. */
extern char *pgd_store_lock_max_held(const char *instance_id,
									 const char *node_ids);
/*
 * Release the instance's entries: of node_id in scope; of every node in
 * scope and below (node_id NULL); all (both NULL).  The keys go to their
 * next waiters in the same transaction.
 */
extern void pgd_store_lock_release(const char *instance_id,
								   const char *node_id, const char *scope);
/* ... of node_id in scope, a LOCK node of one key */
extern void pgd_store_lock_release_one(const char *instance_id,
									   const char *node_id, const char *scope);
extern void pgd_store_lock_result_forget(const char *instance_id,
										 const char *scope);

/* the transaction buffer and its kinds (txn_kinds.c, from _PG_init) */
extern void pgd_store_init(void);

/* batches */
extern void pgd_store_set_run_nowait(bool nowait);
/*
 * The inbox: the next pgd_store_lock_run takes the row with
 * SKIP LOCKED; when it returns false, pgd_store_run_held says whether that
 * was because another transaction holds the row (else it is gone).
 */
extern void pgd_store_set_run_skip(bool skip);
extern bool pgd_store_run_held(void);

/* --- the inbox (inbox.c, docs/design/batches-and-inbox.md §4) --- */

/* A completion waiting in the inbox. */
typedef struct PgdInboxEntry
{
	char	  *node_id;
	char	  *scope;
	int		   attempt;
	PgdOutcome outcome;
} PgdInboxEntry;

extern void pgd_store_inbox_add(const char *instance_id, const char *node_id,
								const char *scope, int attempt,
								const PgdOutcome *outcome);
extern bool pgd_store_inbox_pending(const char *instance_id);
extern int pgd_store_inbox_take(const char *instance_id, PgdInboxEntry **rows);
extern int pgd_store_inbox_drop(const char *instance_id);
extern bool pgd_store_inbox_other_apply(const char *instance_id,
										int64		after_id);
extern void pgd_store_inbox_restore_task(const char *instance_id);

/* --- limits (limit_slots.c) --- */

/* What a LIMIT node execution does next, from the key's queue. */
typedef enum PgdLimitVerdict
{
	PGD_LIMIT_WAIT,	  /* queued (or nothing to do): a timer will come */
	PGD_LIMIT_START,  /* it holds a slot: start its subtree now */
	PGD_LIMIT_TIMEOUT /* its queue_timeout passed: it left the queue */
} PgdLimitVerdict;

/*
 * LIMIT node node_id, in scope, enters key (settings: max_concurrent and
 * burst 0 = none, rate 0 = none; deadline 0 = none): at the end of the
 * key's queue, which is pumped under the key's row lock.  Waiters of other
 * instances that got a slot get a timer now on their LIMIT node.
 */
extern PgdLimitVerdict
pgd_store_limit_enter(const char *instance_id, const char *node_id,
					  const char *scope, const char *key, int max_concurrent,
					  double rate, int burst, TimestampTz deadline);

/* A timer of LIMIT node node_id in scope fell due. */
extern PgdLimitVerdict pgd_store_limit_timer(const char *instance_id,
											 const char *node_id,
											 const char *scope);

/*
 * LIMIT node executions ended: node_id's in scope exactly; with node_id
 * NULL every one in scope or below; with scope NULL too, the instance's.
 * Their slots and queue places go and their keys' queues are pumped.
 */
extern void pgd_store_limit_release(const char *instance_id,
									const char *node_id, const char *scope);

/*
 * Reconciliation's repair of a df.check() problem of a limit (problem is
 * its name) on LIMIT node node_id in scope: the slot or queue place of a
 * node that ended goes (and its key's queue moves on), a stuck queue is
 * pumped, a lost admission gets its timer.  False when nothing was done.
 */
extern bool pgd_store_limit_repair(const char *instance_id,
								   const char *node_id, const char *scope,
								   const char *problem);

/* Retention: forget up to max idle keys (nobody in, bucket full); how many went. */
extern int pgd_store_limit_forget_idle(int max);

/* --- owners and spaces of coordination objects (spaces.c) --- */

typedef enum PgdSpaceKind
{
	PGD_SPACE_LIMIT,  /* a df.limit key */
	PGD_SPACE_LOCK,	  /* a df.with_lock key (its space: the text before ':') */
	PGD_SPACE_TOPIC,  /* an event topic */
	PGD_SPACE_BREAKER /* a circuit breaker (no own space: may_use only) */
} PgdSpaceKind;

/*
 * The engine's name for name of kind used by role with privilege ("use";
 * a topic's "publish" or "subscribe"): name itself when it is shared and
 * the role may use it, else "~<role oid>/<name>", the role's own.
 */
extern char *pgd_store_space_name(PgdSpaceKind kind, const char *name,
								  Oid role, const char *privilege);

/* Does role own (a member of the owner) or hold a grant of privilege on it? */
extern bool pgd_store_may_use(PgdSpaceKind kind, const char *name, Oid role,
							  const char *privilege);

/* The settings of a shared limit made by df.create_limit (found false: none). */
typedef struct PgdSharedLimit
{
	bool   found;
	int	   max_concurrent; /* 0: none */
	double rate;		   /* 0: none */
	int	   burst;
} PgdSharedLimit;

/* pgd_store_space_name of a limit key, with the shared limit's settings. */
extern char *pgd_store_limit_space(const char *key, Oid role,
								   PgdSharedLimit *shared);

/* A name as its user wrote it: without the prefix of a role's own space. */
extern const char *pgd_space_display(const char *name);

/* ---------------------------------------------------------------------
 * df.start's rows written without a statement (start_rows.c)
 * ---------------------------------------------------------------------
 */

/* An instance's id, from the strong source. */
extern void pgd_store_random_instance_id(char *out);
/* The error of a start that drew ten ids, all taken. */
extern void pgd_store_no_free_instance_id(void);

/*
 * Has df.instances the trace columns?  Every schema but 0.3.0's before
 * ALTER EXTENSION UPDATE, whose df.start takes no trace either.
 */
extern bool pgd_store_instances_traced(void);

/*
 * The df.instances row of a start without an idempotency key, under a
 * fresh random id put in instance_id; trace_id NULL leaves the trace
 * columns at their defaults.  False, nothing written, when the statement
 * must write it (a user's INSERT trigger, a table of an older schema).
 */
extern bool pgd_store_start_instance_row(char *instance_id, const char *label,
										 const char *root_id, Oid userid,
										 const char *database,
										 const char *trace_id,
										 const char *traceparent,
										 const char *tracestate);

/* The runs row of a new instance with the caller's variables; false as above. */
extern bool pgd_store_start_run_row(const char *instance_id, Oid userid,
									const char *label, const char *database,
									const char *key, bool events);

/* One node row of df.start (NULL: SQL NULL). */
typedef struct PgdStartNode
{
	const char *id;
	const char *node_type;
	const char *query;
	const char *result_name;
	const char *left;
	const char *right;
} PgdStartNode;

/*
 * The count node rows of a new instance, straight into df.nodes's heap and
 * indexes, or by a statement when a trigger of the user's must fire.
 */
extern void pgd_store_start_nodes(const char *instance_id, Oid submitter,
								  const char *database, int count,
								  const PgdStartNode *rows);

/* ---------------------------------------------------------------------
 * Circuit breakers (breakers.c)
 * ---------------------------------------------------------------------
 */
/* Read breaker name's definition and persisted state; false when it does not exist. */
extern bool pgd_store_breaker_load(const char *name, PgdBreakerSettings *s,
								   PgdBreakerState *state, TimestampTz *opened_at,
								   TimestampTz *open_until);

/*
 * Persist the changes of state of breaker name, oldest first, made by a
 * call of role (by_role; InvalidOid: none, such as an expired permit).
 */
extern void pgd_store_breaker_persist(const char *name,
									  const PgdBreakerChanges *ch,
									  Oid role);

#endif /* PG_DURABLE_STORE_H */
