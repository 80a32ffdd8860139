#!/bin/sh
# checkpoint.sh: the checkpoint of 64 MiB per rank on 3 in-process ranks
# beside its bare costs, measured in one run, and the ratios.
#
#   sh scripts/bench/checkpoint.sh
#
# It runs
#   go test -run '^$' -bench 'Checkpoint64|CheckpointBare64|SHA256_64|WriteFsync|TLS64' -benchtime ${TIMES}x ./runtime/
# REPEAT times (default 3) and prints, for each run and then for the best of
# each benchmark over the runs:
#   checkpoint     BenchmarkCheckpoint64MiB: one epoch of 3 ranks
#   per-rank bare  SHA-256 + write/fsync of the own file + one TLS transfer
#                  + write/fsync of the buddy copy, each measured alone:
#                  SHA256_64MiB + 2 x WriteFsync64MiB + TLS64MiB
#   machine bare   BenchmarkCheckpointBare64MiB: the same pieces done by 3
#                  goroutines at once on this machine (the 3 ranks share its
#                  cores and its disk), without framing, COMMIT or pruning
# and checkpoint / bare for both.
#
# Environment: TIMES=5 (-benchtime TIMES x), REPEAT=3.
set -eu

cd "$(dirname "$0")/../.."
TIMES=${TIMES:-5}
REPEAT=${REPEAT:-3}

out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM

i=1
while [ "$i" -le "$REPEAT" ]; do
	go test -run '^$' -bench 'Checkpoint64|CheckpointBare64|SHA256_64|WriteFsync|TLS64' \
		-benchtime "${TIMES}x" ./runtime/ | grep '^Benchmark' | sed "s/^/run$i /" >>"$out"
	i=$((i + 1))
done

awk '
function ms(ns) { return sprintf("%8.1f ms", ns / 1e6) }
function row(label, c, s, w, t, m,    bare) {
	bare = s + 2 * w + t
	printf "%-6s checkpoint %s | sha %s  write+fsync %s  tls %s | per-rank bare %s  x%.2f | machine bare %s  x%.2f\n",
		label, ms(c), ms(s), ms(w), ms(t), ms(bare), c / bare, ms(m), c / m
}
{
	run = $1; name = $2; sub(/-[0-9]+$/, "", name); ns = $4
	v[run, name] = ns
	if (!((name) in best) || ns < best[name]) best[name] = ns
	runs[run] = 1
}
END {
	for (r in runs) order[++n] = r
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
	for (i = 1; i <= n; i++) {
		r = order[i]
		row(r, v[r, "BenchmarkCheckpoint64MiB"], v[r, "BenchmarkSHA256_64MiB"], v[r, "BenchmarkWriteFsync64MiB"], v[r, "BenchmarkTLS64MiB"], v[r, "BenchmarkCheckpointBare64MiB"])
	}
	row("best", best["BenchmarkCheckpoint64MiB"], best["BenchmarkSHA256_64MiB"], best["BenchmarkWriteFsync64MiB"], best["BenchmarkTLS64MiB"], best["BenchmarkCheckpointBare64MiB"])
}' "$out"
