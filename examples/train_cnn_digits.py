"""Train a small convolutional network on scikit-learn's 8x8 handwritten digits with graphgrad.

Two 3x3 convolutions (SAME padding, relu), each followed by 2x2 max pooling, then a dense layer to
the 10 classes; Adam through ``minimize``; the whole training step (convolutions, their gradients,
pooling and the updates) is one compiled native call per minibatch. Images are NHWC: ``[batch, 8,
8, 1]``. The digits ship with scikit-learn, so nothing is downloaded.

Run it with::

    python examples/train_cnn_digits.py
    python examples/train_cnn_digits.py --epochs 20 --seed 3
    python examples/train_cnn_digits.py --target reference   # the numpy oracle instead of LLVM
    python examples/train_cnn_digits.py --target cuda-emulated   # the GPU kernels, run on the CPU
    python examples/train_cnn_digits.py --layers   # the same model as TF1 code writes it: cc.layers,
                                                   # with batch normalization and dropout

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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a CNN on scikit-learn's digits with graphgrad.")
    parser.add_argument("--epochs", type=int, default=15, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, the weights and shuffling")
    parser.add_argument("--layers", action="store_true",
                        help="build the model with cc.layers (TF1's tf.layers), adding batch normalization "
                             "after each convolution and dropout before the last layer")
    parser.add_argument("--target", choices=("cpu", "reference", "cuda", "cuda-emulated"), default="cpu",
                        help="cpu: compiled with LLVM (default); reference: the numpy evaluator; cuda: an "
                             "NVIDIA GPU; cuda-emulated: the GPU's kernels run block by block on the CPU")
    return parser.parse_args()


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits as [N, 8, 8, 1] images in [0, 1], split 80/20 with a fixed seed."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    return tuple(train_test_split(images, labels, test_size=0.2, random_state=seed,  # type: ignore[return-value]
                                  stratify=labels))


def conv_layer(inputs: cc.Tensor, in_channels: int, out_channels: int, rng: np.random.Generator,
               name: str) -> cc.Tensor:
    """3x3 convolution (SAME) + bias + relu, then 2x2 max pooling."""
    scale = np.sqrt(2.0 / (9 * in_channels))
    filters = cc.Variable((rng.standard_normal((3, 3, in_channels, out_channels)) * scale).astype(np.float32),
                          name=f"{name}/filters")
    bias = cc.Variable(np.zeros(out_channels, np.float32), name=f"{name}/b")
    hidden = cc.nn.relu(cc.nn.conv2d(inputs, filters, strides=1, padding="SAME") + bias)
    return cc.nn.max_pool(hidden, ksize=2, strides=2, padding="SAME")


def build_model(images: cc.Tensor, rng: np.random.Generator) -> cc.Tensor:
    """8x8x1 -> conv 16 -> 4x4x16 -> conv 32 -> 2x2x32 -> dense 10; returns the logits."""
    hidden = conv_layer(images, 1, 16, rng, "conv1")
    hidden = conv_layer(hidden, 16, 32, rng, "conv2")
    flat = cc.reshape(hidden, (-1, 2 * 2 * 32))
    weights = cc.Variable((rng.standard_normal((128, NUM_CLASSES)) * np.sqrt(1.0 / 128)).astype(np.float32),
                          name="logits/W")
    bias = cc.Variable(np.zeros(NUM_CLASSES, np.float32), name="logits/b")
    return flat @ weights + bias


def build_model_with_layers(images: cc.Tensor, training: cc.Tensor) -> cc.Tensor:
    """The same network in TF1's ``tf.layers`` style: variables made by ``get_variable`` (Glorot
    uniform kernels) in scopes ``conv2d``, ``conv2d_1``...; batch normalization after each
    convolution (batch statistics while ``training``, the moving ones otherwise) and dropout before
    the last layer."""
    hidden = images
    for channels in (16, 32):
        hidden = cc.layers.conv2d(hidden, channels, 3, padding="same", use_bias=False)
        hidden = cc.nn.relu(cc.layers.batch_normalization(hidden, momentum=0.9, training=training))
        hidden = cc.layers.max_pooling2d(hidden, 2, 2, padding="same")
    hidden = cc.layers.dropout(cc.layers.flatten(hidden), rate=0.2, training=training)
    return cc.layers.dense(hidden, NUM_CLASSES, name="logits")


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    x_train, x_test, y_train, y_test = load_data(args.seed)

    images = cc.placeholder("float32", shape=(None, 8, 8, 1), name="images")
    labels = cc.placeholder("int32", shape=(None,), name="labels")
    training = cc.placeholder("bool", shape=(), name="training")
    if args.layers:
        cc.set_random_seed(args.seed)
        logits = build_model_with_layers(images, training)
    else:
        logits = build_model(images, rng)
    loss = cc.reduce_mean(cc.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    predictions = cc.argmax(logits, axis=1)
    global_step = optim.get_or_create_global_step()
    # The moving averages of batch normalization update with each training step (as in TF1).
    with cc.control_dependencies(cc.get_default_graph().get_collection(cc.GraphKeys.UPDATE_OPS)):
        train = optim.AdamOptimizer(args.learning_rate).minimize(loss, global_step=global_step)
    mode = {training: True} if args.layers else {}
    evaluation = {training: False} if args.layers else {}

    batch_size = args.batch_size
    batches_per_epoch = len(x_train) // batch_size  # full batches only: one compiled shape
    start = time.perf_counter()
    with Session(target=args.target) as sess:
        progress = tqdm(range(args.epochs), desc="training", unit="epoch")
        for _ in progress:
            order = rng.permutation(len(x_train))
            losses = []
            for batch in range(batches_per_epoch):
                chosen = order[batch * batch_size:(batch + 1) * batch_size]
                _, batch_loss = sess.run([train, loss], feed_dict={images: x_train[chosen], labels: y_train[chosen],
                                                                   **mode})
                losses.append(float(batch_loss))
            progress.set_postfix(loss=f"{np.mean(losses):.4f}")
        predicted = sess.run(predictions, feed_dict={images: x_test, **evaluation})
        steps = int(sess.run(global_step))
    elapsed = time.perf_counter() - start

    accuracy = float(np.mean(predicted == y_test))
    print(f"{steps} steps in {elapsed:.1f} s ({args.target})")
    print(f"test accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
