"""Random concentric spherical shells: variation that is purely radial."""

import numpy as np

from .._validation import check_int, check_real
from ._base import SyntheticTasks, categorical, check_int_range, masked_dirichlet
from ._device import t_categorical, t_masked_dirichlet, t_uniform

__all__ = ["SphericalShellTasks"]


class SphericalShellTasks(SyntheticTasks):
    """Meta-distribution of random concentric spherical shells.

    For every task: the number of shells ``K`` is uniform on the integers in ``n_shells``
    (inclusive), the radii are uniform in ``(0.5, max_radius]`` (sorted increasingly),
    and the shell probabilities follow a Dirichlet(1) law (so some shells may be rare).
    A point is ``center + r * u`` with ``u`` uniform on the unit sphere (a normalized
    Gaussian vector), ``r = radius_k + radial_noise * N(0, 1)`` and ``k`` the point's
    shell. The center is the origin unless ``center_box > 0``, in which case it is uniform
    in ``[-center_box, center_box]^d`` per task.

    The variation within a task is purely radial, the regime in which an isotropic
    kernel's geometry does not match the data.

    Parameters
    ----------
    n_features : int >= 1, default=8
        Dimension ``d`` of the points.
    n_shells : int or (int, int), default=(2, 5)
        Range ``(low, high)`` (inclusive) of the number of shells; an int fixes it.
    max_radius : float > 0.5, default=5.0
        Largest possible shell radius.
    radial_noise : float >= 0, default=0.3
        Standard deviation of the Gaussian noise added to the radius. The noisy radius is
        not clipped: a negative ``r`` places the point on the opposite side.
    center_box : float >= 0, default=0.0
        Half-width of the box the center is drawn from; 0 keeps it at the origin.

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SphericalShellTasks
    >>> tasks = SphericalShellTasks(n_features=4, radial_noise=0.0)
    >>> S, Q = tasks.sample_task(10, 3, random_state=0)
    >>> S.shape, Q.shape
    ((10, 4), (3, 4))
    >>> bool(np.all(np.linalg.norm(S, axis=1) <= 5.0))
    True
    >>> Ss, _ = tasks.sample_tasks(2, 10, 3, random_state=0, device="cpu")  # Torch, float32
    >>> tuple(Ss.shape), Ss.dtype
    ((2, 10, 4), torch.float32)
    """

    _param_names = ("n_features", "n_shells", "max_radius", "radial_noise", "center_box")

    def __init__(
        self, n_features=8, *, n_shells=(2, 5), max_radius=5.0, radial_noise=0.3, center_box=0.0
    ):
        self.n_features = n_features
        self.n_shells = n_shells
        self.max_radius = max_radius
        self.radial_noise = radial_noise
        self.center_box = center_box

    def _validate(self):
        d = check_int(self.n_features, "n_features")
        k_lo, k_hi = check_int_range(self.n_shells, "n_shells", 1)
        r_max = check_real(self.max_radius, "max_radius", low=0.5, low_open=True)
        noise = check_real(self.radial_noise, "radial_noise", low=0.0)
        cbox = check_real(self.center_box, "center_box", low=0.0)
        return d, k_lo, k_hi, r_max, noise, cbox

    @staticmethod
    def _draw(rng, B, n, d, k_lo, k_hi, r_max, noise, cbox):
        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, active = masked_dirichlet(rng, n_active, k_hi)
        # uniform in (0.5, r_max]; inactive slots pushed to the end by the sort
        radii = r_max - rng.random((B, k_hi)) * (r_max - 0.5)
        radii = np.sort(np.where(active, radii, np.inf), axis=1)
        if cbox > 0:
            center = rng.uniform(-cbox, cbox, size=(B, 1, d))
        else:
            center = np.zeros((B, 1, d))

        shell = categorical(rng, weights, n, n_active)  # (B, n)
        u = rng.standard_normal((B, n, d))
        norms = np.linalg.norm(u, axis=2, keepdims=True)
        while np.any(norms == 0):  # measure zero; redraw to stay on the sphere
            bad = norms[..., 0] == 0
            u[bad] = rng.standard_normal((int(bad.sum()), d))
            norms = np.linalg.norm(u, axis=2, keepdims=True)
        u /= norms
        r = np.take_along_axis(radii, shell, axis=1) + noise * rng.standard_normal((B, n))
        X = center + r[:, :, None] * u
        return X, None

    @staticmethod
    def _draw_torch(gen, B, n, d, k_lo, k_hi, r_max, noise, cbox, *, device, dtype):
        """The law of :meth:`_draw` in Torch: points (B, n, d), no extra."""
        import torch

        n_active = torch.randint(k_lo, k_hi + 1, (B,), generator=gen, device=device)
        weights, active = t_masked_dirichlet(gen, n_active, k_hi, dtype)
        radii = r_max - torch.rand((B, k_hi), generator=gen, device=device, dtype=dtype) * (
            r_max - 0.5
        )
        radii = torch.where(active, radii, torch.inf).sort(dim=1).values
        center = torch.zeros((B, 1, d), device=device, dtype=dtype)
        if cbox > 0:
            center = t_uniform(gen, -cbox, cbox, (B, 1, d), device, dtype)
        shell = t_categorical(gen, weights, n, n_active)  # (B, n)
        u = torch.randn((B, n, d), generator=gen, device=device, dtype=dtype)
        norms = torch.linalg.vector_norm(u, dim=2, keepdim=True)
        # a zero vector has probability 0; it becomes the first axis (no redraw, no sync)
        u = torch.where(norms > 0, u / norms.clamp_min(torch.finfo(dtype).tiny), 0.0)
        u[..., 0] += (norms[..., 0] == 0).to(dtype)
        r = torch.gather(radii, 1, shell)
        r = r + noise * torch.randn((B, n), generator=gen, device=device, dtype=dtype)
        return center + r[:, :, None] * u, None
