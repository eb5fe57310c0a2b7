"""The op table: one row per op (and per interesting shape), feeding every op test.

Each row builds an output from placeholders. ``inputs`` give each placeholder's shape and how its
values are drawn; ``grad`` lists the inputs to check gradients for (float64, finite differences);
``second_order`` marks rows whose gradient-of-gradient is checked too; ``repeatable`` is False for
rows whose value changes from one run to the next (random ops: every run advances the graph's
random counter), which are compared with the reference run by run.

Every registered op type is built by some row, or by the gradients the rows check
(``test_ops.test_every_op_type_has_a_row``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import compiler as cc


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    draw: str = "normal"          # normal | positive | labels:<depth> | bool | distinct
    dtype: str | None = None      # None: the row's float dtype

    def values(self, rng: np.random.Generator, float_dtype: str) -> np.ndarray:
        size = int(np.prod(self.shape)) if self.shape else 1
        if self.draw.startswith("labels"):
            depth = int(self.draw.split(":")[1])
            return rng.integers(0, depth, size=self.shape).astype(self.dtype or "int32")
        if self.draw == "bool":
            return rng.random(self.shape) < 0.5
        if self.draw == "positive":
            values = rng.uniform(0.5, 2.0, size=self.shape)
        elif self.draw == "distinct":
            values = rng.permutation(size).reshape(self.shape) * 0.37 - size * 0.15 + rng.uniform(-0.05, 0.05, self.shape)
        else:
            values = rng.normal(size=self.shape)
            values = np.where(np.abs(values) < 0.05, values + 0.2, values)  # keep off kinks at 0
        return np.asarray(values).astype(self.dtype or float_dtype)

    @property
    def is_float(self) -> bool:
        return self.dtype is None


@dataclass(frozen=True)
class Row:
    id: str
    build: Callable[..., cc.Tensor]
    inputs: tuple[Input, ...]
    grad: tuple[int, ...] = (0,)
    second_order: bool = False
    repeatable: bool = True


def _after_assertion(x: cc.Tensor) -> cc.Tensor:
    with cc.control_dependencies([cc.assert_less(x, 1e6, message="drawn values are small")]):
        return x * 2.0


def _unary(name: str, fn: Callable, draw: str = "normal", second: bool = False) -> list[Row]:
    shapes = [(3, 4), (1, 5), (0, 3), (), (7, 131)]  # 7x131: vector loops with remainders
    return [Row(f"{name}-{'x'.join(map(str, s)) or 'scalar'}", fn, (Input(s, draw),),
                second_order=second and i == 0) for i, s in enumerate(shapes)]


def _binary(name: str, fn: Callable, draw_y: str = "normal", draw_x: str = "normal",
            second: bool = False) -> list[Row]:
    shapes = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 4), (4,)),
              ((2, 1, 3), (4, 1)), ((7, 131), (131,))]
    return [Row(f"{name}-{'x'.join(map(str, a)) or 's'}-{'x'.join(map(str, b)) or 's'}", fn,
                (Input(a, draw_x), Input(b, draw_y)), grad=(0, 1), second_order=second and i == 0)
            for i, (a, b) in enumerate(shapes)]


def _random(name: str, fn: Callable) -> list[Row]:
    """Rows of an op that draws new numbers at every run: the input gives only shape and dtype."""
    shapes = [(3, 4), (0, 3), (), (7, 131)]
    return [Row(f"{name}-{'x'.join(map(str, s)) or 'scalar'}", fn, (Input(s),), grad=(), repeatable=False)
            for s in shapes]


ROWS: list[Row] = [
    *_binary("add", lambda x, y: x + y),
    *_binary("subtract", lambda x, y: cc.subtract(x, y)),
    *_binary("multiply", lambda x, y: x * y, second=True),
    *_binary("divide", lambda x, y: x / y, draw_y="positive"),
    *_binary("pow", lambda x, y: cc.pow(x, y), draw_x="positive"),
    *_binary("maximum", cc.maximum, draw_x="distinct"),
    *_binary("minimum", cc.minimum, draw_x="distinct"),
    *_unary("negative", lambda x: -x),
    *_unary("exp", cc.exp, second=True),
    *_unary("log", cc.log, "positive"),
    *_unary("sqrt", cc.sqrt, "positive"),
    *_unary("rsqrt", cc.rsqrt, "positive"),
    *_unary("square", cc.square),
    *_unary("abs", cc.abs),
    *_unary("tanh", cc.tanh, second=True),
    *_unary("sigmoid", cc.sigmoid, second=True),
    *_unary("relu", cc.nn.relu),
    *_unary("identity", cc.identity),
    Row("add_n", lambda x, y: cc.add_n([x, y, x * y]), (Input((3, 4)), Input((3, 4))), grad=(0, 1), second_order=True),
    Row("add_n-one-size0", lambda x: cc.add_n([x]) * 2.0, (Input((0, 3)),)),
    Row("pow-negative-base-integral-exponent", lambda x: cc.pow(x, 3.0), (Input((3, 4)),)),
    Row("stop_gradient", lambda x, y: cc.stop_gradient(x) * y, (Input((3, 4)), Input((3, 4))), grad=(1,)),
    Row("cast-f-to-other-float", lambda x: cc.cast(cc.cast(x, "float32"), "float64") * x,
        (Input((3, 4), dtype="float64"),), grad=()),
    Row("cast-int-to-float", lambda x, k: x * cc.cast(k, x.dtype), (Input((3, 4)), Input((3, 4), "labels:5", "int32"))),
    Row("cast-float-to-int", lambda x: cc.cast(cc.cast(x * 10.0, "int32"), x.dtype), (Input((3, 4)),), grad=()),
    Row("cast-float-to-int-scalar", lambda x: cc.cast(cc.cast(x * 10.0, "int64"), x.dtype), (Input(()),), grad=()),
    # matmul, 2-D with transposes, batched, batch broadcast
    Row("matmul", lambda a, b: cc.matmul(a, b), (Input((3, 4)), Input((4, 5))), grad=(0, 1), second_order=True),
    Row("matmul-ta", lambda a, b: cc.matmul(a, b, transpose_a=True), (Input((4, 3)), Input((4, 5))), grad=(0, 1)),
    Row("matmul-tb", lambda a, b: cc.matmul(a, b, transpose_b=True), (Input((3, 4)), Input((5, 4))), grad=(0, 1)),
    Row("matmul-ta-tb", lambda a, b: cc.matmul(a, b, transpose_a=True, transpose_b=True),
        (Input((4, 3)), Input((5, 4))), grad=(0, 1)),
    Row("matmul-batched", lambda a, b: a @ b, (Input((2, 3, 4)), Input((2, 4, 5))), grad=(0, 1)),
    Row("matmul-batch-broadcast", lambda a, b: a @ b, (Input((2, 3, 4)), Input((4, 5))), grad=(0, 1)),
    Row("matmul-batch-1", lambda a, b: a @ b, (Input((1, 3, 4)), Input((2, 4, 2))), grad=(0, 1)),
    Row("matmul-4d-heads", lambda q, k: cc.matmul(q, k, transpose_b=True), (Input((2, 3, 4, 5)), Input((2, 3, 6, 5))),
        grad=(0, 1), second_order=True),
    Row("matmul-4d-batch-broadcast", lambda a, b: a @ b, (Input((2, 1, 3, 4)), Input((3, 4, 2))), grad=(0, 1)),
    Row("matmul-5d-ta-size0-batch", lambda a, b: cc.matmul(a, b, transpose_a=True),
        (Input((2, 0, 1, 4, 3)), Input((1, 5, 4, 2))), grad=(0, 1)),
    Row("matmul-size1", lambda a, b: a @ b, (Input((1, 4)), Input((4, 1))), grad=(0, 1)),
    Row("matmul-k0", lambda a, b: a @ b, (Input((3, 0)), Input((0, 2))), grad=(0, 1)),
    Row("matmul-m0", lambda a, b: a @ b, (Input((0, 4)), Input((4, 2))), grad=(0, 1)),
    # reductions
    Row("reduce_sum-all", lambda x: cc.reduce_sum(x), (Input((3, 4)),)),
    Row("reduce_sum-axis1", lambda x: cc.reduce_sum(x, axis=1), (Input((3, 4)),)),
    Row("reduce_sum-axis0-keep", lambda x: cc.reduce_sum(x, axis=0, keepdims=True), (Input((3, 4)),)),
    Row("reduce_sum-axes02", lambda x: cc.reduce_sum(x, axis=[0, 2]), (Input((2, 3, 4)),)),
    Row("reduce_sum-negative-axis", lambda x: cc.reduce_sum(x * x, axis=-1), (Input((2, 3, 4)),)),
    Row("reduce_sum-size0", lambda x: cc.reduce_sum(x, axis=1), (Input((3, 0)),)),
    Row("reduce_sum-size1", lambda x: cc.reduce_sum(x, axis=0), (Input((1, 4)),)),
    Row("reduce_mean-all", lambda x: cc.reduce_mean(x), (Input((3, 4)),)),
    Row("reduce_mean-axis0", lambda x: cc.reduce_mean(x, axis=0), (Input((3, 4)),)),
    Row("reduce_mean-keep", lambda x: cc.reduce_mean(x, axis=1, keepdims=True), (Input((2, 3, 4)),)),
    Row("reduce_max-all", lambda x: cc.reduce_max(x), (Input((3, 4), "distinct"),)),
    Row("reduce_max-axis1", lambda x: cc.reduce_max(x, axis=1), (Input((3, 4), "distinct"),)),
    Row("reduce_max-axis0-keep", lambda x: cc.reduce_max(x, axis=0, keepdims=True), (Input((3, 4), "distinct"),)),
    Row("reduce_max-size0", lambda x: cc.reduce_max(x, axis=0), (Input((0, 3)),)),
    Row("reduce_logsumexp", lambda x: cc.reduce_logsumexp(x, axis=1), (Input((3, 4)),)),
    Row("reduce_logsumexp-all-keep", lambda x: cc.reduce_logsumexp(x, keepdims=True), (Input((3, 4)),)),
    Row("softmax", lambda x: cc.nn.softmax(x), (Input((3, 4)),)),
    Row("softmax-axis0", lambda x: cc.nn.softmax(x, axis=0), (Input((3, 4)),)),
    Row("log_softmax", lambda x: cc.nn.log_softmax(x), (Input((3, 4)),), second_order=True),
    Row("log_softmax-size1", lambda x: cc.nn.log_softmax(x), (Input((3, 1)),)),
    Row("softmax_cross_entropy", lambda labels, logits: cc.nn.softmax_cross_entropy_with_logits(
        labels=cc.nn.softmax(labels), logits=logits), (Input((3, 5)), Input((3, 5))), grad=(1,)),
    Row("sparse_softmax_cross_entropy-int32", lambda labels, logits: cc.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), (Input((4,), "labels:5", "int32"), Input((4, 5))), grad=(1,)),
    Row("sparse_softmax_cross_entropy-int64", lambda labels, logits: cc.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), (Input((2, 3), "labels:4", "int64"), Input((2, 3, 4))), grad=(1,)),
    # layout
    Row("reshape", lambda x: cc.reshape(x * 2.0, (4, 3)), (Input((3, 4)),)),
    Row("reshape-infer", lambda x: cc.reshape(x, (-1,)) * 2.0, (Input((2, 3, 2)),)),
    Row("reshape-of-transpose", lambda x: cc.reshape(cc.transpose(x), (12,)), (Input((3, 4)),)),
    Row("reshape-size0", lambda x: cc.reshape(x, (0, 2)), (Input((2, 0)),)),
    Row("transpose", lambda x: cc.transpose(x), (Input((3, 4)),)),
    Row("transpose-perm", lambda x: cc.transpose(x, [1, 2, 0]) * 3.0, (Input((2, 3, 4)),)),
    Row("broadcast_to", lambda x: cc.broadcast_to(x, (3, 2, 4)), (Input((2, 1)),)),
    Row("expand_dims", lambda x: cc.expand_dims(x, 1) * cc.expand_dims(x, -1), (Input((3, 4)),)),
    Row("squeeze", lambda x: cc.squeeze(x) * 2.0, (Input((3, 1, 4)),)),
    Row("squeeze-axis", lambda x: cc.squeeze(x, [0]), (Input((1, 1, 4)),)),
    # non-differentiable helpers (reference equality and PTX only)
    Row("where", lambda c, x, y: cc.where(c, x, y), (Input((3, 4), "bool", "bool"), Input((3, 4)), Input((4,))),
        grad=(1, 2)),
    Row("compare", lambda x, y: cc.cast(cc.logical_or(x < y, cc.logical_not(cc.equal(x, y))), x.dtype)
        + cc.cast(x >= y, x.dtype), (Input((3, 4)), Input((4,))), grad=()),
    Row("one_hot", lambda k: cc.one_hot(k, 5, dtype="float64"), (Input((2, 3), "labels:5", "int64"),), grad=()),
    # TF1: the dtype from on_value (int32 here), the new axis where asked, index 4 out of range
    Row("one_hot-int-axis", lambda k: cc.one_hot(k, 4, on_value=3, off_value=-2, axis=1),
        (Input((2, 3), "labels:5", "int64"),), grad=()),
    Row("one_hot-tensor-value", lambda k, v: cc.one_hot(k, 5, on_value=v * 2.0, off_value=0.5, axis=0),
        (Input((2, 3), "labels:5", "int64"), Input(())), grad=(1,)),
    Row("sign", lambda x: cc.sign(x), (Input((3, 4)),), grad=()),
    Row("ceil", lambda x: cc.ceil(x * 3.0), (Input((3, 4)),), grad=()),
    Row("gather_nd", lambda x: cc.gather_nd(x, [[[1, 2], [0, 0]], [[2, 1], [1, 2]], [[3, 0], [0, 5]]]),
        (Input((3, 4, 2)),)),
    Row("top_k-values", lambda x: cc.nn.top_k(x, 3)[0] * cc.constant(np.array([1.0, 2.0, 3.0], x.dtype)),
        (Input((2, 3, 4), "distinct"),)),
    Row("top_k-indices", lambda x: cc.cast(cc.nn.top_k(cc.floor(x * 2.0), 4)[1], x.dtype), (Input((3, 4)),),
        grad=()),
    Row("count_nonzero", lambda x: cc.cast(cc.count_nonzero(cc.nn.relu(x), axis=0), x.dtype), (Input((3, 4)),),
        grad=()),
    Row("truediv-int", lambda k: cc.truediv(k, 3), (Input((2, 3), "labels:5", "int32"),), grad=()),
    Row("norm-euclidean-axis", lambda x: cc.norm(x, axis=1), (Input((3, 4)),)),
    Row("norm-1-and-inf", lambda x: cc.norm(x, ord=1) + cc.norm(x, ord=np.inf, axis=0, keepdims=True),
        (Input((3, 4), "distinct"),)),
    # check_numerics: passes finite values through (its gradient is checked too)
    *_unary("check_numerics", lambda x: cc.check_numerics(x * 3.0, "row") * x, second=True),
    # Assert: a holding assertion the result depends on; its kernel is checked like the others
    *_unary("assert", lambda x: _after_assertion(x)),
    # is_nan: log of the negative draws is NaN; the where keeps a gradient to check (1 or 2)
    *_unary("is_nan", lambda x: cc.where(cc.is_nan(cc.log(x)), x, x * 2.0)),
    # trigonometric and special functions
    *_unary("sin", cc.sin, second=True),
    *_unary("cos", cc.cos, second=True),
    Row("sin-wide", lambda x: cc.sin(x * 300.0), (Input((7, 131)),)),     # range reduction
    Row("cos-wide", lambda x: cc.cos(x * 300.0), (Input((7, 131)),)),
    *_unary("log1p", cc.log1p, "positive"),
    Row("log1p-negative", lambda x: cc.log1p(x * -0.4), (Input((3, 4), "positive"),)),  # (-0.8, -0.2)
    Row("log1p-tiny", lambda x: cc.log1p(x * 1e-9), (Input((3, 4)),)),
    *_unary("expm1", cc.expm1),
    Row("expm1-tiny", lambda x: cc.expm1(x * 1e-9), (Input((3, 4)),)),
    *_unary("erf", cc.erf),
    Row("erf-wide", lambda x: cc.erf(x * 2.5), (Input((7, 131)),)),       # past the split at 1 and 4
    Row("floor", lambda x: cc.floor(x * 3.0), (Input((3, 4)),), grad=()),
    Row("floor-size0", lambda x: cc.floor(x), (Input((0, 3)),), grad=()),
    Row("floor-times-x", lambda x: cc.floor(x * 3.0) * x, (Input((3, 4)),)),  # None for floor's input
    # "distinct" draws lie within 0.05 of k*0.37 - 1.8: the bounds stay clear of them.
    Row("clip_by_value", lambda x: cc.clip_by_value(x, -0.5, 0.6), (Input((3, 4), "distinct"),)),
    Row("clip_by_value-scalar", lambda x: cc.clip_by_value(x, -0.5, 0.6), (Input((), "distinct"),)),
    Row("clip_by_value-size0", lambda x: cc.clip_by_value(x, -0.5, 0.6), (Input((0, 4)),)),
    Row("clip_by_value-wide", lambda x: cc.clip_by_value(x, -40.0, 50.0), (Input((7, 131), "distinct"),)),
    Row("clip_by_value-tensor-bounds",
        lambda x, lo, hi: cc.clip_by_value(x, lo * -0.5, hi * 0.5),      # lo in (-1, -0.25), hi in (0.25, 1)
        (Input((3, 4), "distinct"), Input((4,), "positive"), Input((3, 1), "positive")),
        grad=(0, 1, 2)),
    Row("clip_by_value-crossed-bounds", lambda x, lo: cc.clip_by_value(x, lo + 1.0, lo),  # min > max
        (Input((3, 4), "distinct"), Input((4,))), grad=(0, 1)),
    # cc.nn activations and losses
    *_unary("softplus", cc.nn.softplus, second=True),
    Row("softplus-wide", lambda x: cc.nn.softplus(x * 40.0), (Input((3, 4)),)),
    *_unary("leaky_relu", cc.nn.leaky_relu),
    Row("leaky_relu-alpha", lambda x: cc.nn.leaky_relu(x, alpha=0.01), (Input((3, 4)),)),
    *_unary("elu", cc.nn.elu),
    Row("elu-wide", lambda x: cc.nn.elu(x * 400.0), (Input((3, 4)),)),   # exp would overflow
    *_unary("gelu", cc.nn.gelu, second=True),
    *_unary("gelu-approximate", lambda x: cc.nn.gelu(x, approximate=True)),
    Row("sigmoid_cross_entropy", lambda z, x: cc.nn.sigmoid_cross_entropy_with_logits(
        labels=cc.sigmoid(z), logits=x), (Input((3, 5)), Input((3, 5))), grad=(0, 1), second_order=True),
    Row("sigmoid_cross_entropy-wide", lambda z, x: cc.nn.sigmoid_cross_entropy_with_logits(
        labels=cc.sigmoid(z), logits=x * 50.0), (Input((2, 3)), Input((2, 3))), grad=(0, 1)),
    Row("mean_squared_error", lambda y, p: cc.losses.mean_squared_error(y, p), (Input((4, 3)), Input((4, 3))),
        grad=(0, 1), second_order=True),
    Row("mean_squared_error-weights", lambda y, p, w: cc.losses.mean_squared_error(y, p, weights=w),
        (Input((4, 3)), Input((4, 3)), Input((4, 1), "positive")), grad=(0, 1, 2)),
    Row("mean_squared_error-size0", lambda y, p: cc.losses.mean_squared_error(y, p),
        (Input((0, 3)), Input((0, 3)))),
    # indexed reads: slices, pad, concat, split, stack, tile, gather
    Row("getitem-steps", lambda x: cc.square(x[1:, ::2]), (Input((3, 5)),), second_order=True),
    Row("getitem-negative", lambda x: x[::-1, -1], (Input((3, 5)),)),
    Row("getitem-negative-step-bounds", lambda x: x[-1:0:-2, 3:-1], (Input((6, 5)),)),
    Row("getitem-int-ellipsis-newaxis", lambda x: x[None, ..., 2], (Input((2, 3, 4)),)),
    Row("getitem-empty", lambda x: x[2:1], (Input((3, 4)),)),
    Row("getitem-tensor-index", lambda x, t: x[t, :, 1] * x[-1, t], (Input((3, 3, 3)), Input((), "labels:3", "int32")),
        grad=(0,)),
    Row("getitem-size0", lambda x: x[:, 1:], (Input((0, 4)),)),
    Row("getitem-wide", lambda x: x[:, 3:-2], (Input((7, 131)),)),
    Row("slice", lambda x: cc.slice(x, [1, 0], [2, -1]), (Input((3, 4)),)),
    Row("reverse", lambda x: cc.reverse(x, [0, -1]) * x, (Input((3, 4)),), second_order=True),
    Row("strided_slice-of-expression", lambda x, y: cc.strided_slice(x * y, [(0, None, 2), (None, None, 1)]),
        (Input((5, 3)), Input((3,))), grad=(0, 1)),
    Row("pad", lambda x: cc.sin(cc.pad(x, [[1, 2], [0, 3]])), (Input((3, 4)),), second_order=True),
    Row("pad-constant", lambda x: cc.pad(x * x, [[0, 0], [2, 1]], constant_values=1.5), (Input((2, 3)),)),
    Row("pad-size1", lambda x: cc.pad(x, [[1, 1], [1, 1]]), (Input((1, 1)),)),
    Row("pad-size0", lambda x: cc.pad(x, [[1, 0], [0, 2]]), (Input((0, 3)),)),
    Row("pad-reflect", lambda x: cc.sin(cc.pad(x, [[2, 1], [1, 3]], mode="REFLECT")), (Input((3, 4)),),
        second_order=True),
    Row("pad-symmetric", lambda x: cc.pad(x * x, [[3, 2], [0, 1]], mode="SYMMETRIC"), (Input((3, 4)),),
        second_order=True),
    Row("pad-reflect-size1-dim", lambda x: cc.pad(x, [[0, 0], [2, 2]], mode="REFLECT"), (Input((1, 3)),)),
    Row("pad-symmetric-size1", lambda x: cc.pad(x, [[1, 1], [1, 0]], mode="symmetric"), (Input((1, 1)),)),
    Row("pad-reflect-size0-rows", lambda x: cc.pad(x, [[0, 0], [1, 1]], mode="REFLECT"), (Input((0, 3)),)),
    Row("pad-reflect-wide", lambda x: cc.pad(x, [[1, 1], [5, 7]], mode="REFLECT"), (Input((7, 131)),)),
    Row("concat-axis1", lambda x, y: cc.square(cc.concat([x, y, x * 2.0], axis=1)), (Input((3, 2)), Input((3, 4))),
        grad=(0, 1), second_order=True),
    Row("concat-axis0-negative", lambda x, y: cc.concat([x, y], axis=-2), (Input((1, 4)), Input((3, 4))),
        grad=(0, 1)),
    Row("concat-with-empty", lambda x, y: cc.concat([x, y], axis=0), (Input((0, 4)), Input((3, 4))),
        grad=(1,)),
    Row("concat-wide", lambda x, y: cc.concat([x, y], axis=1), (Input((7, 131)), Input((7, 5))), grad=(0, 1)),
    Row("split", lambda x: cc.split(x, 2, axis=1)[1] * cc.split(x, [1, -1], axis=1)[1][:, 1:],
        (Input((3, 4)),)),
    Row("stack", lambda x, y: cc.stack([x, y, x], axis=1), (Input((3, 4)), Input((3, 4))), grad=(0, 1)),
    Row("unstack", lambda x: cc.unstack(x, axis=1)[2] * 3.0, (Input((2, 3)),)),
    Row("tile", lambda x: cc.sin(cc.tile(x, [2, 3])), (Input((2, 3)),), second_order=True),
    Row("tile-size1", lambda x: cc.tile(x, [1, 4, 2]), (Input((3, 1, 2)),)),
    Row("tile-zero-multiple", lambda x: cc.tile(x, [0, 2]), (Input((2, 3)),)),
    Row("tile-size0", lambda x: cc.tile(x, [2, 2]), (Input((0, 3)),)),
    Row("gather", lambda p, k: cc.square(cc.gather(p, k)), (Input((5, 3)), Input((4,), "labels:5", "int32")),
        second_order=True),
    Row("gather-2d-indices", lambda p, k: cc.gather(p * p, k), (Input((4, 3)), Input((2, 3), "labels:4", "int64"))),
    Row("gather-axis1", lambda p, k: cc.gather(p, k, axis=1), (Input((2, 5, 3)), Input((4,), "labels:5", "int32"))),
    Row("gather-out-of-range", lambda p, k: cc.gather(p, k - 2), (Input((5, 3)), Input((6,), "labels:9", "int32"))),
    Row("gather-scalar-index", lambda p, k: cc.gather(p, k), (Input((5, 3)), Input((), "labels:5", "int32"))),
    Row("gather-size0", lambda p, k: cc.gather(p, k), (Input((5, 3)), Input((0,), "labels:5", "int32"))),
    Row("gather-wide", lambda p, k: cc.gather(p, k), (Input((6, 131)), Input((7,), "labels:6", "int32"))),
    Row("unsorted_segment_sum", lambda d, k: cc.unsorted_segment_sum(cc.square(d), k, 4),
        (Input((6, 3)), Input((6,), "labels:4", "int32")), second_order=True),
    Row("unsorted_segment_sum-2d-ids", lambda d, k: cc.unsorted_segment_sum(d, k, 3),
        (Input((2, 3, 5)), Input((2, 3), "labels:3", "int64"))),
    Row("unsorted_segment_sum-out-of-range", lambda d, k: cc.unsorted_segment_sum(d, k - 1, 3),
        (Input((8,)), Input((8,), "labels:5", "int32"))),
    Row("unsorted_segment_sum-size0", lambda d, k: cc.unsorted_segment_sum(d, k, 2),
        (Input((0, 3)), Input((0,), "labels:2", "int32"))),
    Row("unsorted_segment_sum-size0-rows", lambda d, k: cc.unsorted_segment_sum(d, k, 3),
        (Input((4, 0)), Input((4,), "labels:3", "int32"))),
    Row("unsorted_segment_sum-no-segments", lambda d, k: cc.unsorted_segment_sum(d, k, 0),
        (Input((3, 2)), Input((3,), "labels:2", "int32"))),
    # more reductions
    Row("reduce_min-axis1", lambda x: cc.reduce_min(x, axis=1), (Input((3, 4), "distinct"),)),
    Row("reduce_min-all-keep", lambda x: cc.reduce_min(x * x, keepdims=True), (Input((3, 4), "distinct"),),
        second_order=True),
    Row("reduce_min-size0", lambda x: cc.reduce_min(x, axis=0), (Input((0, 3)),)),
    Row("reduce_min-wide", lambda x: cc.reduce_min(x, axis=1), (Input((7, 131), "distinct"),)),
    Row("reduce_prod-axis1", lambda x: cc.reduce_prod(x, axis=1), (Input((3, 4)),), second_order=True),
    Row("reduce_prod-axes01", lambda x: cc.reduce_prod(x, axis=[0, 2]), (Input((2, 3, 2)),), second_order=True),
    Row("reduce_prod-with-zero", lambda x: cc.reduce_prod(cc.where(x > 1.0, 0.0 * x, x), axis=0), (Input((4, 3)),),
        second_order=True),
    Row("reduce_prod-all", lambda x: cc.reduce_prod(x), (Input((2, 3), "positive"),)),
    Row("reduce_prod-size0", lambda x: cc.reduce_prod(x, axis=0), (Input((0, 3)),)),
    # more than 64 factors: the product of the others from prefix and suffix products
    Row("reduce_prod-long-axes", lambda x: cc.reduce_prod(x, axis=[0, 2]), (Input((5, 2, 15), "positive"),),
        second_order=True),
    Row("reduce_prod-long-with-zeros", lambda x: cc.reduce_prod(cc.where(x > 1.3, 0.0 * x, x), axis=1),
        (Input((2, 80), "positive"),)),
    Row("reduce_prod-size0-kept", lambda x: cc.reduce_prod(x, axis=0), (Input((7, 0)),)),
    Row("reduce_prod-size1", lambda x: cc.reduce_prod(x, axis=1, keepdims=True), (Input((3, 1)),)),
    Row("argmax", lambda x: cc.argmax(x, axis=1), (Input((3, 4), "distinct"),), grad=()),
    Row("argmax-int32-axis0", lambda x: cc.argmax(x * x, axis=0, output_type="int32"), (Input((3, 4), "distinct"),),
        grad=()),
    Row("argmin", lambda x: cc.argmin(x, axis=-1), (Input((2, 3, 4), "distinct"),), grad=()),
    Row("argmax-ties", lambda x: cc.argmax(cc.floor(x), axis=1), (Input((7, 131)),), grad=()),
    Row("argmax-labels", lambda k: cc.argmax(k, axis=0), (Input((5, 3), "labels:3", "int32"),), grad=()),
    Row("argmax-size0-rows", lambda x: cc.argmax(x, axis=1), (Input((0, 3)),), grad=()),
    Row("cumsum", lambda x: cc.cumsum(x, axis=1), (Input((3, 4)),)),
    Row("cumsum-exclusive", lambda x: cc.cumsum(x, axis=0, exclusive=True), (Input((3, 4)),)),
    Row("cumsum-reverse", lambda x: cc.cumsum(x * x, axis=1, reverse=True), (Input((3, 4)),), second_order=True),
    Row("cumsum-exclusive-reverse", lambda x: cc.cumsum(x, axis=-1, exclusive=True, reverse=True),
        (Input((2, 5)),)),
    Row("cumsum-size0", lambda x: cc.cumsum(x, axis=1), (Input((2, 0)),)),
    Row("cumsum-wide", lambda x: cc.cumsum(x, axis=1), (Input((7, 131)),)),
    Row("cumsum-axis0-wide", lambda x: cc.cumsum(x, axis=0), (Input((131, 7)),)),
    Row("cumsum-middle-axis", lambda x: cc.cumsum(x, axis=1, reverse=True), (Input((2, 5, 3)),)),
    Row("cumsum-size1-axis", lambda x: cc.cumsum(x, axis=1, exclusive=True), (Input((3, 1)),)),
    Row("cumsum-split-across-threads", lambda x: cc.cumsum(x, axis=1), (Input((600, 300)),), grad=()),
    # convolution and pooling (NHWC)
    Row("conv2d-valid", lambda x, w: cc.nn.conv2d(x, w), (Input((2, 5, 6, 3)), Input((3, 2, 3, 4))), grad=(0, 1),
        second_order=True),
    Row("conv2d-same-stride2", lambda x, w: cc.tanh(cc.nn.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME")),
        (Input((2, 7, 6, 2)), Input((3, 3, 2, 3))), grad=(0, 1), second_order=True),
    Row("conv2d-same-dilated", lambda x, w: cc.nn.conv2d(x, w, dilations=(2, 1), padding="SAME"),
        (Input((1, 6, 5, 2)), Input((2, 3, 2, 2))), grad=(0, 1)),
    Row("conv2d-stride-uneven", lambda x, w: cc.nn.conv2d(x, w, strides=(3, 2)),
        (Input((2, 8, 7, 1)), Input((2, 2, 1, 3))), grad=(0, 1)),
    Row("conv2d-1x1", lambda x, w: cc.nn.conv2d(x, w), (Input((2, 3, 3, 4)), Input((1, 1, 4, 2))), grad=(0, 1)),
    # A window as large as the input: one output pixel (a larger one is an error, as in TF1).
    Row("conv2d-window-fills-input", lambda x, w: cc.nn.conv2d(x, w), (Input((2, 3, 3, 1)), Input((3, 3, 1, 2))),
        grad=(0, 1)),
    Row("conv2d-strided-window-fills-rows", lambda x, w: cc.nn.conv2d(x, w, strides=(2, 1)),
        (Input((1, 3, 9, 1)), Input((3, 2, 1, 2))), grad=(0, 1)),
    Row("conv2d-batch0", lambda x, w: cc.nn.conv2d(x, w, padding="SAME"), (Input((0, 4, 4, 2)), Input((3, 3, 2, 2)))),
    Row("max_pool", lambda x: cc.nn.max_pool(x, 2, 2), (Input((2, 4, 6, 3), "distinct"),)),
    Row("max_pool-same-overlap", lambda x: cc.nn.max_pool(x * x, ksize=3, strides=2, padding="SAME"),
        (Input((2, 5, 5, 2), "distinct"),), second_order=True),
    Row("max_pool-uneven", lambda x: cc.nn.max_pool(x, ksize=(2, 3), strides=(1, 2)),
        (Input((1, 4, 7, 1), "distinct"),)),
    Row("max_pool-size0", lambda x: cc.nn.max_pool(x, 2, 2), (Input((0, 4, 4, 2)),)),
    # Windows that do not overlap take their gradient elementwise from the pooled max:
    # ties (relu's zeros) go to the first tap, gaps between windows get none, SAME pads the last.
    Row("max_pool-relu-ties", lambda x: cc.nn.max_pool(cc.nn.relu(x), 2, 2), (Input((2, 4, 6, 3)),)),
    Row("max_pool-gaps", lambda x: cc.nn.max_pool(x * x, ksize=2, strides=3), (Input((1, 7, 8, 2), "distinct"),),
        second_order=True),
    Row("max_pool-same-disjoint", lambda x: cc.nn.max_pool(x, ksize=(2, 3), strides=(2, 3), padding="SAME"),
        (Input((2, 5, 7, 2), "distinct"),)),
    Row("max_pool-size1", lambda x: cc.nn.max_pool(x, 1, 1), (Input((1, 1, 1, 1)),)),
    Row("avg_pool", lambda x: cc.nn.avg_pool(x, 2, 2), (Input((2, 4, 6, 3)),)),
    Row("avg_pool-same", lambda x: cc.sin(cc.nn.avg_pool(x, ksize=3, strides=2, padding="SAME")),
        (Input((2, 5, 6, 2)),), second_order=True),
    Row("avg_pool-size1", lambda x: cc.nn.avg_pool(x, 1, 1), (Input((1, 1, 1, 1)),)),
    # A window as wide as the input: one output column.
    Row("max_pool-window-fills-columns", lambda x: cc.nn.max_pool(x, ksize=(2, 4), strides=2),
        (Input((2, 7, 4, 1), "distinct"),)),
    Row("avg_pool-window-fills-columns", lambda x: cc.nn.avg_pool(x, ksize=(2, 4), strides=2),
        (Input((2, 7, 4, 1)),)),
    Row("avg_pool-size0", lambda x: cc.nn.avg_pool(x, 2, 2), (Input((0, 4, 4, 2)),)),
    # derived math and creation ops (compositions: compared with numpy in test_derived_ops.py too)
    *_binary("squared_difference", cc.squared_difference, second=True),
    *_unary("reciprocal", cc.reciprocal, "positive"),
    *_unary("tan", lambda x: cc.tan(x * 0.35), second=True),       # |x * 0.35| stays below pi/2
    *_binary("floormod", lambda x, y: x % y, draw_y="positive"),
    Row("scatter_nd", lambda u: cc.scatter_nd([[1, 0], [0, 2], [1, 0]], u * u, [2, 3, 4]), (Input((3, 4)),),
        second_order=True),
    Row("scatter_nd-size0", lambda u: cc.scatter_nd(np.zeros((0, 1), "int32"), u, [2, 3]), (Input((0, 3)),)),
    Row("tensor_scatter_nd_add-sub", lambda t, u: cc.tensor_scatter_nd_sub(cc.tensor_scatter_nd_add(t, [[2], [0]], u),
                                                                           [[1]], u[:1] * u[:1]),
        (Input((3, 4)), Input((2, 4))), grad=(0, 1)),
    Row("reduce_mean-int32", lambda k, x: cc.cast(cc.reduce_mean(k - 7, axis=1, keepdims=True), x.dtype) * x,
        (Input((3, 4), "labels:15", "int32"), Input((3, 4))), grad=(1,)),
    Row("div_no_nan", lambda x, y: cc.div_no_nan(x, cc.nn.relu(y)), (Input((3, 4)), Input((4,))), grad=(0, 1)),
    *_unary("sinh", cc.sinh, second=True),
    *_unary("cosh", cc.cosh, second=True),
    *_unary("asinh", lambda x: cc.asinh(x * 3.0), second=True),
    *_unary("acosh", lambda x: cc.acosh(x + 1.0), "positive", second=True),   # from 1.5 to 3
    *_unary("atanh", lambda x: cc.atanh(cc.sin(x) * 0.8), second=True),
    Row("round-rint", lambda x: cc.round(x * 3.0) + cc.rint(x * 0.5) * 10.0, (Input((3, 4)),), grad=()),
    Row("round-size0", lambda x: cc.round(x), (Input((0, 3)),), grad=()),
    Row("is_finite-is_inf", lambda x: cc.where(cc.is_finite(cc.log(x)), x, x * 2.0)
        + cc.cast(cc.is_inf(1.0 / (x - x)), x.dtype), (Input((3, 4)),)),
    Row("truncatediv-truncatemod", lambda x, y: cc.truncatediv(x * 4.0, y) + cc.truncatemod(x * 4.0, y) * 10.0,
        (Input((3, 4)), Input((4,), "positive")), grad=()),
    Row("truncatediv-truncatemod-int32", lambda k, j, x: cc.cast(cc.truncatediv(k - 7, j - 2) * 100
                                                                + cc.truncatemod(k - 7, j - 2), x.dtype) + x,
        (Input((3, 4), "labels:15", "int32"), Input((4,), "labels:5", "int32"), Input((3, 4))), grad=(2,)),
    Row("reduce_variance-std", lambda x: cc.reduce_variance(x, axis=1) + cc.reduce_std(x, axis=1),
        (Input((3, 4)),), second_order=True),
    Row("reduce_variance-keepdims-size1", lambda x: cc.reduce_variance(x, axis=0, keepdims=True) * x,
        (Input((1, 5)),)),
    Row("reduce_euclidean_norm", lambda x: cc.reduce_euclidean_norm(x, axis=[0, 2]), (Input((2, 3, 4)),),
        second_order=True),
    Row("matrix_diag_part-trace", lambda x: cc.matrix_diag_part(x * x) * cc.trace(x)[..., None],
        (Input((2, 3, 4)),), second_order=True),
    Row("matrix_diag-set_diag", lambda x, d: cc.matrix_set_diag(x, d * d) + cc.matrix_diag(d)[:, :1, :] * 2.0,
        (Input((2, 4, 3)), Input((2, 3))), grad=(0, 1)),
    Row("matrix_diag-size0", lambda d: cc.matrix_diag(d), (Input((0, 3)),)),
    Row("roll", lambda x: cc.roll(x * x, [1, -2], [0, 2]), (Input((3, 2, 5)),), second_order=True),
    Row("floordiv-times-x", lambda x, y: (x // y) * x, (Input((3, 4)), Input((4,), "positive")), grad=(0,)),
    Row("floordiv-int32-by-zero", lambda k, j, x: cc.cast((k - 7) // (j - 2), x.dtype) * x,
        (Input((3, 4), "labels:15", "int32"), Input((4,), "labels:5", "int32"), Input((3, 4))), grad=(2,)),
    Row("floormod-int32", lambda k, j, x: cc.cast(cc.mod(k - 7, j - 2), x.dtype) + x,
        (Input((3, 4), "labels:15", "int32"), Input((4,), "labels:5", "int32"), Input((3, 4))), grad=(2,)),
    Row("pow-int-python-exponents", lambda k, x: cc.cast(k ** 3 - (k - 7) ** 2 + k ** 0 + cc.pow(k, 1), x.dtype) + x,
        (Input((3, 4), "labels:15", "int32"), Input((3, 4))), grad=(1,)),
    # int64 beyond float64's exact integers (2**53), divided by 0 and by negatives
    # (the remainders, exact small numbers, show a quotient one off; 2**55 * 7 is past float64's)
    Row("floordiv-floormod-truncatediv-int64", lambda k, j, x: cc.cast(
        ((k - 7) * 2**55 + k) // (j - 2) + cc.truncatediv((k - 7) * 2**55 - k, j - 2), "float64") * 2.0**-55
        + cc.cast(cc.mod((k - 7) * 2**55 + k, j - 2) + cc.truncatemod((k - 7) * 2**55 - k, j - 2) * 10, "float64")
        + cc.cast(x, "float64"),
        (Input((3, 4), "labels:15", "int64"), Input((4,), "labels:5", "int64"), Input((3, 4))), grad=(2,)),
    Row("reduce_any-all", lambda x: cc.cast(cc.reduce_any(x > 0.5, axis=1), x.dtype)
        + cc.cast(cc.reduce_all(x > -0.5, axis=1), x.dtype) * 2.0, (Input((3, 4)),), grad=()),
    Row("reduce_any-all-size0", lambda x: cc.cast(cc.reduce_any(x > 0.0, axis=0, keepdims=True), x.dtype)
        + cc.cast(cc.reduce_all(x > 0.0, axis=0, keepdims=True), x.dtype) * 2.0, (Input((0, 3)),), grad=()),
    Row("logical_xor", lambda x, y: cc.cast((x > 0.0) ^ (y > 0.0), x.dtype) * x, (Input((3, 4)), Input((4,)))),
    Row("zeros-ones-fill", lambda x, v: x * cc.ones((3, 4), x.dtype) + cc.zeros((1, 4), x.dtype)
        + cc.fill([3, 1], cc.reduce_sum(v)), (Input((3, 4)), Input((2,))), grad=(0, 1)),
    Row("eye-range", lambda x: x @ cc.eye(4, 5, dtype=x.dtype) * cc.range(5, dtype=x.dtype), (Input((3, 4)),)),
    Row("eye-batch-size0", lambda x: cc.matmul(x, cc.eye(0, 2, batch_shape=[2], dtype=x.dtype)), (Input((2, 3, 0)),)),
    Row("shape-size-rank", lambda x: x * cc.cast(cc.shape(x)[1] + cc.size(x) + cc.rank(x), x.dtype), (Input((3, 4)),)),
    Row("reshape-from-shape-sizes", lambda x: cc.reshape(x * x, [cc.shape(x)[0], -1, cc.shape(x)[-1]]),
        (Input((3, 2, 2)),), second_order=True),
    Row("shape-size0", lambda x: x + cc.cast(cc.shape(x, out_type="int64")[1], x.dtype), (Input((0, 3)),)),
    Row("matrix_band_part", lambda x: cc.matrix_band_part(x * x, 1, 0) + cc.matrix_band_part(x, -1, 2),
        (Input((2, 3, 4)),), second_order=True),
    Row("matrix_band_part-size0", lambda x: cc.matrix_band_part(x, -1, 0), (Input((2, 0, 3)),)),
    Row("sequence_mask", lambda k, x: cc.where(cc.sequence_mask(k, 4), x, 0.0),
        (Input((3,), "labels:5", "int32"), Input((3, 4))), grad=(1,)),
    Row("einsum-attention", lambda q, k: cc.einsum("bhqd,bhkd->bhqk", q, k), (Input((2, 3, 4, 5)), Input((2, 3, 6, 5))),
        grad=(0, 1), second_order=True),
    Row("einsum-two-depth-axes", lambda a, b: cc.einsum("abc,bcd->ad", a, b), (Input((2, 3, 4)), Input((3, 4, 5))),
        grad=(0, 1)),
    Row("einsum-ellipsis-broadcast", lambda a, b: cc.einsum("...ij,jk->...ik", a, b), (Input((2, 3, 4)), Input((4, 5))),
        grad=(0, 1)),
    Row("einsum-three-operands-implicit", lambda a, b, c: cc.einsum("ij,jk,kl", a, b, c),
        (Input((2, 3)), Input((3, 4)), Input((4, 1))), grad=(0, 1, 2)),
    Row("einsum-outer-and-sums", lambda a, b: cc.einsum("ab,cd->ca", a, b), (Input((2, 3)), Input((4, 5))), grad=(0, 1)),
    Row("einsum-size1-broadcast", lambda a, b: cc.einsum("ab,ab->b", a, b), (Input((2, 3)), Input((1, 3))), grad=(0, 1)),
    Row("einsum-size0-depth", lambda a, b: cc.einsum("ij,kj->ik", a, b), (Input((3, 0)), Input((4, 0))), grad=(0, 1)),
    Row("tensordot", lambda a, b: cc.tensordot(a, b, [[1, 2], [1, 0]]), (Input((2, 3, 4)), Input((4, 3, 5))),
        grad=(0, 1)),
    # more nn compositions (compared with their formulas in test_nn_ops.py)
    Row("relu6", lambda x: cc.nn.relu6(x * 4.0), (Input((3, 4), "distinct"),)),
    *_unary("selu", cc.nn.selu, second=True),
    *_unary("swish", cc.nn.swish, second=True),
    *_unary("softsign", cc.nn.softsign),
    *_unary("log_sigmoid", lambda x: cc.nn.log_sigmoid(x * 30.0), second=True),
    Row("softmax_cross_entropy_v2", lambda labels, logits: cc.nn.softmax_cross_entropy_with_logits_v2(
        labels=cc.nn.softmax(labels), logits=logits), (Input((3, 5)), Input((3, 5))), grad=(0, 1), second_order=True),
    Row("weighted_cross_entropy", lambda z, x: cc.nn.weighted_cross_entropy_with_logits(
        labels=cc.sigmoid(z), logits=x, pos_weight=2.5), (Input((3, 4)), Input((3, 4))), grad=(0, 1)),
    Row("xw_plus_b", lambda x, w, b: cc.nn.xw_plus_b(x, w, b), (Input((3, 4)), Input((4, 2)), Input((2,))),
        grad=(0, 1, 2)),
    Row("zero_fraction", lambda x: cc.cast(cc.nn.zero_fraction(cc.nn.relu(x)), x.dtype) * cc.reduce_sum(x),
        (Input((3, 4)),)),
    Row("embedding_lookup", lambda table, ids: cc.nn.embedding_lookup(table, ids),
        (Input((5, 3)), Input((2, 4), "labels:5", "int32"))),
    Row("embedding_lookup-mod-shards-max_norm", lambda a, b, c, ids: cc.nn.embedding_lookup(
        [a, b, c], ids, max_norm=1.0), (Input((3, 2)), Input((2, 2)), Input((2, 2)), Input((6,), "labels:7", "int64")),
        grad=(0, 1, 2)),
    Row("embedding_lookup-div-shards", lambda a, b, ids: cc.nn.embedding_lookup([a, b], ids, partition_strategy="div"),
        (Input((3, 2)), Input((2, 2)), Input((4,), "labels:5", "int32")), grad=(0, 1)),
    Row("conv1d-same-stride2", lambda x, f: cc.nn.conv1d(x, f, stride=2, padding="SAME"),
        (Input((2, 9, 3)), Input((3, 3, 4))), grad=(0, 1)),
    Row("conv1d-dilated", lambda x, f: cc.nn.conv1d(x, f, padding="VALID", dilations=2),
        (Input((1, 8, 2)), Input((2, 2, 3))), grad=(0, 1)),
    Row("conv2d_transpose-same-stride2", lambda v, w: cc.nn.conv2d_transpose(v, w, [2, 8, 6, 3], strides=2),
        (Input((2, 4, 3, 2)), Input((3, 3, 3, 2))), grad=(0, 1), second_order=True),
    Row("conv2d_transpose-valid", lambda v, w: cc.nn.conv2d_transpose(v, w, [None, 7, 6, 2], strides=(2, 1),
                                                                      padding="VALID"),
        (Input((1, 3, 4, 3)), Input((3, 3, 2, 3))), grad=(0, 1)),
    Row("depthwise_conv2d-same-stride2", lambda x, w: cc.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
        (Input((2, 5, 4, 3)), Input((3, 3, 3, 2))), grad=(0, 1), second_order=True),
    Row("depthwise_conv2d-rate2-multiplier1", lambda x, w: cc.nn.depthwise_conv2d(x, w, 1, "SAME", rate=2),
        (Input((1, 5, 5, 2)), Input((2, 3, 2, 1))), grad=(0, 1)),
    Row("depthwise_conv2d-valid-size1", lambda x, w: cc.nn.depthwise_conv2d(x, w, [1, 1, 2, 1], "VALID"),
        (Input((1, 1, 4, 1)), Input((1, 2, 1, 3))), grad=(0, 1)),
    Row("depthwise_conv2d-size0-batch", lambda x, w: cc.nn.depthwise_conv2d(x, w, 1, "SAME"),
        (Input((0, 3, 3, 2)), Input((2, 2, 2, 1))), grad=(0, 1)),
    Row("separable_conv2d", lambda x, d, p: cc.nn.separable_conv2d(x, d, p, [1, 1, 1, 1], "SAME"),
        (Input((1, 4, 4, 2)), Input((3, 3, 2, 2)), Input((1, 1, 4, 3))), grad=(0, 1, 2)),
    Row("space_to_depth", lambda x: cc.space_to_depth(x, 2) * 1.5, (Input((2, 4, 6, 3)),)),
    Row("depth_to_space", lambda x: cc.depth_to_space(x, 2) * 1.5, (Input((1, 2, 3, 8)),)),
    Row("crelu", lambda x: cc.nn.crelu(x, axis=0), (Input((2, 3)),)),
    Row("xlogy", lambda x, y: cc.math.xlogy(cc.nn.relu(x), y), (Input((3, 4)), Input((4,), "positive")),
        grad=(0, 1), second_order=True),
    Row("xdivy", lambda x, y: cc.math.xdivy(cc.nn.relu(x), y), (Input((3, 4)), Input((4,), "positive")), grad=(0, 1)),
    Row("reciprocal_no_nan", lambda x: cc.math.reciprocal_no_nan(cc.nn.relu(x)), (Input((3, 4)),)),
    Row("weighted_moments", lambda x, w: cc.add_n(list(cc.nn.weighted_moments(x, [1], w))),
        (Input((3, 4)), Input((1, 4), "positive")), grad=(0, 1)),
    Row("meshgrid", lambda x, y: cc.add_n([g * g for g in cc.meshgrid(x, y)]), (Input((3,)), Input((2,))),
        grad=(0, 1)),
    Row("diag_part-rank4", lambda x: cc.diag_part(x), (Input((2, 3, 2, 3)),)),
    Row("polyval", lambda x, c: cc.math.polyval([c, 2.0, c * c], x), (Input((3, 4)), Input(())), grad=(0, 1)),
    Row("pad-tensor-fill", lambda x, c: cc.pad(x, [[1, 0], [0, 2]], constant_values=c), (Input((2, 3)), Input(())),
        grad=(0, 1)),
    *_unary("atan", lambda x: cc.atan(x * 3.0), second=True),
    *_binary("atan2", cc.atan2, second=True),
    *_unary("asin", lambda x: cc.asin(cc.tanh(x) * 0.9)),
    *_unary("acos", lambda x: cc.acos(cc.tanh(x) * 0.9)),
    Row("zeros_like-size-known-when-compiled", lambda x: cc.ones_like(cc.placeholder_with_default(x, (None, 4))) * x,
        (Input((3, 4)),)),
    Row("unsorted_segment_mean", lambda d, k: cc.unsorted_segment_mean(d, k, 4),
        (Input((5, 3)), Input((5,), "labels:3", "int32"))),
    Row("unsorted_segment_sqrt_n-2d-ids", lambda d, k: cc.unsorted_segment_sqrt_n(d, k, 3),
        (Input((2, 3, 2)), Input((2, 3), "labels:3", "int64"))),
    Row("fused_batch_norm-training", lambda x, g, b: (lambda y, mean, variance: y + mean * variance)(
        *cc.nn.fused_batch_norm(x, g, b)), (Input((2, 3, 2, 4)), Input((4,)), Input((4,))), grad=(0, 1, 2)),
    Row("lrn", lambda x: cc.nn.lrn(x, depth_radius=2, bias=2.0, alpha=0.1, beta=0.75), (Input((2, 3, 2, 6)),),
        second_order=True),
    Row("log_poisson_loss-full", lambda t, x: cc.nn.log_poisson_loss(t, x, compute_full_loss=True),
        (Input((3, 4), "positive"), Input((3, 4))), grad=(1,)),
    Row("pool-avg-1d", lambda x: cc.nn.pool(x, [3], "AVG", "SAME", strides=[2]), (Input((2, 7, 3)),)),
    Row("convolution-1d-dilated", lambda x, f: cc.nn.convolution(x, f, "SAME", dilation_rate=[2]),
        (Input((2, 7, 3)), Input((3, 3, 2))), grad=(0, 1)),
    Row("atrous_conv2d", lambda x, f: cc.nn.atrous_conv2d(x, f, 2, "SAME"), (Input((1, 5, 5, 2)), Input((2, 2, 2, 3))),
        grad=(0, 1)),
    Row("image.total_variation", lambda x: cc.image.total_variation(x), (Input((2, 4, 5, 3)),)),
    Row("image.resize_bilinear", lambda x: cc.image.resize_bilinear(x, [7, 3]), (Input((2, 4, 5, 2)),)),
    Row("image.per_image_standardization", lambda x: cc.image.per_image_standardization(x), (Input((4, 3, 2)),)),
    # nn building blocks (compositions)
    Row("bias_add", lambda x, b: cc.nn.bias_add(x, b), (Input((2, 3, 4)), Input((4,))), grad=(0, 1)),
    Row("bias_add-NCHW", lambda x, b: cc.nn.bias_add(x, b, "NCHW"), (Input((2, 3, 2, 2)), Input((3,))), grad=(0, 1)),
    Row("l2_loss", lambda x: cc.nn.l2_loss(x), (Input((3, 4)),), second_order=True),
    Row("l2_normalize", lambda x: cc.nn.l2_normalize(x, axis=1), (Input((3, 4)),), second_order=True),
    Row("l2_normalize-all", lambda x: cc.nn.l2_normalize(x), (Input((2, 5)),)),
    Row("moments-mean", lambda x: cc.nn.moments(x, axes=[0])[0], (Input((5, 3)),)),
    Row("moments-variance", lambda x: cc.nn.moments(x, axes=[0, 2])[1], (Input((3, 2, 4)),), second_order=True),
    Row("moments-keepdims", lambda x: cc.nn.moments(x, axes=1, keepdims=True)[1], (Input((3, 4)),)),
    Row("batch_normalization", lambda x, s, o: cc.nn.batch_normalization(
        x, *cc.nn.moments(x, axes=[0]), offset=o, scale=s, variance_epsilon=1e-3),
        (Input((6, 4)), Input((4,), "positive"), Input((4,))), grad=(0, 1, 2)),
    Row("batch_normalization-second-order", lambda x: cc.sin(cc.nn.batch_normalization(
        x, *cc.nn.moments(x, axes=[0]), offset=0.5, scale=2.0, variance_epsilon=1e-3)),
        (Input((6, 4)),), second_order=True),
    Row("batch_normalization-no-affine", lambda x: cc.nn.batch_normalization(
        x, *cc.nn.moments(x, axes=[0, 1, 2]), offset=None, scale=None, variance_epsilon=1e-3),
        (Input((2, 3, 3, 2)),)),
    Row("in_top_k", lambda p, k: cc.cast(cc.nn.in_top_k(p, k, 2), p.dtype),
        (Input((6, 5), "distinct"), Input((6,), "labels:5", "int32")), grad=()),
    # losses
    Row("losses-absolute_difference", lambda y, p: cc.losses.absolute_difference(y, p),
        (Input((4, 3), "distinct"), Input((4, 3))), grad=(1,)),
    Row("losses-huber", lambda y, p: cc.losses.huber_loss(y, p * 2.0, delta=1.0),
        (Input((4, 3), "distinct"), Input((4, 3))), grad=(0, 1)),
    Row("losses-log_loss", lambda y, p: cc.losses.log_loss(cc.sigmoid(y), cc.sigmoid(p)),
        (Input((4, 3)), Input((4, 3))), grad=(0, 1), second_order=True),
    Row("losses-sigmoid_cross_entropy", lambda y, p: cc.losses.sigmoid_cross_entropy(cc.sigmoid(y), p),
        (Input((4, 3)), Input((4, 3))), grad=(0, 1)),
    Row("losses-softmax_cross_entropy", lambda y, p: cc.losses.softmax_cross_entropy(
        cc.nn.softmax(y), p, label_smoothing=0.1), (Input((4, 3)), Input((4, 3))), grad=(1,)),
    Row("losses-sparse_softmax_cross_entropy", lambda k, p, w: cc.losses.sparse_softmax_cross_entropy(k, p, weights=w),
        (Input((4,), "labels:3", "int32"), Input((4, 3)), Input((4,), "positive")), grad=(1, 2)),
    Row("losses-hinge", lambda y, p: cc.losses.hinge_loss(cc.cast(y > 0.0, p.dtype), p),
        (Input((4, 3)), Input((4, 3), "distinct")), grad=(1,)),
    Row("losses-cosine_distance", lambda y, p: cc.losses.cosine_distance(
        cc.nn.l2_normalize(y, axis=1), cc.nn.l2_normalize(p, axis=1), axis=1), (Input((4, 3)), Input((4, 3))),
        grad=(0, 1)),
    # RandomUniform, RandomStandardNormal, TruncatedNormal: run k on the cpu equals run k of the
    # reference, which draws the same Philox numbers with the numpy twin of the generated code;
    # the numbers have no gradient
    *_random("random_uniform", lambda x: cc.random_uniform(x.shape, dtype=x.dtype, seed=1)),
    Row("random_uniform-range-times-x", lambda x: x * cc.random_uniform(x.shape, -3.0, 5.5, x.dtype, seed=2),
        (Input((3, 4)),), grad=(), repeatable=False),
    Row("random_uniform-tensor-bounds", lambda lo: cc.random_uniform((5, 2), lo, lo + 2.0, lo.dtype, seed=3),
        (Input(()),), grad=(), repeatable=False),
    *_random("random_normal", lambda x: cc.random_normal(x.shape, 0.5, 3.0, x.dtype, seed=4)),
    *_random("truncated_normal", lambda x: cc.truncated_normal(x.shape, -1.0, 2.0, x.dtype, seed=5)),
    Row("dropout", lambda x: cc.nn.dropout(x, rate=0.3, seed=6), (Input((7, 131)),), grad=(), repeatable=False),
    # control flow: Cond, While, RegionOutput and RegionParam (tests/compiler/test_control_flow.py
    # checks the semantics: assignments, structures, errors)
    Row("cond-true-branch", lambda x: cc.cond(cc.reduce_sum(x * x) >= 0.0, lambda: cc.sin(x) * x, lambda: -x),
        (Input((3, 4)),), second_order=True),
    Row("cond-false-branch", lambda x: cc.cond(cc.reduce_sum(x * x) < 0.0, lambda: cc.sin(x), lambda: cc.exp(x) * x),
        (Input((3, 4)),), second_order=True),
    Row("cond-data-dependent", lambda x, p: cc.cond(cc.reduce_sum(p) > 0.0, lambda: x * p, lambda: x / (1.0 + p * p)),
        (Input((5,)), Input((5,))), grad=(0, 1)),
    Row("cond-broadcast-captures", lambda x, y: cc.cond(cc.reduce_max(y) > -100.0, lambda: x * y, lambda: x + y),
        (Input((3, 1)), Input((1, 4))), grad=(0, 1)),
    Row("cond-tuple-and-size-1", lambda x: sum(cc.cond(cc.reduce_sum(x) < 1e9, lambda: (x * 2.0, cc.tanh(x)),
                                                      lambda: (x, x))), (Input((1, 3)),)),
    Row("cond-size-0", lambda x: cc.cond(cc.constant(True), lambda: x * 3.0, lambda: x), (Input((0, 3)),)),
    Row("cumprod", lambda x: cc.cumprod(x, axis=1) + cc.cumprod(x, axis=0, exclusive=True, reverse=True),
        (Input((3, 4)),), second_order=True),
    Row("cumprod-size0", lambda x: cc.cumprod(x, axis=0), (Input((0, 3)),)),
    Row("while-short", lambda x: cc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, cc.sin(v) * x + 1.0),
                                               (0, x), maximum_iterations=5)[1], (Input((3,)),), second_order=True),
    Row("while-data-dependent-trips", lambda x: cc.while_loop(
        lambda v: cc.reduce_sum(v) < 20.0, lambda v: v * 1.5 + 0.1, x, maximum_iterations=40),
        (Input((4,), "positive"),)),
    Row("while-unbounded-grown-stacks", lambda x, w: cc.while_loop(
        lambda v: cc.reduce_sum(v * v) < 30.0, lambda v: cc.tanh(v @ w) * 1.5 + v * 1.2, x),
        (Input((2, 3), "positive"), Input((3, 3))), grad=(0, 1)),
    Row("while-matmul-broadcast", lambda h, w, b: cc.while_loop(
        lambda i, h: i < 3, lambda i, h: (i + 1, cc.tanh(h @ w + b)), (0, h), maximum_iterations=3)[1],
        (Input((2, 3)), Input((3, 3)), Input((1, 3))), grad=(0, 1, 2)),
    Row("while-size-0", lambda x: cc.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * v),
                                                (0, x), maximum_iterations=2)[1], (Input((2, 0)),)),
    Row("fori_loop", lambda x: cc.fori_loop(0, 4, lambda i, acc: acc * x + cc.cast(i, x.dtype), x),
        (Input((2, 3)),)),
    Row("scan-initializer", lambda x: cc.scan(lambda a, e: a * cc.cos(e) + e, x, initializer=cc.zeros_like(x[0])),
        (Input((5, 2)),)),
    Row("scan-reverse-no-initializer", lambda x: cc.scan(lambda a, e: a * e + 1.0, x, reverse=True),
        (Input((4, 1, 3)),)),
    Row("scan-matmul-cell", lambda x, w: cc.scan(lambda h, e: cc.tanh(h @ w + e), x, initializer=x[0] * 0.0),
        (Input((3, 2, 4)), Input((4, 4))), grad=(0, 1)),
    Row("scan-size-0-features", lambda x: cc.scan(lambda a, e: a + e, x), (Input((3, 0)),)),
    Row("scan-inside-cond", lambda x: cc.cond(cc.reduce_sum(x) > -1e9,
                                              lambda: cc.scan(lambda a, e: a * e, x), lambda: x),
        (Input((3, 2)),)),
    Row("while-inside-scan", lambda x: cc.scan(lambda a, e: cc.while_loop(
        lambda i, v: i < 2, lambda i, v: (i + 1, v * e + a), (0, a), maximum_iterations=2)[1], x),
        (Input((3, 2)),)),
]
