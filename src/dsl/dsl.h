/*-------------------------------------------------------------------------
 *
 * dsl.h
 *	  Declarations shared by the workflow DSL (dsl.c, dsl_http.c) and graph
 *	  validation (graph_validate.c).
 *
 * The HTTP checks exist once and serve both the builders, which raise the
 * message as an ERROR, and validation of hand-written graphs, which
 * prefixes it with the node's path.  Each returns NULL when the value is
 * acceptable, else a palloc'd message with the reference's wording.
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_DSL_H
#define PG_DURABLE_DSL_H

#include "postgres.h"
#include "graph/graph.h"
#include "common/json.h"

/* dsl.c: an operand of a composer as a node (auto-wrap, checks) */
extern DfNode *dsl_operand(const char *text);

/* dsl_http.c */
extern char *df_http_check_url(const char *url);
extern char *df_http_check_method(const char *method, bool multipart, char **upper);
extern char *df_http_check_headers(const DfJson *headers);
extern char *df_http_check_parts(const DfJson *parts);
extern char *df_http_check_config(const char *query, bool multipart);
extern char *df_http_check_base64(const char *s);

#endif							/* PG_DURABLE_DSL_H */
