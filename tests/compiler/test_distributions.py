"""cc.distributions against the densities, moments and KL divergences written out in numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest

import compiler as cc
from runtime import Session


def test_normal_samples_densities_moments_and_kl_with_a_batch_fed_at_any_size() -> None:
    loc = cc.placeholder("float64", (None, 2), name="loc")
    normal = cc.distributions.Normal(loc, cc.exp(loc * 0.0 + 0.5))
    draws = normal.sample(seed=1)
    many = normal.sample(4000, seed=2)
    (slope,) = cc.gradients(cc.reduce_sum(draws), [loc])                   # reparameterized
    kl = cc.distributions.kl_divergence(normal, cc.distributions.Normal(np.float64(0.0), np.float64(1.0)))
    with Session() as sess:
        got = sess.run(dict(draws=draws, density=normal.log_prob(draws), slope=slope, kl=kl, many=many,
                            cdf=normal.cdf(loc + 1.0), entropy=normal.entropy(), stddev=normal.stddev()),
                       {loc: np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])})
    scale = math.exp(0.5)
    centre = np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    z = (got["draws"] - centre) / scale
    np.testing.assert_allclose(got["density"], -0.5 * z ** 2 - math.log(scale) - 0.5 * math.log(2 * math.pi))
    np.testing.assert_array_equal(got["slope"], np.ones((3, 2)))
    np.testing.assert_allclose(got["kl"], 0.5 * (scale ** 2 + centre ** 2 - 1.0 - math.log(scale ** 2)))
    assert got["many"].shape == (4000, 3, 2)
    np.testing.assert_allclose(got["many"].mean(0), centre, atol=0.1)
    np.testing.assert_allclose(got["many"].std(0), scale, rtol=0.05)
    np.testing.assert_allclose(got["cdf"], 0.5 * (1 + np.vectorize(math.erf)(1 / (scale * math.sqrt(2)))))
    np.testing.assert_allclose(got["entropy"], 0.5 * math.log(2 * math.pi * math.e) + math.log(scale))
    np.testing.assert_allclose(got["stddev"], scale)


def test_bernoulli_categorical_and_uniform_as_tf1() -> None:
    bernoulli = cc.distributions.Bernoulli(logits=cc.constant([0.0, 2.0]))
    categorical = cc.distributions.Categorical(logits=cc.constant([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]))
    other = cc.distributions.Categorical(probs=cc.constant([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))
    uniform = cc.distributions.Uniform(1.0, 3.0)
    with Session() as sess:
        got = sess.run(dict(flips=bernoulli.sample(4000, seed=2), flip_density=bernoulli.log_prob([1, 0]),
                            flip_entropy=bernoulli.entropy(), classes=categorical.sample(4000, seed=3),
                            class_density=categorical.log_prob([2, 0]), class_entropy=categorical.entropy(),
                            kl=cc.distributions.kl_divergence(categorical, other),
                            spread=uniform.sample(1000, seed=4), spread_density=uniform.log_prob([0.5, 2.0])))
    p = 1 / (1 + math.exp(-2.0))
    np.testing.assert_allclose(got["flips"].mean(0), [0.5, p], atol=0.03)
    np.testing.assert_allclose(got["flip_density"], [math.log(0.5), math.log(1 - p)], rtol=1e-6)
    np.testing.assert_allclose(got["flip_entropy"], [math.log(2.0), -(p * math.log(p) + (1 - p) * math.log(1 - p))],
                               rtol=1e-6)
    softmax = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    assert got["classes"].shape == (4000, 2) and got["classes"].dtype == np.int32
    np.testing.assert_allclose([np.mean(got["classes"][:, 0] == k) for k in range(3)], softmax, atol=0.03)
    np.testing.assert_allclose(got["class_density"], [math.log(softmax[2]), math.log(1 / 3)], rtol=1e-6)
    np.testing.assert_allclose(got["class_entropy"], [-(softmax * np.log(softmax)).sum(), math.log(3.0)], rtol=1e-6)
    probabilities = np.stack([softmax, np.full(3, 1 / 3)])
    targets = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    np.testing.assert_allclose(got["kl"], (probabilities * np.log(probabilities / targets)).sum(1), rtol=1e-5)
    assert 1.0 <= got["spread"].min() and got["spread"].max() < 3.0
    np.testing.assert_allclose(got["spread_density"], [-np.inf, -math.log(2.0)])
    with pytest.raises(ValueError, match="give logits or probs"):
        cc.distributions.Bernoulli()
