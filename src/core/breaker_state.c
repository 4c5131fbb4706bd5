/*-------------------------------------------------------------------------
 *
 * breaker_state.c
 *	  The circuit breakers' table in shared memory and their state machine
 *	  (see breaker_state.h for the states and what is persisted where).
 *
 * Every change of state bumps the slot's epoch (drawn from one counter for
 * the whole table, so a reused slot never repeats one): an outcome whose
 * ticket carries an older epoch belongs to a state that is over and is
 * not counted.  Transitions whose time has come without a call (OPEN past
 * open_until, a half-open permit past its expiry) are made by the next
 * admission or record, at the time they became due; the view applies them
 * to a copy.
 *
 * Locks: the table's LWLock, exclusive for admissions, records, installs,
 * resets and drops, shared for the view; held for a few stores only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "core/breaker_state.h"

#define TRANCHE "pg_durable breakers"

#define CALL_FAILED 0x01
#define CALL_SLOW	0x02

typedef struct Probe
{
	uint64		id;
	TimestampTz expires;
} Probe;

typedef struct Slot
{
	bool			   used;
	Oid				   db;
	char			   name[PGD_BREAKER_NAME_LEN];
	uint64			   epoch;
	PgdBreakerSettings s;
	PgdBreakerState	   state;
	TimestampTz		   opened_at;
	TimestampTz		   open_until;
	TimestampTz		   last_at; /* the last transition's time */
	TimestampTz		   last_used;
	/* the count window: the last wcount calls, a ring ending before wpos */
	int	  wpos;
	int	  wcount;
	int	  nfailed;
	int	  nslow;
	uint8 window[PGD_BREAKER_WINDOW_MAX];
	/* HALF_OPEN */
	int	  permits_left;
	int	  probes_ok;
	int	  nprobes;
	Probe probes[PGD_BREAKER_PROBES_MAX];
} Slot;

typedef struct BreakerTable
{
	LWLock *lock;
	uint64	epochs;	   /* the last epoch given out */
	uint64	probe_ids; /* the last probe id given out */
	Slot	slots[PGD_MAX_BREAKERS];
} BreakerTable;

static BreakerTable *table = NULL;

Size
pgd_breaker_shmem_size(void)
{
	return MAXALIGN(sizeof(BreakerTable));
}

void
pgd_breaker_shmem_request(void)
{
	RequestAddinShmemSpace(pgd_breaker_shmem_size());
	RequestNamedLWLockTranche(TRANCHE, 1);
}

/* Called under AddinShmemInitLock. */
void
pgd_breaker_shmem_startup(void)
{
	bool found;

	table = ShmemInitStruct(TRANCHE, sizeof(BreakerTable), &found);
	if (!found)
	{
		memset(table, 0, sizeof(BreakerTable));
		table->lock = &(GetNamedLWLockTranche(TRANCHE))->lock;
		/* epochs from the clock: a ticket kept from before a restart matches none */
		table->epochs = (uint64) GetCurrentTimestamp();
	}
}

static const char *const state_names[] = {
	[PGD_BREAKER_CLOSED] = "closed",
	[PGD_BREAKER_OPEN] = "open",
	[PGD_BREAKER_HALF_OPEN] = "half_open",
};

const char *
pgd_breaker_state_name(PgdBreakerState s)
{
	return state_names[s];
}

bool
pgd_breaker_state_from_name(const char *name, PgdBreakerState *s)
{
	for (int i = 0; i < lengthof(state_names); i++)
		if (strcmp(state_names[i], name) == 0)
		{
			*s = (PgdBreakerState) i;
			return true;
		}
	return false;
}

static bool
slot_is(const Slot *sl, Oid db, const char *name)
{
	return sl->used && sl->db == db && strcmp(sl->name, name) == 0;
}

static int
find_locked(Oid db, const char *name)
{
	for (int i = 0; i < PGD_MAX_BREAKERS; i++)
		if (slot_is(&table->slots[i], db, name))
			return i;
	return -1;
}

