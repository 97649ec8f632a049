"""Test-only entry points into the C kernels (attention, matmul and norms, K-quants), one compiled module each;
the engine itself never imports them. They let tests compare a single kernel with ggml's op."""
