#!/bin/sh
# Builds and runs the GEMM benchmark, then prints a Markdown table (the one in GEMM_RESULTS.md).
#   bench/gemm_bench.sh [gemm_bench options, e.g. --reps 5 --ms 40 --threads 1,2]
# Process 1 interleaves ours (prepacked weights / nothing prepacked / with a fused epilogue) and
# oneDNN. OpenBLAS runs in processes of its own, once as this environment configures it and once
# with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (it reads them once, at load): its idle
# workers keep yielding for ~0.1 s after each call, which would steal the second core from
# whatever ran next.
set -e
cd "$(dirname "$0")/.."
make -s -f bench/Makefile
out=$(mktemp)
trap 'rm -f "$out"' EXIT
./build/gemm_bench --libs ours,ours_raw,ours_epi,dnnl "$@" | tee "$out" >&2
./build/gemm_bench --libs openblas "$@" | tee -a "$out" >&2
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./build/gemm_bench --libs openblas "$@" |
    sed 's/^RESULT \([^ ]*\) \([0-9]*\) openblas /RESULT \1 \2 openblas_unset /' | tee -a "$out" >&2
echo
grep '^# isa' "$out" | head -n 1
echo
echo '| shape | M x N x K (batch) | threads | ours | ours_raw | ours_epi | oneDNN | OpenBLAS (env) | OpenBLAS (unset) | ours/oneDNN |'
echo '|---|---|---|---:|---:|---:|---:|---:|---:|---:|'
awk '
/^RESULT/ { v[$2 " " $3 " " $4] = $5; if (!seen[$2 " " $3]++) order[n++] = $2 " " $3 }
END {
    for (i = 0; i < n; i++) {
        split(order[i], k, " ")
        o = v[order[i] " ours"]; d = v[order[i] " dnnl"]
        printf "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", k[1], dims[k[1]], k[2], o,
               v[order[i] " ours_raw"], v[order[i] " ours_epi"], d, v[order[i] " openblas"],
               v[order[i] " openblas_unset"], (d > 0 ? o / d : 0)
    }
}
BEGIN {
    dims["r50_conv2_3x3"] = "64x3136x576"; dims["r50_conv2_1x1up"] = "256x3136x64"
    dims["r50_conv3_1x1up"] = "512x784x128"; dims["r50_conv3_3x3"] = "128x784x1152"
    dims["r50_conv4_1x1up"] = "1024x196x256"; dims["r50_conv4_3x3"] = "256x196x2304"
    dims["r50_conv5_1x1up"] = "2048x49x512"; dims["r50_conv5_3x3"] = "512x49x4608"
    dims["r50_stem_7x7"] = "64x12544x147"; dims["bert_qkv_768"] = "128x768x768"
    dims["bert_ffn_up"] = "128x3072x768"; dims["bert_ffn_down"] = "128x768x3072"
    dims["bert_attn_qk"] = "128x128x64 (12)"; dims["bert_attn_pv"] = "128x64x128 (12)"
    dims["mnv3_pw_72x24"] = "72x3136x24"; dims["mnv3_pw_120x40"] = "120x784x40"
    dims["mnv3_pw_960x160"] = "960x49x160"; dims["mnv3_pw_64x16"] = "64x12544x16"
    dims["mnv3_pw_16x16"] = "16x12544x16"
}' "$out"
