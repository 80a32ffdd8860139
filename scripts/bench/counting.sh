#!/bin/sh
# counting.sh: what the --stats counters cost on the latency path. Two
# builds of runtime's benchmarks, with the counters (the normal build) and
# without them (the build tag sperli_nocount compiles them out), time a
# 64 B round trip between two Go ranks in one process, alternated ROUNDS
# times (default 24), and it prints, per build, the best and the median
# round trip in ns.
#
#   sh scripts/bench/counting.sh
#
# Environment: ROUNDS=24, BENCHTIME=1s.
set -eu
cd "$(dirname "$0")/../../runtime"
ROUNDS=${ROUNDS:-24}
BENCHTIME=${BENCHTIME:-1s}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/with" .
go test -c -tags sperli_nocount -o "$dir/without" .
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	for b in with without; do
		ns=$("$dir/$b" -test.run '^$' -test.bench 'RoundTrip64$' -test.benchtime "$BENCHTIME" | awk '/^BenchmarkRoundTrip64/ {print $3}')
		echo "$b $ns" >> "$dir/runs"
	done
	i=$((i + 1))
done
for b in with without; do
	awk -v b="$b" '$1 == b {print $2}' "$dir/runs" | sort -n | awk -v b="$b" '
		{ v[NR] = $1 }
		END {
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%-8s counters: best %d ns, median %d ns a round trip (%d runs)\n", b, v[1], m, NR
		}'
done
