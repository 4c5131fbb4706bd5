/* Placeholder: replaced by the real implementation. */
#include "postgres.h"
#include "fmgr.h"
#define STUB(name) PG_FUNCTION_INFO_V1(name); Datum name(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg(#name " is not implemented yet"))); PG_RETURN_NULL(); }
STUB(pgd_sql)
STUB(pgd_seq)
STUB(pgd_as)
STUB(pgd_sleep)
STUB(pgd_wait_for_schedule)
STUB(pgd_loop)
STUB(pgd_loop_prefix)
STUB(pgd_break)
STUB(pgd_if)
STUB(pgd_if_rows)
STUB(pgd_if_then_op)
STUB(pgd_if_else_op)
STUB(pgd_join)
STUB(pgd_join3)
STUB(pgd_race)
STUB(pgd_wait_for_signal)
STUB(pgd_http)
STUB(pgd_http_multipart)
