#!/bin/sh
# silence-soak.sh: does a short silence limit hold on a loaded machine?
# LOADS busy loops (yes > /dev/null) take the processors while a job of
# N ranks and S spares runs small collectives for SECONDS with --silence
# SILENCE_MS (scripts/bench/soak.star). A false loss — a live rank
# declared lost — shows as a generation line on the launcher's standard
# error and a generation above 0 in rank 0's line. Prints the job's exit
# status, rank 0's line and every loss line; exit status 1 when the job
# did not end well or lost a rank.
#
#   SECONDS_=600 SILENCE_MS=100 sh scripts/bench/silence-soak.sh
#
# Environment: SECONDS_=60, SILENCE_MS=100, N=8, S=2, LOADS=2,
# SPERLI=bin/sperli.
set -eu
cd "$(dirname "$0")/../.."
SECS=${SECONDS_:-60}
SILENCE_MS=${SILENCE_MS:-100}
N=${N:-8}
S=${S:-2}
LOADS=${LOADS:-2}
SPERLI=${SPERLI:-bin/sperli}
[ -x "$SPERLI" ] || go build -o "$SPERLI" ./cmd/sperli
work=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
i=0
while [ "$i" -lt "$LOADS" ]; do
	yes > /dev/null &
	pids="$pids $!"
	i=$((i + 1))
done
code=0
# The job's own bound: its run time and a minute.
"$SPERLI" run -n "$N" --spares "$S" --silence "$SILENCE_MS" --timeout "$((SECS + 60))s" \
	scripts/bench/soak.star "$SECS" > "$work/out" 2> "$work/err" || code=$?
echo "exit status $code; -n $N --spares $S --silence $SILENCE_MS, $LOADS busy loops, $SECS s"
cat "$work/out"
grep -E 'generation [0-9]+:|lost|silen' "$work/err" || echo "no loss said"
[ "$code" -eq 0 ] || tail -5 "$work/err"
if [ "$code" -ne 0 ] || grep -qE 'generation [0-9]+:|lost' "$work/err"; then
	exit 1
fi
