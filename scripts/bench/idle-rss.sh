#!/usr/bin/env bash
# The resident memory of idle joined ranks (docs/scale.md): a job of N
# Starlark ranks (idle.star) joins and waits; once every rank is idle, the script reads each rank process's VmRSS, RssAnon and
# RssFile (/proc/PID/status) and its descriptors, prints the mean and the
# most, and ends the job with SIGINT.
#
#   bash scripts/bench/idle-rss.sh [N]     (default 1024)
set -eu
cd "$(dirname "$0")/../.."
N=${1:-1024}
mkdir -p bin
CGO_ENABLED=0 go build -o bin/sperli ./cmd/sperli
tmp=$(mktemp -d)
bin/sperli run -n "$N" scripts/bench/idle.star >"$tmp/out" 2>"$tmp/err" &
launcher=$!
trap 'kill -INT $launcher 2>/dev/null || true; wait $launcher 2>/dev/null || true; rm -rf "$tmp"' EXIT
# The launcher passes the ranks' output on at their end, so the script
# cannot wait for a line: it waits for N rank processes of which at most
# one in twenty is running, three times in a row (joined and waiting: only
# heartbeats run).
running() { for p in $(pgrep -P $launcher); do cut -d' ' -f3 /proc/$p/stat 2>/dev/null; done | grep -c R || true; }
calm=0
for _ in $(seq 1 300); do
  kill -0 $launcher 2>/dev/null || { cat "$tmp/err" >&2; exit 1; }
  if [ "$(pgrep -c -P $launcher)" -ge "$N" ] && [ "$(running)" -le $((N / 20)) ]; then
    calm=$((calm + 1))
    [ $calm -ge 3 ] && break
  else
    calm=0
  fi
  sleep 2
done
[ $calm -ge 3 ] || { echo "the job's $N ranks were not idle within 10 minutes" >&2; exit 1; }
pids=$(pgrep -P $launcher)
python3 - $pids <<'PY'
import os, sys
rows = []
for pid in sys.argv[1:]:
    try:
        st = dict(l.split(":", 1) for l in open("/proc/%s/status" % pid))
        fds = len(os.listdir("/proc/%s/fd" % pid))
    except OSError:
        continue
    kb = lambda k: int(st[k].split()[0])
    rows.append((kb("VmRSS"), kb("RssAnon"), kb("RssFile"), fds))
if not rows:
    sys.exit("no rank process found")
n = len(rows)
for i, name in enumerate(["VmRSS", "RssAnon", "RssFile"]):
    col = [r[i] for r in rows]
    print("%-8s mean %6.1f MiB  max %6.1f MiB" % (name, sum(col) / n / 1024, max(col) / 1024))
print("fds      mean %6.1f      max %d" % (sum(r[3] for r in rows) / n, max(r[3] for r in rows)))
print("rank processes: %d" % n)
PY
