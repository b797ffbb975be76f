#!/usr/bin/env bash
# Regenerate the real-model fixtures.
#
#   models/make_fixtures.sh            small fixtures -> tests/models/<name>/ (committed)
#   models/make_fixtures.sh --full     full-size models -> build/models/<name>/ (not committed)
#   models/make_fixtures.sh --only NAME [--only NAME...]   just those fixtures
#
# Each fixture: export with seeded random weights (export_models.py, which
# also runs onnx.checker), reference outputs from ONNX Runtime (ort_run.js ->
# test_data_set_0/{input,output}_K.pb), then a cross-check of ORT's outputs
# against PyTorch on the same inputs (export_models.py --check).
#
# Needs Debian's /usr/bin/python3 (torch, torchvision, onnx, numpy) and node
# with models/node_modules (installed here with `npm ci --ignore-scripts` if
# missing).  Override with PYTHON=... NODE=... ; ORT_THREADS (default 1).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PYTHON:-/usr/bin/python3}
NODE=${NODE:-node}
THREADS=${ORT_THREADS:-1}

FULL=0
ONLY=()
while [ $# -gt 0 ]; do
  case "$1" in
    --full) FULL=1 ;;
    --only) shift; ONLY+=("${1:?--only needs a name}") ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "make_fixtures.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# name | export_models.py arguments | ort_run.js extra arguments
SMALL=(
  "mobilenet_v3_small|--model mobilenet_v3_small|"
  "mobilenet_v3_small_bn|--model mobilenet_v3_small --keep-bn|"
  "mobilenet_v2_small|--model mobilenet_v2_small|"
  "resnet_small|--model resnet_small|"
  "resnet_small_bn|--model resnet_small --keep-bn|"
  "resnet_small_bn_op11|--model resnet_small --keep-bn --opset 11|"
  "resnet_small_dynamic_plane|--model resnet_small --dynamic-batch --dynamic-plane --data-dim batch=2 --data-dim height=128 --data-dim width=96|"
  "squeezenet_small|--model squeezenet_small|"
  "shufflenet_small|--model shufflenet_small|"
  "shufflenet_small_dynamic|--model shufflenet_small --dynamic-batch --data-dim batch=2|"
  "mobilenet_v3_small_dynamic|--model mobilenet_v3_small --dynamic-batch --data-dim batch=2|"
  "vit_tiny|--model vit_tiny|"
  "vit_tiny_dynamic|--model vit_tiny --dynamic-batch --data-dim batch=2|"
  "swin_tiny|--model swin_tiny|"
  "bert_tiny|--model bert_tiny|"
  "bert_tiny_op11|--model bert_tiny --opset 11|"
  "bert_tiny_dynamic|--model bert_tiny --dynamic-batch --data-dim batch=1 --data-dim sequence=16|"
  "loop_refine|--model loop_refine|"
  "lstm_small|--model lstm_small --opset 14|"
  "gru_small|--model gru_small --opset 14|"
)
FULLSET=(
  "resnet50|--model resnet50|"
  "mobilenet_v3_large|--model mobilenet_v3_large|"
  "bert_base|--model bert_base|"
  "bert_base_dynamic|--model bert_base --dynamic-batch --data-dim batch=1 --data-dim sequence=128|"
)

if [ "$FULL" = 1 ]; then
  DEST="$ROOT/build/models"; LIST=("${FULLSET[@]}")
else
  DEST="$ROOT/tests/models"; LIST=("${SMALL[@]}")
fi

"$PY" -c 'import torch, torchvision, onnx, numpy' 2>/dev/null || {
  echo "make_fixtures.sh: $PY lacks torch/torchvision/onnx/numpy (use Debian's /usr/bin/python3)" >&2; exit 1; }
if ! (cd "$HERE" && "$NODE" -e "require('onnxruntime-node')") 2>/dev/null; then
  echo "== npm ci --ignore-scripts (onnxruntime-node ships its CPU binaries; the postinstall only fetches CUDA parts)"
  (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund)
fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

mkdir -p "$DEST"
T_ALL=$(now)
DONE=()
for entry in "${LIST[@]}"; do
  IFS='|' read -r name exp_args ort_args <<<"$entry"
  if [ ${#ONLY[@]} -gt 0 ]; then
    keep=0; for o in "${ONLY[@]}"; do [ "$o" = "$name" ] && keep=1; done
    [ "$keep" = 1 ] || continue
  fi
  out="$DEST/$name"
  echo "== $name"
  rm -rf "$out"
  t0=$(now)
  # shellcheck disable=SC2086
  "$PY" "$HERE/export_models.py" $exp_args --out "$out"
  t1=$(now)
  # shellcheck disable=SC2086
  "$NODE" "$HERE/ort_run.js" "$out/model.onnx" "$out" --threads "$THREADS" --opt all $ort_args
  t2=$(now)
  "$PY" "$HERE/export_models.py" --check "$out"
  t3=$(now)
  echo "   times: export+checker $(secs "$t0" "$t1")s, ORT $(secs "$t1" "$t2")s, torch cross-check $(secs "$t2" "$t3")s"
  DONE+=("$out")
done

if [ ${#DONE[@]} -gt 0 ]; then
  echo "== summary"
  "$PY" "$HERE/export_models.py" --summary "${DONE[@]}"
  du -sh "${DONE[@]}"
  du -sh "$DEST"
fi
echo "== all done in $(secs "$T_ALL" "$(now)")s"
