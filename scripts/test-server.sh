#!/usr/bin/env bash
# The --server tests against a real vLLM (tests/server/): install it (once, .venv-vllm), start it on
# pld's default model with n-gram drafting and a 2,048-token context, wait for /v1/models, run the
# tests, and stop the server whatever happens. The last of those tests kills the server (kill -9),
# so a second server is started for the test that stops one with SIGTERM. Called by
# `make test-server` (and so by .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8765}
LOG=${LOG:-.cache/vllm-test.log}
mkdir -p "$(dirname "$LOG")"

start=$(date +%s)
server=
stop() { [ -z "$server" ] || kill -9 -- "-$server" 2>/dev/null || true; }
trap stop EXIT

# Start a server in its own session (the API server and the engine processes it starts are
# stopped together) and wait until it serves; $server is its process group.
serve() {
    PORT=$PORT MAX_MODEL_LEN=2048 setsid scripts/vllm-server.sh >"$LOG" 2>&1 &
    server=$!
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
}

serve
PLD_TEST_SERVER="http://127.0.0.1:$PORT" PLD_TEST_SERVER_PGID=$server HF_HUB_OFFLINE=1 \
    .venv/bin/pytest tests/server -v -p no:cacheprovider
stop
# The killed server's port may still be held for a moment by its exiting processes.
for _ in $(seq 60); do curl -s "http://127.0.0.1:$PORT" >/dev/null || break; sleep 1; done

serve
PLD_TEST_STOPPED_SERVER="http://127.0.0.1:$PORT" PLD_TEST_STOPPED_SERVER_PGID=$server \
    HF_HUB_OFFLINE=1 .venv/bin/pytest tests/server/test_vllm_stopped.py -v -p no:cacheprovider
echo "test-server: $(( $(date +%s) - start )) s in all" >&2
