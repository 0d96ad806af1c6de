"""The paper's 2-D families (random rings, two moons, multi-arm spirals), embedded in ``d``
dimensions by a random rotation of their plane."""

import numpy as np

from .._validation import check_int, check_real
from ._base import (
    SyntheticTasks,
    categorical,
    check_int_range,
    check_positive_range,
    haar_rotations,
    masked_dirichlet,
)
from ._device import t_categorical, t_haar_rotations, t_masked_dirichlet, t_uniform

__all__ = ["MoonsTasks", "RingTasks", "SpiralTasks"]


def _embed_plane(rng, P, d, box, noise):
    """Place 2-D task shapes ``P`` (B, n, 2) in ``R^d``: a random rotation, a shift, noise.

    Each task's plane is spanned by two orthonormal rows of a Haar-random rotation (in 2-D: a
    random rotation or reflection of the plane), the shape is shifted by a vector uniform in
    ``[-box, box]^d`` and isotropic Gaussian noise of the task's level ``noise`` (B,) is added
    in all ``d`` dimensions.
    """
    B, n, _ = P.shape
    frame = haar_rotations(rng, (B,), d)[:, :2, :]  # (B, 2, d), orthonormal rows
    shift = rng.uniform(-box, box, size=(B, 1, d)) if box > 0 else np.zeros((B, 1, d))
    X = P @ frame + shift + noise[:, None, None] * rng.standard_normal((B, n, d))
    return X


def _embed_plane_torch(gen, P, d, box, noise):
    """:func:`_embed_plane` in Torch: shapes ``P`` (B, n, 2), noise levels (B,) -> (B, n, d)."""
    import torch

    B, n, _ = P.shape
    device, dtype = P.device, P.dtype
    frame = t_haar_rotations(gen, (B,), d, device, dtype)[:, :2, :]  # (B, 2, d)
    if box > 0:
        shift = t_uniform(gen, -box, box, (B, 1, d), device, dtype)
    else:
        shift = torch.zeros((B, 1, d), device=device, dtype=dtype)
    eps = torch.randn((B, n, d), generator=gen, device=device, dtype=dtype)
    return P @ frame + shift + noise[:, None, None] * eps


class _PlanarTasks(SyntheticTasks):
    """Shared sampling of the 2-D families: draw shapes, embed them, split support/query.

    A subclass supplies ``_validate_shape()`` (its checked shape parameters),
    ``_shapes(rng, B, n, *shape_params)``, the planar points of shape ``(B, n, 2)``, and
    ``_shapes_torch(gen, B, n, *shape_params, device=, dtype=)``, the same law in Torch.
    """

    def _validate(self):
        d = check_int(self.n_features, "n_features", minimum=2)
        box = check_real(self.box, "box", low=0.0)
        n_lo, n_hi = check_positive_range(self.noise, "noise")
        return (d, box, n_lo, n_hi, *self._validate_shape())

    def _draw(self, rng, B, n, d, box, n_lo, n_hi, *shape_params):
        P = self._shapes(rng, B, n, *shape_params)  # (B, n, 2)
        noise = rng.uniform(n_lo, n_hi, size=B)
        return _embed_plane(rng, P, d, box, noise), None

    def _draw_torch(self, gen, B, n, d, box, n_lo, n_hi, *shape_params, device, dtype):
        P = self._shapes_torch(gen, B, n, *shape_params, device=device, dtype=dtype)
        noise = t_uniform(gen, n_lo, n_hi, (B,), device, dtype)
        return _embed_plane_torch(gen, P, d, box, noise), None


