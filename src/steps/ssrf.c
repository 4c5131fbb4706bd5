/*-------------------------------------------------------------------------
 *
 * ssrf.c
 *	  The destination policy of HTTP steps: which hosts and which addresses
 *	  a workflow may call (no server-side request forgery).
 *
 * Before any I/O, the URL (after substitution) is parsed with libcurl's own
 * URL parser, so the host checked is the host curl will connect to:
 *	 - only http and https;
 *	 - a bare IP address as host is refused, unless pg_durable.http_allowed_hosts
 *	   names that very address;
 *	 - when pg_durable.http_allowed_hosts is not empty, the host must match
 *	   an entry: "example.com" matches example.com and its subdomains,
 *	   ".example.com" only its subdomains (case-insensitive, a trailing dot
 *	   of the host ignored).
 * Then, for every address curl is about to connect to (its open-socket
 * callback, after its own resolution, so there is no window between the
 * check and the connection in which DNS could answer differently), the
 * address must be public unless pg_durable.http_allow_private is on:
 * loopback, private, link-local, shared, multicast, documentation and
 * other reserved IPv4 and IPv6 ranges are refused, IPv4 addresses embedded
 * in IPv6 (mapped, compatible, NAT64, 6to4) are checked as IPv4.  Proxies
 * are never used (http_worker.c), so the address checked is the server's.
 *
 * The settings are the HTTP worker's (PGC_SIGHUP, superuser-only).
 *
 * Locks: none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <curl/curl.h>

#include "common/messages.h"
#include "steps/http.h"
#include "core/settings.h"

static char *
lower_copy(const char *s)
{
	char *c = pstrdup(s);

	for (char *p = c; *p; p++)
		*p = pg_ascii_tolower((unsigned char) *p);
	return c;
}

/* "[::1]" -> "::1"; a trailing dot removed. */
static char *
bare_host(const char *host)
{
	char  *h = lower_copy(host);
	size_t len = strlen(h);

	if (len >= 2 && h[0] == '[' && h[len - 1] == ']')
	{
		h[len - 1] = '\0';
		h++;
		len -= 2;
	}
	if (len > 1 && h[len - 1] == '.')
		h[len - 1] = '\0';
	return h;
}

static bool
is_ip_literal(const char *host)
{
	unsigned char  buf[sizeof(struct in6_addr)];
	struct in_addr a4;

	return inet_pton(AF_INET6, host, buf) == 1 ||
		inet_pton(AF_INET, host, buf) == 1 ||
		inet_aton(host, &a4) != 0; /* 127.1, 0x7f.1 ... */
}

/* Is host (lower case, no brackets) allowed by the list? *listed: it is named as is. */
static bool
host_allowed(const char *host, bool *listed)
{
	char *list =
		lower_copy(pgd_http_allowed_hosts ? pgd_http_allowed_hosts : "");
	char *entry;
	char *save = NULL;
	bool  any = false;

	*listed = false;
	for (entry = strtok_r(list, ",", &save); entry != NULL;
		 entry = strtok_r(NULL, ",", &save))
	{
		size_t elen, hlen = strlen(host);

		while (*entry == ' ' || *entry == '\t')
			entry++;
		elen = strlen(entry);
		while (elen > 0 && (entry[elen - 1] == ' ' || entry[elen - 1] == '\t'))
			entry[--elen] = '\0';
		if (elen == 0)
			continue;
		any = true;
		entry = bare_host(entry);
		elen = strlen(entry);
		if (strcmp(entry, host) == 0 && entry[0] != '.')
		{
			*listed = true;
			return true;
		}
		if (entry[0] == '.')
		{
			/* ".example.com": strict subdomains */
			if (hlen > elen && strcmp(host + hlen - elen, entry) == 0)
				return true;
		}
		else if (hlen > elen && host[hlen - elen - 1] == '.' &&
				 strcmp(host + hlen - elen, entry) == 0)
			return true;
	}
	return !any;
}

/*
 * Check a URL before any I/O.  Returns NULL and sets *host (as written in
 * the URL, for messages) when it may be called, else the reason.
 */
