# pg_durable — PGXS build.
#
#   make                     build the extension
#   make install             install it into the PostgreSQL found by PG_CONFIG
#   make installcheck        pg_regress and isolation tests against a running
#                            server set up as README "Tests" says
#   make prove_installcheck  TAP tests (they start their own servers from the
#                            installation)
#   bash test/run            build, install into a private tree and run every
#                            test: all three layers, no server needed
#
EXTENSION = pg_durable
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = pg_durable
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
# sql/pg_durable.sql is the schema of the current version, installed as
# pg_durable--$(EXTVERSION).sql.  The install scripts of released versions
# are frozen beside it (so that a test can create the old version and update
# it), with the upgrade scripts between versions: every schema change goes
# into pg_durable.sql AND the current upgrade script (src/README.md).
OLD_VERSIONS = 0.3.0
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = $(foreach v,$(OLD_VERSIONS),sql/$(EXTENSION)--$(v).sql) \
	$(sort $(wildcard sql/$(EXTENSION)--*--*.sql))
EXTRA_CLEAN = sql/$(EXTENSION)--$(EXTVERSION).sql

PG_CONFIG ?= pg_config
BUILD_TIME := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PG_CPPFLAGS = -I$(srcdir)/src -DPG_DURABLE_VERSION='"$(EXTVERSION)"' -DPG_DURABLE_BUILT='"$(BUILD_TIME)"'
PG_CFLAGS = -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wno-sign-compare -Wno-missing-field-initializers -Wno-cast-function-type
SHLIB_LINK = -lcurl

# The tests, in three layers (README "Tests").  These lists are the only
# ones: bash test/run reads them too (make -s list-isolation, list-tap).
# pg_regress: test/sql + test/expected, in the order of test/schedule.
REGRESS = $(shell sed -n 's/^test: *//p' test/schedule)
REGRESS_OPTS = --inputdir=test --load-extension=pg_durable
# isolation specs: test/specs + test/expected.  They run in the database the
# pg_regress tests leave behind (--use-existing): pg_isolation_regress could
# not drop it to start afresh while the engine's workers are connected to it.
ISOLATION = cancel_step_race join_same_moment race_same_moment \
	signal_new_before_commit signal_wait_race start_rollback timeout_completion_race timer_cancel_race vars_upsert start_same_key compensate_twice \
	map_same_moment \
	limit_release_timeout_race \
	event_wait_race \
	lock_release_cancel_race \
	inbox_runs_held \
	task_claim_race \
	http_completion_held
ISOLATION_OPTS = --inputdir=test --use-existing

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The expected output names the test database, which must be the server's
# pg_durable.database (test/regress.conf): "regression" for both layers,
# not PGXS's contrib_regression / isolation_regression.
CONTRIB_TESTDB = regression
ISOLATION_TESTDB = regression

# TAP tests: test/t/*.pl with the helpers of test/perl.  Set after the
# include on purpose: PGXS would otherwise run them in "make installcheck",
# which is about the running server these tests do not use (each starts its
# own clusters, and initdb refuses to run as root).  They run with
# "make prove_installcheck" (PROVE_TESTS=test/t/001_launcher.pl for one).
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl
PG_PROVE_FLAGS += -I test/perl
EXTRA_CLEAN += tmp_check/

.PHONY: prove_installcheck list-isolation list-tap dist

# The release archive for PGXN: the committed tree at HEAD (git archive),
# under the folder pg_durable-<version>/, after checking META.json.
DIST = $(EXTENSION)-$(EXTVERSION).zip
dist:
	perl scripts/check-meta --tree . META.json
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(DIST) HEAD
	@echo $(DIST)
prove_installcheck:
	$(prove_installcheck)

list-isolation:
	@echo $(ISOLATION)

list-tap:
	@echo $(sort $(wildcard $(PROVE_TESTS)))

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# PGXS tracks no header dependencies: a struct changed in a header must
# rebuild every object that uses it, or they disagree about its layout.
$(OBJS) $(OBJS:.o=.bc): $(wildcard src/*/*.h)
