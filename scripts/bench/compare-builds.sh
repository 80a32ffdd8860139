#!/bin/sh
# compare-builds.sh: the collectives of two builds of Sperli, alternated,
# one run each, between real processes on this machine (Go ranks,
# scripts/bench/collbench, each build with its own launcher).
#
#   sh scripts/bench/compare-builds.sh OLD [NEW]
#
# OLD and NEW are commits (NEW: the work tree). SIZES (default "2 4 8 16
# 32") are the job sizes; SPECS the measurements, in collbench's terms.
# It prints a Markdown table of per-call times in microseconds.
set -eu
old=$1
new=${2:-}
sizes=${SIZES:-2 4 8 16 32}
specs=${SPECS:-allreduce-int64:8:2000 allreduce-int64:1048576:40 bcast:1048576:40 allgather:65536:40 alltoall:1048576:20 barrier:0:2000}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" 2>/dev/null || true; git worktree remove --force "$work/new" 2>/dev/null || true; rm -rf "$work"' EXIT
build() { # build NAME COMMIT: bin/NAME-sperli and bin/NAME-collbench
	if [ -n "$2" ]; then
		git worktree add -q "$work/$1" "$2"
		dir=$work/$1
	else
		dir=.
	fi
	(cd "$dir" && go build -o "$work/$1-sperli" ./cmd/sperli && go build -o "$work/$1-collbench" ./scripts/bench/collbench)
}
build old "$old"
build new "$new"
for n in $sizes; do
	for v in old new; do
		# shellcheck disable=SC2086 # the specs are words
		"$work/$v-sperli" run -n "$n" "$work/$v-collbench" $specs 2>/dev/null | sed -n "s/.*sperli op=/$v $n /p"
	done
done | awk '{
	op = $3; b = $4; sub("bytes=", "", b); us = $NF; sub("per_call_us=", "", us)
	key = op " " b " " $2
	if ($1 == "old") old[key] = us; else { now[key] = us; order[++k] = key }
} END {
	print "| op | bytes | ranks | old, µs | new, µs |"
	print "| --- | --- | --- | --- | --- |"
	for (i = 1; i <= k; i++) { split(order[i], a, " "); printf "| %s | %s | %s | %s | %s |\n", a[1], a[2], a[3], old[order[i]], now[order[i]] }
}'
