#!/usr/bin/env bash
# Sperli beside Open MPI (TCP on loopback) and mpi4py, in one run and the
# same placement: 64-byte round trip, 1 MiB one-way rate, and the start-up
# of 4 ranks. Installs Debian's openmpi-bin, libopenmpi-dev and
# python3-mpi4py when missing (needs root for that).
#
#   sh scripts/bench/compare-mpi.sh [PINGS] [MESSAGES]
set -eu
cd "$(dirname "$0")/../.."
PINGS=${1:-1000}
MSGS=${2:-32}
PY=/usr/bin/python3

need=""
command -v mpicc >/dev/null 2>&1 || need="$need libopenmpi-dev"
command -v mpirun >/dev/null 2>&1 || need="$need openmpi-bin"
[ -x $PY ] && $PY -c 'import mpi4py' >/dev/null 2>&1 || need="$need python3-mpi4py"
if [ -n "$need" ]; then
  echo "installing:$need" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi

mkdir -p bin
go build -o bin/sperli ./cmd/sperli
mpicc -O2 -o bin/mpi_pingpong scripts/bench/mpi_pingpong.c

# Placement, the same for both systems, in two runs: unpinned (the two
# ranks float over the cores: Open MPI --bind-to none, Sperli's ranks as
# the kernel places them), then pinned (rank i on core i: Open MPI
# --bind-to core, sperli bench --pin, which starts each rank under taskset).
MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus"
for placement in unpinned pinned; do
if [ $placement = pinned ]; then bind="--bind-to core --map-by core"; pin="--pin"; else bind="--bind-to none"; pin=""; fi
# Five runs of each MPI program, medians, as sperli bench takes the median
# of its five interleaved runs.
mpi=""; py=""
for i in 1 2 3 4 5; do
  mpi="$mpi $($MPIRUN $bind -np 2 bin/mpi_pingpong "$PINGS" "$MSGS")"
  py="$py $($MPIRUN $bind -np 2 $PY scripts/bench/mpi4py_pingpong.py "$PINGS" "$MSGS")"
done
json=$(bin/sperli bench $pin --pings "$PINGS" --messages "$MSGS" --sizes 64,1M --json 2>/dev/null)
[ $placement = unpinned ] && startup_json=$json
echo
echo "ranks $placement (Open MPI $bind; sperli bench $pin)"
printf '%s\n' "$json" | $PY -c '
import json, sys, re
rep = json.load(sys.stdin)
import statistics
def med(text, key):
    return statistics.median(float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", text) if k == key)
rows = [("Open MPI tcp (C)", med(sys.argv[1], "rt_us"), med(sys.argv[1], "rate_MBps")),
        ("mpi4py tcp", med(sys.argv[2], "rt_us"), med(sys.argv[2], "rate_MBps"))]
for p in rep["pairs"]:
    rows.append(("sperli " + p["name"], p["roundtrip_64B_us"], p["rate_1MiB_MBps"]))
ompi = rows[0]
print("%-28s %16s %10s %14s %10s" % ("pair", "64 B round trip", "x OMPI", "1 MiB rate", "x OMPI"))
for name, rt, rate in rows:
    print("%-28s %13.1f us %10.2f %9.0f MB/s %10.2f" % (name, rt, rt / ompi[1], rate, rate / ompi[2]))
' "$mpi" "$py"
done

t0=$(date +%s%N); for i in 1 2 3 4 5; do $MPIRUN -np 4 /bin/true; done; t1=$(date +%s%N)
mpitrue=$(( (t1 - t0) / 5000000 ))

echo
printf '%s\n' "$startup_json" | $PY -c '
import json, sys
rep = json.load(sys.stdin)
print("%-28s %13d ms" % ("mpirun -np 4 /bin/true", int(sys.argv[1])))
print("%-28s %13.0f ms   (%.2fx mpirun)" % ("sperli run -n 4 empty.star", rep["empty_run_4ranks_ms"], rep["empty_run_4ranks_ms"] / max(1, int(sys.argv[1]))))
' "$mpitrue"
