#!/usr/bin/env bash
# Jobs of many ranks on this machine, Sperli beside Open MPI in one run
# (docs/scale.md): the wall time of a job that joins, allreduces and meets
# at a barrier (scale.star, mpi_scale.c), the peak resident memory and the
# descriptors of its ranks (the most of any rank), at each size. Open MPI
# runs over TCP on loopback, oversubscribed. Installs Debian's openmpi-bin
# and libopenmpi-dev when missing (root). A run that does not end within
# TIMEOUT seconds (default 300) is reported as such.
#
#   bash scripts/bench/scale.sh [SIZES...]     (default 64 128 256 512 1024)
set -eu
cd "$(dirname "$0")/../.."
SIZES=${*:-64 128 256 512 1024}
TIMEOUT=${TIMEOUT:-300}
need=""
command -v mpicc >/dev/null 2>&1 || need="$need libopenmpi-dev"
command -v mpirun >/dev/null 2>&1 || need="$need openmpi-bin"
if [ -n "$need" ]; then
  echo "installing:$need" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
mkdir -p bin
CGO_ENABLED=0 go build -o bin/sperli ./cmd/sperli
mpicc -O2 -o bin/mpi_scale scripts/bench/mpi_scale.c
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus"
printf '%-6s %-8s %10s %12s %6s %6s  %s\n' ranks system wall_s peak_rss_MiB fds links result
for n in $SIZES; do
  # Sperli: peak RSS, descriptors and links from every rank's status record.
  start=$(date +%s.%N)
  if timeout "$TIMEOUT" bin/sperli run -n "$n" --stats=json scripts/bench/scale.star >"$tmp/out" 2>"$tmp/err"; then ok=ok; else ok="exit $?"; fi
  end=$(date +%s.%N)
  grep -q "sum=" "$tmp/out" || ok="$ok, no sum"
  stats=$(grep '^{"sperli_stats"' "$tmp/err" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read() or "{}").get("sperli_stats", [])
print("%.1f %d %d" % (max([r["peak_rss_kb"] for r in d] or [0]) / 1024, max([r["peak_fds"] for r in d] or [0]), max([r["peak_links"] for r in d] or [0])))')
  set -- $stats
  printf '%-6s %-8s %10.2f %12s %6s %6s  %s\n' "$n" sperli "$(echo "$end - $start" | bc)" "$1" "$2" "$3" "$ok"
  # Open MPI.
  start=$(date +%s.%N)
  if timeout "$TIMEOUT" $MPIRUN -np "$n" bin/mpi_scale >"$tmp/out" 2>"$tmp/err"; then ok=ok; else ok="exit $? (timeout $TIMEOUT s is 124)"; fi
  end=$(date +%s.%N)
  line=$(grep "sum=" "$tmp/out" || true)
  rss=$(echo "$line" | sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p'); fds=$(echo "$line" | sed -n 's/.*fds=\([0-9]*\).*/\1/p')
  [ -n "$rss" ] && rss=$(echo "scale=1; $rss / 1024" | bc) || rss=-
  printf '%-6s %-8s %10.2f %12s %6s %6s  %s\n' "$n" openmpi "$(echo "$end - $start" | bc)" "$rss" "${fds:--}" - "$ok"
  pkill -f bin/mpi_scale 2>/dev/null || true
done
