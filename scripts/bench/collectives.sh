#!/bin/sh
# collectives.sh: Sperli's collectives beside Open MPI's, measured in the
# same run on this machine, both over TCP on loopback (Sperli: every byte
# in TLS 1.3; Open MPI: plain TCP, --mca btl tcp,self).
#
#   sh scripts/bench/collectives.sh          (or: make bench-coll)
#
# First table, between real processes:
#   allreduce of one int64 (8 B, sum) and barrier over 2 ranks (the
#   latency of a collective: one exchange)
#   allreduce of 2,000,000 int64 (16 MB, sum) over 3 ranks
#   barrier over 3 ranks and over 8 ranks
# for Go ranks (bin/collbench) and, in rows of their own against the same
# Open MPI figures, Starlark ranks (scripts/bench/collbench.star, timed
# inside the program). Each measurement runs REPEAT times (default 3),
# alternating Open MPI, Sperli Go and Sperli Starlark, and the table shows
# the best per-call time of each.
#
# Then a sweep over SWEEP_RANKS (default 2 4 8 16 32) ranks of allreduce
# (int64 and float64 sum) of 8 B, 1 MiB and 16 MB, bcast of 1 MiB from rank
# 0, allgather of 64 KiB per rank, alltoall of 1 MiB per rank and barrier:
# every op in one job per system, Open MPI and Sperli Go ranks alternating,
# REPEAT runs each, best per-call time; each op's call count is calibrated
# to about SWEEP_TARGET_MS of calls (a third of it at 32 ranks and more) the
# same way on both sides (scripts/bench/mpi_coll.c says how). It prints the
# sweep as a table and as Markdown, and writes the plot to PLOT.
#
# Environment:
#   REPEAT=3              runs of each measurement
#   ALLREDUCE_ITERS=20    calls per allreduce run (first table)
#   BARRIER_ITERS=2000    calls per barrier run (first table)
#   STAR=1                Starlark rows in the first table (0: none)
#   SWEEP=1               the sweep (0: first table only)
#   SWEEP_RANKS="2 4 8 16 32"
#   SWEEP_TARGET_MS=300   time of calls per op and run
#   PLOT=docs/collectives.svg
#   MPI_ARGS=             more mpirun arguments, e.g. "--mca mpi_yield_when_idle 1"
#                         (Open MPI polls without yielding when it has a core
#                         per rank, which a busy machine punishes)
#   PROFILE=1             also profile Sperli's allreduce (rank 0, the root,
#                         and rank 1) and print the top of each profile
#
# It installs Debian's openmpi-bin and libopenmpi-dev when mpicc or mpirun
# is missing (apt-get; needs root), and builds bin/sperli, bin/collbench
# and bin/collplot with go build and mpi_coll with mpicc.
set -eu

cd "$(dirname "$0")/../.."
REPEAT=${REPEAT:-3}
ALLREDUCE_ITERS=${ALLREDUCE_ITERS:-20}
BARRIER_ITERS=${BARRIER_ITERS:-2000}
PROFILE=${PROFILE:-0}
STAR=${STAR:-1}
SWEEP=${SWEEP:-1}
SWEEP_RANKS=${SWEEP_RANKS:-2 4 8 16 32}
SWEEP_TARGET_MS=${SWEEP_TARGET_MS:-300}
PLOT=${PLOT:-docs/collectives.svg}
MPI_ARGS=${MPI_ARGS:-}

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
go build -o bin/collplot ./scripts/bench/collplot

mpirun_() { # RANKS ARGS...
	n=$1
	shift
	# shellcheck disable=SC2086
	mpirun --allow-run-as-root --oversubscribe -np "$n" $MPI_ARGS \
		--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
		"$work/mpi_coll" "$@"
}

# args OP ITERS: the arguments of mpi_coll and collbench for OP
# (allreduce8 is an allreduce of one int64, in their OP:BYTES:ITERS form).
args() {
	if [ "$1" = allreduce8 ]; then
		echo "allreduce-int64:8:$2"
	else
		echo "$1 $2"
	fi
}

mpi() { # RANKS OP ITERS
	# shellcheck disable=SC2046
	mpirun_ "$1" $(args "$2" "$3") | sed -n 's/.*per_call_us=//p'
}

sperli() { # RANKS OP ITERS [ARGS]
	n=$1
	a=$(args "$2" "$3")
	shift 3
	# shellcheck disable=SC2086
	bin/sperli run -n "$n" bin/collbench $a "$@" | sed -n 's/.*sperli op=.*per_call_us=//p'
}

star() { # RANKS OP ITERS
	bin/sperli run -n "$1" scripts/bench/collbench.star "$2" "$3" | sed -n 's/.*sperli-star op=.*per_call_us=//p'
}

# best LIST: the smallest of the numbers given.
best() {
	printf '%s\n' "$@" | sort -g | head -n 1
}

measure() { # NAME RANKS OP ITERS
	m=""
	s=""
	t=""
	i=0
	while [ "$i" -lt "$REPEAT" ]; do
		a=$(mpi "$2" "$3" "$4")
		b=$(sperli "$2" "$3" "$4")
		c=-
		if [ "$STAR" = 1 ]; then
			c=$(star "$2" "$3" "$4")
		fi
		if [ -z "$a" ] || [ -z "$b" ] || [ -z "$c" ]; then
			echo "collectives.sh: $1: a run gave no figure (Open MPI '$a', Sperli '$b', Starlark '$c')" >&2
			exit 1
		fi
		echo "  $1 run $((i + 1)): Open MPI $a µs, Sperli $b µs, Starlark $c µs" >&2
		m="$m $a"
		s="$s $b"
		t="$t $c"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	bm=$(best $m)
	# shellcheck disable=SC2086
	bs=$(best $s)
	printf '%-28s %14.1f %14.1f %8.2f\n' "$1" "$bm" "$bs" "$(echo "$bs $bm" | awk '{ printf "%.4f", $1 / $2 }')" >>"$work/table"
	if [ "$STAR" = 1 ]; then
		# shellcheck disable=SC2086
		bt=$(best $t)
		printf '%-28s %14.1f %14.1f %8.2f\n' "$1, Starlark" "$bm" "$bt" "$(echo "$bt $bm" | awk '{ printf "%.4f", $1 / $2 }')" >>"$work/startable"
	fi
}

