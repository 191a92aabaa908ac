"""`pld serve`: the loaded model behind an OpenAI-compatible HTTP API, each answer exact.

The layer above the engines: a request (requests.py, typed values) becomes prompt ids with the
same chat template pld's tasks use (prompting.py), is decoded on the local engine in a slot of
its batch, shared passes and each answer the one it gets alone (answer.py), and goes back as
OpenAI's JSON or as server-sent events (responses.py, sse.py). The model is loaded once and kept
while requests come (holder.py); handler.py routes, app.py starts and stops the server. A request's
`prediction` is one more draft source beside the prompt, never fed to the model, so it changes
how fast the answer comes, never the answer.
"""
