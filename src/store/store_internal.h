/*-------------------------------------------------------------------------
 *
 * store_internal.h
 *	  What the files of src/store/ share and nothing else sees: the names
 *	  of the statements and the one way to run them (statements.c), the
 *	  direct row access (rows.c, node_rows.c, node_reads.c, task_rows.c),
 *	  and the transaction buffer with the operations of each kind of held
 *	  write (txn_buffer.c, txn_kinds.c).
 *
 * Nothing outside the store includes this header.
 *
 * Locks: see store.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STORE_INTERNAL_H
#define PG_DURABLE_STORE_INTERNAL_H

#include "postgres.h"

#include "executor/spi.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"

#include "store/types.h"

struct PgdRunInfo;	  /* store.h */
struct PgdClaim;	  /* store.h */
struct PgdStoredNode; /* store.h */

/*
 * The statements.  The order of the enum and of the table is the same;
 * each entry says what the statement is for.
 */
typedef enum PgdStmt
{
	STMT_RUN_LOCK,
	STMT_RUN_STARTED,
	STMT_INSTANCE_STARTED,
	STMT_INSTANCE_FINISHED,
	STMT_INSTANCE_SUBMITTER,
	STMT_END_INSTANCE,
	STMT_CANCEL_RUNNING_NODES,
	STMT_RESUME_CANCELLED_NODES,
	STMT_TASK_START,
	STMT_TASK_STEP,
	STMT_TASK_HTTP,
	STMT_TASK_DELIVER,
	STMT_TASK_TIMER,
	STMT_TASK_REQUEUE,
	STMT_TASK_DELETE,
	STMT_TASKS_DROP_SCOPE,
	STMT_WAITS_DROP_SCOPE,
	STMT_TASK_DROP_WAIT_TIMER,
	STMT_TASK_DELIVER_DROP,
	STMT_TASK_OLDEST_READY,
	STMT_TASK_OLDEST_READY_SHARE,
	STMT_TASK_NEXT_DUE,
	STMT_TASK_ENGINE_ERROR,
	STMT_START_TASK_OF_MARKER,
	STMT_START_MARKER_ERROR,
	STMT_HTTP_DUE,
	STMT_HTTP_LEASE,
	STMT_HTTP_LEASE_TOKEN,
	STMT_HTTP_NEXT_DUE,
	STMT_HTTP_LEASES_VOID,
	STMT_EVENT_ADD,
	STMT_JOIN_OPEN,
	STMT_JOINS_DROP_SCOPE,
	STMT_LOOP_OPEN,
	STMT_LOOP_FORGET,
	STMT_LOOP_NEXT_GENERATION,
	STMT_LOOP_MOVE_SCOPE,
	STMT_LOOP_COUNT_ITERATION,
	STMT_RESULT_SAVE,
	STMT_RESULTS_COPY,
	STMT_RESULTS_DROP_SCOPE,
	STMT_RESULTS_MOVE,
	STMT_RESULTS_DROP_BELOW,
	STMT_RESULTS_IN,
	STMT_SIGNAL_TAKE,
	STMT_SIGNAL_SEND,
	STMT_SIGNALS_AND_CANCELS_XMIN,
	STMT_WAIT_ADD,
	STMT_WAIT_REMOVE,
	STMT_WAIT_MATCHED,
	STMT_READY_ANNOUNCE,
	STMT_READY_VERSION,
	STMT_EPOCH_CLEAR,
	STMT_EPOCH_NEW,
	STMT_HEARTBEAT,
	STMT_RETENTION_BATCH,
	STMT_PROBLEMS,
	STMT_PROBLEM_STILL_THERE,
	STMT_DROP_TASKS_OF_FINISHED,
	STMT_RESTORE_STEP_TASK,
	STMT_RESTORE_TIMER,
	/* the wrapper nodes of orchestration/ (wrapper_state.c) */
	STMT_NODE_DETAILS_MERGE,
	STMT_NODE_DETAILS,
	STMT_TASK_STEP_AT,
	STMT_HTTP_RETRY_AT,
	STMT_TASKS_OF_NODE_DROP,
	STMT_HTTP_TASKS_GONE,
	/* sagas (sagas.c) */
	STMT_UNDO_REGISTER,
	STMT_UNDO_NEXT,
	STMT_UNDO_FINISH,
	STMT_UNDOS_DONE,
	STMT_UNDO_PENDING,
	STMT_UNDO_TALLY,
	STMT_UNDO_REQUEUE,
	/* batches */
	STMT_RUN_LOCK_NOWAIT,
	/* maintenance */
	STMT_START_SWEEP,
	STMT_START_TASKS,
	STMT_STALE_READY,
	/* the hold of a restore */
	STMT_RESTORE_HELD,
	STMT_RESTORE_HOLD_ADD,
	STMT_COUNT
} PgdStmt;

