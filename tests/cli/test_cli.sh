#!/bin/sh
# CLI behaviour: exit codes, one-line errors, outputs written as TensorProto files that match the
# ONNX Runtime reference of a fixture.
AF=${1:-build/autofusion}
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # description, condition result (0 = ok)
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "PASS $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}
M=tests/models/resnet_small
N=/usr/include/onnx/backend/test/data/node

"$AF" inspect $M/model.onnx >"$tmp/inspect.txt" 2>&1
check "inspect exits 0" $?
grep -q '^parameters: [1-9]' "$tmp/inspect.txt"; check "inspect counts parameters" $?
grep -q '^flops: ' "$tmp/inspect.txt"; check "inspect reports flops" $?
grep -Eq '^  Conv +[0-9]+' "$tmp/inspect.txt"; check "inspect prints an op histogram" $?
grep -q 'float32\[1,3,112,112\]' "$tmp/inspect.txt"; check "inspect shows input shapes" $?

"$AF" run $N/test_add/model.onnx --input x=$N/test_add/test_data_set_0/input_0.pb \
    --input y=$N/test_add/test_data_set_0/input_1.pb --output-dir "$tmp/out" >"$tmp/run.txt" 2>&1
check "run with given inputs exits 0" $?
[ -f "$tmp/out/sum.pb" ]; check "run writes DIR/NAME.pb" $?
cmp -s "$tmp/out/sum.pb" $N/test_add/test_data_set_0/output_0.pb
check "written output equals the ONNX reference byte for byte" $?

"$AF" run $M/model.onnx >"$tmp/rand.txt" 2>&1; check "run with random inputs exits 0" $?

for cmd in --help "run --help" "bench -h" "fuse --help" "inspect --help"; do
    # shellcheck disable=SC2086
    "$AF" $cmd >"$tmp/help.txt" 2>&1 && grep -q '^usage: autofusion inspect' "$tmp/help.txt"
    check "autofusion $cmd prints the usage and exits 0" $?
done

"$AF" run /nonexistent.onnx >/dev/null 2>"$tmp/err.txt"; rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && grep -q 'nonexistent' "$tmp/err.txt"
check "missing model: non-zero exit and a one-line error naming it" $?

printf 'not a model' >"$tmp/bad.onnx"
"$AF" inspect "$tmp/bad.onnx" >/dev/null 2>"$tmp/err.txt"; rc=$?
[ $rc -ne 0 ] && grep -q 'not a valid ONNX model' "$tmp/err.txt"; check "garbage file: clear parse error" $?

"$AF" run $N/test_add/model.onnx --input nosuch=$N/test_add/test_data_set_0/input_0.pb >/dev/null 2>"$tmp/err.txt"
[ $? -ne 0 ] && grep -q 'nosuch' "$tmp/err.txt"; check "unknown input name is rejected by name" $?

"$AF" frobnicate >/dev/null 2>&1; [ $? -ne 0 ]; check "unknown command exits non-zero" $?

