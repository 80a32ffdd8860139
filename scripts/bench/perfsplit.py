#!/usr/bin/env python3
"""perfsplit.py: where the processor time of each process went, from
`perf script` of a `perf record -a -g` (docs/benchmarks.md, issue 49).

    perf record -a -g -o run.perf -- sleep 2
    perf script -i run.perf -F comm,pid,tid,ip,sym | python3 scripts/bench/perfsplit.py COMM

COMM is the process name to split (e.g. p2pbench); every process of that
name gets a column, and the idle loop (swapper) one more. Each sample is
put in the first class that fits, looking at its leaf frame first and
then at its stack:

    seal, open      AES-GCM (crypto/tls encrypt / decrypt)
    copy (Go)       runtime.memmove, memclr (user-space copies and zeroing)
    write (kernel)  a write or send system call, the kernel's copies and
                    the loopback delivery it does included
    read (kernel)   a read or recv system call, likewise
    scheduling      Go's scheduler, futexes, sched_yield, nanosleep, epoll
    other kernel    page faults, interrupts, the rest in the kernel
    other Go        the rest: framing, matching, TLS's bookkeeping
"""
import collections
import re
import sys

CLASSES = ["seal", "open", "copy (Go)", "write (kernel)", "read (kernel)", "scheduling", "other kernel", "other Go"]


def classify(frames):
    leaf = frames[0] if frames else ""
    stack = " ".join(frames)
    if re.search(r"gcmAes|aes\.|gcm\.|ghash|gcmAesData|gcmAesFinish", leaf):
        if "decrypt" in stack or ".Open" in stack:
            return "open"
        return "seal"
    if re.search(r"runtime\.memmove|runtime\.memclr", leaf):
        return "copy (Go)"
    if re.search(r"ksys_write|__x64_sys_write|__sys_sendto|sendmsg|ksys_writev|do_writev", stack):
        return "write (kernel)"
    if re.search(r"ksys_read|__x64_sys_read|__sys_recvfrom|recvmsg|do_readv", stack):
        return "read (kernel)"
    if re.search(r"runtime\.(schedule|findRunnable|park_m|mcall|futex|usleep|notesleep|netpoll|stopm|gopark|osyield)|sched_yield|futex|nanosleep|epoll|schedYield|do_sched_yield", stack):
        return "scheduling"
    if re.match(r"^[0-9a-f]*\s*$", leaf) or leaf.startswith("[unknown]"):
        return "other Go"
    return None


def main():
    comm = sys.argv[1] if len(sys.argv) > 1 else ""
    counts = collections.defaultdict(collections.Counter)
    head, frames, kernel = None, [], False

    def flush():
        if head is None:
            return
        name, pid = head
        if name == "swapper":
            counts["idle"]["idle"] += 1
            return
        if comm and name != comm:
            counts["others"]["others"] += 1
            return
        c = classify(frames)
        if c is None:
            c = "other kernel" if kernel else "other Go"
        counts[pid][c] += 1

    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if not line.startswith("\t") and not line.startswith(" " * 4):
            flush()
            m = re.match(r"^(\S+)\s+(\d+)/(\d+)", line)
            head = (m.group(1), m.group(2)) if m else ("?", "?")
            frames, kernel = [], False
            continue
        parts = line.strip().split(None, 1)
        sym = parts[1] if len(parts) > 1 else ""
        if not frames:
            kernel = parts[0].startswith("ffffffff")
        frames.append(sym)
    flush()

    total = sum(sum(c.values()) for c in counts.values())
    pids = sorted(p for p in counts if p not in ("idle", "others"))
    print("| class | " + " | ".join("pid %s" % p for p in pids) + " |")
    print("| --- |" + " --- |" * len(pids))
    for cl in CLASSES:
        row = []
        for p in pids:
            n = sum(counts[p].values())
            row.append("%.0f%%" % (100.0 * counts[p][cl] / n) if n else "–")
        print("| %s | %s |" % (cl, " | ".join(row)))
    print("| samples | %s |" % " | ".join(str(sum(counts[p].values())) for p in pids))
    idle = counts["idle"]["idle"]
    others = counts["others"]["others"]
    print("\nall samples %d: idle %.0f%%, other processes %.0f%%" % (total, 100.0 * idle / max(total, 1), 100.0 * others / max(total, 1)))


main()
