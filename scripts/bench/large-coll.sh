#!/bin/sh
# large-coll.sh: the large collectives and barriers of issue 49, Open MPI
# and one or more Sperli builds alternated in one run (Go ranks,
# scripts/bench/collbench; Open MPI over TCP on loopback, as
# collectives.sh runs it).
#
#   sh scripts/bench/large-coll.sh RANKS NAME=SPERLI:COLLBENCH ...
#
# For RANKS ranks: allreduce (int64, sum) of 16 MB, bcast of 16 MB from
# rank 0, allgather of 16 MB in all (16 MB / RANKS from each rank) and
# barrier; REPEAT (default 3) runs of each system, alternated; each line
# is one run's per-call time in µs: "SYSTEM OP BYTES RANKS US". ITERS
# (default 10) is the timed calls of each large collective, after one
# warm-up: the first calls of a rank process fault its heap in, so ten
# calls measure mostly that, and some 60 the steady state.
set -eu
cd "$(dirname "$0")/../.."
n=$1
shift
REPEAT=${REPEAT:-3}
work=${WORK:-/tmp/large-coll}
mkdir -p "$work"
[ -x "$work/mpi_coll" ] || mpicc -O2 -o "$work/mpi_coll" scripts/bench/mpi_coll.c
per=$((16000000 / n / 8 * 8))
barriers=$((n < 4 ? 2000 : 500))
it=${ITERS:-10}
specs="allreduce-int64:16000000:$it bcast:16000000:$it allgather:$per:$it barrier:0:$barriers"
i=0
while [ "$i" -lt "$REPEAT" ]; do
	# shellcheck disable=SC2086
	mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl tcp,self \
		--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "$work/mpi_coll" $specs |
		sed -n "s/.*op=\([^ ]*\) bytes=\([0-9]*\).*per_call_us=\([0-9.]*\).*/mpi \1 \2 $n \3/p"
	for b in "$@"; do
		name=${b%%=*} rest=${b#*=}
		# shellcheck disable=SC2086
		"${rest%%:*}" run -n "$n" "${rest#*:}" $specs |
			sed -n "s/.*op=\([^ ]*\) bytes=\([0-9]*\).*per_call_us=\([0-9.]*\).*/$name \1 \2 $n \3/p"
	done
	i=$((i + 1))
done
