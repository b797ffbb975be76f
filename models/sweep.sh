#!/bin/sh
# Real models beyond the fixtures: exports torchvision models with seeded random weights
# (export_models.py --model tv:NAME), makes ONNX Runtime's reference outputs (ort_run.js), runs
# `autofusion run` on them unfused (--level 0) and fused (the default level), and compares both
# with ONNX Runtime's outputs (rtol 1e-3, atol 1e-4) and with the model run in torch at float64
# (export_models.py --accuracy).
#
#   sh models/sweep.sh [--out DIR] [--config FILE] [--threads N] [NAME...]
#
# NAME: a torchvision builder (resnet18, fcn_resnet50, ...); default: the list below. --out holds
# one folder per model (default build/sweep; a model already exported there is reused). --config
# is passed to both runs. Prints one line per model and run; exits 1 if any run failed or
# differed from ONNX Runtime's outputs. About 6 minutes for the default list on 2 cores.
set -u
cd "$(dirname "$0")/.."
out=build/sweep config= threads=2
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -*) echo "usage: $0 [--out DIR] [--config FILE] [--threads N] [NAME...]" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- resnet18 resnext50_32x4d mobilenet_v2 mobilenet_v3_small efficientnet_b0 \
    efficientnet_v2_s squeezenet1_1 shufflenet_v2_x1_0 densenet121 mnasnet1_0 googlenet inception_v3 \
    regnet_y_400mf convnext_tiny vit_b_16 swin_t alexnet lraspp_mobilenet_v3_large fcn_resnet50
make -s build/autofusion || exit 1
node -e "require('./models/node_modules/onnxruntime-node')" 2>/dev/null ||
    (cd models && npm ci --ignore-scripts --no-audit --no-fund >/dev/null) || exit 1
py=/usr/bin/python3
failed=0
for name in "$@"; do
    d=$out/$name
    log=$out/$name.log
    mkdir -p "$d"
    if [ ! -f "$d/model.onnx" ] && ! $py models/export_models.py --model "tv:$name" --out "$d" >"$log" 2>&1; then
        echo "$name: export failed ($log)"; failed=1; continue
    fi
    if [ ! -f "$d/test_data_set_0/output_0.pb" ] &&
        ! node models/ort_run.js "$d/model.onnx" "$d" --threads "$threads" >>"$log" 2>&1; then
        echo "$name: ONNX Runtime failed ($log)"; failed=1; continue
    fi
    dirs=
    for level in 0 3; do
        rm -rf "$d/level$level"
        if ! ./build/autofusion run "$d/model.onnx" --level $level ${config:+--config "$config"} --threads "$threads" \
            --inputs "$d/test_data_set_0" --output-dir "$d/level$level" >>"$log" 2>&1; then
            echo "$name level $level: run failed: $(tail -n 1 "$log")"; failed=1; continue
        fi
        dirs="$dirs $d/level$level"
    done
    [ -n "$dirs" ] || continue
    # shellcheck disable=SC2086
    $py models/export_models.py --accuracy "$d" $dirs >"$d/accuracy.txt" 2>>"$log" || failed=1
    sed "s|^ *|$name |" "$d/accuracy.txt"
done
exit $failed
