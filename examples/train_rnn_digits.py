"""Train a GRU on scikit-learn's 8x8 handwritten digits, read row by row, with graphgrad's ``cc.scan``.

Each image is a sequence of 8 rows of 8 pixels. A GRU cell (update gate z, reset gate r,
candidate n; hidden size 64) reads them in order with ``cc.scan``; the last hidden state goes
through a dense layer to the 10 classes. The inputs' share of the three gates is one matmul over
all 8 steps, outside the loop; inside it, one ``h @ U`` per step. ``minimize`` differentiates
through the scan (a loop that runs backwards over the hidden states the forward loop kept), and
the whole training step (the forward loop, the backward loop and the Adam updates) is one
compiled native call per minibatch. The digits ship with scikit-learn: nothing is downloaded.

Run it with::

    python examples/train_rnn_digits.py
    python examples/train_rnn_digits.py --epochs 30 --hidden 128 --seed 1
    python examples/train_rnn_digits.py --target reference       # the numpy oracle instead of LLVM
    python examples/train_rnn_digits.py --target cuda-emulated   # the GPU kernels, run on the CPU

The last line printed is ``test accuracy: 0.XXX``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import compiler as cc
import optim
from runtime import Session

NUM_CLASSES: int = 10
STEPS: int = 8        # rows per image: the sequence length
FEATURES: int = 8     # pixels per row


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a GRU (cc.scan) on scikit-learn's digits, row by row.")
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--hidden", type=int, default=64, help="the GRU's hidden size")
    parser.add_argument("--learning-rate", type=float, default=5e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, the weights and shuffling")
    parser.add_argument("--target", choices=("cpu", "reference", "cuda", "cuda-emulated"), default="cpu",
                        help="cpu: compiled with LLVM (default); reference: the numpy evaluator; cuda: an "
                             "NVIDIA GPU; cuda-emulated: the GPU's kernels run block by block on the CPU")
    return parser.parse_args()


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits as [N, 8 rows, 8 pixels] in [0, 1], split 80/20 with a fixed seed."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    return tuple(train_test_split(images, labels, test_size=0.2, random_state=seed,  # type: ignore[return-value]
                                  stratify=labels))


def gru_logits(images: cc.Tensor, hidden: int, rng: np.random.Generator) -> cc.Tensor:
    """Logits of a GRU over the rows of ``images`` ([batch, 8, 8]) and a dense layer on its last state."""
    def weights(shape: tuple[int, ...], name: str) -> cc.Variable:
        scale = np.sqrt(1.0 / shape[0])
        return cc.Variable((rng.uniform(-scale, scale, shape)).astype(np.float32), name=name)

    input_weights = weights((FEATURES, 3 * hidden), "gru/input_weights")      # x -> z, r, n
    state_weights = weights((hidden, 3 * hidden), "gru/state_weights")        # h -> z, r, n
    bias = cc.Variable(np.zeros(3 * hidden, np.float32), name="gru/bias")
    rows = cc.transpose(images, [1, 0, 2])                                     # [8, batch, 8]: time first
    projected = cc.reshape(cc.reshape(rows, (-1, FEATURES)) @ input_weights + bias, (STEPS, -1, 3 * hidden))

    def cell(state: cc.Tensor, inputs: cc.Tensor) -> cc.Tensor:
        from_state = state @ state_weights
        z = cc.sigmoid(inputs[:, :hidden] + from_state[:, :hidden])
        r = cc.sigmoid(inputs[:, hidden:2 * hidden] + from_state[:, hidden:2 * hidden])
        n = cc.tanh(inputs[:, 2 * hidden:] + r * from_state[:, 2 * hidden:])
        return (1.0 - z) * n + z * state

    initial = cc.zeros_like(projected[0, :, :hidden])
    states = cc.scan(cell, projected, initializer=initial)                     # [8, batch, hidden]
    output_weights = weights((hidden, NUM_CLASSES), "dense/weights")
    output_bias = cc.Variable(np.zeros(NUM_CLASSES, np.float32), name="dense/bias")
    return states[STEPS - 1] @ output_weights + output_bias


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    x_train, x_test, y_train, y_test = load_data(args.seed)
    images = cc.placeholder("float32", shape=(None, STEPS, FEATURES), name="images")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    logits = gru_logits(images, args.hidden, rng)
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    correct = cc.reduce_sum(cc.cast(cc.equal(cc.argmax(logits, axis=1, output_type="int32"), labels), "int32"))
    train = optim.AdamOptimizer(args.learning_rate).minimize(loss)

    with Session(target=args.target) as sess:
        started = time.perf_counter()
        for epoch in range(args.epochs):
            order = rng.permutation(len(x_train))
            total, batches = 0.0, 0
            progress = tqdm(range(0, len(order) - args.batch_size + 1, args.batch_size),
                            desc=f"epoch {epoch + 1}/{args.epochs}", leave=False, mininterval=0.5)
            for start in progress:
                batch = order[start:start + args.batch_size]
                _, value = sess.run([train, loss], {images: x_train[batch], labels: y_train[batch]})
                total += float(value)
                batches += 1
            right = int(sess.run(correct, {images: x_test, labels: y_test}))
            print(f"epoch {epoch + 1:2d}  loss {total / max(batches, 1):.4f}  "
                  f"test accuracy {right / len(x_test):.3f}")
        print(f"trained in {time.perf_counter() - started:.1f} s ({args.target})")
        right = int(sess.run(correct, {images: x_test, labels: y_test}))
    print(f"test accuracy: {right / len(x_test):.3f}")


if __name__ == "__main__":
    main()
