/*-------------------------------------------------------------------------
 *
 * http_config.h
 *	  The checks of HTTP and HTTP_MULTIPART node configs (http_config.c).
 *
 * Each returns NULL when the value is acceptable, else a palloc'd message
 * (the reference's text where it pins one, from common/messages.h).
 *
 * Locks: none; pure functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DURABLE_HTTP_CONFIG_H
#define PG_DURABLE_HTTP_CONFIG_H

#include "postgres.h"

#include "common/json.h"

extern char *df_http_check_url(const char *url);
extern char *df_http_check_method(const char *method, bool multipart,
								  char **upper);
extern char *df_http_check_headers(const DfJson *headers);
extern char *df_http_check_parts(const DfJson *parts);
extern char *df_http_check_config(const char *query, bool multipart);
extern char *df_http_check_base64(const char *s);
extern char *df_http_check_fail_on(const char *fail_on, char **normalized);
extern char *df_http_check_idempotency_key(const char *key);
extern bool	 df_http_fail_on_matches(const char *fail_on, long status);

#endif /* PG_DURABLE_HTTP_CONFIG_H */
