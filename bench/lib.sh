# Shell functions shared by bench/run and bench/peers/run: build pg_durable,
# install it into a private copy of the server's installation (as test/run
# does), start and stop a throwaway cluster as the postgres user.  Sourced,
# not run.  The caller sets ROOT, PG_CONFIG, PORT, WORKERS, SYNC, PRELOAD,
# MAXCONN and BENCH_DIR; bench_install sets INSTALL, DATA, BINDIR, RUNAS,
# OWNER and may move BENCH_DIR to $TMPDIR when the postgres user cannot
# write the build tree.  No locks: one cluster per BENCH_DIR and port.

log() { printf '== %s\n' "$*" >&2; }

if [ "$(id -u)" = 0 ]; then
	RUNAS=(runuser -u postgres --)
	OWNER=postgres
else
	RUNAS=()
	OWNER=$(id -un)
fi

# Build the extension (and whatever make targets the caller names in
# BUILD_EXTRA, e.g. bench) and install it into $BENCH_DIR/tmp_install.
bench_install() {
	bash "$ROOT/scripts/install-deps"
	PGBIN=$($PG_CONFIG --bindir)
	PKGLIB=$($PG_CONFIG --pkglibdir)
	SHARE=$($PG_CONFIG --sharedir)

	log "building pg_durable${BUILD_EXTRA:+ and $BUILD_EXTRA}"
	# (from make clean when the tree was built for another server)
	PG_CONFIG="$PG_CONFIG" bash "$ROOT/scripts/make-for"
	[ -n "${BUILD_EXTRA:-}" ] && make -C "$ROOT/$BUILD_EXTRA" -s PG_CONFIG="$PG_CONFIG"

	mkdir -p "$BENCH_DIR"
	chown "$OWNER" "$BENCH_DIR" 2>/dev/null || true
	if ! "${RUNAS[@]}" test -w "$BENCH_DIR" -a -x "$BENCH_DIR"; then
		BENCH_DIR=${TMPDIR:-/tmp}/pg_durable-$(basename "$BENCH_DIR")
		log "$OWNER cannot write the build tree; using $BENCH_DIR"
		mkdir -p "$BENCH_DIR"; chown "$OWNER" "$BENCH_DIR" 2>/dev/null || true
	fi
	INSTALL=$BENCH_DIR/tmp_install
	DATA=$BENCH_DIR/data
	BINDIR=$INSTALL$PGBIN

	log "installing into $INSTALL"
	rm -rf "$INSTALL"
	mkdir -p "$INSTALL$PGBIN" "$INSTALL$PKGLIB" "$INSTALL$SHARE"
	cp -a "$PGBIN/." "$INSTALL$PGBIN/"
	cp -a "$PKGLIB/." "$INSTALL$PKGLIB/"
	cp -a "$SHARE/." "$INSTALL$SHARE/"
	make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" install DESTDIR="$INSTALL" >/dev/null
}

stop_cluster() {
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
}

# initdb a fresh cluster in $DATA and start it; the pg_durable engine runs
# in database $PGD_DB.
bench_start_cluster() {
	stop_cluster
	rm -rf "$DATA"
	log "starting a throwaway cluster in $DATA (port $PORT, $WORKERS executors, synchronous_commit = $SYNC)"
	"${RUNAS[@]}" "$BINDIR/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C >/dev/null
	cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$BENCH_DIR'
max_connections = $MAXCONN
shared_buffers = '512MB'
max_wal_size = '4GB'
checkpoint_timeout = '30min'
fsync = on
synchronous_commit = $SYNC
shared_preload_libraries = '$PRELOAD'
max_worker_processes = $((WORKERS + 8))
pg_durable.database = '$PGD_DB'
pg_durable.workers = $WORKERS
pg_durable.max_user_connections = $((WORKERS > 10 ? WORKERS : 10))
pg_durable.enable_superuser_instances = on
pg_durable.http_allow_private = on
pg_stat_statements.track = all
CONF
	# BENCH_CONF: more settings, one a line (bench/run --batch-steps, --batch-ms)
	[ -z "${BENCH_CONF:-}" ] || printf '%s\n' "$BENCH_CONF" >>"$DATA/postgresql.conf"
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -l "$BENCH_DIR/server.log" -w start >/dev/null
}

# Wait until the executors have connected (they start once the extension exists).
bench_wait_executors() {
	local n
	for _ in $(seq 1 100); do
		n=$("${RUNAS[@]}" "$BINDIR/psql" -X -At "${CONN[@]}" -d "$PGD_DB" \
			-c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_durable executor'")
		[ "$n" -ge "$WORKERS" ] && break
		sleep 0.1
	done
}