#define PGD_STMT_MAX_ARGS 12

/*
 * The writes a transaction may hold in memory instead of rows, which a
 * statement that reads (or writes next to) them needs written first: the
 * node writes of a transition or a batch (node_writes.c), the step tasks a
 * batch made ready (tasks.c), the JOIN counts it keeps (joins_loops.c)
 * and the counters of MAPs in lanes mode (map_items.c).  Each statement
 * names them in its entry; nothing is inferred from its text.
 *
 * A statement that reads or writes df.nodes or the history, or calls one
 * of the extension's functions (which may read anything: df.check()'s
 * rows), names FLUSH_NODE_WRITES; one that reads the queue or the JOIN
 * counters (df.check()'s rows too) names FLUSH_TASKS or FLUSH_JOIN_COUNTS,
 * one that reads or writes a MAP's counters FLUSH_MAP_COUNTS;
 * one that reads the entries of keyed locks FLUSH_LOCK_KEYS, one that
 * counts the holders of a limit key FLUSH_LIMIT_SLOTS.
 * Those that add tasks, or a JOIN counter, need nothing written before
 * them.  The others leave the node writes held, so that a transition's
 * writes go out together, and a batch's until its commit: reading the
 * runs row (a df.limit key template) or queueing a task between two node
 * writes would split them into statements of their own, and taking a
 * signal or a wait between a step's start and its end would make them two
 * updates.
 */
#define FLUSH_NODE_WRITES HELD_MASK(HELD_NODE_WRITES) /* df.nodes, the history */
#define FLUSH_TASKS		  HELD_MASK(HELD_TASKS)		  /* df_internal.tasks */
#define FLUSH_JOIN_COUNTS HELD_MASK(HELD_JOIN_COUNTS) /* df_internal.joins */
#define FLUSH_MAP_COUNTS  HELD_MASK(HELD_MAP_COUNTS)  /* df_internal.maps */
#define FLUSH_LOCK_KEYS	  HELD_MASK(HELD_LOCK_KEYS)	  /* locks, lock_keys */
#define FLUSH_LIMIT_SLOTS HELD_MASK(HELD_LIMIT_SLOTS) /* limit_holders */

/*
 * Which instances a statement touches: those of one instance, named by its
 * id in $1 (REACH_INSTANCE); one task, by its id (REACH_TASK); or rows of
 * many instances or of none, the queue scans, maintenance and the
 * engine's own rows (REACH_ALL).  On a PostgreSQL that distributes the
 * tables by instance, only REACH_INSTANCE statements stay on one node.
 */
typedef enum PgdStmtReach
{
	REACH_INSTANCE,
	REACH_TASK,
	REACH_ALL
} PgdStmtReach;