static double
rate(int part, int calls)
{
	return calls > 0 ? 100.0 * part / calls : -1;
}

/*
 * Move slot sl to state 'to' at 'at' (the transitions of one slot get
 * strictly increasing times, so the latest persisted row is its state).
 * epochs: where the next epoch comes from (the table's counter, or a
 * private one for the view's copy).
 */
static void
transition(Slot *sl, PgdBreakerState to, TimestampTz at, const char *reason,
		   uint64 *epochs, PgdBreakerChanges *ch)
{
	PgdBreakerTransition  spare;
	PgdBreakerTransition *tr =
		ch->n < PGD_BREAKER_MAX_CHANGES ? &ch->t[ch->n++] : &spare;

	if (at <= sl->last_at)
		at = sl->last_at + 1;
	tr->from = sl->state;
	tr->to = to;
	tr->at = at;
	tr->failure_rate = rate(sl->nfailed, sl->wcount);
	tr->calls = sl->wcount;
	tr->reason = reason;
	sl->state = to;
	sl->last_at = at;
	sl->epoch = ++(*epochs);
	sl->nprobes = 0;
	sl->probes_ok = 0;
	sl->permits_left = 0;
	sl->opened_at = 0;
	sl->open_until = 0;
	switch (to)
	{
		case PGD_BREAKER_OPEN:
			sl->opened_at = at;
			sl->open_until = TimestampTzPlusMilliseconds(at, sl->s.wait_ms);
			break;
		case PGD_BREAKER_HALF_OPEN:
			sl->permits_left = sl->s.half_open_calls;
			break;
		case PGD_BREAKER_CLOSED:
			sl->wpos = sl->wcount = sl->nfailed = sl->nslow = 0;
			break;
	}
	tr->opened_at = sl->opened_at;
	tr->open_until = sl->open_until;
}

/* Make the transitions whose time has come by now (at most two in a row). */
static void
advance(Slot *sl, TimestampTz now, uint64 *epochs, PgdBreakerChanges *ch)
{
	for (int step = 0; step < 3; step++)
	{
		if (sl->state == PGD_BREAKER_OPEN && now >= sl->open_until)
			transition(sl, PGD_BREAKER_HALF_OPEN, now, "wait_duration elapsed",
					   epochs, ch);
		else if (sl->state == PGD_BREAKER_HALF_OPEN)
		{
			TimestampTz first = DT_NOEND;

			for (int i = 0; i < sl->nprobes; i++)
				if (sl->probes[i].expires < first)
					first = sl->probes[i].expires;
			if (first > now)
				return;
			/* a lost probe counts as failed, at the time its permit expired */
			transition(sl, PGD_BREAKER_OPEN, first,
					   "a half-open probe did not return in time", epochs, ch);
		}
		else
			return;
	}
}

int
pgd_breaker_find(Oid db, const char *name)
{
	int slot;

	LWLockAcquire(table->lock, LW_SHARED);
	slot = find_locked(db, name);
	LWLockRelease(table->lock);
	return slot;
}

int
pgd_breaker_install(Oid db, const char *name, const PgdBreakerSettings *s,
					PgdBreakerState state, TimestampTz opened_at,
					TimestampTz open_until)
{
	int	  slot;
	Slot *sl;

	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	slot = find_locked(db, name);
	if (slot < 0)
	{
		/* a free slot, else the least recently used one */
		slot = 0;
		for (int i = 0; i < PGD_MAX_BREAKERS; i++)
		{
			if (!table->slots[i].used)
			{
				slot = i;
				break;
			}
			if (table->slots[i].last_used < table->slots[slot].last_used)
				slot = i;
		}
		sl = &table->slots[slot];
		memset(sl, 0, sizeof(Slot));
		sl->used = true;
		sl->db = db;
		strlcpy(sl->name, name, sizeof(sl->name));
		sl->s = *s;
		sl->state = state;
		sl->epoch = ++table->epochs;
		if (state == PGD_BREAKER_OPEN)
		{
			sl->opened_at = opened_at;
			sl->open_until = open_until;
		}
		else if (state == PGD_BREAKER_HALF_OPEN)
			sl->permits_left = s->half_open_calls;
		sl->last_at = opened_at;
		sl->last_used = GetCurrentTimestamp();
	}
	LWLockRelease(table->lock);
	return slot;
}

