#!/bin/sh
# check-ranks.sh — build libsperli and run libsperli/test/test_ranks.c, a
# job of three C ranks in three processes (SPEC §12):
#
#   sh scripts/libsperli/check-ranks.sh
#
# runs `sperli run -n 3 test_ranks` and wants exit status 0 and the line
# "test_ranks: rank R ok" of every rank. Environment: SPERLI, a sperli
# binary to use (else bin/sperli is built with go build);
# LIBSPERLI_PREBUILT=1 to use the library as built already (tests/clib does
# so); GO, CC as for build.sh.
set -eu

check=ranks
. "$(dirname "$0")/prelude.sh"
build_test test_ranks

status=0
"$SPERLI" run -n 3 "$work/test_ranks" >"$work/out" 2>&1 || status=$?
cat "$work/out"
if [ "$status" -ne 0 ]; then
	echo "check-ranks.sh: sperli run -n 3 test_ranks: exit status $status, want 0" >&2
	exit 1
fi
for r in 0 1 2; do
	if ! grep -qx "\[rank $r\] test_ranks: rank $r ok" "$work/out"; then
		echo "check-ranks.sh: rank $r did not say ok" >&2
		exit 1
	fi
done
echo "check-ranks.sh: ok"