typedef struct PgdStmtDef
{
	const char	*name;
	int			 flush_first; /* FLUSH_*: the held writes written before it */
	PgdStmtReach reach;
	const char	*sql;
	int			 nargs;
	Oid			 types[PGD_STMT_MAX_ARGS];
	/*
	 * It reads df_internal.runs after df_internal.tasks, and runs outside
	 * any runs row lock: df_internal.runs is locked first (AccessShareLock),
	 * in the one order of the two tables (docs/design/store.md §7).
	 */
	bool		 runs_first;
} PgdStmtDef;

/* A statement's kept plan, made at its first run (store_exec). */
typedef struct PgdStmtPlan
{
	SPIPlanPtr plan;
	bool	   planned; /* pgd_spi_run_kept */
} PgdStmtPlan;

/*
 * Run statement def of a family's table, its plan kept in *p: the held
 * writes it names first, then the statement.  Returns SPI_processed; the
 * rows are in SPI_tuptable.
 */
extern int store_exec(const PgdStmtDef *def, PgdStmtPlan *p,
					  const Datum *values, const char *nulls);
/* store_exec with text arguments only (a NULL pointer is SQL NULL). */
extern int store_exec_text(const PgdStmtDef *def, PgdStmtPlan *p, int nargs,
						   const char *const *args);

#define STORE_EXEC(defs, plans, s, ...) \
	store_exec_text(&(defs)[s], &(plans)[s], \
					(int) (sizeof((const char *[]){__VA_ARGS__}) / \
						   sizeof(const char *)), \
					(const char *[]){__VA_ARGS__})


/*
 * Run statement s: the buffered node writes first, then its kept plan.
 * Returns SPI_processed; the rows are in SPI_tuptable.
 */
extern int store_run(PgdStmt s, const Datum *values, const char *nulls);


/* store_run with text arguments only (a NULL pointer is SQL NULL). */
extern int store_run_text(PgdStmt s, int nargs, const char *const *args);

#define RUN(stmt, ...) \
	store_run_text((stmt), \
				   (int) (sizeof((const char *[]){__VA_ARGS__}) / \
						  sizeof(const char *)), \
				   (const char *[]){__VA_ARGS__})

/* Column col (1-based) of a result row, as text (NULL for SQL NULL) or a Datum. */
extern char *store_get_string(int row, int col);
extern Datum store_get_datum(int row, int col, bool *isnull);

/* A text[] of n items (NULL items are SQL NULLs). */
extern Datum store_text_array(int n, const char *const *items);

/* node_rows.c: rel's column name (0 with missing_ok, else an error) */
extern AttrNumber store_attnum(Relation rel, const char *name,
							   bool missing_ok);
/* node_rows.c: column a of tup as a C string (NULL for SQL NULL) */
extern char *store_text_attr(HeapTuple tup, TupleDesc desc, AttrNumber a);
/* node_reads.c: an instance's root node and graph rows by the primary keys */
extern int store_load_node_rows(const char *instance_id, char **root_id,
								struct PgdStoredNode **rows);
/* task_rows.c: the runs row and a task's claim by the primary key */
extern HeapTuple store_key_row(Oid relid, Oid indexid, const char *col,
							   const char *value, LOCKMODE lockmode,
							   Relation *rel);
extern bool	 store_read_run_row(const char *instance_id, struct PgdRunInfo *r);
extern bool	 store_claim_task_row(int64 task_id, struct PgdClaim *c);
extern int64 store_insert_task_row(const char *instance_id,
								   const char *node_id, const char *scope,
								   const char *kind);
extern int	 store_join_count_row(const char *instance_id, const char *node_id,
								  const char *scope, int width, bool hold,
								  bool *by_statement, bool *absent);
extern void	 store_join_close_row(const char *instance_id, const char *node_id,
								  const char *scope);

/* How store_lock_run_row found an instance's runs row. */
typedef enum PgdRunLock
{
	PGD_RUN_TAKEN,	 /* locked (or held already) by this transaction */
	PGD_RUN_HELD,	 /* another transaction holds it */
	PGD_RUN_GONE,	 /* there is none */
	PGD_RUN_CHANGED, /* changed since the snapshot: lock it by statement */
} PgdRunLock;

