#!/bin/sh
# check-libsperli.sh — build libsperli and run libsperli/test/test_sperli.c:
# every function of the library given each kind of wrong input, its code
# held against the table of sperli.h (SPEC §12).
#
#   sh scripts/libsperli/check-libsperli.sh
#
# The test joins jobs of one rank made by `sperli job make` on a random
# loopback address 127.X.Y.Z (so that two runs at once do not share the
# fixed port 47000). Environment: SPERLI, a sperli binary to use (else
# bin/sperli is built); LIBSPERLI_PREBUILT=1 to use the library as built
# already (tests/clib does so); GO, CC as for build.sh.
set -eu

check=check
. "$(dirname "$0")/prelude.sh"
build_test test_sperli

# A random loopback address 127.X.Y.Z (X, Y, Z in 1 … 254) whose ports
# 47000 and 47001 nobody listens at.
free_addr() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		a=127.$(od -An -N3 -tu1 /dev/urandom | awk '{printf "%d.%d.%d", $1%254+1, $2%254+1, $3%254+1}')
		if ! (ss -ltn 2>/dev/null | grep -q " $a:4700[01] "); then
			echo "$a"
			return
		fi
	done
	echo "check-libsperli.sh: no free loopback address found" >&2
	exit 1
}
for n in 1 2; do
	addr=$(free_addr)
	printf '%s\n%s\n' "$addr" "$addr" >"$work/hosts-$n"
	"$SPERLI" job make -n "$n" --hosts "$work/hosts-$n" --out "$work/job-$n" >/dev/null
done
mkdir "$work/ckpt"
# Standard input is a pipe: the description, then input of the program's
# own that sperli_init_stdin must leave (STDIN_REST in test_sperli.c).
# sperli_exit writes two expected lines of error text on standard error.
{ cat "$work/job-1/rank-0.job"; printf "the program's own input\nsecond line\n"; } |
	"$work/test_sperli" "$work/job-1/rank-0.job" "$work/job-2/rank-0.job" "$work/ckpt"
# A SPERLI_SPIN_US outside its range is 1616 from both inits, no abort.
for v in abc -5 2000000 " 5" 1e3; do
	SPERLI_SPIN_US=$v "$work/test_sperli" spin "$work/job-1/rank-0.job" <"$work/job-1/rank-0.job" 2>"$work/spin.err" || {
		cat "$work/spin.err" >&2
		echo "check-libsperli.sh: SPERLI_SPIN_US=$v: test_sperli spin failed" >&2
		exit 1
	}
done
