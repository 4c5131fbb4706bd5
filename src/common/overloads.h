/*-------------------------------------------------------------------------
 *
 * overloads.h
 *	  The overloads that carry the options pg_durable 0.2.6's functions did
 *	  not have (common/overloads.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_OVERLOADS_H
#define PG_DURABLE_OVERLOADS_H

#include "fmgr.h"

extern void pgd_require_compat_execute(FunctionCallInfo fcinfo, int compat_nargs);

#endif