extern PgdRunLock store_lock_run_row(const char	   *instance_id,
									 LockWaitPolicy wait, char **status);
extern bool		  store_delete_run_row(const char *instance_id);
extern int		  store_finish_instance_row(const char *instance_id,
											const char *status);
extern bool		  store_instance_submitter_row(const char *instance_id,
											   Oid		  *submitter);
/* node_rows.c: a scope as df_internal.events keeps it */
extern const char *store_event_scope(const char *instance_id,
									 const char *scope);
/*
 * node_rows.c: the instance's start and end as one history row, which a
 * flush of its node writes adds as its last row when it can
 * (store_flush_with_instance_event, node_writes.c, sets it; done says it
 * was written).
 */
typedef struct PgdFlushTail
{
	bool		set;
	bool		done;
	int64		event_id;
	const char *instance_id;
	TimestampTz started_at;
	const char *kind;
	const char *scope;
	const char *detail;
	bool		alone; /* no history row written since the instance started */
} PgdFlushTail;
extern PgdFlushTail store_flush_tail;
extern bool store_instance_event_row(int64 event_id, const char *instance_id,
									 TimestampTz started_at, const char *kind,
									 const char *scope, const char *detail);
extern bool store_flush_with_instance_event(int64		event_id,
											const char *instance_id,
											TimestampTz started_at,
											const char *kind,
											const char *scope,
											const char *detail, bool alone);
/* the history rows this process has written (a count that only grows) */
extern uint64 store_event_rows;
/* node_rows.c: an event of the history as a row of its own */
extern void store_history_insert(const char *instance_id, const char *kind,
								 const char *node_id, const char *scope,
								 int attempt, const char *detail);

/*
 * The key rows of locks and limits in one order (lock_keys.c): may a
 * statement that locks rows of space from key first on (NULL: not known)
 * wait for them?  store_keys_wait_begin(may) gives it a short lock_timeout
 * when not, store_keys_wait_end ends that, store_keys_wait_failed (in its
 * PG_CATCH) says which row was busy; store_keys_locked records a row it
 * locked (key NULL: rows not known).
 */
typedef enum PgdKeySpace
{
	PGD_KEYS_LOCK,	/* df_internal.lock_keys */
	PGD_KEYS_LIMIT, /* df_internal.limits */
	PGD_KEY_SPACES
} PgdKeySpace;

extern bool store_keys_may_wait(PgdKeySpace space, const char *first);
extern int	store_keys_wait_begin(bool may_wait);
extern void store_keys_wait_end(int nest);
extern void store_keys_wait_failed(MemoryContext cxt, int nest,
								   const char *what, const char *key);
/* Fail as a key row out of order that another transaction holds: "what" key "key" is busy. */
extern void store_keys_busy(const char *what, const char *key);
extern void store_keys_locked(PgdKeySpace space, const char *key);

/*
 * Run stmt, which locks key rows of space from key on (NULL: not known),
 * under that order.  A variable stmt assigns and the caller reads after
 * must be volatile.
 */
#define STORE_KEY_ROWS(space, what, key, stmt) \
	do \
	{ \
		MemoryContext keys_cxt_ = CurrentMemoryContext; \
		volatile int  keys_nest_ = \
			store_keys_wait_begin(store_keys_may_wait((space), (key))); \
		PG_TRY(); \
		{ \
			stmt; \
		} \
		PG_CATCH(); \
		{ \
			store_keys_wait_failed(keys_cxt_, keys_nest_, (what), (key)); \
		} \
		PG_END_TRY(); \
		store_keys_wait_end(keys_nest_); \
	} while (0)