class RingTasks(_PlanarTasks):
    """Meta-distribution of random rings (circles with Gaussian noise), in a random plane.

    For every task: ``K`` rings (uniform on the integers in ``n_rings``), each with its own
    centre uniform in ``[-spread, spread]^2``, radius uniform in ``radius`` and Dirichlet(1)
    weight; a point is ``centre_k + r_k (cos a, sin a)`` with ``a`` uniform. The planar task
    is then rotated into ``R^d``, shifted and noised (see ``noise``, ``box``).

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the rings lie in a random 2-D plane.
    n_rings : int or (int, int), default=(1, 3)
        Range (inclusive) of the number of rings.
    radius : float or (float, float), default=(1.0, 3.0)
        Range of the radii.
    spread : float >= 0, default=3.0
        Ring centres are uniform in ``[-spread, spread]^2`` (0: concentric rings).
    box : float >= 0, default=2.0
        The whole task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level (all ``d`` dimensions).

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> from skflow.tasks import RingTasks
    >>> S, Q = RingTasks(n_features=4).sample_tasks(3, 10, 5, random_state=0)
    >>> S.shape, Q.shape
    ((3, 10, 4), (3, 5, 4))
    >>> S, Q = RingTasks(n_features=4).sample_tasks(3, 10, 5, random_state=0, device="cpu")
    >>> tuple(S.shape), S.dtype
    ((3, 10, 4), torch.float32)
    """

    _param_names = ("n_features", "n_rings", "radius", "spread", "box", "noise")

    def __init__(
        self, n_features=2, *, n_rings=(1, 3), radius=(1.0, 3.0), spread=3.0, box=2.0,
        noise=(0.05, 0.2),
    ):  # fmt: skip
        self.n_features = n_features
        self.n_rings = n_rings
        self.radius = radius
        self.spread = spread
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        k_lo, k_hi = check_int_range(self.n_rings, "n_rings", 1)
        r_lo, r_hi = check_positive_range(self.radius, "radius")
        spread = check_real(self.spread, "spread", low=0.0)
        return k_lo, k_hi, r_lo, r_hi, spread

    @staticmethod
    def _shapes(rng, B, n, k_lo, k_hi, r_lo, r_hi, spread):
        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, _ = masked_dirichlet(rng, n_active, k_hi)
        centres = rng.uniform(-spread, spread, size=(B, k_hi, 2))
        radii = rng.uniform(r_lo, r_hi, size=(B, k_hi))
        ring = categorical(rng, weights, n, n_active)  # (B, n)
        angle = rng.uniform(0.0, 2.0 * np.pi, size=(B, n))
        circle = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
        r = np.take_along_axis(radii, ring, axis=1)[..., None]
        return np.take_along_axis(centres, ring[..., None], axis=1) + r * circle

    @staticmethod
    def _shapes_torch(gen, B, n, k_lo, k_hi, r_lo, r_hi, spread, *, device, dtype):
        import torch

        n_active = torch.randint(k_lo, k_hi + 1, (B,), generator=gen, device=device)
        weights, _ = t_masked_dirichlet(gen, n_active, k_hi, dtype)
        centres = t_uniform(gen, -spread, spread, (B, k_hi, 2), device, dtype)
        radii = t_uniform(gen, r_lo, r_hi, (B, k_hi), device, dtype)
        ring = t_categorical(gen, weights, n, n_active)  # (B, n)
        angle = t_uniform(gen, 0.0, 2.0 * np.pi, (B, n), device, dtype)
        circle = torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)
        r = torch.gather(radii, 1, ring)[..., None]
        return torch.gather(centres, 1, ring[..., None].expand(B, n, 2)) + r * circle


class MoonsTasks(_PlanarTasks):
    """Meta-distribution of random two-moons tasks (two interleaved half circles).

    The planar shape is scikit-learn's ``make_moons``: with ``a`` uniform in ``[0, pi]``,
    a point is ``(cos a, sin a)`` (upper moon) or ``(1 - cos a, 1/2 - sin a)`` (lower moon)
    with probability 1/2 each, centred on ``(1/2, 1/4)`` and multiplied by the task's
    ``scale``; the task is then rotated into ``R^d``, shifted and noised.

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the moons lie in a random 2-D plane.
    scale : float or (float, float), default=(1.0, 3.0)
        Range of the task's size factor (the moons' radius).
    box : float >= 0, default=3.0
        The task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level, in units of the data (not of
        ``scale``).

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> from skflow.tasks import MoonsTasks
    >>> S, Q = MoonsTasks().sample_task(20, 4, random_state=0)
    >>> S.shape, Q.shape
    ((20, 2), (4, 2))
    """

    _param_names = ("n_features", "scale", "box", "noise")

    def __init__(self, n_features=2, *, scale=(1.0, 3.0), box=3.0, noise=(0.05, 0.2)):
        self.n_features = n_features
        self.scale = scale
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        return check_positive_range(self.scale, "scale")

    @staticmethod
    def _shapes(rng, B, n, s_lo, s_hi):
        scale = rng.uniform(s_lo, s_hi, size=(B, 1, 1))
        lower = rng.random((B, n)) < 0.5
        a = rng.uniform(0.0, np.pi, size=(B, n))
        x = np.where(lower, 1.0 - np.cos(a), np.cos(a)) - 0.5
        y = np.where(lower, 0.5 - np.sin(a), np.sin(a)) - 0.25
        return scale * np.stack([x, y], axis=-1)

    @staticmethod
    def _shapes_torch(gen, B, n, s_lo, s_hi, *, device, dtype):
        import torch

        scale = t_uniform(gen, s_lo, s_hi, (B, 1, 1), device, dtype)
        lower = torch.rand((B, n), generator=gen, device=device, dtype=dtype) < 0.5
        a = t_uniform(gen, 0.0, np.pi, (B, n), device, dtype)
        cos, sin = torch.cos(a), torch.sin(a)
        x = torch.where(lower, 1.0 - cos, cos) - 0.5
        y = torch.where(lower, 0.5 - sin, sin) - 0.25
        return scale * torch.stack([x, y], dim=-1)


