"""The synthetic meta-distribution the shipped priors are trained on.

A prior must serve data it has never seen, of any dimension up to its width, from a handful
of rows. Its training tasks therefore vary everything a user's classes may vary: the number of
features, the number of clusters, the shape of each cluster (anisotropic with a decaying
spectrum, as classes after a PCA are; heavy-tailed; skewed; thin curves such as rings, moons
and spirals in a random plane; shells) and the scale. Two sources live here:

- :class:`EllipticalMixtureTasks`: mixtures of affine images of a radial law (Gaussian,
  Student-t or log-normal coordinates), each component with its own random rotation and a
  spectrum ``exp(-decay * j / d)``;
- :class:`PriorTasks`: every batch draws its number of features, then every task draws a
  family (the elliptical mixtures, :class:`~skflow.tasks.RingTasks`,
  :class:`~skflow.tasks.MoonsTasks`, :class:`~skflow.tasks.SpiralTasks`,
  :class:`~skflow.tasks.SphericalShellTasks`) and a random scale. It declares
  ``variable_n_features = True``: :class:`~skflow.LearnedFlowSampler` then trains one network
  on tasks of 1 to ``max_features`` features (the network zero-pads narrower tasks, see
  :meth:`skflow.nn.transformer.CrossAttentionVelocity.restrict_features`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skflow.exceptions import InvalidParameterError
from skflow.tasks import MixedTasks, MoonsTasks, RingTasks, SphericalShellTasks, SpiralTasks

__all__ = ["FAMILIES", "RADIAL_LAWS", "EllipticalMixtureTasks", "PriorTasks"]

#: Radial laws of :class:`EllipticalMixtureTasks`.
RADIAL_LAWS = ("gaussian", "student", "lognormal")
#: Families of :class:`PriorTasks` (the elliptical mixtures split by radial law).
FAMILIES = ("gaussian", "student", "lognormal", "rings", "moons", "spirals", "shells")
_PLANAR = {"rings": RingTasks, "moons": MoonsTasks, "spirals": SpiralTasks}


def _rotations(rng: np.random.Generator, shape: tuple, d: int) -> np.ndarray:
    """Haar-random orthogonal matrices of shape ``shape + (d, d)`` (QR with the sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal(shape + (d, d)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def _radial(rng: np.random.Generator, law: str, shape: tuple) -> np.ndarray:
    """Standardized draws of one radial law (mean 0, unit variance per coordinate)."""
    z = rng.standard_normal(shape)
    if law == "student":  # degrees of freedom 2.5..10 per task: finite variance, heavy tails
        df = rng.uniform(2.5, 10.0, size=shape[:1] + (1,) * (len(shape) - 1))
        chi = rng.chisquare(np.broadcast_to(df, shape[:-1] + (1,)))
        return z * np.sqrt((df - 2.0) / chi)
    if law == "lognormal":  # skewed coordinates: exp(s z), standardized
        s = rng.uniform(0.3, 1.0, size=shape[:1] + (1,) * (len(shape) - 1))
        mean, var = np.exp(s**2 / 2), (np.exp(s**2) - 1) * np.exp(s**2)
        return (np.exp(s * z) - mean) / np.sqrt(var)
    return z


class EllipticalMixtureTasks:
    """Mixtures of rotated, anisotropic clusters with a Gaussian, Student-t or skewed law.

    For every task: ``K`` components (uniform on the integers in ``n_components``; Dirichlet(1)
    weights), means ``N(0, separation^2 I)``; component ``k`` is ``mean_k + R_k diag(l_k) z``
    with ``R_k`` a Haar rotation, ``l_kj = exp(-decay_k j / d)`` for ``j = 0..d-1`` (``decay``
    uniform in ``decay``: 0 is isotropic, 4 leaves the last direction at 2 % of the first) and
    ``z`` of standardized coordinates of the task's radial ``law``.

    Parameters
    ----------
    n_features : int >= 1
        Dimension ``d``.
    law : {"gaussian", "student", "lognormal"}, default="gaussian"
        Radial law of the coordinates (Student-t with 2.5-10 degrees of freedom per task;
        log-normal ``exp(s z)`` with ``s`` in 0.3-1).
    n_components : (int, int), default=(1, 4)
        Inclusive range of the number of components.
    separation : float, default=2.0
        Standard deviation of the component means.
    decay : (float, float), default=(0.0, 4.0)
        Range of the spectrum's decay rate.

    Examples
    --------
    >>> from skflow.priors.meta_distribution import EllipticalMixtureTasks
    >>> S, Q = EllipticalMixtureTasks(3, law="student").sample_tasks(4, 10, 5, random_state=0)
    >>> S.shape, Q.shape
    ((4, 10, 3), (4, 5, 3))
    """

    def __init__(
        self,
        n_features: int,
        *,
        law: str = "gaussian",
        n_components: tuple[int, int] = (1, 4),
        separation: float = 2.0,
        decay: tuple[float, float] = (0.0, 4.0),
    ):
        self.n_features = n_features
        self.law = law
        self.n_components = n_components
        self.separation = separation
        self.decay = decay

    def sample_tasks(
        self, n_tasks: int, n_support: int, n_query: int, random_state: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n_tasks`` tasks: supports ``(B, m, d)`` and queries ``(B, q, d)``."""
        if self.law not in RADIAL_LAWS:
            raise InvalidParameterError(f"law must be one of {RADIAL_LAWS}, got {self.law!r}.")
        rng = np.random.default_rng(random_state)
        B, n, d = int(n_tasks), int(n_support) + int(n_query), int(self.n_features)
        k_lo, k_hi = self.n_components
        K = rng.integers(k_lo, k_hi + 1, size=B)
        w = rng.dirichlet(np.ones(k_hi), size=B) * (np.arange(k_hi) < K[:, None])
        w /= w.sum(axis=1, keepdims=True)
        comp = (rng.random((B, n, 1)) > np.cumsum(w, axis=1)[:, None, :]).sum(-1)
        comp = np.minimum(comp, K[:, None] - 1)  # (B, n)
        means = self.separation * rng.standard_normal((B, k_hi, d))
        decay = rng.uniform(*self.decay, size=(B, k_hi, 1))
        spectrum = np.exp(-decay * np.arange(d) / d)  # (B, K, d)
        A = _rotations(rng, (B, k_hi), d) * spectrum[..., None, :]  # R diag(l)
        z = _radial(rng, self.law, (B, n, d))
        pick = np.arange(B)[:, None], comp
        X = means[pick] + np.einsum("bnij,bnj->bni", A[pick], z)
        return np.ascontiguousarray(X[:, :n_support]), np.ascontiguousarray(X[:, n_support:])


class PriorTasks:
    """The prior's meta-distribution: tasks of a random dimension, family and scale.

    Every call of :meth:`sample_tasks` (one training batch) draws its number of features
    uniformly on ``1..max_features`` (``2..max_features`` when only planar families and shells
    are weighted); every task then draws a family with probability
    ``weights[family]`` (planar families and shells need 2 features and are left out at
    ``d = 1``) and is multiplied by a scale log-uniform on ``scale``.

    Parameters
    ----------
    max_features : int, default=16
        Largest number of features of a task.
    weights : dict of str to float or None, default=None
        Family probabilities (normalized) over :data:`FAMILIES`; None: every family equally.
    scale : (float, float), default=(0.1, 10.0)
        Range of the per-task scale.

    Attributes
    ----------
    n_features : int
        ``max_features``: the width of the network trained on these tasks.
    variable_n_features : bool
        True: batches have fewer features than ``n_features`` in general.

    Examples
    --------
    >>> from skflow.priors import PriorTasks
    >>> S, Q = PriorTasks(max_features=5).sample_tasks(3, 8, 4, random_state=0)
    >>> S.shape[0], S.shape[1], Q.shape[1], S.shape[2] <= 5
    (3, 8, 4, True)
    """

    variable_n_features = True

    def __init__(
        self,
        max_features: int = 16,
        *,
        weights: dict[str, float] | None = None,
        scale: tuple[float, float] = (0.1, 10.0),
    ):
        self.max_features = max_features
        self.weights = weights
        self.scale = scale

    @property
    def n_features(self) -> int:
        return int(self.max_features)

    def __repr__(self) -> str:
        return (
            f"PriorTasks(max_features={self.max_features!r}, weights={self.weights!r}, "
            f"scale={self.scale!r})"
        )

    def _family_weights(self) -> dict[str, float]:
        weights = {f: 1.0 for f in FAMILIES} if self.weights is None else dict(self.weights)
        unknown = set(weights) - set(FAMILIES)
        if unknown or not any(v > 0 for v in weights.values()):
            raise InvalidParameterError(
                f"weights must map some of {FAMILIES} to non-negative numbers, not all 0; "
                f"got {self.weights!r}."
            )
        return {f: float(v) for f, v in weights.items() if v > 0}

    def families(self, d: int) -> tuple[list, list[float]]:
        """The task sources of dimension ``d`` and their probabilities."""
        sources, probs = [], []
        for name, weight in self._family_weights().items():
            if name in RADIAL_LAWS:
                sources.append(EllipticalMixtureTasks(d, law=name))
            elif d >= 2 and name == "shells":
                sources.append(SphericalShellTasks(d))
            elif d >= 2:
                sources.append(_PLANAR[name](d))
            else:
                continue
            probs.append(weight)
        if not sources:
            raise InvalidParameterError(f"no family of {self.weights!r} exists at d = {d}.")
        return sources, probs

    def sample_tasks(
        self, n_tasks: int, n_support: int, n_query: int, random_state: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw a batch: supports ``(B, m, d)`` and queries ``(B, q, d)``, one random ``d``.

        Parameters
        ----------
        n_tasks, n_support, n_query : int
            Tasks ``B``, support rows ``m`` and query rows ``q`` per task.
        random_state : None, int or Generator, default=None

        Returns
        -------
        supports : ndarray of shape (B, m, d), float64
        queries : ndarray of shape (B, q, d), float64
        """
        rng = np.random.default_rng(random_state)
        # planar families and shells need 2 features: without a radial law, d starts at 2
        low = 1 if set(self._family_weights()) & set(RADIAL_LAWS) else 2
        d = int(rng.integers(low, self.n_features + 1))
        sources, probs = self.families(d)
        S, Q = MixedTasks(sources, weights=probs).sample_tasks(
            n_tasks, n_support, n_query, random_state=rng
        )
        lo, hi = self.scale
        s = np.exp(rng.uniform(np.log(lo), np.log(hi), size=(n_tasks, 1, 1)))
        return S * s, Q * s