/*
 * The columns of a flush's node writes (node_writes.c, written by
 * node_rows.c), one array each with an element per write: id, scope, state, result, attempt, detail, the time of its event,
 * the time its node started when that start is in the flush too, whether
 * it is a start whose update the node's end in the same flush makes,
 * whether it is a start or an end whose start and end are one event row,
 * and (NW_IDS) the event row's id and its end's place (ended_id).
 */
enum
{
	NW_ID,
	NW_SCOPE,
	NW_STATE,
	NW_RESULT,
	NW_ATTEMPT,
	NW_DETAIL,
	NW_AT,
	NW_START_AT,
	NW_LATER,
	NW_STARTED,
	NW_EID,
	NW_ENDED,
	NW_COLS
};

/*
 * How a flush writes the events: for a schema without started_at (0.3.0,
 * until updated), each its own row; a start and its end when it is the
 * next write, one row; and a start and its end with other writes between
 * them, one row too, whose ids are drawn for the flush beforehand.
 */
typedef enum NodeWriteMode
{
	NW_ROWS,
	NW_PAIRS,
	NW_IDS
} NodeWriteMode;

/*
 * Write a flush's n node writes of one instance: each node's row and the
 * events, in the order of the writes (node_rows.c).
 */
extern void store_write_node_rows(const char *instance_id, int n,
								  NodeWriteMode mode, Datum **v, bool **nulls);
/* The rows of some nodes of an instance, by the primary key (node_reads.c). */
extern void store_read_node_rows(const char *instance_id, int n,
								 const char *const *ids, bool *found,
								 char **statuses, char **stamps,
								 char **results);

/* ---------------------------------------------------------------------
 * txn_buffer.c: what a transaction holds in memory instead of rows
 * ---------------------------------------------------------------------
 */

/* The kinds of held writes, in the order they are written. */
typedef enum PgdHeldKind
{
	HELD_LOCK_KEYS,	  /* keyed locks a batch took (lock_keys.c) */
	HELD_LIMIT_SLOTS, /* limit slots it gave (limit_slots.c) */
	HELD_JOIN_COUNTS, /* JOIN counts (joins_loops.c) */
	HELD_MAP_COUNTS,  /* the counters of MAPs in lanes mode (map_items.c) */
	HELD_START,		  /* an instance's start (held_start.c) */
	HELD_NODE_WRITES, /* node starts and ends with their events (node_writes.c) */
	HELD_TASKS,		  /* step tasks made ready (tasks.c) */
	HELD_STAMPS,	  /* node stamps read under the runs row (stamps.c) */
	HELD_KINDS
} PgdHeldKind;

#define HELD_MASK(kind) (1 << (kind))
#define HELD_ALL		((1 << HELD_KINDS) - 1)

/*
 * What the buffer does with a kind (any may be NULL): write what is held
 * as rows; at PRE_COMMIT, refuse the commit (ERROR) when something is
 * still unwritten; undo what the subtransaction mySubid (and those below
 * it) held when it rolls back, or pass it to its parent when it commits;
 * forget everything when the transaction ends.
 */
typedef struct PgdHeldOps
{
	void (*write)(void);
	void (*check_written)(void);
	void (*subxact_abort)(SubTransactionId mySubid);
	void (*subxact_commit)(SubTransactionId mySubid,
						   SubTransactionId parentSubid);
	void (*forget)(void);
} PgdHeldOps;

extern void store_txn_buffer_init(const PgdHeldOps *const ops[HELD_KINDS]);
/* Write what the kinds of mask hold (HELD_MASK of each), in their order. */
extern void store_txn_write(int mask);
/* Does this transaction hold its writes until its end (an executor's batch)? */
extern bool store_writes_held(void);

/*
 * An entry that a batch holds instead of its rows: a keyed lock, a limit
 * slot, a JOIN count.  It belongs to one node execution (instance, node,
 * scope) and names a key.
 */
