"""Quantized weights for pld's own forward: the schemes (`scheme`), how a model's weights are
quantized at load (`quantize`), the matrices that run them (`grouped`: pld's int8 kernel in groups;
`matrices`: torch's weight-only kernels), the head (`head`), and the flat state a cached copy holds
(`state`). Every matrix computes each row from its own row, so pld's output equals --no-pld's."""
