#!/bin/sh
# netguard: the test suite must never leave loopback. Used as
#
#   go test -exec "$PWD/scripts/netguard.sh" ./...
#
# it runs each test binary in a network namespace of its own, whose only
# interface is loopback. The host's TCP services the tests use are forwarded
# into it through unix sockets (NETGUARD_PORTS, default Redis's 6379; and
# PostgreSQL's 5432 unless its own unix socket is in NETGUARD_PG_SOCKETS,
# default /var/run/postgresql: then the tests' default database URL,
# NORNWEAVE_TEST_DATABASE_URL when unset, points there, one proxy fewer on
# every query). A connection, a datagram or a DNS query to any other
# address fails there (network unreachable), and the kernel counts it
# (OutNoRoutes, IPv4 and IPv6, per namespace): if the count is not zero when
# the binary exits, the package fails, whatever its tests said.
#
#   scripts/netguard.sh --exec-flag   prints the -exec flag for go test, or,
#                                     when the guard cannot run here (not
#                                     root, no unshare, ip or socat), nothing
#                                     on stdout and a warning on stderr; with
#                                     NETGUARD=required it fails instead.
set -u
pgsockets=${NETGUARD_PG_SOCKETS:-/var/run/postgresql}
if [ -z "${NETGUARD_PORTS:-}" ]; then
	NETGUARD_PORTS="5432 6379"
	if [ -z "${NORNWEAVE_TEST_DATABASE_URL:-}" ] && [ -S "$pgsockets/.s.PGSQL.5432" ]; then
		NETGUARD_PORTS=6379
		NORNWEAVE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&host=$pgsockets"
		export NORNWEAVE_TEST_DATABASE_URL
	fi
	export NETGUARD_PORTS
fi
ports=$NETGUARD_PORTS
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

can_run() {
	command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
		command -v socat >/dev/null 2>&1 && unshare -n true 2>/dev/null
}

# noroutes4 and noroutes6 print this namespace's IPv4 and IPv6 no-route counts.
noroutes4() {
	v4=$(awk '/^Ip:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "OutNoRoutes") c = i; h = 1 } else print $c }' /proc/net/snmp)
	echo "${v4:-0}"
}
noroutes6() {
	v6=$(awk '$1 == "Ip6OutNoRoutes" { print $2 }' /proc/net/snmp6 2>/dev/null)
	echo "${v6:-0}"
}

# wait_port waits (up to 5 s) until something listens on 127.0.0.1:$1.
wait_port() {
	i=0
	while ! socat -u /dev/null "TCP:127.0.0.1:$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 250 ] && return 1
		sleep 0.02
	done
}

case "${1:-}" in
--exec-flag)
	if can_run; then
		echo "-exec=$self"
		exit 0
	fi
	cat >&2 <<MSG
********************************************************************************
WARNING: the network guard cannot run here (it needs root, unshare, ip and
socat): the tests run WITHOUT the check that they never leave loopback.
Set NETGUARD=required to make this an error.
********************************************************************************
MSG
	[ "${NETGUARD:-}" = required ] && exit 1
	exit 0
	;;
--inside)
	# In the new namespace: loopback up, the ports forwarded, the binary run.
	shift
	ip link set lo up || exit 1
	# The one exception: Chromium (the /docs browser test) probes IPv6 at
	# start by connecting a UDP socket to Google Public DNS, which sends
	# no packet and has no switch to turn it off. An unreachable route
	# refuses it (EHOSTUNREACH) without counting a no-route; any other
	# address still counts.
	ip -6 route add unreachable 2001:4860:4860::8888/128 2>/dev/null
	pids=""
	for port in $ports; do
		socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$NETGUARD_DIR/$port.sock" 2>/dev/null &
		pids="$pids $!"
	done
	for port in $ports; do
		wait_port "$port" || echo "netguard: forwarding 127.0.0.1:$port did not start" >&2
	done
	before4=$(noroutes4) before6=$(noroutes6)
	"$@"
	rc=$?
	tried4=$(($(noroutes4) - before4)) tried6=$(($(noroutes6) - before6))
	for p in $pids; do kill "$p" 2>/dev/null; done
	if [ $((tried4 + tried6)) -gt 0 ]; then
		echo "netguard: FAIL: $(basename "$1") tried $((tried4 + tried6)) time(s) ($tried4 IPv4, $tried6 IPv6) to reach an" \
			"address that is not loopback (a connection, a datagram or a DNS query); tests must stay on 127.0.0.1" >&2
		[ $rc -eq 0 ] && rc=1
	fi
	exit $rc
	;;
esac

# Outside: unix sockets that reach the host's services, then the namespace.
NETGUARD_DIR=$(mktemp -d) || exit 1
export NETGUARD_DIR
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$NETGUARD_DIR"
}
trap cleanup EXIT INT TERM
for port in $ports; do
	socat "UNIX-LISTEN:$NETGUARD_DIR/$port.sock,fork" "TCP:127.0.0.1:$port" 2>/dev/null &
	pids="$pids $!"
done
for port in $ports; do
	i=0
	while [ ! -S "$NETGUARD_DIR/$port.sock" ] && [ $i -lt 250 ]; do
		i=$((i + 1))
		sleep 0.02
	done
done
unshare -n "$self" --inside "$@"
