#!/usr/bin/env bash
# The GPU check, in stages that each fit one short call on a CUDA machine:
#   passes  the CUDA tests on tiny models, then gpu_bench.py's per-pass table (8B-shaped Llama);
#   model   the CUDA tests on the default model, gpu_bench.py's sample benches (bfloat16 and
#           float32), `pld edit` / `pld summarize` with --stats --compare;
#   tests   the fast test tier, 8 processes (the CPU-independent parts on that machine's stack).
# Usage: scripts/gpu_check.sh passes|model|tests OUT_DIR, from the repository root, with pld_cli
# importable and (for `model`) the default model installed. Logs and JSON land in OUT_DIR.
set -u
stage=$1
out=$2
mkdir -p "$out"
pytest() { python3 -m pytest -q -p no:cacheprovider "$@"; }
pld() { timeout 60 python3 -m pld_cli "$@" --device cuda --stats --compare --verbose; }
case $stage in
passes)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
    timeout 150 pytest tests/runtime/test_cuda.py -m "not slow" 2>&1 | tee "$out/pytest-cuda.log"
    timeout 330 python3 scripts/gpu_bench.py --skip-bench --out "$out" 2>&1 | tee "$out/passes.log"
    ;;
model)
    timeout 120 pytest tests/runtime/test_cuda.py -m slow 2>&1 | tee "$out/pytest-cuda-model.log"
    python3 scripts/gpu_bench.py --skip-passes --bench-timeout 150 --out "$out" 2>&1 |
        tee "$out/bench.log"
    {
        pld edit samples/edit/rename_symbol.py -i "Rename normalize_sku to canonical_sku."
        pld summarize samples/summarize/news.txt
    } >"$out/cli.log" 2>&1
    ;;
tests)
    timeout 240 pytest -m "not slow" tests >"$out/pytest-fast.log" 2>&1
    ;;
*)
    echo "usage: scripts/gpu_check.sh passes|model|tests OUT_DIR" >&2
    exit 2
    ;;
esac
