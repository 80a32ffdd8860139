#!/bin/sh
# trace-picture.sh: the picture of docs/starlark.md §7 — a trace of the
# stencil example (3 ranks and a spare, 3000 cells, 60 steps, a checkpoint
# every 10) in which the test failure schedule kills slot 1 right after its
# second checkpoint and the spare takes its place in place, drawn by
# `sperli trace`.
#
#   sh scripts/trace-picture.sh            (or: make trace-picture)
#
# Writes docs/trace-stencil.svg; the trace itself is left in
# $OUT_JSON (default: a temporary file, removed).
set -eu
cd "$(dirname "$0")/.."
SPERLI=${SPERLI:-bin/sperli}
[ -x "$SPERLI" ] || go build -o "$SPERLI" ./cmd/sperli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
json=${OUT_JSON:-$work/stencil.json}
SPERLI_TEST_FAILURE_SCHEDULE=0:1@after-ckpt-2 "$SPERLI" run -n 3 --spares 1 \
	--checkpoint-dir "$work/ckpt" --trace "$json" \
	scripts/examples/stencil.star 3000 60 10
"$SPERLI" trace "$json" --title "stencil.star, 3 ranks + 1 spare: slot 1 killed after its 2nd checkpoint, the spare takes rank 1" \
	-o docs/trace-stencil.svg
echo "wrote docs/trace-stencil.svg"
