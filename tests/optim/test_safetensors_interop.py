"""Checkpoints move between graphgrad and PyTorch as safetensors files: a graphgrad checkpoint loads
into a ``torch.nn.Linear``'s ``state_dict``, and a ``state_dict`` saved by ``safetensors.torch``
restores into graphgrad variables of the same names and shapes."""
from __future__ import annotations

import re

import numpy as np
import pytest
import safetensors.torch
import torch

import compiler as cc
import optim
from optim.saver import CheckpointError
from runtime import Session

IN_FEATURES, OUT_FEATURES = 5, 3


def _linear_layer() -> tuple[cc.Tensor, cc.Variable, cc.Variable, cc.Tensor]:
    """graphgrad's ``torch.nn.Linear``: weight (out, in) and bias (out,), y = x @ weight.T + bias.
    Returns (x, weight, bias, y)."""
    x = cc.placeholder("float32", shape=(None, IN_FEATURES), name="x")
    weight = cc.Variable(np.zeros((OUT_FEATURES, IN_FEATURES), "float32"), name="weight")
    bias = cc.Variable(np.zeros(OUT_FEATURES, "float32"), name="bias")
    return x, weight, bias, cc.matmul(x, weight, transpose_b=True) + bias


def _inputs() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(8, IN_FEATURES)).astype("float32")


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_graphgrad_checkpoint_loads_into_a_torch_state_dict(graph, tmp_path, target) -> None:
    x, weight, bias, y = _linear_layer()
    targets = np.random.default_rng(4).normal(size=(8, OUT_FEATURES)).astype("float32")
    loss = cc.reduce_mean(cc.square(y - targets))
    train = optim.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(5)
    with Session(graph, target=target) as sess:
        sess.load_variable(weight, rng.normal(size=(OUT_FEATURES, IN_FEATURES)).astype("float32"))
        for _ in range(3):
            sess.run(train, {x: _inputs()})
        path = optim.Saver([weight, bias]).save(sess, str(tmp_path / "linear"), global_step=3)
        trained_weight, trained_bias, outputs = sess.run([weight, bias, y], {x: _inputs()})

    module = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
    module.load_state_dict(safetensors.torch.load_file(path))
    assert torch.equal(module.weight.detach(), torch.from_numpy(trained_weight))
    assert torch.equal(module.bias.detach(), torch.from_numpy(trained_bias))
    with torch.no_grad():
        torch_outputs = module(torch.from_numpy(_inputs())).numpy()
    np.testing.assert_allclose(torch_outputs, outputs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_torch_state_dict_restores_into_graphgrad(graph, tmp_path, target) -> None:
    torch.manual_seed(0)
    module = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
    path = str(tmp_path / "linear.safetensors")
    safetensors.torch.save_file(module.state_dict(), path)   # no graphgrad metadata: matched by name
    with torch.no_grad():
        torch_outputs = module(torch.from_numpy(_inputs())).numpy()

    x, weight, bias, y = _linear_layer()
    with Session(graph, target=target) as sess:
        optim.Saver([weight, bias]).restore(sess, path)
        assert np.array_equal(sess.run(weight), module.weight.detach().numpy())
        assert np.array_equal(sess.run(bias), module.bias.detach().numpy())
        np.testing.assert_allclose(sess.run(y, {x: _inputs()}), torch_outputs, rtol=1e-5, atol=1e-6)
    loaded = optim.load_checkpoint(path)
    assert sorted(loaded) == ["bias", "weight"] and loaded["weight"].dtype == np.float32


def test_torch_tensors_of_other_dtypes_are_refused_by_name(graph, tmp_path) -> None:
    x, weight, bias, y = _linear_layer()
    half = str(tmp_path / "half")
    safetensors.torch.save_file({"weight": torch.zeros(OUT_FEATURES, IN_FEATURES, dtype=torch.float16),
                                 "bias": torch.zeros(OUT_FEATURES)}, half)
    with Session(graph) as sess:
        with pytest.raises(cc.DTypeError, match="'weight' is float32 but checkpoint "
                                                + re.escape(repr(half)) + " holds it as float16"):
            optim.Saver([weight, bias]).restore(sess, half)
    brain = str(tmp_path / "bfloat16")
    safetensors.torch.save_file({"weight": torch.zeros(2, dtype=torch.bfloat16)}, brain)
    with pytest.raises(CheckpointError, match=re.escape(repr(brain)) + " holds tensor 'weight' as BF16"):
        optim.load_checkpoint(brain)


def test_a_tensor_numpy_cannot_hold_does_not_block_restoring_the_others(tmp_path) -> None:
    path = tmp_path / "torch_model"   # a float32 weight beside a bfloat16 buffer, as torch models have
    safetensors.torch.save_file({"weight": torch.arange(6.0).reshape(2, 3),
                                 "rotary_cache": torch.zeros(4, dtype=torch.bfloat16)}, str(path))
    graph = cc.Graph()
    with graph.as_default():
        weight = cc.Variable(np.zeros((2, 3), "float32"), name="weight")
        cache = cc.Variable(np.zeros(4, "float32"), name="rotary_cache")
    with Session(graph) as sess:
        optim.Saver([weight]).restore(sess, str(path))
        np.testing.assert_array_equal(sess.run(weight), np.arange(6, dtype="float32").reshape(2, 3))
        with pytest.raises(CheckpointError, match="tensor 'rotary_cache' as BF16 \\(4,\\)"):
            optim.Saver([cache]).restore(sess, str(path))
    with pytest.raises(CheckpointError, match="tensor 'rotary_cache' as BF16"):
        optim.load_checkpoint(str(path))
