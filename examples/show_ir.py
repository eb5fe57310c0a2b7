"""A tour of what graphgrad's compiler produces for one tiny program.

The program is ``y = exp(x * w)`` with ``x`` a placeholder and ``w`` a Variable, and
``loss = reduce_sum(y)``. ``cc.gradients(loss, [w])`` adds the backward graph (made of ordinary
ops), and ``Session.compile`` runs the pipeline without executing anything. This script prints,
each under its own heading:

    forward graph     the pruned graph, with concrete shapes, that computes y
    backward graph    the graph that computes d(loss)/dw, before and after the rewrite passes
    kernels           the fused kernel IR and buffer plan (each kernel lists the ops it covers)
    LLVM IR           the LLVM module for the CPU: the kernels and the entry ``graphgrad_step``
    PTX               the same kernel IR lowered for NVIDIA GPUs

Run it with::

    python examples/show_ir.py                  # the whole tour
    python examples/show_ir.py --stage llvm     # one stage, for both the y and the gradient step
    python examples/show_ir.py --stage asm      # stages: graph, optimized, kernels, llvm,
                                                # llvm-opt, asm, ptx
"""
from __future__ import annotations

import argparse

import numpy as np

import compiler as cc
from compiler.pipeline import STAGES
from runtime import Session
from runtime.executable import Executable

W_INITIAL: float = 0.5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Print each compiler stage for y = exp(x * w).")
    parser.add_argument("--stage", choices=STAGES, default=None,
                        help="print only this stage, for both the forward and the gradient step")
    parser.add_argument("--size", type=int, default=4, help="how many values x holds")
    return parser.parse_args()


def heading(title: str) -> None:
    print()
    print("=" * 78)
    print(f"== {title}")
    print("=" * 78)


def show(title: str, executable: Executable, stage: str) -> None:
    heading(title)
    print(executable.dump(stage).rstrip())


def main() -> None:
    args = parse_args()

    x = cc.placeholder("float32", shape=(None,), name="x")
    w = cc.Variable(np.float32(W_INITIAL), name="w")
    y = cc.exp(x * w)
    loss = cc.reduce_sum(y)
    (grad_w,) = cc.gradients(loss, [w])

    x_value = np.linspace(0.0, 1.0, args.size, dtype=np.float32)
    feed = {x: x_value}
    with Session() as sess:
        forward = sess.compile(y, feed_dict=feed)
        backward = sess.compile(grad_w, feed_dict=feed)

        if args.stage is not None:
            show(f"{args.stage}: the step fetching y", forward, args.stage)
            show(f"{args.stage}: the step fetching d(loss)/dw", backward, args.stage)
        else:
            show("forward graph: the step fetching y = exp(x * w)", forward, "graph")
            show("backward graph: the step fetching d(loss)/dw, as built by cc.gradients",
                 backward, "graph")
            show("backward graph, optimized: after the rewrite passes", backward, "optimized")
            show("kernels: the gradient step fused into kernels", backward, "kernels")
            show("LLVM IR: the step fetching y (see --stage llvm for the gradient step)",
                 forward, "llvm")
            show("PTX: the step fetching y, for nvptx64-nvidia-cuda", forward, "ptx")

        y_value, grad_value = sess.run([y, grad_w], feed_dict=feed)

    heading("values")
    by_hand = np.sum(x_value * np.exp(x_value * W_INITIAL))
    print(f"x                                = {x_value}")
    print(f"y                                = {y_value}")
    print(f"d(loss)/dw, compiled             = {float(grad_value):.6f}")
    print(f"d(loss)/dw = sum(x * y), by hand = {float(by_hand):.6f}")


if __name__ == "__main__":
    main()
