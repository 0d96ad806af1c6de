"""Attention heads of the exact field: the zero-parameter NW head and multi-head NW smoothers.

:class:`NWAttentionHead` is the exact marginal velocity of the OT path for a support set,
written as one cross-attention head (see :mod:`skflow._attention`): it has no parameters and
equals :func:`skflow.field.nw_velocity` to rounding. :class:`MultiHeadNW` generalizes it to
``H`` heads whose weights see learnable projections ``P_h x`` and ``P_h s_i`` (anisotropic,
Mahalanobis kernels ``M_h = P_h^T P_h``), the "generalized NW smoothers" that learned
cross-attention models implement.

Both modules take batched inputs: ``x`` of shape ``(..., n, d)``, ``support`` of shape
``(..., m, d)`` with broadcastable batch dimensions, and ``t`` a float or a tensor
broadcastable to ``(..., n)`` (one time per query row allowed). They are differentiable in
``x`` and ``support``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..field._sdpa import (
    centre,
    lifted_attention_mean,
    lifted_logits,
    torch_coefficients,
)
from .._validation import check_bandwidth

__all__ = ["MultiHeadNW", "NWAttentionHead"]


def _check_sigma_min(sigma_min: Any) -> float:
    if isinstance(sigma_min, bool) or not isinstance(sigma_min, int | float):
        raise ValueError(f"sigma_min must be a float in (0, 1), got {sigma_min!r}.")
    if not 0.0 < float(sigma_min) < 1.0:
        raise ValueError(f"sigma_min must be a float in (0, 1), got {sigma_min!r}.")
    return float(sigma_min)


def _common(x: Any, support: Any) -> tuple[Any, Any]:
    if not (torch.is_tensor(x) and torch.is_tensor(support)):
        raise TypeError("x and support must be torch tensors.")
    if x.ndim < 2 or support.ndim < 2:
        raise ValueError(
            f"x and support must have shape (..., n, d) and (..., m, d); got {tuple(x.shape)} "
            f"and {tuple(support.shape)}."
        )
    if x.shape[-1] != support.shape[-1]:
        raise ValueError(f"x has {x.shape[-1]} features but support has {support.shape[-1]}.")
    if support.shape[-2] == 0:
        raise ValueError("support is empty: at least one support point is required.")
    dtype = torch.promote_types(x.dtype, support.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return x.to(dtype), support.to(device=x.device, dtype=dtype)


def _coefficient_columns(t, x, *, sigma_min, bandwidth):
    """``t, a, b, sigma_t`` as tensors of shape (..., n, 1) broadcastable against ``x``."""
    # The range check syncs with the device: only done for host values.
    validate = not (torch.is_tensor(t) and t.device.type != "cpu")
    if torch.is_tensor(t):
        t_tensor = t.to(x.device)
    else:  # float64 first: torch.as_tensor(0.99) would round through float32
        t_tensor = torch.as_tensor(np.asarray(t, dtype=np.float64), device=x.device)
    a, b, sig = torch_coefficients(
        t_tensor,
        sigma_min=sigma_min,
        bandwidth=bandwidth,
        dtype=x.dtype,
        device=x.device,
        validate=validate,
        limit=True,  # t = 0 is the t -> 0+ limit, as in skflow.field
    )
    shape = x.shape[:-1]
    cols = []
    for c in (t_tensor.to(x.dtype), a, b, sig):
        try:
            cols.append(torch.broadcast_to(c, shape).unsqueeze(-1))
        except RuntimeError:
            raise ValueError(
                f"t of shape {tuple(t_tensor.shape)} does not broadcast to {tuple(shape)}."
            ) from None
    return cols


class NWAttentionHead(nn.Module):
    """Exact NW velocity field of a support set as one zero-parameter attention head.

    Query ``(t / sigma_t^2) x``, keys ``s_i`` with per-key bias ``-(t^2 / 2 sigma_t^2) ||s_i||^2``
    (a lifted key coordinate), values ``s_i``, scale 1, through
    :func:`torch.nn.functional.scaled_dot_product_attention`; then the affine map
    ``v -> (v - (1 - sigma_min) x) / sigma_t``. Support and queries are centred on the support
    mean first. The result equals :func:`skflow.field.nw_velocity`.

    Parameters
    ----------
    sigma_min : float, default=0.01
        Path noise at ``t = 1``.
    bandwidth : {"ot"} or float or callable, default="ot"
        As in :func:`skflow.field.kernel_coefficients`.

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

    def __init__(self, sigma_min: float = 0.01, bandwidth: Any = "ot"):
        super().__init__()
        self.sigma_min = _check_sigma_min(sigma_min)
        check_bandwidth(bandwidth)
        self.bandwidth = bandwidth

    def extra_repr(self) -> str:
        return f"sigma_min={self.sigma_min}, bandwidth={self.bandwidth!r}"

    def _setup(self, x, support, t):
        x, support = _common(x, support)
        t_col, a, b, sig = _coefficient_columns(
            t, x, sigma_min=self.sigma_min, bandwidth=self.bandwidth
        )
        xc, sc, mu = centre(x, support, t_col)
        return x, xc, sc, mu, a, b, sig

    def local_mean(self, x: Any, support: Any, t: Any) -> Any:
        """NW local mean ``sum_i w_i(x, t) s_i``, shape (..., n, d)."""
        _, xc, sc, mu, a, b, _ = self._setup(x, support, t)
        return lifted_attention_mean(xc, sc, sc, a, b, mu) + mu

    def weights(self, x: Any, support: Any, t: Any) -> Any:
        """NW weights ``w_i(x, t)``, shape (..., n, m); rows sum to one."""
        _, xc, sc, mu, a, b, _ = self._setup(x, support, t)
        return torch.softmax(lifted_logits(xc, sc, a, b, mu), dim=-1)

    def forward(self, x: Any, support: Any, t: Any) -> Any:
        """Exact velocity ``u_t(x)``, shape (..., n, d)."""
        x, xc, sc, mu, a, b, sig = self._setup(x, support, t)
        mean = lifted_attention_mean(xc, sc, sc, a, b, mu) + mu
        return (mean - (1.0 - self.sigma_min) * x) / sig


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
        Path noise at ``t = 1``.
    bandwidth : {"ot"} or float or callable, default="ot"
        As in :func:`skflow.field.kernel_coefficients`.
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
        value_map: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        for name, val in (("n_features", n_features), ("n_heads", n_heads)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive integer, got {val!r}.")
        head_dim = n_features if head_dim is None else head_dim
        if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive integer, got {head_dim!r}.")
        self.n_features, self.n_heads, self.head_dim = n_features, n_heads, head_dim
        self.sigma_min = _check_sigma_min(sigma_min)
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

    def _setup(self, x, support, t):
        x, support = _common(x, support)
        if x.shape[-1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features, got {x.shape[-1]}.")
        t_col, a, b, sig = _coefficient_columns(
            t, x, sigma_min=self.sigma_min, bandwidth=self.bandwidth
        )
        xc, sc, mu = centre(x, support, t_col)
        proj = self.projections.to(x.dtype)
        # (..., H, n, k) queries and (..., H, m, k) keys; one time column per query row.
        q = torch.einsum("...nd,hkd->...hnk", xc, proj)
        k = torch.einsum("...md,hkd->...hmk", sc, proj)
        # P_h mu (..., H, 1, k): the tie-break of the t -> 0 hard-argmax limit needs it
        mk = torch.einsum("...od,hkd->...hok", mu, proj)
        return x, q, k, sc, mu, mk, a.unsqueeze(-3), b.unsqueeze(-3), sig

    def head_means(self, x: Any, support: Any, t: Any) -> Any:
        """Per-head local means ``m_h(x, t)`` (after the value maps), shape (..., H, n, d)."""
        _, q, k, sc, mu, mk, a, b, _ = self._setup(x, support, t)
        return self._head_means(q, k, sc, mu, mk, a, b)

    def _head_means(self, q, k, sc, mu, mk, a, b):
        means = lifted_attention_mean(q, k, sc.unsqueeze(-3), a, b, mk) + mu.unsqueeze(-3)
        if self.value_maps is not None:
            means = torch.einsum("...hnd,hed->...hne", means, self.value_maps.to(means.dtype))
        return means

    def weights(self, x: Any, support: Any, t: Any) -> Any:
        """Per-head weights ``w^h_i(x, t)``, shape (..., H, n, m)."""
        _, q, k, _, _, mk, a, b, _ = self._setup(x, support, t)
        return torch.softmax(lifted_logits(q, k, a, b, mk), dim=-1)

    def forward(self, x: Any, support: Any, t: Any, *, return_weights: bool = False) -> Any:
        """Velocity ``u_t(x)`` (..., n, d); with ``return_weights`` also the (..., H, n, m)
        per-head weights."""
        x, q, k, sc, mu, mk, a, b, sig = self._setup(x, support, t)
        means = self._head_means(q, k, sc, mu, mk, a, b)  # (..., H, n, d)
        stacked = means.movedim(-3, -2).reshape(*means.shape[:-3], means.shape[-2], -1)
        mixed = stacked @ self.output_map.to(x.dtype).T
        velocity = (mixed - (1.0 - self.sigma_min) * x) / sig
        if not return_weights:
            return velocity
        return velocity, torch.softmax(lifted_logits(q, k, a, b, mk), dim=-1)
