#!/usr/bin/env bash
# Start llama-cpp-python's OpenAI-style server on one GGUF in the background (2 threads, n_ctx
# 4096), wait until /v1/models answers, and print its PID (stop it with `kill PID`).
#
#   scripts/llama_server.sh FILE.gguf [PORT (8090)] [LOG (/tmp/llama-server-PORT.log)]
#
# LLAMA_PYTHON overrides the interpreter (default /work/llama-venv/bin/python); WAIT_S the wait.
set -euo pipefail
model=${1:?usage: llama_server.sh FILE.gguf [PORT] [LOG]}
port=${2:-8090}
log=${3:-/tmp/llama-server-$port.log}
python=${LLAMA_PYTHON:-/work/llama-venv/bin/python}
wait_s=${WAIT_S:-120}

nohup "$python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
    --n_threads 2 --n_ctx 4096 >"$log" 2>&1 &
pid=$!
for _ in $(seq "$wait_s"); do
    if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null; then
        echo "$pid"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "server exited early; last of $log:" >&2
        tail -20 "$log" >&2
        exit 1
    fi
    sleep 1
done
echo "no answer on port $port after ${wait_s}s; killing $pid (log $log)" >&2
kill "$pid"
exit 1
