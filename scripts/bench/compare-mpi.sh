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

# Placement: neither system is pinned; the two ranks float over the
# machine's cores (Open MPI with --bind-to none, Sperli's ranks as the
# kernel places them), so both get the same treatment.
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus; ranks unpinned"
mpi=$($MPIRUN -np 2 bin/mpi_pingpong "$PINGS" "$MSGS")
py=$($MPIRUN -np 2 $PY scripts/bench/mpi4py_pingpong.py "$PINGS" "$MSGS")
json=$(bin/sperli bench --pings "$PINGS" --messages "$MSGS" --sizes 64,1M --json 2>/dev/null)

t0=$(date +%s%N); for i in 1 2 3 4 5; do $MPIRUN -np 4 /bin/true; done; t1=$(date +%s%N)
mpitrue=$(( (t1 - t0) / 5000000 ))

printf '%s\n' "$json" | $PY -c '
import json, sys, re
rep = json.load(sys.stdin)
mpi = dict(re.findall(r"(\w+)=([\d.]+)", sys.argv[1]))
py = dict(re.findall(r"(\w+)=([\d.]+)", sys.argv[2]))
rows = [("Open MPI tcp (C)", float(mpi["rt_us"]), float(mpi["rate_MBps"])),
        ("mpi4py tcp", float(py["rt_us"]), float(py["rate_MBps"]))]
for p in rep["pairs"]:
    rows.append(("sperli " + p["name"], p["roundtrip_64B_us"], p["rate_1MiB_MBps"]))
ompi = rows[0]
print("%-28s %16s %10s %14s %10s" % ("pair", "64 B round trip", "x OMPI", "1 MiB rate", "x OMPI"))
for name, rt, rate in rows:
    print("%-28s %13.1f us %10.2f %9.0f MB/s %10.2f" % (name, rt, rt / ompi[1], rate, rate / ompi[2]))
print()
print("%-28s %13d ms" % ("mpirun -np 4 /bin/true", int(sys.argv[3])))
print("%-28s %13.0f ms   (%.2fx mpirun)" % ("sperli run -n 4 empty.star", rep["empty_run_4ranks_ms"], rep["empty_run_4ranks_ms"] / max(1, int(sys.argv[3]))))
' "$mpi" "$py" "$mpitrue"
