"""Train a small MLP on scikit-learn's handwritten digits with graphgrad.

This is graphgrad's main example. It builds a TensorFlow 1.x style graph (placeholders with a
``None`` batch dimension, Variables, relu layers, a sparse softmax cross-entropy loss), lets
``optim.AdamOptimizer(...).minimize`` add the backward pass and the Adam updates, and runs the
whole training step as one compiled native call per minibatch.

The digits data (1797 8x8 images, 10 classes) ships with scikit-learn, so nothing is downloaded.

Run it with::

    python examples/train_digits.py
    python examples/train_digits.py --epochs 30 --batch-size 64 --seed 1
    python examples/train_digits.py --target reference   # the numpy oracle instead of LLVM
    python examples/train_digits.py --target cuda-emulated   # the GPU kernels, run on the CPU
    python examples/train_digits.py --verbose            # also print the train step's compile report
    python examples/train_digits.py --logdir runs/digits # TensorBoard: tensorboard --logdir runs
    mpiexec -n 2 python examples/train_digits.py --distributed   # data-parallel over MPI

The last line printed is ``test accuracy: 0.XXX``.

With ``--distributed`` (run under ``mpiexec -n N``; ``pip install -e ".[mpi]"``), each of the N
processes takes its shard of every batch of ``--batch-size`` examples, the gradients are averaged
over the processes in every step (``optim.DistributedOptimizer``) and all start from rank 0's
weights (``optim.broadcast_variables``): the same updates as one process on the whole batch, so
the same accuracy. Rank 0 prints the progress and the results.

With ``--logdir DIR`` it also writes a TensorBoard event file there: ``train/loss`` and
``train/accuracy`` of every step and ``test/accuracy`` after every epoch (all computed in the
compiled steps), histograms of the weights after every epoch, and the graph.
"""
from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import compiler as cc
import optim
from runtime import Session

