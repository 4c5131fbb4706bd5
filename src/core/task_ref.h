/*-------------------------------------------------------------------------
 *
 * task_ref.h
 *	  A reference to a unit of queued work: a row of df_internal.tasks, a
 *	  step task an executor's batch holds in memory instead of a row
 *	  (store/tasks.c), or a start's marker (an instance whose pending runs
 *	  row is the work: docs/design/wakeups.md §3).
 *
 * The ring of ready work in shared memory (wake.c) keeps rows and markers
 * as one int64 each, in ranges no task id reaches; everything else passes
 * this type and looks at its kind.
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_TASK_REF_H
#define PG_DURABLE_TASK_REF_H

#include "postgres.h"

typedef enum PgdTaskRefKind
{
	PGD_TASK_REF_NONE = 0, /* no task */
	PGD_TASK_REF_ROW,	   /* a df_internal.tasks row: id is its id */
	PGD_TASK_REF_HELD,	   /* a step task held by the batch: id is its number */
	PGD_TASK_REF_START	   /* a start's marker: id is the instance id read
							* as a hexadecimal number */
} PgdTaskRefKind;

typedef struct PgdTaskRef
{
	PgdTaskRefKind kind;
	int64		   id;
} PgdTaskRef;

static inline PgdTaskRef
pgd_task_ref(PgdTaskRefKind kind, int64 id)
{
	PgdTaskRef r;

	r.kind = kind;
	r.id = id;
	return r;
}

#define PGD_NO_TASK pgd_task_ref(PGD_TASK_REF_NONE, 0)

static inline bool
pgd_task_ref_is_task(PgdTaskRef r)
{
	return r.kind != PGD_TASK_REF_NONE;
}

static inline bool
pgd_task_ref_equal(PgdTaskRef a, PgdTaskRef b)
{
	return a.kind == b.kind && a.id == b.id;
}

/* For messages: "task 12", "held task 3", "start marker 1a2b3c4d". */
static inline char *
pgd_task_ref_text(PgdTaskRef r)
{
	switch (r.kind)
	{
		case PGD_TASK_REF_ROW:
			return psprintf("task %lld", (long long) r.id);
		case PGD_TASK_REF_HELD:
			return psprintf("held task %lld", (long long) r.id);
		case PGD_TASK_REF_START:
			return psprintf("start marker %08llx", (long long) r.id);
		case PGD_TASK_REF_NONE:
			break;
	}
	return pstrdup("no task");
}

#endif /* PG_DURABLE_TASK_REF_H */
