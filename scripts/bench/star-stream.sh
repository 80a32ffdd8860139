#!/bin/sh
# star-stream.sh: the Starlark one-way rate of 1 MiB messages and each
# rank's processor time a message (issue 49), one line per run:
#
#   sh scripts/bench/star-stream.sh SPERLI COUNT [sperli run flags ...]
#   mb_s=... cpu0_us=... cpu1_us=... rss1_kb=...
#
# Both ranks run bench/pingpong.star's stream (rank 0 sends COUNT
# messages, rank 1 receives them). A rank's processor time is --stats's
# cpu_ms less join_cpu_ms, over COUNT + 1 messages (the warm-up one
# counted); rss1_kb is the receiver's peak resident size.
set -eu
cd "$(dirname "$0")/../.."
s=$1 n=$2
shift 2
"$s" run -n 2 --stats=json "$@" bench/pingpong.star stream 1048576 "$n" 2>&1 | python3 -c '
import json, sys
n = int(sys.argv[1])
out = []
for l in sys.stdin:
    if l.startswith("[rank 0] {"):
        ns = json.loads(l.split("] ", 1)[1])["ns"]
        out.append("mb_s=%.0f" % (n * 1048576 / ns * 1e3))
    elif l.startswith("{\"sperli_stats"):
        st = json.loads(l)["sperli_stats"]
        for r in st:
            out.append("cpu%d_us=%.0f" % (r["rank"], (r["cpu_ms"] - r["join_cpu_ms"]) * 1000 / (n + 1)))
        out.append("rss1_kb=%d" % st[1]["peak_rss_kb"])
print(" ".join(out))
' "$n"