bool
pgd_breaker_settings(int slot, const char *name, PgdBreakerSettings *s)
{
	bool ok;

	LWLockAcquire(table->lock, LW_SHARED);
	ok = table->slots[slot].used && strcmp(table->slots[slot].name, name) == 0;
	if (ok)
		*s = table->slots[slot].s;
	LWLockRelease(table->lock);
	return ok;
}

PgdBreakerAdmit
pgd_breaker_admit(int slot, Oid db, const char *name, TimestampTz now,
				  PgdBreakerTicket *t, PgdBreakerChanges *ch,
				  TimestampTz *until)
{
	Slot		   *sl;
	PgdBreakerAdmit r = PGD_BREAKER_ADMITTED;

	memset(t, 0, sizeof(*t));
	ch->n = 0;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	sl = &table->slots[slot];
	if (!slot_is(sl, db, name))
	{
		LWLockRelease(table->lock);
		return PGD_BREAKER_NOT_LOADED;
	}
	sl->last_used = now;
	advance(sl, now, &table->epochs, ch);
	switch (sl->state)
	{
		case PGD_BREAKER_CLOSED:
			break;
		case PGD_BREAKER_OPEN:
			*until = sl->open_until;
			r = PGD_BREAKER_REFUSED;
			break;
		case PGD_BREAKER_HALF_OPEN:
			if (sl->permits_left > 0 && sl->nprobes < PGD_BREAKER_PROBES_MAX)
			{
				Probe *p = &sl->probes[sl->nprobes++];

				sl->permits_left--;
				p->id = ++table->probe_ids;
				p->expires = TimestampTzPlusMilliseconds(now, sl->s.wait_ms);
				t->probe = true;
				t->probe_id = p->id;
			}
			else
			{
				/* every permit is out: the earliest can be decided when it expires */
				*until = DT_NOEND;
				for (int i = 0; i < sl->nprobes; i++)
					if (sl->probes[i].expires < *until)
						*until = sl->probes[i].expires;
				r = PGD_BREAKER_REFUSED;
			}
			break;
	}
	if (r == PGD_BREAKER_ADMITTED)
	{
		t->active = true;
		t->slot = slot;
		t->epoch = sl->epoch;
		t->started = now;
		strlcpy(t->name, name, sizeof(t->name));
	}
	LWLockRelease(table->lock);
	return r;
}

/* A closed breaker's window takes one outcome. */
static void
window_push(Slot *sl, uint8 call)
{
	int size = Max(sl->s.window_size, 1);

	if (sl->wcount == size)
	{
		uint8 old = sl->window[(sl->wpos + size - sl->wcount) % size];

		sl->nfailed -= (old & CALL_FAILED) ? 1 : 0;
		sl->nslow -= (old & CALL_SLOW) ? 1 : 0;
		sl->wcount--;
	}
	sl->window[sl->wpos] = call;
	sl->wpos = (sl->wpos + 1) % size;
	sl->wcount++;
	sl->nfailed += (call & CALL_FAILED) ? 1 : 0;
	sl->nslow += (call & CALL_SLOW) ? 1 : 0;
}

static bool
rates_trip(const Slot *sl)
{
	if (sl->wcount < sl->s.minimum_calls)
		return false;
	if (rate(sl->nfailed, sl->wcount) >= sl->s.failure_rate_threshold)
		return true;
	return sl->s.slow_call_ms >= 0 &&
		rate(sl->nslow, sl->wcount) >= sl->s.slow_call_rate_threshold;
}

