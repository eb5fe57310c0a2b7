"""TF1's older argument names (``keep_dims``, ``reduction_indices``, ``dim``, ``dimension``,
``squeeze_dims``) are accepted beside the current ones and give the same graph values; giving both
names is an error at the user's line, as in TF1."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as cc
from runtime import Session

# name: (the call with today's names, the same call with TF1's older names)
SAME_CALLS = {
    "reduce_sum": (lambda x: cc.reduce_sum(x, axis=1, keepdims=True),
                   lambda x: cc.reduce_sum(x, reduction_indices=1, keep_dims=True)),
    "reduce_mean": (lambda x: cc.reduce_mean(x, axis=[0, 2]), lambda x: cc.reduce_mean(x, reduction_indices=[0, 2])),
    "reduce_max": (lambda x: cc.reduce_max(x, axis=0, keepdims=True), lambda x: cc.reduce_max(x, 0, keep_dims=True)),
    "reduce_min": (lambda x: cc.reduce_min(x, axis=-1), lambda x: cc.reduce_min(x, reduction_indices=-1)),
    "reduce_prod": (lambda x: cc.reduce_prod(x, axis=2), lambda x: cc.reduce_prod(x, reduction_indices=2)),
    "reduce_logsumexp": (lambda x: cc.reduce_logsumexp(x, axis=1, keepdims=True),
                         lambda x: cc.reduce_logsumexp(x, reduction_indices=[1], keep_dims=True)),
    "argmax": (lambda x: cc.argmax(x, axis=1), lambda x: cc.argmax(x, dimension=1)),
    "argmin": (lambda x: cc.argmin(x, axis=2), lambda x: cc.argmin(x, dimension=2)),
    "softmax": (lambda x: cc.nn.softmax(x, axis=1), lambda x: cc.nn.softmax(x, dim=1)),
    "log_softmax": (lambda x: cc.nn.log_softmax(x, axis=0), lambda x: cc.nn.log_softmax(x, dim=0)),
    "softmax_cross_entropy": (
        lambda x: cc.nn.softmax_cross_entropy_with_logits(labels=cc.nn.softmax(x, axis=1), logits=x * 2.0, axis=1),
        lambda x: cc.nn.softmax_cross_entropy_with_logits(labels=cc.nn.softmax(x, dim=1), logits=x * 2.0, dim=1)),
    "l2_normalize": (lambda x: cc.nn.l2_normalize(x, axis=2), lambda x: cc.nn.l2_normalize(x, dim=2)),
    "moments": (lambda x: cc.nn.moments(x, axes=[0, 1], keepdims=True),
                lambda x: cc.nn.moments(x, [0, 1], shift=None, keep_dims=True)),
    "expand_dims": (lambda x: cc.expand_dims(x, axis=1), lambda x: cc.expand_dims(x, dim=1)),
    "squeeze": (lambda x: cc.squeeze(x[:, :1], axis=[1]), lambda x: cc.squeeze(x[:, :1], squeeze_dims=[1])),
}


@pytest.mark.parametrize("name", sorted(SAME_CALLS))
def test_tf1_names_give_the_same_values(name: str) -> None:
    current, older = SAME_CALLS[name]
    x = cc.placeholder("float64", (3, 4, 5))
    feeds = {x: np.random.default_rng(7).normal(size=(3, 4, 5))}
    with Session() as sess:
        got, expected = sess.run([older(x), current(x)], feeds)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("call, pattern", [
    (lambda x: cc.reduce_sum(x, axis=0, reduction_indices=0), "reduce_sum: give axis or its older name "
                                                               "reduction_indices, not both"),
    (lambda x: cc.reduce_mean(x, keepdims=False, keep_dims=True), "reduce_mean: give keepdims or its older name keep_dims"),
    (lambda x: cc.nn.softmax(x, axis=0, dim=1), "softmax: give axis or its older name dim"),
    (lambda x: cc.argmax(x, 0, dimension=1), "argmax: give axis or its older name dimension"),
    (lambda x: cc.expand_dims(x), "expand_dims: axis is required"),
])
def test_both_names_at_once_is_an_error_at_the_users_line(call, pattern: str) -> None:
    x = cc.placeholder("float32", (2, 3))
    with pytest.raises(ValueError, match=pattern) as raised:
        call(x)
    assert f"(at {__file__}:" in str(raised.value)
