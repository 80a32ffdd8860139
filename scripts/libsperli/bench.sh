#!/bin/sh
# bench.sh — the benchmark pairs of the C library (SPEC §11, §12): the
# round trip of a 64-byte message and the one-way rate of 1 MiB messages
# for the pairs Go–Go, C–C, C–Go and Go–C, measured in one run across
# processes on loopback, with each C pair's ratio to Go–Go:
#
#   sh scripts/libsperli/bench.sh [PINGS [MESSAGES [ROUNDS]]]
#
# (defaults 2000, 64, 7). It runs TestBenchPairs of tests/clib, which
# builds the library and the programs first.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
LIBSPERLI_BENCH=1 LIBSPERLI_BENCH_PINGS=${1:-2000} LIBSPERLI_BENCH_MESSAGES=${2:-64} \
	LIBSPERLI_BENCH_ROUNDS=${3:-7} "${GO:-go}" test -count=1 -run '^TestBenchPairs$' -v ./tests/clib/
