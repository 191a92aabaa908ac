#!/usr/bin/env bash
# The --server tests against a real vLLM (tests/server/): install it (once, .venv-vllm), start it on
# pld's default model with n-gram drafting and a 2,048-token context, wait for /v1/models, run the
# tests, and stop the server whatever happens. Called by `make test-server` (and so by .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8765}
LOG=${LOG:-.cache/vllm-test.log}
mkdir -p "$(dirname "$LOG")"

start=$(date +%s)
# Its own session, so the API server and the engine processes it starts are stopped together.
PORT=$PORT MAX_MODEL_LEN=2048 setsid scripts/vllm-server.sh >"$LOG" 2>&1 &
server=$!
stop() { kill -9 -- "-$server" 2>/dev/null || true; }
trap stop EXIT

for _ in $(seq 1200); do
    if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; then break; fi
    if ! kill -0 "$server" 2>/dev/null; then
        echo "test-server: vLLM exited before it served; the end of $LOG:" >&2
        tail -30 "$LOG" >&2
        exit 1
    fi
    sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { tail -30 "$LOG" >&2; exit 1; }
echo "test-server: vLLM serving after $(( $(date +%s) - start )) s (install included)" >&2

PLD_TEST_SERVER="http://127.0.0.1:$PORT" PLD_TEST_SERVER_PGID=$server HF_HUB_OFFLINE=1 \
    .venv/bin/pytest tests/server -v -p no:cacheprovider
echo "test-server: $(( $(date +%s) - start )) s in all" >&2
