#!/bin/sh
# recovery.sh: how long a loss costs, in place (SPEC §10.2) beside the
# launcher restart, and how long a loss takes to be known.
#
#   sh scripts/bench/recovery.sh          (or: make bench-recovery)
#
# 1. SIGKILL to every rank back in its program: 8 ranks + 2 spares, the
#    stencil of scripts/examples with checkpoints, slot 2 killed by the
#    test failure schedule right after its first checkpoint. In place:
#    the launcher's "back in N ms" (from the killed process's end, as the
#    launcher sees it, to the last slot entering generation 1). Restart:
#    the same job and loss without spares: "every rank back in its program
#    N ms after the loss" (from the first bad end to the last rank of
#    incarnation 1 joined and in its program).
# 2. A silent host: slot 3 of the same job is stopped (SIGSTOP: it holds
#    its connections and says nothing) with --silence SILENCE_MS; it is
#    declared lost one limit after its last frame (within a tenth of it),
#    and the launcher's "back in N ms" is the time from the first slot's
#    report of generation 1 to the last's. (Until 2026-12-07 this was the
#    time from the stop to the launcher's line less the limit; since the
#    launcher holds that line until the lost process ends, it measured
#    the hold.)
#
# Environment: REPEAT=10 runs of each, SILENCE_MS=1000, SPERLI=bin/sperli,
# KINDS="inplace restart silent" (the measures to make, in that order).
set -eu
cd "$(dirname "$0")/../.."
REPEAT=${REPEAT:-10}
SILENCE_MS=${SILENCE_MS:-1000}
SPERLI=${SPERLI:-bin/sperli}
[ -x "$SPERLI" ] || go build -o "$SPERLI" ./cmd/sperli
STENCIL=$PWD/scripts/examples/stencil.star
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

stats() { # name, then numbers on stdin: min median max
	sort -n | awk -v name="$1" '{ v[NR] = $1 } END { if (NR == 0) { printf "%-36s (no figures)\n", name; exit }
		printf "%-36s min %6d  median %6d  max %6d ms  (%d runs)\n", name, v[1], v[int((NR + 1) / 2)], v[NR], NR }'
}

inplace() {
	i=0
	while [ $i -lt "$REPEAT" ]; do
		d=$work/in$i; mkdir -p "$d"; cd "$d"
		SPERLI_TEST_FAILURE_SCHEDULE=0:2 "$OLDPWD/$SPERLI" run -n 8 --spares 2 --silence "$SILENCE_MS" \
			--checkpoint-dir ck "$STENCIL" 4000 80 10 2>&1 >/dev/null | sed -n 's/.*generation 1: .* back in \([0-9]*\) ms.*/\1/p'
		cd "$OLDPWD"; i=$((i + 1))
	done
}

restart() {
	i=0
	while [ $i -lt "$REPEAT" ]; do
		d=$work/re$i; mkdir -p "$d"; cd "$d"
		SPERLI_TEST_FAILURE_SCHEDULE=0:2 "$OLDPWD/$SPERLI" run -n 8 --silence "$SILENCE_MS" \
			--checkpoint-dir ck "$STENCIL" 4000 80 10 2>&1 >/dev/null | sed -n 's/.*every rank back in its program \([0-9]*\) ms after the loss.*/\1/p'
		cd "$OLDPWD"; i=$((i + 1))
	done
}

now_ms() { date +%s%3N; }

silent() {
	i=0
	while [ $i -lt "$REPEAT" ]; do
		d=$work/si$i; mkdir -p "$d"; cd "$d"
		"$OLDPWD/$SPERLI" run -n 8 --spares 2 --silence "$SILENCE_MS" --checkpoint-dir ck --record rec.jsonl \
			"$STENCIL" 4000 100000 50 >/dev/null 2>err.txt &
		launcher=$!
		# Slot 3's pid, from the record's first line; then the first commit.
		n=0
		until [ -s rec.jsonl ] && [ -n "$(ls ck/*/ 2>/dev/null)" ]; do
			n=$((n + 1)); [ $n -lt 600 ] || break; sleep 0.05
		done
		pid=$(sed -n '1s/.*"pids":{[^}]*"3":\([0-9]*\).*/\1/p' rec.jsonl)
		kill -STOP "$pid"
		# The others declare it lost one limit after its last frame and
		# agree at once; the launcher holds its line until the stopped
		# process ends (to say the launcher's own sight of it), so it is
		# killed a second past the limit. The line's "back in" is the
		# time from the first slot's report of generation 1 to the last.
		sleep "$(awk -v ms="$SILENCE_MS" 'BEGIN { printf "%.3f", ms / 1000 + 1 }')"
		kill -KILL "$pid" 2>/dev/null || true
		n=0
		until grep -q 'generation 1:' err.txt; do
			n=$((n + 1)); [ $n -lt 2000 ] || break; sleep 0.005
		done
		kill -INT "$launcher" 2>/dev/null || true
		wait "$launcher" 2>/dev/null || true
		sed -n 's/.*generation 1: .* back in \([0-9]*\) ms.*/\1/p' err.txt
		cd "$OLDPWD"; i=$((i + 1))
	done
}

echo "machine: $(nproc) processors, $(uname -sr); $(date -u +%Y-%m-%d)"
for kind in ${KINDS:-inplace restart silent}; do
	case $kind in
	inplace) inplace | stats "in place (8 ranks + 2 spares)" ;;
	restart) restart | stats "launcher restart (8 ranks)" ;;
	silent) silent | stats "silent host: back in, after the ${SILENCE_MS} ms limit" ;;
	*) echo "recovery.sh: KINDS: $kind is none of inplace, restart, silent" >&2; exit 2 ;;
	esac
done