class SpiralTasks(_PlanarTasks):
    """Meta-distribution of random Archimedean spirals with several arms.

    For every task: ``A`` arms (uniform on the integers in ``n_arms``) turned by ``2 pi a / A``,
    ``turns`` revolutions and a size ``scale``. A point of arm ``a`` is
    ``scale * s * (cos(theta + 2 pi a / A), sin(theta + 2 pi a / A))`` with
    ``theta = 2 pi * turns * s`` and ``s = sqrt(u)``, ``u`` uniform on [0, 1] (roughly uniform
    along the arm); the task is then rotated into ``R^d``, shifted and noised.

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the spiral lies in a random 2-D plane.
    n_arms : int or (int, int), default=(1, 3)
        Range (inclusive) of the number of arms.
    turns : float or (float, float), default=(1.0, 2.0)
        Range of the revolutions of each arm.
    scale : float or (float, float), default=(2.0, 5.0)
        Range of the outer radius.
    box : float >= 0, default=2.0
        The task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level.

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SpiralTasks
    >>> tasks = SpiralTasks(n_features=3, box=0.0, noise=1e-9, scale=2.0)
    >>> S, _ = tasks.sample_task(50, 0, random_state=0)
    >>> bool(np.linalg.norm(S, axis=1).max() <= 2.0 + 1e-6)
    True
    """

    _param_names = ("n_features", "n_arms", "turns", "scale", "box", "noise")

    def __init__(
        self, n_features=2, *, n_arms=(1, 3), turns=(1.0, 2.0), scale=(2.0, 5.0), box=2.0,
        noise=(0.05, 0.2),
    ):  # fmt: skip
        self.n_features = n_features
        self.n_arms = n_arms
        self.turns = turns
        self.scale = scale
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        a_lo, a_hi = check_int_range(self.n_arms, "n_arms", 1)
        t_lo, t_hi = check_positive_range(self.turns, "turns")
        s_lo, s_hi = check_positive_range(self.scale, "scale")
        return a_lo, a_hi, t_lo, t_hi, s_lo, s_hi

    @staticmethod
    def _shapes(rng, B, n, a_lo, a_hi, t_lo, t_hi, s_lo, s_hi):
        n_arms = rng.integers(a_lo, a_hi + 1, size=(B, 1))
        turns = rng.uniform(t_lo, t_hi, size=(B, 1))
        scale = rng.uniform(s_lo, s_hi, size=(B, 1))
        arm = np.floor(rng.random((B, n)) * n_arms)  # uniform arm index in [0, A)
        s = np.sqrt(rng.random((B, n)))
        theta = 2.0 * np.pi * (turns * s + arm / n_arms)
        return (scale * s)[..., None] * np.stack([np.cos(theta), np.sin(theta)], axis=-1)

    @staticmethod
    def _shapes_torch(gen, B, n, a_lo, a_hi, t_lo, t_hi, s_lo, s_hi, *, device, dtype):
        import torch

        n_arms = torch.randint(a_lo, a_hi + 1, (B, 1), generator=gen, device=device).to(dtype)
        turns = t_uniform(gen, t_lo, t_hi, (B, 1), device, dtype)
        scale = t_uniform(gen, s_lo, s_hi, (B, 1), device, dtype)
        arm = torch.floor(torch.rand((B, n), generator=gen, device=device, dtype=dtype) * n_arms)
        s = torch.sqrt(torch.rand((B, n), generator=gen, device=device, dtype=dtype))
        theta = 2.0 * np.pi * (turns * s + arm / n_arms)
        return (scale * s)[..., None] * torch.stack([torch.cos(theta), torch.sin(theta)], dim=-1)
