"""The law of the random rotations of the task families: Haar on O(d), in NumPy and in Torch.

A QR factorisation of a Gaussian matrix gives an orthogonal ``Q`` whose law is Haar only after
the sign fix (the columns scaled by the signs of diag(R)); without it LAPACK's Householder QR
makes diag(R) of one sign, so every column of ``Q`` points into a fixed half-space: still
orthogonal, not Haar. Under Haar, ``E[Q] = 0``, each diagonal entry is positive with
probability 1/2, and the first column ``Q e1`` is uniform on the sphere, so
``Q[0, 0]**2 ~ Beta(1/2, (d - 1)/2)``.

Tolerances: ``N`` seeded draws; a mean of ``N`` entries of variance ``1/d`` has standard
deviation ``1/sqrt(d N)`` and a share of positive entries ``1/(2 sqrt(N))``; the bounds are 6 of
those (a seeded draw outside them is a 1e-9 event under Haar, a broken sign fix moves the mean
of ``Q[0, 0]`` by about ``0.4`` and the share by ``0.5``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from skflow.tasks._base import haar_rotations

N_DRAWS = 4000


def _numpy_draws(d: int, seed: int) -> np.ndarray:
    return haar_rotations(np.random.default_rng(seed), (N_DRAWS,), d)


def _torch_draws(d: int, seed: int) -> np.ndarray:
    torch = pytest.importorskip("torch")
    from skflow.tasks._device import t_haar_rotations, torch_generator

    gen = torch_generator(seed, "cpu")
    return t_haar_rotations(gen, (N_DRAWS,), d, "cpu", torch.float64).numpy()


DRAWS = {"numpy": _numpy_draws, "torch": _torch_draws}


@pytest.mark.parametrize("backend", sorted(DRAWS))
@pytest.mark.parametrize("d", [1, 2, 5])
def test_rotations_are_orthogonal(backend, d):
    Q = DRAWS[backend](d, seed=0)
    assert Q.shape == (N_DRAWS, d, d)
    gram = np.swapaxes(Q, -1, -2) @ Q
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(d), gram.shape), atol=1e-12)


@pytest.mark.parametrize("backend", sorted(DRAWS))
@pytest.mark.parametrize("d", [1, 2, 5])
def test_rotations_have_mean_zero_and_unbiased_signs(backend, d):
    Q = DRAWS[backend](d, seed=1)
    sd_mean = 1.0 / np.sqrt(d * N_DRAWS)
    assert np.abs(Q.mean(axis=0)).max() < 6 * sd_mean  # E[Q] = 0 under Haar
    diag = np.diagonal(Q, axis1=-2, axis2=-1)
    share = (diag > 0).mean(axis=0)  # each diagonal entry positive with probability 1/2
    assert np.abs(share - 0.5).max() < 6 * 0.5 / np.sqrt(N_DRAWS)
    # second moments: E[Q_ij^2] = 1/d (Q e_j is a unit vector with exchangeable entries)
    np.testing.assert_allclose((Q**2).mean(axis=0), 1.0 / d, atol=6 * np.sqrt(2 / d**2 / N_DRAWS))


@pytest.mark.parametrize("backend", sorted(DRAWS))
@pytest.mark.parametrize("d", [2, 5])
def test_first_column_is_uniform_on_the_sphere(backend, d):
    Q = DRAWS[backend](d, seed=2)
    # Q[0, 0]^2 ~ Beta(1/2, (d - 1)/2), and its sign is a fair coin independent of it
    ks = stats.kstest(Q[:, 0, 0] ** 2, stats.beta(0.5, (d - 1) / 2).cdf)
    assert ks.pvalue > 1e-6
    signed = stats.kstest(Q[:, 0, 0], _signed_coordinate_cdf(d))
    assert signed.pvalue > 1e-6


def _signed_coordinate_cdf(d: int):
    """CDF of one coordinate ``u`` of a uniform point of the unit sphere in R^d: symmetric,
    with ``u^2 ~ Beta(1/2, (d - 1)/2)``."""
    beta = stats.beta(0.5, (d - 1) / 2)

    def cdf(u):
        u = np.asarray(u, dtype=np.float64)
        half = 0.5 * beta.cdf(u**2)
        return np.where(u >= 0, 0.5 + half, 0.5 - half)

    return cdf


def test_numpy_and_torch_draw_the_same_law():
    """The device twin draws the law of the NumPy draws (different streams, same law)."""
    d = 3
    a, b = _numpy_draws(d, seed=3), _torch_draws(d, seed=3)
    for i, j in [(0, 0), (1, 2), (2, 1)]:
        assert stats.ks_2samp(a[:, i, j], b[:, i, j]).pvalue > 1e-6
