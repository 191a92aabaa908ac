"""pld's own forward: a Llama-family model in one file (`model`) over a KV cache it owns
(`runtime`), row attention for exact verification (`attention`), CUDA-graph replay (`graphs`), the
C library's whole-pass decoder (`decoder`), and quantized weights (`quantized/`)."""