# Numeric flags are read whole: anything but a number in range is a one-line error naming the flag.
bad_flag() { # command, flag, value
    "$AF" "$1" $M/model.onnx "$2" "$3" >/dev/null 2>"$tmp/err.txt"; rc=$?
    [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && grep -q -- "$2 takes .*, not '$3'" "$tmp/err.txt"
    check "$1 $2 '$3' is an error naming the flag" $?
}
bad_flag run --threads abc
bad_flag run --threads -1
bad_flag run --threads 8x
bad_flag bench --threads 99999999999
bad_flag bench --warmup x
bad_flag bench --iterations 0
bad_flag bench --iterations 2.5
bad_flag run --seed -1
bad_flag run --seed 1e3
bad_flag fuse --level ""
bad_flag fuse --level 4
"$AF" run $M/model.onnx --threads 2 --seed 7 >/dev/null 2>&1; check "run --threads 2 --seed 7 exits 0" $?

"$AF" bench $M/model.onnx --iterations 2 --warmup 0 --threads 2 --profile >"$tmp/prof.txt" 2>&1; check "bench --profile exits 0" $?
steps=$(grep -Ec "^ +[0-9]+ +[0-9.]+ +[0-9.]+% +([0-9.]+|-) +[0-9.]+% +[A-Za-z]" "$tmp/prof.txt")
planned=$(sed -n 's/^profile over 2 runs: .* in \([0-9]*\) steps$/\1/p' "$tmp/prof.txt")
[ -n "$planned" ] && [ "$steps" -eq "$planned" ] && grep -q '^by kind:' "$tmp/prof.txt" && grep -q 'fused:conv' "$tmp/prof.txt"
check "bench --profile times every plan step and sums them by kind" $?
# Each step's GFLOP/s times its ms is its share of the contraction flops: they add up to the total.
awk '/^contractions:/ {total = $2}
     /^ +[0-9]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+% +[A-Za-z]/ {sum += $2 * $4 / 1000}
     END {exit !(total > 0 && sum > 0.98 * total && sum < 1.02 * total)}' "$tmp/prof.txt"
check "bench --profile rates each step's contractions, and they add up to the run's" $?
# On two threads every step has its idle share (0-100%) and the run its total; on one, "-".
grep -q '^threads: 2, idle [0-9.]*% of their time' "$tmp/prof.txt" &&
    awk '/^ +[0-9]+ +[0-9.]+ +[0-9.]+% +([0-9.]+|-) +[0-9.]+% +[A-Za-z]/ {n++; v = $5 + 0; if (v < 0 || v > 100) bad++}
         END {exit !(n > 0 && !bad)}' "$tmp/prof.txt"
check "bench --profile on two threads shows each step's idle share" $?
"$AF" bench $M/model.onnx --iterations 1 --warmup 0 --threads 1 --profile >"$tmp/prof1.txt" 2>&1 &&
    ! grep -q '^threads:' "$tmp/prof1.txt" && grep -Eq "^ +0 +[0-9.]+ +[0-9.]+% +([0-9.]+|-) +- +[A-Za-z]" "$tmp/prof1.txt"
check "bench --profile on one thread has no idle share" $?
# --json: one object a bench with the profile inside it, valid even for a path with a quote in it.
mkdir -p "$tmp/q\"dir" && cp $M/model.onnx "$tmp/q\"dir/"
"$AF" bench "$tmp/q\"dir/model.onnx" --iterations 2 --warmup 0 --threads 2 --json --profile >"$tmp/prof.json" 2>&1
check "bench --json --profile exits 0" $?
[ "$(wc -l <"$tmp/prof.json")" -eq 1 ] && grep -q '"model":"[^"]*q\\"dir/model.onnx"' "$tmp/prof.json" &&
    grep -q '"threads":2,' "$tmp/prof.json" && grep -q '"profile":{"runs":2,' "$tmp/prof.json" &&
    [ "$(grep -o '"kernel":' "$tmp/prof.json" | wc -l)" -eq "$(sed -n 's/.*"steps":\([0-9]*\),.*/\1/p' "$tmp/prof.json")" ]
check "bench --json --profile prints one JSON object, every step in its profile" $?

"$AF" fuse $M/model.onnx >"$tmp/fuse.txt" 2>&1; check "fuse exits 0" $?
grep -q '^accepted groups:' "$tmp/fuse.txt" && grep -q 'conv_residual' "$tmp/fuse.txt"; check "fuse lists accepted groups by family" $?
grep -q '^fusion pass: ' "$tmp/fuse.txt"; check "fuse reports the pass's time" $?
pct=$(sed -n 's/^plan memory: .*engine metadata [0-9.]* KiB, \([0-9.]*\)% of the model.s constants$/\1/p' "$tmp/fuse.txt")
[ -n "$pct" ] && awk -v p="$pct" 'BEGIN { exit !(p > 0 && p < 5) }'
check "fuse reports the plan's memory; engine metadata is under 5% of the model's constants" $?
"$AF" fuse $M/model.onnx --level 0 2>&1 | grep -q 'no fusion'; check "fuse --level 0 fuses nothing" $?
printf '{"fusion_policy": {"conv_residual": "never"}}' >"$tmp/cfg.json"
"$AF" fuse $M/model.onnx --config "$tmp/cfg.json" >"$tmp/fuse2.txt" 2>&1
grep -q 'policy never for conv_residual' "$tmp/fuse2.txt"; check "fuse --config applies a policy and says why" $?
printf '{"verify": true}' >"$tmp/verify.json"
"$AF" fuse $M/model.onnx --config "$tmp/verify.json" >"$tmp/verify.txt" 2>&1
grep -q '^verify: 0 fused groups backed out.* [1-9][0-9]* fused groups match' "$tmp/verify.txt"
check "verify checks every fused group and keeps the ones that match" $?
printf '{"verify": true, "verify_tolerance": {"rtol": 0, "atol": 0}}' >"$tmp/verify0.json"
# Folding BatchNorm into the Conv weights changes the last bits, so exactness fails there.
"$AF" fuse ${M}_bn/model.onnx --config "$tmp/verify0.json" >"$tmp/verify0.txt" 2>&1
grep -q 'numeric check: max error' "$tmp/verify0.txt" && grep -q '^verify: [1-9][0-9]* fused groups backed out' "$tmp/verify0.txt"
check "verify backs out groups beyond the tolerance, saying why" $?
"$AF" run ${M}_bn/model.onnx --config "$tmp/verify0.json" --inputs ${M}_bn/test_data_set_0 >/dev/null 2>&1
check "a session whose groups were all backed out still runs" $?
"$AF" fuse tests/models/loop_refine/model.onnx --config "$tmp/verify.json" >"$tmp/verify_loop.txt" 2>&1
grep -q "^verify (Loop iteration 0, .*): 1 fused groups checked, 0 backed out" "$tmp/verify_loop.txt"
check "verify checks the fused groups of a Loop body" $?
printf '{"fusion_levle": 2}' >"$tmp/bad.json"
"$AF" run $M/model.onnx --config "$tmp/bad.json" >/dev/null 2>"$tmp/err.txt"
[ $? -ne 0 ] && grep -q 'fusion_levle' "$tmp/err.txt"; check "unknown config key is an error naming it" $?
printf '{"rules": ["nonexistent.rules"]}' >"$tmp/norules.json"
"$AF" fuse $M/model.onnx --config "$tmp/norules.json" --level 0 >/dev/null 2>"$tmp/err.txt"
[ $? -ne 0 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && \
    grep -q 'norules.json: rules\[0\]: .*nonexistent.rules: cannot open rules file' "$tmp/err.txt"
check "a missing rules file is an error naming the config key, at --level 0 too" $?
printf '{"resource_constraints": {"max_mem_usage": "1KB"}}' >"$tmp/small.json"
"$AF" run $M/model.onnx --config "$tmp/small.json" >/dev/null 2>"$tmp/err.txt"
[ $? -ne 0 ] && grep -q 'max_mem_usage' "$tmp/err.txt"; check "max_mem_usage rejects a plan that needs more" $?
"$AF" run $M/model.onnx --inputs $M/test_data_set_0 --level 3 --output-dir "$tmp/f3" >/dev/null 2>&1 && \
"$AF" run $M/model.onnx --inputs $M/test_data_set_0 --level 0 --output-dir "$tmp/f0" >/dev/null 2>&1
check "run at level 3 and level 0 both succeed" $?

echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