typedef struct PgdHeldEntry
{
	char			 instance_id[PGD_ID_LEN + 1];
	char			 node_id[PGD_ID_LEN + 1];
	char			*scope;
	char			*key;
	char			*since;		   /* a lock or a slot: when it was taken */
	int64			 token;		   /* a lock: its fencing token */
	int				 remaining;	   /* a JOIN count: the branches still to end */
	int				 counts[4];	   /* a MAP's: total, started, finished, failed */
	SubTransactionId made;		   /* the subtransaction that made it */
	SubTransactionId released; /* the one that released or wrote it; 0: held */
} PgdHeldEntry;
typedef struct PgdHeldList
{
	LocalTransactionId lxid;
	PgdHeldEntry	  *e;
	int				   n;
	int				   max;
	int				   nlive; /* entries with released 0 */
} PgdHeldList;

extern PgdHeldList store_held_locks;
extern PgdHeldList store_held_slots;
extern PgdHeldList store_held_join_counts;
extern PgdHeldList store_held_map_counts;

extern bool store_held_fits(const char *instance_id, const char *node_id);
extern PgdHeldEntry *store_held_add(PgdHeldList *l, const char *instance_id,
									const char *node_id, const char *scope,
									const char *key, const char *since);
extern void			 store_held_release(PgdHeldList *l, PgdHeldEntry *h);
extern PgdHeldEntry *store_held_find(PgdHeldList *l, const char *instance_id,
									 const char *node_id, const char *scope);
extern PgdHeldEntry *store_held_next(PgdHeldList *l, const char *key, int *i);
extern int			 store_held_count(PgdHeldList *l, const char *key);
extern bool			 store_held_by(PgdHeldList *l, const char *instance_id);
extern void			 store_held_drop(PgdHeldList *l, const char *instance_id,
									 const char *node_id, const char *scope);
extern void store_held_subxact_abort(PgdHeldList *l, SubTransactionId subid);
extern void store_held_check_written(PgdHeldList *l, const char *what);
/* Has the instance a keyed lock, a limit slot, a JOIN count held here? */
extern bool store_locks_held_by(const char *instance_id);
extern bool store_slots_held_by(const char *instance_id);
extern bool store_join_counts_held(const char *instance_id);

/* The keys node executions took in this transaction, while it holds their rows. */
#define PGD_XACT_KEYS_MAX 32
typedef struct PgdXactKey
{
	char  instance_id[PGD_ID_LEN + 1];
	char  node_id[PGD_ID_LEN + 1];
	char *scope;
	char *key;
} PgdXactKey;
typedef struct PgdXactKeys
{
	LocalTransactionId lxid;
	int				   n;
	PgdXactKey		   keys[PGD_XACT_KEYS_MAX];
} PgdXactKeys;

extern PgdXactKeys store_fresh_lock_keys;
extern PgdXactKeys store_entered_limit_keys;

extern void	 store_xact_keys_add(PgdXactKeys *l, const char *instance_id,
								 const char *node_id, const char *scope,
								 const char *key);
extern char *store_xact_keys_take(PgdXactKeys *l, const char *instance_id,
								  const char *node_id, const char *scope);
extern void	 store_xact_keys_forget(PgdXactKeys *l, const char *instance_id);
extern void	 store_xact_keys_clear(PgdXactKeys *l);

/* The operations of each kind (txn_kinds.c puts them in their order) */
extern const PgdHeldOps store_lock_keys_ops;	/* lock_keys.c */
extern const PgdHeldOps store_limit_slots_ops;	/* limit_slots.c */
extern const PgdHeldOps store_join_counts_ops;	/* joins_loops.c */
extern const PgdHeldOps store_map_counts_ops;	/* map_items.c */
extern const PgdHeldOps store_held_start_ops;	/* held_start.c */
extern const PgdHeldOps store_node_writes_ops;	/* node_writes.c */
extern const PgdHeldOps store_held_tasks_ops;	/* tasks.c */
extern const PgdHeldOps store_stamps_ops;		/* stamps.c */

