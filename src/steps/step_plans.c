/*-------------------------------------------------------------------------
 *
 * step_plans.c
 *	  The plans of the statements SQL steps run again and again, kept by the
 *	  process that runs them.
 *
 * The steps of a workflow's instances often run one text many times (the
 * same INSERT in every instance): parsing, analysing and planning it again
 * each time is most of what a short statement costs a step.  A text that
 * comes back for the same submitter (it is among the last SEEN_SLOTS texts
 * this process ran) is prepared with SPI_prepare_extended and kept with
 * SPI_keepplan, up to MAX_PLANS of them, the least recently used given up
 * first.  A text that does not repeat (one whose {variables} or $results
 * differ per instance), or is longer than MAX_KEPT_TEXT, runs as a one-shot
 * statement, as it would without this file, and is only remembered by its
 * hash.
 *
 * A kept plan is an entry of PostgreSQL's plan cache, as a client's
 * prepared statement is: it is checked before each use, so that DDL on
 * what it reads, an ANALYZE of it, a search_path that resolves to other
 * schemas (with "$user" the submitter) or, under row-level security, a
 * different user, plans it again.  Permissions are checked each time it
 * runs, as the submitter.  The key holds the submitter all the same, so
 * that no plan ever crosses from one role to another.
 *
 * Process-local, no locks of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "steps/step_plans.h"

#define MAX_PLANS  64
#define SEEN_SLOTS 256
/* a longer text is run one-shot: 64 of them would weigh on the executor */
#define MAX_KEPT_TEXT 16384

typedef struct KeptPlan
{
	uint32	   hash;
	Oid		   submitter;
	char	  *text; /* in TopMemoryContext */
	SPIPlanPtr plan;
	uint64	   used; /* the use_clock at its last use */
} KeptPlan;

static KeptPlan kept[MAX_PLANS];
static int		nkept = 0;
static uint64	use_clock = 0;

/* hashes of the texts run lately, a ring; 0 stands for an empty slot */
static uint32 seen[SEEN_SLOTS];
static int	  seen_next = 0;

static uint32
text_hash(const char *query, Oid submitter)
{
	uint32 h = hash_bytes((const unsigned char *) query, strlen(query));

	h = hash_combine(h, submitter);
	return h == 0 ? 1 : h;
}

SPIPlanPtr
pgd_step_plan_find(const char *query, Oid submitter)
{
	uint32 h = text_hash(query, submitter);

	for (int i = 0; i < nkept; i++)
		if (kept[i].hash == h && kept[i].submitter == submitter &&
			strcmp(kept[i].text, query) == 0)
		{
			kept[i].used = ++use_clock;
			return kept[i].plan;
		}
	return NULL;
}

/* Whether a text of this hash was run lately; it is remembered either way. */
static bool
seen_before(uint32 h)
{
	for (int i = 0; i < SEEN_SLOTS; i++)
		if (seen[i] == h)
			return true;
	seen[seen_next] = h;
	seen_next = (seen_next + 1) % SEEN_SLOTS;
	return false;
}

/* The slot for a new plan: a free one, or the least recently used emptied. */
static KeptPlan *
free_slot(void)
{
	KeptPlan *oldest;

	if (nkept < MAX_PLANS)
		return &kept[nkept++];
	oldest = &kept[0];
	for (int i = 1; i < nkept; i++)
		if (kept[i].used < oldest->used)
			oldest = &kept[i];
	SPI_freeplan(oldest->plan);
	pfree(oldest->text);
	return oldest;
}

SPIPlanPtr
pgd_step_plan_prepare_if_repeated(const char *query, Oid submitter)
{
	SPIPrepareOptions options;
	SPIPlanPtr		  plan;
	KeptPlan		 *k;
	uint32			  h;

	if (strlen(query) > MAX_KEPT_TEXT ||
		!seen_before(h = text_hash(query, submitter)))
		return NULL;
	memset(&options, 0, sizeof(options));
	options.parseMode = RAW_PARSE_DEFAULT;
	/* as SPI_execute_extended plans a one-shot statement */
	options.cursorOptions = CURSOR_OPT_PARALLEL_OK;
	plan = SPI_prepare_extended(query, &options);
	if (plan == NULL)
		return NULL; /* the one-shot statement reports SPI's error */
	if (list_length(SPI_plan_get_plan_sources(plan)) != 1 ||
		SPI_keepplan(plan) != 0)
	{
		SPI_freeplan(plan);
		return NULL;
	}
	k = free_slot();
	k->hash = h;
	k->submitter = submitter;
	k->text = MemoryContextStrdup(TopMemoryContext, query);
	k->plan = plan;
	k->used = ++use_clock;
	return plan;
}