void
pgd_breaker_record(const PgdBreakerTicket *t, bool failed, bool slow,
				   TimestampTz now, PgdBreakerChanges *ch)
{
	Slot *sl;

	ch->n = 0;
	if (!t->active)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	sl = &table->slots[t->slot];
	if (!sl->used || strcmp(sl->name, t->name) != 0)
	{
		LWLockRelease(table->lock);
		return;
	}
	advance(sl, now, &table->epochs, ch);
	if (sl->epoch != t->epoch)
	{
		/* the state the call was admitted in is over */
		LWLockRelease(table->lock);
		return;
	}
	if (!t->probe && sl->state == PGD_BREAKER_CLOSED)
	{
		window_push(sl, (failed ? CALL_FAILED : 0) | (slow ? CALL_SLOW : 0));
		if (rates_trip(sl))
			transition(sl, PGD_BREAKER_OPEN, now,
					   rate(sl->nfailed, sl->wcount) >=
							   sl->s.failure_rate_threshold ?
						   "failure rate reached its threshold" :
						   "slow-call rate reached its threshold",
					   &table->epochs, ch);
	}
	else if (t->probe && sl->state == PGD_BREAKER_HALF_OPEN)
	{
		int i;

		for (i = 0; i < sl->nprobes; i++)
			if (sl->probes[i].id == t->probe_id)
				break;
		if (i < sl->nprobes)
		{
			sl->probes[i] = sl->probes[--sl->nprobes];
			if (failed || slow)
				transition(sl, PGD_BREAKER_OPEN, now,
						   failed ? "a half-open probe failed" :
									"a half-open probe was slow",
						   &table->epochs, ch);
			else if (++sl->probes_ok >= sl->s.half_open_calls)
				transition(sl, PGD_BREAKER_CLOSED, now,
						   "the half-open probes succeeded", &table->epochs,
						   ch);
		}
	}
	LWLockRelease(table->lock);
}

void
pgd_breaker_release(const PgdBreakerTicket *t)
{
	Slot *sl;

	if (!t->active || !t->probe)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	sl = &table->slots[t->slot];
	if (sl->used && strcmp(sl->name, t->name) == 0 && sl->epoch == t->epoch &&
		sl->state == PGD_BREAKER_HALF_OPEN)
		for (int i = 0; i < sl->nprobes; i++)
			if (sl->probes[i].id == t->probe_id)
			{
				sl->probes[i] = sl->probes[--sl->nprobes];
				sl->permits_left++;
				break;
			}
	LWLockRelease(table->lock);
}

void
pgd_breaker_reset(Oid db, const char *name, TimestampTz now,
				  PgdBreakerChanges *ch)
{
	int slot;

	ch->n = 0;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	slot = find_locked(db, name);
	if (slot >= 0)
		transition(&table->slots[slot], PGD_BREAKER_CLOSED, now, "reset",
				   &table->epochs, ch);
	LWLockRelease(table->lock);
}

void
pgd_breaker_forget(Oid db, const char *name)
{
	int slot;

	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	slot = find_locked(db, name);
	if (slot >= 0)
		memset(&table->slots[slot], 0, sizeof(Slot));
	LWLockRelease(table->lock);
}

bool
pgd_breaker_view(Oid db, const char *name, TimestampTz now, PgdBreakerView *v)
{
	Slot			 *copy = palloc(sizeof(Slot));
	PgdBreakerChanges ch;
	uint64			  epochs = 0;
	int				  slot;

	LWLockAcquire(table->lock, LW_SHARED);
	slot = find_locked(db, name);
	if (slot >= 0)
		memcpy(copy, &table->slots[slot], sizeof(Slot));
	LWLockRelease(table->lock);
	if (slot < 0)
	{
		pfree(copy);
		return false;
	}
	ch.n = 0;
	advance(copy, now, &epochs, &ch);
	v->state = copy->state;
	v->failure_rate = rate(copy->nfailed, copy->wcount);
	v->slow_rate = rate(copy->nslow, copy->wcount);
	v->calls = copy->wcount;
	v->opened_at = copy->opened_at;
	v->open_until = copy->open_until;
	v->permits_left =
		copy->state == PGD_BREAKER_HALF_OPEN ? copy->permits_left : -1;
	pfree(copy);
	return true;
}
