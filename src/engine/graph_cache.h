/*-------------------------------------------------------------------------
 *
 * graph_cache.h
 *	  The structure of an instance's graph as the engine sees it, loaded
 *	  from df.nodes once per process and cached (graph_cache.c).
 *
 * A graph changes after df.start only by growing (the children df.map
 * adds to a MAP node), so a cached one is never wrong, at most
 * short of nodes (pgd_graph_find loads them);
 * its node configs are parsed once, when it is loaded, into the fields
 * below (a config that does not parse leaves them unset, and the node
 * fails with the message it always gave when it starts).
 *
 * Locks: none (plain reads of df.instances and df.nodes).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_GRAPH_CACHE_H
#define PG_DURABLE_GRAPH_CACHE_H

#include "postgres.h"

#include "common/cron.h"
#include "common/json.h"
#include "store/types.h"
#include "graph/event_config.h"
#include "graph/graph.h"
#include "graph/lock_config.h"
#include "graph/map_config.h"
#include "graph/loop_config.h"
#include "graph/orch_config.h"

/* A node of an instance's graph (immutable). */
typedef struct PgdNode
{
	char	   id[PGD_ID_LEN + 1];
	DfNodeType type;
	char	  *query;		/* as stored in df.nodes (config or SQL) */
	char	  *result_name; /* NULL if none */
	int		   parent;		/* index in PgdGraph.nodes, -1 for the root */
	int		   left;		/* child indexes, -1 when absent */
	int		   right;
	int		   condition;
	int		   nextras;
	int		  *extras;

	/* the config, parsed at load */
	int64	sleep_ms;	 /* SLEEP */
	char   *signal_name; /* SIGNAL; NULL: none given */
	bool	has_timeout; /* SIGNAL */
	int64	timeout_seconds;
	char   *cron_expr;	/* WAIT_SCHEDULE; "" when missing */
	char   *cron_error; /* NULL when cron is valid */
	DfCron	cron;
	char   *break_value;	  /* BREAK: the value as JSON text */
	char   *if_rows_name;	  /* IF without a condition node (df.if_rows) */
	DfJson *config;			  /* HTTP, HTTP_MULTIPART, TASK: the config object */
	char   *config_problem;	  /* ... NULL when it passes the config checks */
	DfWrapperConfig *wrapper; /* RETRY, TIMEOUT, CATCH, FAIL: settings */
	char			*wrapper_problem; /* ... NULL when they parse */
	DfMapSettings	 map;			  /* MAP: settings */
	char			*map_problem;	  /* ... NULL when the settings parse */
	int				 nitems;		  /* MAP: the children df.map made, */
	int				*items;			  /* ... in row order (parent: the MAP) */
	DfEventConfig	*event;			  /* PUBLISH, EVENT: settings */
	char			*event_problem;	  /* ... NULL when they parse */
	DfLockConfig	*lock;			  /* LOCK: settings */
	char			*lock_problem;	  /* ... NULL when they parse */
	DfLoopConfig	 loop;			  /* LOOP: settings */
	char			*loop_problem;	  /* ... NULL when they parse */
} PgdNode;

/* The immutable structure of one instance. */
typedef struct PgdGraph
{
	char		  instance_id[PGD_ID_LEN + 1];
	int			  root; /* index of the root node */
	int			  nnodes;
	PgdNode		 *nodes;
	int			  cap;	   /* room in nodes (df.map adds to them) */
	char		 *token;   /* identifies this incarnation of the id */
	bool		  has_map; /* a MAP node: the graph grows (df.map) */
	/* a node may still run when the instance completes (its end stops it) */
	bool		  may_end_running;
	bool		  stale;   /* it grew in a transaction that rolled back */
	/*
	 * The runs row's fields that never change while the row lives
	 * (submitted_by, label, vars, database: the token is its incarnation),
	 * kept once a transition has read them (pgd_graph_remember_run), so
	 * that a key or message template does not read the row again.  Not
	 * the status, which changes.
	 */
	bool		  has_run;
	PgdRunInfo	  run;
	/* a large graph's ids, for its lookups by id (pgd_graph_find_loaded) */
	struct HTAB  *ids;
	MemoryContext cxt; /* owns everything above */
} PgdGraph;

/*
 * The graph of an instance, from the cache or loaded now (inside SPI).
 * token is the runs row's (PgdRunInfo.token): an id reused by a newer
 * instance does not find the old graph.  NULL when the instance or its
 * nodes do not exist.
 */
extern PgdGraph *pgd_graph_get(const char *instance_id, const char *token);

/*
 * Index of node_id in g, or -1; a graph with a MAP node loads the nodes
 * added since it was cached on a miss (inside SPI).
 */
extern int pgd_graph_find(const PgdGraph *g, const char *node_id);

/* Keep run's unchanging fields in g (run read with g's token). */
extern void pgd_graph_remember_run(PgdGraph *g, const PgdRunInfo *run);

/*
 * The runs row of g's instance: the fields kept in g, or read now and
 * kept (inside SPI).  run->status is not the row's (it changes, and is
 * not kept): it reads as running.
 */
extern void pgd_graph_run(PgdGraph *g, PgdRunInfo *run);

/* ... without looking for added nodes. */
extern int pgd_graph_find_loaded(const PgdGraph *g, const char *node_id);

/*
 * Load the nodes and MAP children added to g's instance since g was loaded
 * (df.map); the nodes g holds keep their indexes.
 */
extern void pgd_graph_extend(PgdGraph *g);

/* Drop an instance's graph (it ended). */
extern void pgd_graph_forget(const char *instance_id);

#endif /* PG_DURABLE_GRAPH_CACHE_H */
