# pg_durable — PGXS build.
#
#   make                 build the extension
#   make install         install it into the PostgreSQL found by PG_CONFIG
#   bash test/run        build, install into a private tree and run every test
#
EXTENSION = pg_durable
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = pg_durable
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
EXTRA_CLEAN = sql/$(EXTENSION)--$(EXTVERSION).sql

PG_CONFIG ?= pg_config
BUILD_TIME := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PG_CPPFLAGS = -I$(srcdir)/src -DPG_DURABLE_VERSION='"$(EXTVERSION)"' -DPG_DURABLE_BUILT='"$(BUILD_TIME)"'
PG_CFLAGS = -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wno-sign-compare -Wno-missing-field-initializers -Wno-cast-function-type
SHLIB_LINK = -lcurl

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# PGXS tracks no header dependencies: a struct changed in a header must
# rebuild every object that uses it, or they disagree about its layout.
$(OBJS) $(OBJS:.o=.bc): $(wildcard src/*/*.h)
