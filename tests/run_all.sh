#!/bin/sh
# Runs every test suite against the binaries in BUILD (build/ or build-san/) and prints one
# closing total. Exit status is non-zero if any suite failed.
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 2
total_pass=0
total_fail=0
status=0
log=$(mktemp)
# Sessions measure the hardware once and cache the figures (docs/cost_model.md). Tests keep
# theirs in a folder of their own: measured on a loaded machine (CI, the sanitizer builds), they
# would otherwise replace the user's cache and change the plans later runs make.
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
trap 'rm -rf "$log" "$XDG_CACHE_HOME"' EXIT

suite() { # name, command...
    name=$1
    shift
    echo "== $name: $*"
    "$@" >"$log" 2>&1
    rc=$?
    grep -v '^PASS ' "$log"
    line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=1
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    [ "$rc" -ne 0 ] && status=1
}

suite unit "$BUILD/test_unit"
# Sessions fuse by default (level 3); level 0 runs the same kernels unfused, and the reference
# kernels are the oracle the fast ones are written against.
suite onnx-node-tests "$BUILD/test_conformance"
suite onnx-node-tests-unfused "$BUILD/test_conformance" --level 0
# Real models: ONNX Runtime 1.30 references, rtol 1e-3 / atol 1e-4 (the issue's tolerance).
suite model-fixtures-fused "$BUILD/test_conformance" --dir tests/models --rtol 1e-3 --atol 1e-4
suite model-fixtures-unfused "$BUILD/test_conformance" --dir tests/models --rtol 1e-3 --atol 1e-4 --level 0
# Every ISA level the kernels have must give the same answers (AF_ISA lowers the level), and the
# unit tests must pass where the CPU has no AVX-512 or no AVX2 at all.
for isa in avx2 scalar; do
    suite "unit-$isa" env AF_ISA=$isa "$BUILD/test_unit"
    suite "onnx-node-tests-$isa" env AF_ISA=$isa "$BUILD/test_conformance"
    suite "model-fixtures-$isa" env AF_ISA=$isa "$BUILD/test_conformance" --dir tests/models --rtol 1e-3 --atol 1e-4
done
suite cli sh tests/cli/test_cli.sh "$BUILD/autofusion"
# The optimized build only: at -O1 under the sanitizers, helpers the release build inlines stay
# calls (and there speed does not matter).
[ "$BUILD" = build ] && suite vex-calls sh tests/lint/vex_calls.sh "$BUILD/autofusion"

echo "all suites: $total_pass passed, $total_fail failed"
exit $status
