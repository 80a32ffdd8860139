#!/bin/sh
# Counts the tests of runtime (and its sub-packages) that pass, each run
# alone, in a network namespace with no interface up (unshare -n: not even
# loopback). Needs root (or unprivileged user namespaces) and util-linux.
# Usage: sh scripts/dev/offline-tests.sh [package...]   (default ./runtime/...)
# Prints one line per package ("pkg: passed/total") and the sum; with
# VERBOSE=1 also each test's verdict.
set -eu
pkgs=${*:-./runtime/...}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
all=0
ok=0
for pkg in $(go list $pkgs); do
	bin="$tmp/t.test"
	go test -c -o "$bin" "$pkg" >/dev/null
	[ -x "$bin" ] || continue
	dir=$(go list -f '{{.Dir}}' "$pkg")
	n=0
	p=0
	for t in $("$bin" -test.list '^Test' | grep '^Test'); do
		n=$((n + 1))
		if (cd "$dir" && timeout 120 unshare -n "$bin" -test.run "^$t\$" -test.count=1 >/dev/null 2>&1); then
			p=$((p + 1))
			v=pass
		else
			v=FAIL
		fi
		[ "${VERBOSE:-0}" = 1 ] && echo "  $v $t"
	done
	echo "$pkg: $p/$n"
	all=$((all + n))
	ok=$((ok + p))
	rm -f "$bin"
done
echo "total: $ok/$all without a network"
