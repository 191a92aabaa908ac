"""Models onto this machine: what -m names (`sources`), GGUF files and the default model (`gguf`),
checkpoints read block by block (`checkpoint`), the quantized copy in the user cache
(`quantized_copy`), the quantization that fits (`fit`), the loaded model (`models`), and a runtime
made ready for a decode (`ready`).

The layer between the runtimes and the tasks: it knows model files and model libraries, never a
document or a prompt."""
