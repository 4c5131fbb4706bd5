/*-------------------------------------------------------------------------
 *
 * step_plans.h
 *	  The plans of steps' statements that repeat, kept by the process that
 *	  runs them (step_plans.c).
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_STEP_PLANS_H
#define PG_DURABLE_STEP_PLANS_H

#include "postgres.h"

#include "executor/spi.h"

/* The plan kept for query run as submitter, or NULL.  SPI is connected. */
extern SPIPlanPtr pgd_step_plan_find(const char *query, Oid submitter);

/*
 * query, one statement, run as submitter once more: prepared and kept when
 * this process ran it lately, else NULL (it is remembered, and the caller
 * runs it as a one-shot statement).  SPI is connected; an error of the
 * statement's parsing or analysis is raised.
 */
extern SPIPlanPtr pgd_step_plan_prepare_if_repeated(const char *query,
													Oid			submitter);

#endif /* PG_DURABLE_STEP_PLANS_H */