machine="$(nproc) cores, $(uname -sr), $(mpirun --version | head -n 1), $(go version | cut -d' ' -f3), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "collectives.sh: $machine" >&2
: >"$work/table"
: >"$work/startable"
measure "allreduce 8 B, 2 ranks" 2 allreduce8 "$BARRIER_ITERS"
measure "barrier, 2 ranks" 2 barrier "$BARRIER_ITERS"
measure "allreduce 16 MB, 3 ranks" 3 allreduce "$ALLREDUCE_ITERS"
measure "barrier, 3 ranks" 3 barrier "$BARRIER_ITERS"
measure "barrier, 8 ranks" 8 barrier "$BARRIER_ITERS"

echo
printf '%-28s %14s %14s %8s\n' "per call (best of $REPEAT)" "Open MPI µs" "Sperli µs" "ratio"
cat "$work/table" "$work/startable"

if [ "$PROFILE" = 1 ]; then
	prof="$work/allreduce.prof"
	sperli 3 allreduce "$ALLREDUCE_ITERS" -cpuprofile "$prof" >/dev/null
	for f in "$prof" "$prof.rank1"; do
		echo
		echo "profile of $(basename "$f") (Sperli allreduce, $ALLREDUCE_ITERS calls):"
		go tool pprof -top -nodecount 25 bin/collbench "$f" 2>/dev/null | sed -n '1,35p'
	done
fi

[ "$SWEEP" = 1 ] || exit 0

# The sweep's measurements, OP:BYTES, in mpi_coll's and collbench's terms.
specs="allreduce-int64:8 allreduce-int64:1048576 allreduce-int64:16000000
allreduce-float64:8 allreduce-float64:1048576 allreduce-float64:16000000
bcast:1048576 allgather:65536 alltoall:1048576 barrier:0"

# sweepline SYSTEM: "OP BYTES US" for each line of a run's output.
sweepline() {
	sed -n "s/.*$1 op=\([^ ]*\) bytes=\([0-9]*\) .*per_call_us=\([0-9.]*\).*/\1 \2 \3/p"
}

: >"$work/runs"
for n in $SWEEP_RANKS; do
	target=$SWEEP_TARGET_MS
	if [ "$n" -ge 32 ]; then
		target=$((SWEEP_TARGET_MS / 3))
	fi
	i=0
	while [ "$i" -lt "$REPEAT" ]; do
		start=$(date +%s)
		# shellcheck disable=SC2086
		mpirun_ "$n" -target-ms "$target" $specs | sweepline mpi | sed "s/^/mpi $n /" >"$work/a"
		# shellcheck disable=SC2086
		bin/sperli run -n "$n" bin/collbench -target-ms "$target" $specs | sweepline sperli | sed "s/^/sperli $n /" >"$work/b"
		want=$(echo $specs | wc -w)
		if [ "$(wc -l <"$work/a")" -ne "$want" ] || [ "$(wc -l <"$work/b")" -ne "$want" ]; then
			echo "collectives.sh: sweep, $n ranks: a run gave $(wc -l <"$work/a") (Open MPI) and $(wc -l <"$work/b") (Sperli) of $want figures" >&2
			exit 1
		fi
		cat "$work/a" "$work/b" >>"$work/runs"
		echo "  sweep $n ranks run $((i + 1)): $(($(date +%s) - start)) s" >&2
		i=$((i + 1))
	done
done

# Best of the runs per system, op, size and rank count, as the tab-separated
# OP BYTES RANKS OPEN_MPI_US SPERLI_US that collplot reads, in the order of
# specs and ranks.
awk -v specs="$specs" -v ranks="$SWEEP_RANKS" '
	{ k = $3 " " $4 " " $2; if (!(($1, k) in best) || $5 < best[$1, k]) best[$1, k] = $5 }
	END {
		ns = split(specs, s, /[ \n]+/); nr = split(ranks, r, / +/)
		for (i = 1; i <= ns; i++) {
			split(s[i], f, ":")
			for (j = 1; j <= nr; j++) {
				k = f[1] " " f[2] " " r[j]
				if (("mpi", k) in best && ("sperli", k) in best)
					printf "%s\t%s\t%s\t%s\t%s\n", f[1], f[2], r[j], best["mpi", k], best["sperli", k]
			}
		}
	}' "$work/runs" >"$work/sweep.tsv"

echo
printf '%-18s %9s %6s %14s %14s %8s\n' "sweep (best of $REPEAT)" bytes ranks "Open MPI µs" "Sperli µs" ratio
awk -F'\t' '{ printf "%-18s %9d %6d %14.1f %14.1f %8.2f\n", $1, $2, $3, $4, $5, $5 / $4 }' "$work/sweep.tsv"
echo
bin/collplot -svg "$PLOT" -machine "$machine" <"$work/sweep.tsv"
echo
echo "collectives.sh: plot written to $PLOT" >&2
