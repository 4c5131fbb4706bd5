/*-------------------------------------------------------------------------
 *
 * results.h
 *	  Step results and the data flow between steps: turning the rows of a
 *	  SQL step into its result JSON, substituting {variables} and $named
 *	  results into the text of later steps, and deciding whether a result is
 *	  "truthy" for IF and loop conditions.
 *
 * These are pure functions of their arguments (reference §1.6 - §1.8): they
 * read no tables and keep no state, so the engine can call them from any
 * transaction.  Everything is palloc'd in CurrentMemoryContext.  Functions
 * that can fail because of what a user wrote return NULL and set *errmsg
 * to a palloc'd message (the reference's text) instead of throwing; they
 * throw only for out-of-memory or stack depth.
 *
 * Files: results_json.c, results_subst.c, results_lex.c (where a reference
 * stands in SQL text, for PostgreSQL's lexer), results_check.c (the same
 * check over a whole workflow before it starts), results_truthy.c, and
 * results_sql.c (SQL entry points in df_internal used by the tests).
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_RESULTS_H
#define PG_DURABLE_RESULTS_H

#include "postgres.h"

#include "executor/spi.h"

#include "common/json.h"

/* Most rows a $name.* reference may expand to (reference §1.10). */
#define PGD_MAX_STAR_ROWS 10000

/*
 * The rows of a statement as the step's result:
 *	{"rows":[{"col":val,...},...],"row_count":N}
 * keys in column order, N = number of rows returned.  tuptable NULL (DML
 * without RETURNING, utility statements) gives {"rows":[],"row_count":0}.
 * Returns NULL and sets *errmsg when a column's type has no JSON mapping:
 *	Unsupported column type '<T>' for column '<c>'. Cast the column ...
 */
extern char *pgd_spi_result_to_json(SPITupleTable *tuptable, uint64 nrows,
									char **errmsg);

/*
 * The same result built row by row as a statement produces them (from a
 * DestReceiver), within limit bytes of JSON text (0: no limit).  Begin
 * with the rows' descriptor; add_row returns false with *errmsg set when
 * the row cannot be converted (an unsupported column type, the first row
 * only) or the result would exceed limit ("step result exceeds
 * pg_durable.max_result_size (...) at row N: ..."); finish returns the
 * JSON text and frees the builder, discard only frees it.  The text lives
 * in the memory context current at begin.
 */
typedef struct PgdResultBuilder PgdResultBuilder;

extern PgdResultBuilder *pgd_result_begin(TupleDesc tupdesc, Size limit);
extern bool	 pgd_result_add_row(PgdResultBuilder *b, const Datum *values,
								const bool *isnull, char **errmsg);
extern char *pgd_result_finish(PgdResultBuilder *b);
extern void	 pgd_result_discard(PgdResultBuilder *b);

/* The result of a statement that returns no rows: {"rows":[],"row_count":0}. */
extern char *pgd_result_empty(void);

/* Where a substituted text goes. */
typedef enum PgdSubstMode
{
	PGD_SUBST_SQL, /* SQL text: values become SQL literals */
	PGD_SUBST_RAW  /* HTTP url/body/headers, multipart fields:
								 * values as plain text */
} PgdSubstMode;

/*
 * Substitute {variables} (vars: object name -> string) and then $references
 * to named results (results: object name -> the node's result JSON) in
 * text.  Returns the new text, or NULL with *errmsg set on a strict error
 * ("$n has no rows — query returned zero results", ...) or, in SQL mode,
 * for a reference to a known result that does not stand where a value can
 * ("a reference inside a string literal is not substituted: ...").  See
 * results_subst.c for the exact rules.  vars and results may be NULL
 * (nothing to substitute).
 */
extern char *pgd_substitute(const char *text, const DfJson *vars,
							const DfJson *results, PgdSubstMode mode,
							char **errmsg);

/*
 * pgd_substitute in raw mode for keys and payloads, where a {name} that
 * names no variable or a $name that names no result (but an optional
 * $name?) fails with a message naming it instead of staying as text.
 */