HIDDEN_SIZES: tuple[int, ...] = (128,)
NUM_FEATURES: int = 64
NUM_CLASSES: int = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train an MLP on scikit-learn's digits with graphgrad.")
    parser.add_argument("--epochs", type=int, default=30, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, the weights and shuffling")
    parser.add_argument("--target", choices=("cpu", "reference", "cuda", "cuda-emulated"), default="cpu",
                        help="cpu: compiled with LLVM (default); reference: the numpy evaluator; cuda: an "
                             "NVIDIA GPU; cuda-emulated: the GPU's kernels run block by block on the CPU")
    parser.add_argument("--verbose", action="store_true", help="print the train step's compile report")
    parser.add_argument("--logdir", default=None,
                        help="write TensorBoard summaries and the graph to this directory")
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel over MPI: run as `mpiexec -n N python examples/train_digits.py "
                             "--distributed`; each process trains on its shard of every batch")
    return parser.parse_args()


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits, scaled to [0, 1], split 80/20 into train and test with a fixed seed."""
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed, stratify=labels)
    return x_train, x_test, y_train, y_test


def dense(inputs: cc.Tensor, in_size: int, out_size: int, rng: np.random.Generator,
          name: str) -> cc.Tensor:
    """A fully connected layer ``inputs @ W + b`` with He-initialised weights."""
    scale = np.sqrt(2.0 / in_size)
    weights = cc.Variable((rng.standard_normal((in_size, out_size)) * scale).astype(np.float32),
                          name=f"{name}/W")
    bias = cc.Variable(np.zeros(out_size, np.float32), name=f"{name}/b")
    return inputs @ weights + bias


def build_model(images: cc.Tensor, rng: np.random.Generator) -> cc.Tensor:
    """The MLP 64 -> 128 -> 10 (relu between layers); returns the logits."""
    hidden = images
    in_size = NUM_FEATURES
    for index, size in enumerate(HIDDEN_SIZES):
        hidden = cc.nn.relu(dense(hidden, in_size, size, rng, name=f"hidden{index}"))
        in_size = size
    return dense(hidden, in_size, NUM_CLASSES, rng, name="logits")


class Summaries(NamedTuple):
    """The summaries ``--logdir`` writes: ``per_step`` with each training step, ``test`` on the test
    set and ``per_epoch`` (the weight histograms) after each epoch."""

    per_step: cc.Tensor
    test: cc.Tensor
    per_epoch: cc.Tensor


def build_summaries(logits: cc.Tensor, labels: cc.Tensor, loss: cc.Tensor) -> Summaries:
    """Loss and accuracy scalars (on the fed batch, computed in the step) and weight histograms."""
    predictions = cc.argmax(logits, 1)
    accuracy = cc.reduce_mean(cc.cast(cc.equal(predictions, cc.cast(labels, "int64")), "float32"))
    with cc.name_scope("train"):
        per_step = cc.summary.merge([cc.summary.scalar("loss", loss), cc.summary.scalar("accuracy", accuracy)])
    with cc.name_scope("test"):
        test = cc.summary.scalar("accuracy", accuracy)
    weights = [variable for variable in cc.trainable_variables() if variable.op.name.endswith("/W")]
    with cc.name_scope("weights"):
        per_epoch = cc.summary.merge([cc.summary.histogram(variable.op.name, variable) for variable in weights])
    return Summaries(per_step, test, per_epoch)


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    x_train, x_test, y_train, y_test = load_data(args.seed)

    images = cc.placeholder("float32", shape=(None, NUM_FEATURES), name="images")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    logits = build_model(images, rng)
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    global_step = optim.get_or_create_global_step()
    optimizer: optim.Optimizer = optim.AdamOptimizer(args.learning_rate)
    rank, ranks = 0, 1
    if args.distributed:
        optimizer = optim.DistributedOptimizer(optimizer)
        rank, ranks = optim.rank(), optim.size()
    train = optimizer.minimize(loss, global_step=global_step)
    summaries = build_summaries(logits, labels, loss) if args.logdir else None
    writes = args.logdir and rank == 0
    writer = cc.summary.FileWriter(args.logdir, graph=cc.get_default_graph()) if writes else None

    # Every distinct feed shape compiles a new step, so only full batches are used for training
    # (the last partial batch of each epoch is dropped) and the test set is evaluated in one call.
    batch_size = args.batch_size
    batches_per_epoch = len(x_train) // batch_size
    start = time.perf_counter()
    with Session(target=args.target) as sess:
        if args.distributed:
            optim.broadcast_variables(sess)   # every process starts from rank 0's weights
        if args.verbose and args.target == "cpu" and not args.distributed:
            feed = {images: x_train[:batch_size], labels: y_train[:batch_size]}
            print(sess.compile([train, loss], feed_dict=feed).report())
        progress = tqdm(range(args.epochs), desc="training", unit="epoch", disable=rank != 0)
        for _ in progress:
            order = rng.permutation(len(x_train))    # the same order in every process (same seed)
            losses = []
            for batch in range(batches_per_epoch):
                indices = order[batch * batch_size:(batch + 1) * batch_size]
                if args.distributed:
                    indices = optim.shard(indices, rank, ranks)   # this process's part of the batch
                feed = {images: x_train[indices], labels: y_train[indices]}
                if writer is not None and summaries is not None:
                    _, batch_loss, step_summary, step = sess.run(
                        [train, loss, summaries.per_step, global_step], feed_dict=feed)
                    writer.add_summary(step_summary, global_step=step)
                else:
                    _, batch_loss = sess.run([train, loss], feed_dict=feed)
                losses.append(float(batch_loss))
            progress.set_postfix(loss=f"{np.mean(losses):.4f}")
            if writer is not None and summaries is not None:
                step = sess.run(global_step)
                writer.add_summary(sess.run(summaries.test, feed_dict={images: x_test, labels: y_test}), step)
                writer.add_summary(sess.run(summaries.per_epoch), step)
        test_logits = sess.run(logits, feed_dict={images: x_test})
        steps = int(sess.run(global_step))
    elapsed = time.perf_counter() - start
    if writer is not None:
        writer.close()

    if rank != 0:
        return
    accuracy = float(np.mean(np.argmax(test_logits, axis=1) == y_test))
    where = f"{args.target}, {ranks} processes" if args.distributed else args.target
    print(f"{steps} steps in {elapsed:.1f} s ({where})")
    print(f"test accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
