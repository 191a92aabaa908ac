"""Print the folder of pld's default model as safetensors (converted from its GGUF once, cached):
what scripts/vllm-server.sh serves, so the server and pld's own engine run the same weights."""

from pld_cli.loading.gguf import converted_gguf, default_gguf

print(converted_gguf(default_gguf(), lambda message: None))
