/* Placeholder: replaced by the real implementation. */
#include "postgres.h"
#include "fmgr.h"
#define STUB(name) PG_FUNCTION_INFO_V1(name); Datum name(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg(#name " is not implemented yet"))); PG_RETURN_NULL(); }
STUB(pgd_explain)
