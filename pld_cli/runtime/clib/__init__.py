"""pld's C library: the kernels in `csrc/`, built and loaded by `library`."""
