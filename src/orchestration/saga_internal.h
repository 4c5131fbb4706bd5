/*-------------------------------------------------------------------------
 *
 * saga_internal.h
 *	  Inside orchestration/'s sagas (saga.c, saga_resume.c): what names a
 *	  compensation, and how one goes on.
 *
 * Locks: the caller holds the instance's runs row.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_SAGA_INTERNAL_H
#define PG_DURABLE_SAGA_INTERNAL_H

#include "postgres.h"

#include "engine/graph_cache.h"

/* A compensation (saga.c's header comment). */
typedef struct PgdComp
{
	char *
		owner; /* its name: a SAGA's body scope, a losing branch's, a root scope */
	char *within; /* it takes the undos whose forward ran within this scope */
	char *node_scope; /* the scope of its SAGA or RACE node (root: owner) */
	int	  saga;		  /* the SAGA, or -1 */
	int	  race;		  /* the RACE whose branch lost, or -1 */
	int	  loser;	  /* that branch */
	bool  parallel;	  /* df.saga(parallel => true) */
	bool  cont;		  /* on_undo_failure 'continue' */
} PgdComp;

/* The compensation named owner. */
extern void pgd_saga_comp_of(PgdGraph *g, const char *owner, PgdComp *c);

/* Start its next undos, or end it when none is left or running. */
extern void pgd_saga_advance(PgdGraph *g, const PgdComp *c);

/* The root scope of the generation a scope lies in. */
extern char *pgd_saga_root_scope(const char *scope);

#endif /* PG_DURABLE_SAGA_INTERNAL_H */
