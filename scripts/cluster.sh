# A throwaway PostgreSQL cluster with pg_durable preloaded, for scripts/demo
# and the examples.  Source it from bash after setting ROOT; it defines
#   cluster_build_install        install packages, build, install the extension
#   cluster_start DIR PORT [CONF] initdb + start in DIR (CONF: extra settings)
#   cluster_stop                 stop it
#   PSQL                         an array: psql as postgres on that cluster
# As root the cluster runs as the postgres user (PostgreSQL refuses root).

cluster_build_install() {
	bash "$ROOT/scripts/install-deps"
	PG_CONFIG=${PG_CONFIG:-pg_config}
	BINDIR=$($PG_CONFIG --bindir)
	echo "== building and installing pg_durable"
	make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG"
	if [ "$(id -u)" = 0 ]; then
		make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" install >/dev/null
		RUNAS=(runuser -u postgres --)
		OWNER=postgres
	else
		sudo make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" install >/dev/null
		RUNAS=()
		OWNER=$(id -un)
	fi
}

cluster_start() {
	CLUSTER_DIR=$1
	local port=$2 conf=${3:-}
	mkdir -p "$CLUSTER_DIR"
	chown "$OWNER" "$CLUSTER_DIR" 2>/dev/null || true
	if ! "${RUNAS[@]}" test -w "$CLUSTER_DIR"; then
		CLUSTER_DIR=${TMPDIR:-/tmp}/pg_durable-$(basename "$CLUSTER_DIR")
		mkdir -p "$CLUSTER_DIR"; chown "$OWNER" "$CLUSTER_DIR" 2>/dev/null || true
	fi
	CLUSTER_DATA=$CLUSTER_DIR/data
	cluster_stop
	rm -rf "$CLUSTER_DATA"
	echo "== starting a throwaway cluster in $CLUSTER_DATA (port $port)"
	"${RUNAS[@]}" "$BINDIR/initdb" -D "$CLUSTER_DATA" -U postgres -A trust >/dev/null
	cat >>"$CLUSTER_DATA/postgresql.conf" <<CONF
listen_addresses = ''
port = $port
unix_socket_directories = '$CLUSTER_DIR'
shared_preload_libraries = 'pg_durable'
pg_durable.database = 'postgres'
$conf
CONF
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_DIR/server.log" -w start >/dev/null
	PSQL=("${RUNAS[@]}" "$BINDIR/psql" -X -h "$CLUSTER_DIR" -p "$port" -U postgres -d postgres)
	"${PSQL[@]}" -q -c "CREATE EXTENSION pg_durable"
}

cluster_stop() {
	[ -n "${CLUSTER_DATA:-}" ] || return 0
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$CLUSTER_DATA" -m fast stop >/dev/null 2>&1 || true
}