extern char *pgd_substitute_strict(const char *text, const DfJson *vars,
								   const DfJson *results, char **errmsg);

/*
 * True when s is exactly one reference and nothing else: $n, $n?, $n.c,
 * $n.c? or {v}.  Multipart data_b64 is substituted only in that case.
 */
extern bool pgd_is_whole_value_reference(const char *s);

/*
 * Where a byte of SQL text stands for PostgreSQL's lexer (results_lex.c).
 * A reference is substituted only where it stands in code.
 */
typedef enum PgdSqlContext
{
	PGD_SQL_CODE = 0,
	PGD_SQL_WORD,		   /* an unquoted identifier or keyword: x$a */
	PGD_SQL_STRING,		   /* '', E'', N'', B'', X'', U&'' literals */
	PGD_SQL_QUOTED_IDENT,  /* "" and U&"" */
	PGD_SQL_DOLLAR_STRING, /* the body of $tag$ ... $tag$ */
	PGD_SQL_DOLLAR_TAG,	   /* $tag$ itself */
	PGD_SQL_COMMENT		   /* -- and nested block comments */
} PgdSqlContext;

/*
 * The contexts of every byte of text (one PgdSqlContext a byte), with
 * standard_conforming_strings on and off.  Pure; palloc'd.
 */
typedef struct PgdSqlScan
{
	const char *text;
	int			len;
	uint8	   *ctx_on;
	uint8	   *ctx_off;
} PgdSqlScan;

extern void pgd_sql_scan(PgdSqlScan *scan, const char *text);
extern void pgd_sql_scan_free(PgdSqlScan *scan);

/* Why a reference may not be substituted where it stands. */
typedef struct PgdRefProblem
{
	const char *message; /* errmsg: lower case, no final period */
	char	   *detail;	 /* a sentence */
	char	   *hint;	 /* a sentence */
} PgdRefProblem;

/*
 * False when the reference written at text[pos, pos + reflen) stands in
 * code under both settings of standard_conforming_strings; else true with
 * *problem filled.  where ("the SQL step at root.left") goes into the
 * detail when not NULL.
 */
extern bool pgd_sql_reference_problem(const PgdSqlScan *scan, int pos,
									  int reflen, const char *where,
									  PgdRefProblem *problem);

/*
 * The checks of a workflow before it starts (df.start) or is kept to be
 * started later (df.subscribe), in results_check.c; func names the caller
 * in the messages ("df.start").
 *
 * 1. Refuse (ERROR) a reference inside a string literal, quoted
 *    identifier, dollar-quoted string or comment of one of its SQL steps,
 *    for the names it can bind: its named results, $event when it is a
 *    subscription's workflow, and $item, $error and $lock when it has a
 *    MAP, a CATCH or a LOCK.
 * 2. Refuse (ERROR) a lock or limit key, HTTP idempotency key, or PUBLISH
 *    key or payload that holds a reference that can never resolve: a $name
 *    no node names (the optional $name? aside; $event, which a
 *    subscription binds, is a name there), or a {variable} for which
 *    var_is_set(name, arg) is false (not asked when var_is_set is NULL,
 *    nor of the engine's sys_ variables).
 * 3. A NOTICE for each $name in the code of a SQL step or in an HTTP
 *    step's text that names no result of the workflow: it stays as
 *    written there.
 */
struct DfNode;
typedef bool (*PgdVarIsSet) (const char *name, void *arg);
extern void pgd_check_workflow(const char *func, const struct DfNode *root,
							   bool subscription, PgdVarIsSet var_is_set,
							   void *arg);

/* Only 3 (df.explain). */
extern void pgd_notice_unmatched_references(const char *func,
											const struct DfNode *root);

/* Truthiness of a result for IF and loop conditions (reference §1.7). */
extern bool pgd_truthy(const DfJson *result);

/* Same for text: JSON is parsed first; other text uses the string rule. */
extern bool pgd_truthy_text(const char *text);

#endif /* PG_DURABLE_RESULTS_H */
