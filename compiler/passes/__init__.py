"""Compile-time passes: specialise the graph to concrete shapes, simplify it, fuse it into kernels."""
