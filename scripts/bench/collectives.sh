#!/bin/sh
# collectives.sh: Sperli's collectives beside Open MPI's, measured in the
# same run on this machine, both over TCP on loopback (Sperli: every byte
# in TLS 1.3; Open MPI: plain TCP, --mca btl tcp,self).
#
#   sh scripts/bench/collectives.sh
#
# It measures, between real processes:
#   allreduce of 2,000,000 int64 (16 MB, sum) over 3 ranks
#   barrier over 3 ranks and over 8 ranks
# Each measurement runs REPEAT times (default 3), alternating Open MPI and
# Sperli, and the table shows the best per-call time of each.
#
# Environment:
#   REPEAT=3              runs of each measurement
#   ALLREDUCE_ITERS=20    calls per allreduce run
#   BARRIER_ITERS=2000    calls per barrier run
#   PROFILE=1             also profile Sperli's allreduce (rank 0, the root,
#                         and rank 1) and print the top of each profile
#
# It installs Debian's openmpi-bin and libopenmpi-dev when mpicc or mpirun
# is missing (apt-get; needs root), and builds bin/sperli and bin/collbench
# with go build and mpi_coll with mpicc.
set -eu

cd "$(dirname "$0")/../.."
REPEAT=${REPEAT:-3}
ALLREDUCE_ITERS=${ALLREDUCE_ITERS:-20}
BARRIER_ITERS=${BARRIER_ITERS:-2000}
PROFILE=${PROFILE:-0}

if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
	echo "collectives.sh: installing openmpi-bin and libopenmpi-dev" >&2
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

mpicc -O2 -o "$work/mpi_coll" scripts/bench/mpi_coll.c
go build -o bin/sperli ./cmd/sperli
go build -o bin/collbench ./scripts/bench/collbench

mpi() { # RANKS OP ITERS
	mpirun --allow-run-as-root --oversubscribe -np "$1" \
		--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
		"$work/mpi_coll" "$2" "$3" | sed -n 's/.*per_call_us=//p'
}

sperli() { # RANKS OP ITERS [ARGS]
	n=$1
	shift
	bin/sperli run -n "$n" bin/collbench "$@" | sed -n 's/.*sperli op=.*per_call_us=//p'
}

# best LIST: the smallest of the numbers given.
best() {
	printf '%s\n' "$@" | sort -g | head -n 1
}

measure() { # NAME RANKS OP ITERS
	m=""
	s=""
	i=0
	while [ "$i" -lt "$REPEAT" ]; do
		a=$(mpi "$2" "$3" "$4")
		b=$(sperli "$2" "$3" "$4")
		if [ -z "$a" ] || [ -z "$b" ]; then
			echo "collectives.sh: $1: a run gave no figure (Open MPI '$a', Sperli '$b')" >&2
			exit 1
		fi
		echo "  $1 run $((i + 1)): Open MPI $a µs, Sperli $b µs" >&2
		m="$m $a"
		s="$s $b"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	bm=$(best $m)
	# shellcheck disable=SC2086
	bs=$(best $s)
	printf '%-28s %14.1f %14.1f %8.2f\n' "$1" "$bm" "$bs" "$(echo "$bs $bm" | awk '{ printf "%.4f", $1 / $2 }')" >>"$work/table"
}

echo "collectives.sh: $(nproc) cores, $(uname -sr), $(mpirun --version | head -n 1), $(go version | cut -d' ' -f3)" >&2
: >"$work/table"
measure "allreduce 16 MB, 3 ranks" 3 allreduce "$ALLREDUCE_ITERS"
measure "barrier, 3 ranks" 3 barrier "$BARRIER_ITERS"
measure "barrier, 8 ranks" 8 barrier "$BARRIER_ITERS"

echo
printf '%-28s %14s %14s %8s\n' "per call (best of $REPEAT)" "Open MPI µs" "Sperli µs" "ratio"
cat "$work/table"

if [ "$PROFILE" = 1 ]; then
	prof="$work/allreduce.prof"
	sperli 3 allreduce "$ALLREDUCE_ITERS" -cpuprofile "$prof" >/dev/null
	for f in "$prof" "$prof.rank1"; do
		echo
		echo "profile of $(basename "$f") (Sperli allreduce, $ALLREDUCE_ITERS calls):"
		go tool pprof -top -nodecount 25 bin/collbench "$f" 2>/dev/null | sed -n '1,35p'
	done
fi
