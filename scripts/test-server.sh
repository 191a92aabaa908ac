#!/usr/bin/env bash
# The --server tests against a real vLLM (tests/server/): install it (once, .venv-vllm), start it on
# pld's default model with n-gram drafting and a 2,048-token context, wait for /v1/models, run the
# tests, then start a second one for the test that stops its engine core, and stop both whatever
# happens. Called by `make test-server` (and so by .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8765}
LOG=${LOG:-.cache/vllm-test.log}
mkdir -p "$(dirname "$LOG")"

start=$(date +%s)
servers=()
stop() { for pgid in "${servers[@]}"; do kill -9 -- "-$pgid" 2>/dev/null || true; done; }
trap stop EXIT

# Starts vLLM in its own session (so the API server and the engine processes it starts are stopped
# together) on port $1 and waits until it serves; leaves its process group in $server.
serve() {
    PORT=$1 MAX_MODEL_LEN=2048 setsid scripts/vllm-server.sh >"$LOG" 2>&1 &
    server=$!
    servers+=("$server")
    for _ in $(seq 1200); do
        if curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null; then break; fi
        if ! kill -0 "$server" 2>/dev/null; then
            echo "test-server: vLLM exited before it served; the end of $LOG:" >&2
            tail -30 "$LOG" >&2
            exit 1
        fi
        sleep 1
    done
    curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null || { tail -30 "$LOG" >&2; exit 1; }
    echo "test-server: vLLM serving after $(( $(date +%s) - start )) s (install included)" >&2
}

# Every test but the engine-core one, on one server (the last test kills it), then that one on a
# second server: it stops the engine core, after which the server answers nothing.
serve "$PORT"
PLD_TEST_SERVER="http://127.0.0.1:$PORT" PLD_TEST_SERVER_PGID=$server HF_HUB_OFFLINE=1 \
    .venv/bin/pytest tests/server -v -p no:cacheprovider -k "not engine_core"
serve "$((PORT + 1))"
PLD_TEST_SERVER="http://127.0.0.1:$((PORT + 1))" PLD_TEST_SERVER_PGID=$server HF_HUB_OFFLINE=1 \
    .venv/bin/pytest tests/server -v -p no:cacheprovider -k engine_core
echo "test-server: $(( $(date +%s) - start )) s in all" >&2
