#!/bin/sh
# fuzz-libsperli.sh — build libsperli and run libsperli/test/fuzz_sperli.c,
# the random-API fuzzer of the C layer: every function called with right
# and wrong arguments from a seeded generator, each code held against the
# table of sperli.h and a model of the session (SPEC §12).
#
#   sh scripts/libsperli/fuzz-libsperli.sh [SEED [SECONDS]]
#
# SEED defaults to 1, SECONDS to 10. A mismatch prints the seed and the
# call's number; FUZZ_TRACE=N in the environment prints the calls from the
# N-th on. The fuzzer joins a job of one rank made by `sperli job make` on a
# random loopback address 127.X.Y.Z. Environment: SPERLI, a sperli binary
# to use (else bin/sperli is built); LIBSPERLI_PREBUILT=1 to use the
# library as built already (tests/clib does so); GO, CC as for build.sh.
set -eu

seed=${1:-1}
secs=${2:-10}
check=fuzz
. "$(dirname "$0")/prelude.sh"
build_test fuzz_sperli

a=127.$(od -An -N3 -tu1 /dev/urandom | awk '{printf "%d.%d.%d", $1%254+1, $2%254+1, $3%254+1}')
printf '%s\n' "$a" >"$work/hosts"
"$SPERLI" job make -n 1 --hosts "$work/hosts" --out "$work/job" >/dev/null
mkdir "$work/ckpt"
# sperli_exit writes its messages on standard error: kept aside, shown on
# a failure.
status=0
"$work/fuzz_sperli" "$seed" "$secs" "$work/job/rank-0.job" "$work/ckpt" </dev/null 2>"$work/stderr" || status=$?
if [ "$status" -ne 0 ]; then
	echo "fuzz-libsperli.sh: fuzz_sperli $seed $secs: exit status $status; the last lines of its standard error:" >&2
	tail -n 20 "$work/stderr" >&2
	exit 1
fi
