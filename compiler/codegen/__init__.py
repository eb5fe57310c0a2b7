"""Code generation from the kernel IR: ``cpu`` (LLVM IR for the host, JIT-compiled) and ``nvptx``."""