char *
pgd_ssrf_check_url(const char *url, char **host)
{
	CURLU	 *h = curl_url();
	char	 *scheme = NULL;
	char	 *chost = NULL;
	char	 *result = NULL;
	CURLUcode rc;

	*host = NULL;
	if (h == NULL)
		return pstrdup("out of memory parsing the URL");
	rc = curl_url_set(h, CURLUPART_URL, url, 0);
	if (rc != CURLUE_OK)
	{
		result = psprintf("invalid URL '%s': %s", url, curl_url_strerror(rc));
		goto done;
	}
	if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
		(pg_strcasecmp(scheme, "http") != 0 &&
		 pg_strcasecmp(scheme, "https") != 0))
	{
		result = psprintf(PGD_MSG_HTTP_BAD_SCHEME, scheme ? scheme : "");
		goto done;
	}
	if (curl_url_get(h, CURLUPART_HOST, &chost, 0) != CURLUE_OK ||
		chost[0] == '\0')
	{
		result = psprintf("invalid URL '%s': missing host", url);
		goto done;
	}
	*host = pstrdup(chost);
	{
		char *bh = bare_host(chost);
		bool  listed;
		bool  allowed = host_allowed(bh, &listed);

		if (is_ip_literal(bh) && !listed)
			result = psprintf(PGD_MSG_HTTP_BARE_IP, bh);
		else if (!allowed)
			result = psprintf(PGD_MSG_HTTP_HOST_NOT_ALLOWED, bh);
	}

done:
	if (scheme)
		curl_free(scheme);
	if (chost)
		curl_free(chost);
	curl_url_cleanup(h);
	return result;
}

static bool
ipv4_restricted(uint32 a)
{
	static const struct
	{
		uint32 net;
		int	   bits;
	} ranges[] = {
		{0x00000000, 8},  /* 0.0.0.0/8 "this network" */
		{0x0A000000, 8},  /* 10/8 private */
		{0x64400000, 10}, /* 100.64/10 shared (CGN) */
		{0x7F000000, 8},  /* 127/8 loopback */
		{0xA9FE0000, 16}, /* 169.254/16 link-local (cloud metadata) */
		{0xAC100000, 12}, /* 172.16/12 private */
		{0xC0000000, 24}, /* 192.0.0/24 IETF assignments */
		{0xC0000200, 24}, /* 192.0.2/24 documentation */
		{0xC0A80000, 16}, /* 192.168/16 private */
		{0xC6120000, 15}, /* 198.18/15 benchmarking */
		{0xC6336400, 24}, /* 198.51.100/24 documentation */
		{0xCB007100, 24}, /* 203.0.113/24 documentation */
		{0xE0000000, 4},  /* 224/4 multicast */
		{0xF0000000, 4},  /* 240/4 reserved, broadcast */
	};

	for (int i = 0; i < lengthof(ranges); i++)
	{
		uint32 mask =
			ranges[i].bits == 0 ? 0 : ~((uint32) 0) << (32 - ranges[i].bits);

		if ((a & mask) == ranges[i].net)
			return true;
	}
	return false;
}

static uint32
v4_at(const unsigned char *b)
{
	return ((uint32) b[0] << 24) | ((uint32) b[1] << 16) |
		((uint32) b[2] << 8) | b[3];
}

static bool
ipv6_restricted(const unsigned char *b)
{
	static const unsigned char zero[16] = {0};

	/* ::/96 (unspecified, loopback, IPv4-compatible) */
	if (memcmp(b, zero, 12) == 0)
		return true;
	/* ::ffff:0:0/96 IPv4-mapped */
	if (memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
		return ipv4_restricted(v4_at(b + 12));
	/* 64:ff9b::/96 NAT64 */
	if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b &&
		memcmp(b + 4, zero, 8) == 0)
		return ipv4_restricted(v4_at(b + 12));
	/* 2002::/16 6to4 */
	if (b[0] == 0x20 && b[1] == 0x02)
		return ipv4_restricted(v4_at(b + 2));
	/* 100::/64 discard */
	if (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, zero, 6) == 0)
		return true;
	/* 2001:db8::/32 documentation */
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
		return true;
	/* fc00::/7 unique local */
	if ((b[0] & 0xfe) == 0xfc)
		return true;
	/* fe80::/10 link-local, fec0::/10 site-local */
	if (b[0] == 0xfe && ((b[1] & 0xc0) == 0x80 || (b[1] & 0xc0) == 0xc0))
		return true;
	/* ff00::/8 multicast */
	if (b[0] == 0xff)
		return true;
	return false;
}

/*
 * May a step connect to this address?  Called from libcurl's open-socket
 * callback: no palloc, no ereport.
 */
bool
pgd_ssrf_address_allowed(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
	{
		const struct sockaddr_in *in = (const struct sockaddr_in *) sa;

		return pgd_http_allow_private ||
			!ipv4_restricted(ntohl(in->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6)
	{
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;

		return pgd_http_allow_private ||
			!ipv6_restricted(in6->sin6_addr.s6_addr);
	}
	return false; /* unix sockets and anything else */
}

char *
pgd_ssrf_blocked_address_message(const char *host)
{
	return psprintf(PGD_MSG_HTTP_RESTRICTED_ADDRESS, host);
}
