#!/bin/sh
# No AVX code calls legacy-SSE code with the upper register halves dirty.
#
# A function built for the baseline ISA uses legacy (non-VEX) SSE instructions for float scalars;
# called from an AVX2 or AVX-512 kernel with no vzeroupper before it, each call stalls on Intel (an
# AveragePool's border columns ran 10x slower so: bench/RESULTS.md, session 31). Helpers that AVX
# kernels call must be inlined or built for the caller's ISA. This reads the disassembly of the
# optimized binary and lists every direct call from a function that uses YMM/ZMM registers to one
# that uses legacy SSE instructions and none of those registers. Functions are told apart by
# address: the static helpers of the per-ISA files share their names.
#
#   sh tests/lint/vex_calls.sh build/autofusion
objdump -d --no-show-raw-insn "${1:?binary}" | awk '
/^[0-9a-f]+ <.*>:$/ {
    cur = $1; sub(/^0+/, "", cur)
    name[cur] = substr($2, 2, length($2) - 3)
    since_vz = 99
    next
}
cur == "" || !/\t/ { next }
{
    since_vz++
    if ($0 ~ /\tvzeroupper/) since_vz = 0
    if ($0 ~ /\tv[a-z0-9]+[ \t].*%[yz]mm/) wide[cur] = 1
    if ($0 ~ /\t(addss|subss|mulss|divss|maxss|minss|sqrtss|cvtsi2ss|cvtss2sd|cvtsd2ss|pxor|movss|movaps|movups|addps|mulps|xorps|ucomiss|comiss|addsd|mulsd|divsd|cvtsi2sd|movsd|movapd|sqrtsd|andps|andpd)[ \t]/)
        legacy[cur] = 1
    if ($0 ~ /\tcall[ \t]+[0-9a-f]+ </ && since_vz > 8) {
        n = split($0, f, /[ \t]+/)
        for (i = 1; i <= n; i++) if (f[i] == "call") { callee = f[i + 1]; break }
        sub(/^0+/, "", callee)
        calls[++n_calls] = cur " " callee
    }
}
END {
    for (a in wide) n_wide++
    for (c = 1; c <= n_calls; c++) {
        split(calls[c], p, " ")
        if ((p[1] in wide) && (p[2] in legacy) && !(p[2] in wide) && !((p[1] " " p[2]) in seen)) {
            seen[p[1] " " p[2]] = 1
            printf "FAIL %s calls %s (legacy SSE) with the upper halves dirty\n", name[p[1]], name[p[2]]
            if (!(p[1] in bad)) { bad[p[1]] = 1; n_bad++ }
        }
    }
    printf "lint: %d passed, %d failed\n", n_wide - n_bad, n_bad
    exit n_bad > 0
}'
