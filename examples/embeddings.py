"""Learn embeddings with ``cc.gather``: a bag-of-tokens classifier on scikit-learn's digits.

Each 8x8 digit becomes 64 tokens, one per pixel: ``token = position * 17 + intensity`` (intensity
0..16), a vocabulary of 64 * 17 = 1088. The model looks up a learned vector for every token
(``cc.gather``, an embedding lookup), averages them, and classifies the average with a small MLP.
The gradient of the lookup adds each token's gradient into its row of the table, inside the same
compiled training step. Nothing is downloaded.

Run it with::

    python examples/embeddings.py
    python examples/embeddings.py --dim 32 --epochs 20

It prints how many rows of the table training changed (tokens that never occur in the training
set get no gradient, so Adam leaves their rows as they were) and the accuracy on held-out digits.
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

LEVELS: int = 17            # pixel intensities 0..16
POSITIONS: int = 64
VOCABULARY: int = POSITIONS * LEVELS
NUM_CLASSES: int = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Embedding lookups with graphgrad on the digits.")
    parser.add_argument("--dim", type=int, default=16, help="embedding size")
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, the weights and shuffling")
    return parser.parse_args()


def load_tokens(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each digit as 64 int32 tokens, split 80/20 with a fixed seed."""
    digits = load_digits()
    tokens = (np.arange(POSITIONS) * LEVELS + digits.data.astype(np.int64)).astype(np.int32)
    labels = digits.target.astype(np.int32)
    return tuple(train_test_split(tokens, labels, test_size=0.2, random_state=seed,  # type: ignore[return-value]
                                  stratify=labels))


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    x_train, x_test, y_train, y_test = load_tokens(args.seed)

    tokens = cc.placeholder("int32", shape=(None, POSITIONS), name="tokens")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    initial_table = (rng.standard_normal((VOCABULARY, args.dim)) * 0.1).astype(np.float32)
    table = cc.Variable(initial_table, name="embeddings")
    vectors = cc.gather(table, tokens)                      # [batch, 64, dim]
    pooled = cc.reduce_mean(vectors, axis=1)                # [batch, dim]
    hidden_weights = cc.Variable((rng.standard_normal((args.dim, 64)) * np.sqrt(2.0 / args.dim)).astype(np.float32),
                                 name="hidden/W")
    hidden = cc.nn.relu(pooled @ hidden_weights + cc.Variable(np.zeros(64, np.float32), name="hidden/b"))
    out_weights = cc.Variable((rng.standard_normal((64, NUM_CLASSES)) * 0.125).astype(np.float32), name="logits/W")
    logits = hidden @ out_weights + cc.Variable(np.zeros(NUM_CLASSES, np.float32), name="logits/b")
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    predictions = cc.argmax(logits, axis=1)
    train = optim.AdamOptimizer(args.learning_rate).minimize(loss)

    batches_per_epoch = len(x_train) // args.batch_size
    start = time.perf_counter()
    with Session() as sess:
        progress = tqdm(range(args.epochs), desc="training", unit="epoch")
        for _ in progress:
            order = rng.permutation(len(x_train))
            losses = []
            for batch in range(batches_per_epoch):
                chosen = order[batch * args.batch_size:(batch + 1) * args.batch_size]
                _, value = sess.run([train, loss], feed_dict={tokens: x_train[chosen], labels: y_train[chosen]})
                losses.append(float(value))
            progress.set_postfix(loss=f"{np.mean(losses):.4f}")
        predicted = sess.run(predictions, feed_dict={tokens: x_test})
        learned = sess.run(table)
    elapsed = time.perf_counter() - start

    changed = int(np.sum(np.any(learned != initial_table, axis=1)))
    seen = len(np.unique(x_train))
    print(f"{args.epochs * batches_per_epoch} steps in {elapsed:.1f} s")
    print(f"embedding rows changed: {changed} of {VOCABULARY} ({seen} tokens occur in the training set)")
    print(f"test accuracy: {np.mean(predicted == y_test):.3f}")


if __name__ == "__main__":
    main()
