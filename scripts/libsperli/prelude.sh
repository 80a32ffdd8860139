# prelude.sh — what the check scripts share, sourced after `set -eu` with
# $check the script's name: the library built (unless
# LIBSPERLI_PREBUILT=1), $lib its directory, $SPERLI a sperli binary (else
# bin/sperli is built with $GO), $work a temporary directory removed at
# exit, and build_test NAME, which compiles libsperli/test/NAME.c against
# the library into $work/NAME.
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
CC=${CC:-cc}
if [ "${LIBSPERLI_PREBUILT:-}" != 1 ]; then
	sh scripts/libsperli/build.sh >/dev/null
fi
target=$(uname -s | tr '[:upper:]' '[:lower:]')
lib=libsperli/c/$target
if [ -z "${SPERLI:-}" ]; then
	"$GO" build -o bin/sperli ./cmd/sperli
	SPERLI=bin/sperli
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/libsperli-$check.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

build_test() {
	"$CC" -O2 -std=c11 -Wall -Wextra -Werror -pthread -I "$lib" -o "$work/$1" \
		"libsperli/test/$1.c" "$lib/libsperli.a" -lpthread
}
