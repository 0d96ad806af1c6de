"""Attention heads of the exact field: the zero-parameter NW head and multi-head NW smoothers.

:class:`NWAttentionHead` is the exact marginal velocity of the OT path for a support set,
written as one cross-attention head (see :mod:`skflow.field._sdpa`): it has no parameters and
equals :func:`skflow.field.nw_velocity` to rounding. :class:`MultiHeadNW` generalizes it to
``H`` heads whose weights see learnable projections ``P_h x`` and ``P_h s_i`` (anisotropic,
Mahalanobis kernels ``M_h = P_h^T P_h``), the "generalized NW smoothers" that learned
cross-attention models implement.

Both modules take batched inputs: ``x`` of shape ``(..., n, d)``, ``support`` of shape
``(..., m, d)`` with broadcastable batch dimensions, and ``t`` a float or a tensor
broadcastable to ``(..., n)`` (one time per query row allowed). They are differentiable in
``x`` and ``support``. Both evaluate a prepared :class:`skflow.field.NWField` (a batch of
supports; for ``MultiHeadNW`` one projected support per head), so they follow the field's
dtype and precision rules: float32 when ``x`` and ``support`` are float32 (computed in
float64 where float32 logits would lose accuracy, late in the flow), float64 otherwise. In a
``torch.compile``-d model that evaluation runs eagerly, outside the graph (it reads host
numbers of each support).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .._array import as_array, as_time, check_tensors
from .._validation import check_bandwidth, check_int
from ..field import NWField
from ..paths import GaussianPath, as_path

__all__ = ["MultiHeadNW", "NWAttentionHead"]


def _common(x: Any, support: Any) -> tuple[Any, Any]:
    check_tensors(x=x, support=support)
    if x.ndim < 2 or support.ndim < 2:
        raise ValueError(
            f"x and support must have shape (..., n, d) and (..., m, d); got {tuple(x.shape)} "
            f"and {tuple(support.shape)}."
        )
    if x.shape[-1] != support.shape[-1]:
        raise ValueError(f"x has {x.shape[-1]} features but support has {support.shape[-1]}.")
    if support.shape[-2] == 0:
        raise ValueError("support is empty: at least one support point is required.")
    return x, support


def _path_columns(path: GaussianPath, t: Any, x: Any) -> tuple[Any, Any, Any]:
    """``gain_t, decay_t, sigma_t`` of the path's affine map, each a float or a (..., n, 1)
    column against queries ``x`` (..., n, d)."""
    t = as_time(t, x, np.float64)
    if isinstance(t, float):
        return (*(float(c) for c in path.velocity_coefficients(t)), float(path.sigma(t)))
    t = torch.broadcast_to(t.to(device=x.device, dtype=torch.float64), x.shape[:-1])
    cols = (*path.velocity_coefficients(t), path.sigma(t))
    return tuple(c if isinstance(c, float) else c.to(x.dtype).unsqueeze(-1) for c in cols)


def _head_times(t: Any) -> Any:
    """Times broadcastable to (..., n) as times broadcastable to (..., 1, n) (one head axis)."""
    if np.ndim(t) >= 1:  # a tensor's own ndim: no host copy
        return as_array(t, np.float64)[..., None, :]
    return t


# Outside the graph of a compiled model: the field reads host numbers of its inputs (the
# float32 precision check reads the support radius and the largest kernel coefficient, the
# time check whether every time is in range), so traced by ``torch.compile`` it breaks the
# graph there and recompiles the rest for every new value, i.e. at every training step.
@torch.compiler.disable
def _field_eager(methods: tuple, x: Any, support: Any, t: Any, **field: Any) -> tuple:
    """``(method(x, t) for method in methods)`` of ``NWField(support, engine="attention",
    **field)``, one field for all of them, as contiguous tensors."""
    prepared = NWField(support, engine="attention", **field)
    # contiguous: the layout depends on the engine path (a slice of the lifted SDPA output,
    # or a float64 fallback cast back), and a compiled caller is specialised on the layout
    return tuple(getattr(prepared, method)(x, t).contiguous() for method in methods)


class NWAttentionHead(nn.Module):
    """Exact NW velocity field of a support set as one zero-parameter attention head.

    Query ``(t / sigma_t^2) x``, keys ``s_i`` with per-key bias ``-(t^2 / 2 sigma_t^2) ||s_i||^2``
    (a lifted key coordinate), values ``s_i``, scale 1, through
    :func:`torch.nn.functional.scaled_dot_product_attention`; then the affine map
    ``v -> (v - (1 - sigma_min) x) / sigma_t``. Support and queries are centred on the support
    mean first. The result equals :func:`skflow.field.nw_velocity` (on another ``path``,
    ``t`` becomes ``alpha_t`` in the kernel and the map ``(gain_t v - decay_t x) / sigma_t``).

    Parameters
    ----------
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (of the default OT path; ignored when ``path`` is given).
    bandwidth : {"ot"} or float or callable, default="ot"
        As in :func:`skflow.field.kernel_coefficients`.
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.

    Examples
    --------
    >>> import torch
    >>> head = NWAttentionHead(sigma_min=0.01)
    >>> x, S = torch.zeros(2, 5, 3), torch.randn(2, 7, 3)
    >>> head(x, S, 0.5).shape
    torch.Size([2, 5, 3])
    >>> sum(p.numel() for p in head.parameters())
    0
    """

    def __init__(
        self, sigma_min: float = 0.01, bandwidth: Any = "ot", path: GaussianPath | None = None
    ):
        super().__init__()
        self.path = as_path(path, sigma_min)
        self.sigma_min = self.path.sigma_min
        check_bandwidth(bandwidth)
        self.bandwidth = bandwidth

    def extra_repr(self) -> str:
        return f"sigma_min={self.sigma_min}, bandwidth={self.bandwidth!r}"

    def _evaluate(self, method: str, x: Any, support: Any, t: Any) -> Any:
        x, support = _common(x, support)
        (out,) = _field_eager((method,), x, support, t, path=self.path, bandwidth=self.bandwidth)
        return out

    def local_mean(self, x: Any, support: Any, t: Any) -> Any:
        """NW local mean ``sum_i w_i(x, t) s_i``, shape (..., n, d)."""
        return self._evaluate("local_mean", x, support, t)

    def weights(self, x: Any, support: Any, t: Any) -> Any:
        """NW weights ``w_i(x, t)``, shape (..., n, m); rows sum to one."""
        return self._evaluate("weights", x, support, t)

    def forward(self, x: Any, support: Any, t: Any) -> Any:
        """Exact velocity ``u_t(x)``, shape (..., n, d)."""
        return self._evaluate("velocity", x, support, t)


class MultiHeadNW(nn.Module):
    """``H`` generalized Nadaraya-Watson smoothers with learnable projections (multi-head NW).

    Head ``h`` weighs the support with the OT-path kernel seen through a projection
    ``P_h`` (``head_dim x n_features``):

    .. math::

        w^h_i(x, t) = \\operatorname{softmax}_i\\Big(
            -\\frac{\\|P_h (x - t s_i)\\|^2}{2 \\tau_t^2}\\Big),
        \\qquad m_h(x, t) = V_h \\sum_i w^h_i s_i,

    (``tau_t = sigma_t`` for the OT bandwidth), i.e. an anisotropic Mahalanobis kernel
    ``M_h = P_h^T P_h``, with values in input space (``V_h`` an optional value map). The head
    outputs are concatenated and mixed by the output map ``W_o`` (``n_features x H n_features``),
    then the path's affine map gives the velocity:

    .. math::

        u_t(x) = \\big(W_o [m_1; \\dots; m_H] - (1 - \\sigma_{\\min}) x\\big) / \\sigma_t .

    Each head is computed by the lifted attention call of :class:`NWAttentionHead` (all heads
    in one ``scaled_dot_product_attention``).

    **At initialisation** ``P_h`` selects coordinates of ``x``: with ``head_dim = n_features``
    (the default) every ``P_h = I``; ``V_h = I`` and ``W_o = [I/H, ..., I/H]`` (equal mixing).
    The module then reproduces the exact isotropic field :func:`skflow.field.nw_velocity`
    (every head is that field and the mixing averages them). With ``head_dim < n_features``
    head ``h`` sees coordinates ``h k, ..., h k + k - 1`` (cyclically); the output is then the
    average of those coordinate-subset NW fields.

    Parameters
    ----------
    n_features : int
        Dimension ``d`` of the data.
    n_heads : int, default=1
        Number of heads ``H``.
    head_dim : int, optional
        Rows ``k`` of each projection; ``n_features`` when None.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (of the default OT path; ignored when ``path`` is given).
    bandwidth : {"ot"} or float or callable, default="ot"
        As in :func:`skflow.field.kernel_coefficients`.
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.
    value_map : bool, default=False
        Learn a per-head value map ``V_h`` (``d x d``, initialised to the identity).
    device, dtype : optional
        Of the parameters (as for ``torch.nn.Linear``). Create the module in float64 for exact
        comparisons: ``1 / H`` in ``W_o`` is rounded in float32.

    Attributes
    ----------
    projections : nn.Parameter of shape (H, head_dim, n_features)
    value_maps : nn.Parameter of shape (H, n_features, n_features) or None
    output_map : nn.Parameter of shape (n_features, H * n_features)

    Examples
    --------
    >>> import torch
    >>> mh = MultiHeadNW(3, n_heads=2)
    >>> x, S = torch.randn(4, 5, 3), torch.randn(4, 8, 3)
    >>> v, w = mh(x, S, 0.5, return_weights=True)
    >>> v.shape, w.shape
    (torch.Size([4, 5, 3]), torch.Size([4, 2, 5, 8]))
    """

    def __init__(
        self,
        n_features: int,
        n_heads: int = 1,
        head_dim: int | None = None,
        *,
        sigma_min: float = 0.01,
        bandwidth: Any = "ot",
        path: GaussianPath | None = None,
        value_map: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        n_features = check_int(n_features, "n_features")
        n_heads = check_int(n_heads, "n_heads")
        head_dim = check_int(n_features if head_dim is None else head_dim, "head_dim")
        self.n_features, self.n_heads, self.head_dim = n_features, n_heads, head_dim
        self.path = as_path(path, sigma_min)
        self.sigma_min = self.path.sigma_min
        check_bandwidth(bandwidth)
        self.bandwidth = bandwidth
        eye = torch.eye(n_features, device=device, dtype=dtype)
        proj = torch.stack(
            [
                eye[[(h * head_dim + r) % n_features for r in range(head_dim)]]
                for h in range(n_heads)
            ]
        )
        self.projections = nn.Parameter(proj)
        if value_map:
            self.value_maps = nn.Parameter(eye.expand(n_heads, -1, -1).clone())
        else:
            self.register_parameter("value_maps", None)
        self.output_map = nn.Parameter(torch.cat([eye / n_heads] * n_heads, dim=1))

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
            f"sigma_min={self.sigma_min}, bandwidth={self.bandwidth!r}, "
            f"value_map={self.value_maps is not None}"
        )

    def _evaluate(self, methods: tuple, x: Any, support: Any, t: Any) -> tuple:
        """``methods`` of the field of every head at queries (..., 1, n, d): the support
        (..., 1, m, d) seen through the projections (H, k, d), a batch of H projected
        supports."""
        x, support = _common(x, support)
        if x.shape[-1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features, got {x.shape[-1]}.")
        return _field_eager(
            methods,
            x.unsqueeze(-3),
            support.unsqueeze(-3),
            _head_times(t),
            path=self.path,
            bandwidth=self.bandwidth,
            projection=self.projections,
        )

    def _value_maps(self, means: Any) -> Any:
        if self.value_maps is None:
            return means
        return torch.einsum("...hnd,hed->...hne", means, self.value_maps.to(means.dtype))

    def head_means(self, x: Any, support: Any, t: Any) -> Any:
        """Per-head local means ``m_h(x, t)`` (after the value maps), shape (..., H, n, d)."""
        return self._value_maps(self._evaluate(("local_mean",), x, support, t)[0])

    def weights(self, x: Any, support: Any, t: Any) -> Any:
        """Per-head weights ``w^h_i(x, t)``, shape (..., H, n, m)."""
        return self._evaluate(("weights",), x, support, t)[0]

    def forward(self, x: Any, support: Any, t: Any, *, return_weights: bool = False) -> Any:
        """Velocity ``u_t(x)`` (..., n, d); with ``return_weights`` also the (..., H, n, m)
        per-head weights."""
        methods = ("local_mean", "weights") if return_weights else ("local_mean",)
        evaluated = self._evaluate(methods, x, support, t)
        means = self._value_maps(evaluated[0])  # (..., H, n, d)
        stacked = means.movedim(-3, -2).reshape(*means.shape[:-3], means.shape[-2], -1)
        mixed = stacked @ self.output_map.to(means.dtype).T
        x = x.to(means.dtype)
        gain, decay, sigma = _path_columns(self.path, t, x)
        velocity = (gain * mixed - decay * x) / sigma
        if not return_weights:
            return velocity
        return velocity, evaluated[1]