/* ---------------------------------------------------------------------
 * The kinds' own functions
 * ---------------------------------------------------------------------
 */

/* Write the buffered node updates now (node_writes.c). */
extern void store_flush_node_writes(void);
/* The attempt of a node's step under way, or 0 (node_writes.c). */
extern int store_current_attempt_of(const char *node_id);
/* node_writes.c: event ids drawn ahead, and the column that needs them */
extern int64 *store_draw_event_ids(int n);
extern bool	  store_events_have_ended_id(void);
/* held_start.c: an instance's start held in a batch */
extern void store_overlay_held_start(const char		   *instance_id,
									 PgdInstanceStatus *status);
extern void store_held_start_ends(const char *instance_id);
extern bool store_held_start_end_event(const char *instance_id,
									   const char *kind, const char *scope,
									   const char *detail);
/* stamps.c: node stamps kept while the runs row is held */
extern void store_stamps_locked(const char *instance_id);
extern void store_stamps_forget(void);
extern void store_stamps_put(const char *instance_id, const char *id,
							 const char *status, const char *stamp);
extern bool store_stamps_find(const char *instance_id, const char *id,
							  char **status, char **stamp);
/* joins_loops.c: the JOIN counts a batch holds */
extern void store_drop_held_join_counts(const char *instance_id);
/* map_items.c: the MAP counters a batch holds */
extern void store_drop_held_map_counts(const char *instance_id);
/* tasks.c: a task of a node due at 'at', by statement s (timers, a step's retry) */
extern void store_task_due_at(PgdStmt s, const char *instance_id,
							  const char *node_id, const char *scope,
							  TimestampTz at);
/* tasks.c: the start markers of a transaction that is prepared */
extern void store_tasks_init(void);

/* inbox.c: the runs row with SKIP LOCKED */
extern bool store_run_lock_skip(const char *instance_id, bool *held,
								char **status);

/* ---------------------------------------------------------------------
 * row_layouts.c: the columns of each table written without a statement,
 * as the C code knows them (compared with the installed tables by the
 * regression test row_layouts)
 * ---------------------------------------------------------------------
 */
typedef enum PgdRowTable
{
	PGD_ROWS_INSTANCES,
	PGD_ROWS_NODES,
	PGD_ROWS_EVENTS,
	PGD_ROWS_RUNS,
	PGD_ROWS_TASKS,
	PGD_ROWS_JOINS
} PgdRowTable;

typedef struct PgdRowLayout
{
	const char		   *schema;
	const char		   *table;
	const char *const *columns;
	int					ncolumns;
} PgdRowLayout;

extern const PgdRowLayout *store_row_layout(PgdRowTable table);

/* ---------------------------------------------------------------------
 * row_prep.c: a table's column defaults and CHECK constraints, prepared
 * once per backend for the rows df.start writes without a statement
 * (start_rows.c).  The caller has the table open.
 * ---------------------------------------------------------------------
 */
typedef struct PgdRowPrep PgdRowPrep;

/*
 * The prepared defaults and checks of rel, built at the first call in this
 * backend and again after the table's definition changed.  Valid until the
 * next call.
 */
extern PgdRowPrep *store_row_prep(Relation rel);

/*
 * Fill slot's columns that given (indexed by attribute number - 1) does not
 * mark with their defaults (NULL where there is none), as an INSERT does.
 */
extern void store_row_prep_defaults(PgdRowPrep *prep, TupleTableSlot *slot,
									const bool *given, ExprContext *econtext);

/*
 * The NOT NULL and CHECK constraints of rri's table on the row in slot,
 * with the errors an INSERT raises (estate's per-tuple context evaluates
 * them).
 */
extern void store_row_prep_check(PgdRowPrep *prep, ResultRelInfo *rri,
								 TupleTableSlot *slot, EState *estate);

#endif /* PG_DURABLE_STORE_INTERNAL_H */
