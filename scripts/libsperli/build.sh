#!/bin/sh
# build.sh — build libsperli, the C library of SPEC §12:
#
#   sh scripts/libsperli/build.sh
#
# writes libsperli/c/<target>/libsperli.a and libsperli/c/<target>/sperli.h,
# <target> being the system it runs on (uname -s, lower case: linux,
# openbsd, freebsd, darwin). The archive is the runtime built with
# `go build -buildmode=c-archive` (libsperli/go) plus libsperli/src/sperli.c,
# which checks every argument before it calls into Go. Link a program with
#
#   cc -I libsperli/c/linux prog.c libsperli/c/linux/libsperli.a -lpthread
#
# Environment: GO (default go), CC (default cc), CFLAGS (default -O2).
# The files are replaced atomically, so a build never leaves half an archive
# for a compile that runs at the same time.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O2}
target=$(uname -s | tr '[:upper:]' '[:lower:]')
case $target in
linux | openbsd | freebsd | darwin) ;;
*) echo "build.sh: system $target is none of linux, openbsd, freebsd, darwin" >&2; exit 2 ;;
esac
out=libsperli/c/$target
work=$(mktemp -d "${TMPDIR:-/tmp}/libsperli-build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

CGO_ENABLED=1 "$GO" build -buildmode=c-archive -trimpath -o "$work/libsperli_go.a" ./libsperli/go
# shellcheck disable=SC2086 # CFLAGS is a list of flags
"$CC" $CFLAGS -std=c11 -Wall -Wextra -Werror -fPIC -D_POSIX_C_SOURCE=200809L \
	-I libsperli/include -I libsperli/go -I "$work" -c libsperli/src/sperli.c -o "$work/sperli.o"
cp "$work/libsperli_go.a" "$work/libsperli.a"
ar rcs "$work/libsperli.a" "$work/sperli.o"

mkdir -p "$out"
cp "$work/libsperli.a" "$out/.libsperli.a.$$"
cp libsperli/include/sperli.h "$out/.sperli.h.$$"
mv -f "$out/.libsperli.a.$$" "$out/libsperli.a"
mv -f "$out/.sperli.h.$$" "$out/sperli.h"
echo "build.sh: wrote $out/libsperli.a and $out/sperli.h"
