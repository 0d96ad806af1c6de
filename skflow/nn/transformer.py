"""The learned velocity network: a cross-attention transformer conditioned on a support set.

:class:`CrossAttentionVelocity` maps noisy query points ``x`` at times ``t`` and a support set
``S`` (batched over tasks) to velocities. Query tokens attend to support tokens through
``n_layers`` pre-norm blocks of multi-head cross-attention and an MLP. Optionally a frozen,
zero-parameter exact head (:class:`skflow.nn.heads.NWAttentionHead`) computes the plug-in
field ``u_NW(x, t; S)``; its (normalized) local mean is an input of the network and the exact
field is added back as a residual,

.. math::

    v_\\theta(x, t; S) = u_{NW}(x, t; S) + g_\\theta \\, (u_{NW}(x, t; S) - \\bar s)
                         + c \\cdot o_\\theta(x, t; S),

where ``s_bar`` is the support mean, ``g`` a scalar gate per query and ``o`` the learned
correction. The last linear layers of ``g`` and ``o`` are zero-initialized, so an untrained
model *is* the exact NW field, and the gate lets the network cancel the plug-in field (whose
magnitude grows like ``1 / sigma_t`` near ``t = 1``) where it is harmful, with one output
instead of regressing a large value. All inputs of the learned branch stay ``O(1)``:
coordinates are centred on the support mean and divided by ``input_scale``; the exact field is
fed as ``sigma_t (u_NW - s_bar)``, which is bounded (it is the centred NW local mean minus
``(1 - sigma_min)`` times the centred query).

This module depends only on Torch, :mod:`skflow._validation`, :mod:`skflow.paths` and
:mod:`skflow.nn.heads`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as tnf
from torch import nn

from .._validation import InvalidParameterError, check_choice, check_int, check_sigma_min
from ..paths import GaussianPath, as_path
from .heads import NWAttentionHead

__all__ = ["CrossAttentionVelocity", "FourierTimeEmbedding"]


class FourierTimeEmbedding(nn.Module):
    """Fourier features of ``t`` in [0, 1] plus ``log sigma_t``, mapped by a small MLP.

    Features: ``sin(pi 2^k t), cos(pi 2^k t)`` for ``k < n_frequencies``, ``t`` and
    ``log(sigma_t) / log(sigma_min)`` (0 at ``t = 0``, 1 at ``t = 1``), which resolves the
    last few percent of the flow where the field changes fastest.

    Parameters
    ----------
    d_model : int
        Output width.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (of the default OT path; ignored when ``path`` is given).
    n_frequencies : int, default=8
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.
    """

    def __init__(
        self,
        d_model: int,
        sigma_min: float = 0.01,
        n_frequencies: int = 8,
        path: GaussianPath | None = None,
    ):
        super().__init__()
        self.path = as_path(path, sigma_min)
        self.sigma_min = float(self.path.sigma_min)
        self.n_frequencies = n_frequencies
        n_in = 2 * n_frequencies + 2
        self.mlp = nn.Sequential(nn.Linear(n_in, d_model), nn.SiLU(), nn.Linear(d_model, d_model))

    def features(self, t: torch.Tensor) -> torch.Tensor:
        """Raw features of ``t`` (any shape), shape ``(*t.shape, 2 n_frequencies + 2)``."""
        freqs = math.pi * 2.0 ** torch.arange(self.n_frequencies, device=t.device, dtype=t.dtype)
        arg = t[..., None] * freqs
        sigma_t = self.path.sigma(t)
        log_sigma = torch.log(sigma_t) / math.log(self.sigma_min)
        return torch.cat([arg.sin(), arg.cos(), t[..., None], log_sigma[..., None]], dim=-1)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.features(t))


class _CrossAttention(nn.Module):
    """Multi-head cross-attention; queries (B, n, D) attend to keys/values (B, m, D)."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split(self, a: torch.Tensor) -> torch.Tensor:
        B, L, _ = a.shape
        return a.view(B, L, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, L, dh)

    def forward(self, h: torch.Tensor, s: torch.Tensor, return_attention: bool = False):
        q = self._split(self.q(h))
        k, v = (self._split(a) for a in self.kv(s).chunk(2, dim=-1))
        if return_attention:
            # Explicit softmax(QK^T / sqrt(dk)): same numbers as SDPA, weights kept.
            attn = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.d_head), dim=-1)
            o = attn @ v
        else:
            attn = None
            o = tnf.scaled_dot_product_attention(q, k, v)
        B, H, n, dh = o.shape
        return self.out(o.transpose(1, 2).reshape(B, n, H * dh)), attn


class _Block(nn.Module):
    """Pre-norm residual block: cross-attention to the support, then an MLP."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int):
        super().__init__()
        self.norm_q = nn.LayerNorm(d_model)
        self.norm_kv = nn.LayerNorm(d_model)
        self.attn = _CrossAttention(d_model, n_heads)
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, h, s, return_attention=False):
        a, attn = self.attn(self.norm_q(h), self.norm_kv(s), return_attention)
        h = h + a
        h = h + self.mlp(self.norm_mlp(h))
        return h, attn


def _network_config(
    n_features, d_model, n_heads, n_layers, mlp_ratio, exact_head, path, support_summary,
    n_frequencies, path_given, frame_context, base, size_embedding,
) -> dict:  # fmt: skip
    """The validated constructor arguments of :class:`CrossAttentionVelocity` as its
    ``config`` (the defaults of later options left out, so older configurations stay as
    they were): ``path`` is the network's (built), stored as ``"path"`` only when the caller
    gave one (``path_given``), and always as its ``"sigma_min"``."""
    check_choice(base, "base", ("nw", "gaussian"))
    d = check_int(n_features, "n_features")
    for name, value in (
        ("d_model", d_model),
        ("n_heads", n_heads),
        ("n_layers", n_layers),
        ("mlp_ratio", mlp_ratio),
        ("n_frequencies", n_frequencies),
    ):
        check_int(value, name)
    if d_model % n_heads:
        raise InvalidParameterError(f"d_model={d_model} must be divisible by n_heads={n_heads}.")
    sigma_min = check_sigma_min(path.sigma_min)
    config = {
        "n_features": d,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_layers": n_layers,
        "mlp_ratio": mlp_ratio,
        "exact_head": bool(exact_head),
        "sigma_min": float(sigma_min),
        "support_summary": bool(support_summary),
        "n_frequencies": n_frequencies,
    }
    # the defaults (OT path, no frame context) keep the configuration of earlier versions
    optional = {"path": path if path_given else None,
                "frame_context": bool(frame_context) or None,
                "base": None if base == "nw" else base,
                "size_embedding": bool(size_embedding) or None}  # fmt: skip
    return config | {k: v for k, v in optional.items() if v is not None}


class CrossAttentionVelocity(nn.Module):
    """Support-conditioned velocity network (cross-attention transformer).

    Parameters
    ----------
    n_features : int
        Dimension ``d`` of the data.
    d_model : int, default=64
        Token width; must be divisible by ``n_heads``.
    n_heads : int, default=4
        Attention heads per layer.
    n_layers : int, default=2
        Cross-attention blocks.
    mlp_ratio : int, default=2
        Hidden width of the block MLPs, in units of ``d_model``.
    exact_head : bool, default=True
        Add the frozen exact NW head: its output is an input of the network and a residual of
        the output (see the module docstring). With zero-initialized output layers (the
        default initialization) the untrained model equals the exact NW field.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (the exact head's and the time embedding's).
    support_summary : bool, default=True
        Add a learned summary of the whole support (mean of an MLP over support tokens, plus
        the support mean) to every query token.
    n_frequencies : int, default=8
        Fourier frequencies of the time embedding.
    path : GaussianPath, optional
        The probability path of the exact head, the time embedding and the centring (queries
        are centred on ``alpha_t`` times the support mean); default ``OTPath(sigma_min)``
        (``sigma_min`` is then the path's). Stored in :attr:`config` when given.
    frame_context : bool, default=False
        The network works in each support's own frame but sees that frame: every support row
        carries ``d + 1`` extra columns after its ``d`` coordinates, the support's centre and
        the log of its scale in data units (the same on every row; the estimator appends them,
        see :class:`skflow.samplers.learned.LearnedFlowSampler`). From them, the
        training data's global mean ``frame_mean`` and scale ``frame_scale`` (buffers) and the
        support size ``m``, a context token is added to every query token: the centre and
        log-scale in the global standardised frame, the global mean in the support's frame
        and ``log m``. This is what shrinkage toward the training classes needs, and what the
        per-task frame alone erases.
    base : {"nw", "gaussian"}, default="nw"
        What the untrained network (zero output layers) is. ``"nw"``: the exact NW field of
        the support. ``"gaussian"``: the field whose flow ends at ``N(0, I)``, the predictive
        law in the frame of ``normalize="predictive"`` (see
        :func:`skflow.samplers._frame.predictive_frame`); the gate then mixes in the NW field
        (``v = u_gauss + gate (u_nw - u_gauss) + correction``), so the network learns how far
        to move from the Gaussian toward its support.
    size_embedding : bool, default=False
        Add an embedding of the support size ``m`` to every query token (an MLP of
        ``log m / log 100`` and ``m^(-1/2)``, :meth:`size_features`). Attention and the
        support summary average over the support rows, so without it the network cannot count
        them: it sees ``m`` only through how close the rows lie, which in many dimensions
        hardly changes with ``m``, and one network must then serve a 5-row and a 50-row
        support with about the same spread. Stored in :attr:`config` when set.

    Attributes
    ----------
    input_scale, output_scale : tensor buffers (scalars)
        Coordinates are divided by ``input_scale`` before embedding; the learned correction is
        multiplied by ``output_scale``. Both default to 1; the estimator sets them from the
        training data. They are part of the ``state_dict``.
    frame_mean : tensor buffer of shape (n_features,)
        Only with ``frame_context``: the centre of the global frame of the context token
        (default 0; the estimator sets it from the training data).
    frame_scale : tensor buffer of shape ()
        Only with ``frame_context``: the scale of that frame (default 1; set the same way).

    Notes
    -----
    ``forward(x, support, t)`` takes ``x`` of shape (B, n, d), ``support`` (B, m, d) and ``t``
    a float or a tensor broadcastable to (B, n) (for example (B, n), (B, 1) or (n,)). The
    exact head runs in the dtype of ``x`` (float64 inputs give a float64 exact field), the
    learned branch in the dtype of the parameters.

    Examples
    --------
    >>> import torch
    >>> net = CrossAttentionVelocity(3, d_model=16, n_heads=2, n_layers=1)
    >>> x, S = torch.randn(2, 5, 3), torch.randn(2, 7, 3)
    >>> net(x, S, torch.rand(2, 5)).shape
    torch.Size([2, 5, 3])
    >>> v, attn = net(x, S, 0.5, return_attention=True)
    >>> attn.shape  # (n_layers, B, n_heads, n, m)
    torch.Size([1, 2, 2, 5, 7])
    """

    def __init__(
        self,
        n_features: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        mlp_ratio: int = 2,
        exact_head: bool = True,
        sigma_min: float = 0.01,
        support_summary: bool = True,
        n_frequencies: int = 8,
        path: GaussianPath | None = None,
        frame_context: bool = False,
        base: str = "nw",
        size_embedding: bool = False,
    ):
        super().__init__()
        self.path = as_path(path, sigma_min)  # the network's one path, shared below
        self.config = _network_config(
            n_features, d_model, n_heads, n_layers, mlp_ratio, exact_head, self.path,
            support_summary, n_frequencies, path is not None, frame_context, base,
            size_embedding,
        )  # fmt: skip
        d = self.config["n_features"]
        self.n_features = d
        self.sigma_min = self.config["sigma_min"]
        self.exact_head = bool(exact_head)
        self.support_summary = bool(support_summary)
        self.frame_context = bool(frame_context)
        self.size_embedding = bool(size_embedding)
        self.base = base
        self._build_layers(d, d_model, n_heads, n_layers, mlp_ratio, n_frequencies)
        self.reset_parameters()

    def _build_layers(
        self, d: int, d_model: int, n_heads: int, n_layers: int, mlp_ratio: int, n_freq: int
    ) -> None:
        """Register the buffers and layers (in a fixed order: the initialisation draws from
        one generator in this order, so a seed gives the same network as before)."""
        self.register_buffer("input_scale", torch.ones(()))
        self.register_buffer("output_scale", torch.ones(()))
        self.time = FourierTimeEmbedding(d_model, n_frequencies=n_freq, path=self.path)
        n_query_in = 2 * d if self.exact_head else d
        self.query_embed = nn.Linear(n_query_in, d_model)
        self.support_embed = nn.Linear(d, d_model)
        if self.support_summary:
            self.summary_mlp = nn.Sequential(
                nn.Linear(d_model, d_model), nn.GELU(), nn.Linear(d_model, d_model)
            )
            self.mean_embed = nn.Linear(d, d_model)
        if self.frame_context:
            self.register_buffer("frame_mean", torch.zeros(d))
            self.register_buffer("frame_scale", torch.ones(()))
            self.context_mlp = nn.Sequential(
                nn.Linear(2 * d + 2, d_model), nn.GELU(), nn.Linear(d_model, d_model)
            )
        if self.size_embedding:
            self.size_mlp = nn.Sequential(
                nn.Linear(2, d_model), nn.GELU(), nn.Linear(d_model, d_model)
            )
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, mlp_ratio) for _ in range(n_layers))
        self.norm_out = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, d)
        if self.exact_head:
            self.head = NWAttentionHead(path=self.path)
            self.gate = nn.Linear(d_model, 1)

    # -- initialization ---------------------------------------------------------------------
    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """(Re)initialize every parameter, drawing from ``generator``.

        With ``generator=None`` (as in ``__init__``) the global Torch RNG is used, like any
        ``nn.Module``; :class:`~skflow.samplers.learned.LearnedFlowSampler` passes a local,
        seeded generator and builds the module inside ``torch.random.fork_rng``.

        Linear layers get PyTorch's default uniform law ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``
        for weights and biases, layer norms ones and zeros, and the output layers (``out`` and
        ``gate``) zeros, so the untrained model is the exact NW field (``exact_head=True``) or
        the constant support mean (``exact_head=False``).
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                bound = 1.0 / math.sqrt(module.in_features)
                module.weight.uniform_(-bound, bound, generator=generator)
                if module.bias is not None:
                    module.bias.uniform_(-bound, bound, generator=generator)
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        zero = [self.out] + ([self.gate] if self.exact_head else [])
        for layer in zero:
            layer.weight.zero_()
            layer.bias.zero_()

    # -- fewer features ----------------------------------------------------------------------
    @torch.no_grad()
    def restrict_features(self, n_features: int) -> CrossAttentionVelocity:
        """The same network for the first ``n_features`` coordinates only.

        Zero-padded coordinates add nothing to any linear map, distance or mean, so the
        network fed ``d``-column inputs padded with zeros to :attr:`n_features` equals a
        ``d``-feature network whose input layers keep the first ``d`` columns of every
        coordinate block and whose output layer keeps the first ``d`` rows. This builds that
        network (a new module with copied weights; ``self`` is unchanged).

        Parameters
        ----------
        n_features : int
            Features of the new network, ``1 <= n_features <= self.n_features``.

        Returns
        -------
        net : CrossAttentionVelocity
            In eval mode if ``self`` is, on ``self``'s device and dtype.

        Examples
        --------
        >>> import torch
        >>> net = CrossAttentionVelocity(4, d_model=8, n_heads=2, n_layers=1)
        >>> small = net.restrict_features(2)
        >>> x, S = torch.randn(1, 3, 2), torch.randn(1, 5, 2)
        >>> bool(torch.allclose(small(x, S, 0.5), net(x, S, 0.5), atol=1e-6))
        True
        """
        d, full = check_int(n_features, "n_features"), self.n_features
        if self.frame_context and d != full:
            raise InvalidParameterError(
                "restrict_features needs frame_context=False: the context token reads every "
                "coordinate of the support's centre."
            )
        if d > full:
            raise InvalidParameterError(f"n_features={d} exceeds the network's {full} features.")
        with torch.random.fork_rng(devices=[]):  # construction must not move the global RNG
            net = type(self)(**{**self.config, "n_features": d})
        keep = torch.arange(d)
        blocks = 2 if self.exact_head else 1
        columns = torch.cat([keep + b * full for b in range(blocks)])
        state = {}
        for key, value in self.state_dict().items():
            if key == "query_embed.weight":
                value = value[:, columns]
            elif key in ("support_embed.weight", "mean_embed.weight"):
                value = value[:, :d]
            elif key in ("out.weight", "out.bias"):
                value = value[:d]
            state[key] = value.clone()
        net.load_state_dict(state)
        param = next(self.parameters())
        return net.to(device=param.device, dtype=param.dtype).train(self.training)

    # -- the support's frame as an input ------------------------------------------------------
    @staticmethod
    def with_frame(support: torch.Tensor, centre: torch.Tensor, scale: torch.Tensor):
        """``support`` (B, m, d) with its frame appended to every row: (B, m, 2 d + 1).

        Parameters
        ----------
        support : tensor of shape (B, m, d)
            The support as the network sees it (in its own frame).
        centre : tensor of shape (B, 1, d)
            The support's centre in data units.
        scale : tensor of shape (B, 1, 1)
            Its scale in data units (positive).

        Returns
        -------
        tensor of shape (B, m, 2 d + 1)

        Examples
        --------
        >>> import torch
        >>> S = torch.zeros(2, 5, 3)
        >>> CrossAttentionVelocity.with_frame(S, torch.ones(2, 1, 3), torch.ones(2, 1, 1)).shape
        torch.Size([2, 5, 7])
        """
        B, m, _ = support.shape
        frame = torch.cat([centre, torch.log(scale)], dim=-1).to(support.dtype)
        return torch.cat([support, frame.expand(B, m, -1)], dim=-1)

    def _split_context(self, x: torch.Tensor, support: torch.Tensor):
        """Coordinates (B, m, d) and frame (B, d + 1) of a support carrying its frame."""
        d = self.n_features
        if x.shape[-1] != d or support.shape[-1] != 2 * d + 1:
            raise ValueError(
                f"with frame_context, x must have {d} features and support {2 * d + 1} columns "
                f"(coordinates, centre, log-scale); got x {tuple(x.shape)} and support "
                f"{tuple(support.shape)}."
            )
        return support[..., :d], support[:, 0, d:]

    def _context_token(self, frame: torch.Tensor, m: int) -> torch.Tensor:
        """The context token (B, 1, d_model) of frames (B, d + 1) of supports of ``m`` rows."""
        d = self.n_features
        centre, log_scale = frame[:, :d], frame[:, d:]
        mean = self.frame_mean.to(frame.dtype)
        scale = self.frame_scale.to(frame.dtype)
        feats = [
            (centre - mean) / scale,  # where the support lies among the training data
            (mean - centre) * torch.exp(-log_scale),  # where the data's centre is, seen from it
            log_scale - torch.log(scale),
            torch.full_like(log_scale, math.log(m)),  # how much the support can be trusted
        ]
        token = self.context_mlp(torch.cat(feats, dim=-1).to(self.out.weight.dtype))
        return token[:, None, :]

    @staticmethod
    def size_features(m: int) -> list[float]:
        """The inputs of the support-size embedding: ``[log m / log 100, m^(-1/2)]``.

        Both are of order one over the sizes a few-shot network serves (2 to a few hundred);
        ``m^(-1/2)`` is the rate at which a support's mean and spread settle.

        Parameters
        ----------
        m : int
            Support rows.

        Returns
        -------
        list of 2 floats

        Examples
        --------
        >>> CrossAttentionVelocity.size_features(100)
        [1.0, 0.1]
        """
        return [math.log(m) / math.log(100.0), m**-0.5]

    def gaussian_velocity(self, x: torch.Tensor, t: Any) -> torch.Tensor:
        """Marginal velocity of the path toward ``N(0, I)`` (the ``"gaussian"`` base).

        With ``x_1 ~ N(0, I)``, ``x_t ~ N(0, (alpha_t^2 + sigma_t^2) I)`` and
        ``E[x_1 | x_t = x] = alpha_t x / (alpha_t^2 + sigma_t^2)``.

        Parameters
        ----------
        x : tensor of shape (B, n, d)
        t : tensor of shape (B, n, 1) or float

        Returns
        -------
        tensor of shape (B, n, d)

        Examples
        --------
        >>> import torch
        >>> net = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
        >>> net.gaussian_velocity(torch.zeros(1, 3, 2), 0.5).abs().max().item()
        0.0
        """
        a, s = self.path.alpha(t), self.path.sigma(t)
        return self.path.velocity_from_mean(a * x / (a * a + s * s), x, t)

    # -- forward ----------------------------------------------------------------------------
    def _times(self, t: Any, x: torch.Tensor) -> torch.Tensor:
        # frozen at the nearest end outside [0, 1] (the path, and training, stop there):
        # third-party adaptive solvers probe stages past t = 1
        tt = torch.as_tensor(t, device=x.device, dtype=x.dtype).clamp(0.0, 1.0)
        try:
            return torch.broadcast_to(tt, x.shape[:-1])
        except RuntimeError:
            raise ValueError(
                f"t of shape {tuple(tt.shape)} does not broadcast to {tuple(x.shape[:-1])}."
            ) from None

    def forward(
        self,
        x: torch.Tensor,
        support: torch.Tensor,
        t: Any,
        *,
        return_attention: bool = False,
    ):
        """Velocity at ``(x, t)`` conditioned on ``support``.

        Parameters
        ----------
        x : tensor of shape (B, n, d)
            ``d <= n_features``: fewer features are zero-padded, which is exactly the network
            :meth:`restrict_features` ``(d)`` returns.
        support : tensor of shape (B, m, d), or (B, m, 2 d + 1) with ``frame_context``
            With ``frame_context`` every row ends with the support's centre and log-scale in
            data units (:meth:`with_frame`); then ``d`` must be ``n_features``.
        t : float or tensor broadcastable to (B, n)
            Times; outside [0, 1] the field is frozen at the nearest end (``v(x, t) =
            v(x, 1)`` for ``t > 1``), so adaptive solvers may probe past ``t = 1``.
        return_attention : bool, default=False
            Also return the attention weights ``softmax(Q K^T / sqrt(d_k))`` of every layer,
            a tensor of shape (n_layers, B, n_heads, n, m) (computed explicitly instead of by
            the fused kernel).

        Returns
        -------
        v : tensor of shape (B, n, d), dtype of ``x``
        attention : tensor, only if ``return_attention``
        """
        if x.ndim != 3 or support.ndim != 3:
            raise ValueError(
                f"x and support must have shape (B, n, d) and (B, m, d); got {tuple(x.shape)} "
                f"and {tuple(support.shape)}."
            )
        context = None
        if self.frame_context:
            support, context = self._split_context(x, support)
        d = x.shape[-1]
        if d > self.n_features or support.shape[-1] != d:
            raise ValueError(
                f"expected {self.n_features} features (or fewer, the same for x and support), "
                f"got x {tuple(x.shape)} and support {tuple(support.shape)}."
            )
        if d < self.n_features:
            # zero columns add nothing to any linear map, distance or mean: the padded network
            # is the network of the first d coordinates (see restrict_features)
            pad = self.n_features - d
            x, support = tnf.pad(x, (0, pad)), tnf.pad(support, (0, pad))
            out = self.forward(x, support, t, return_attention=return_attention)
            if return_attention:
                return out[0][..., :d], out[1]
            return out[..., :d]
        if support.shape[1] == 0:
            raise ValueError("support is empty: at least one support point is required.")
        io_dtype = x.dtype
        support = support.to(io_dtype)
        t_full = self._times(t, x)  # (B, n), dtype of x
        t_col = t_full[..., None]
        mu = support.mean(dim=1, keepdim=True)  # (B, 1, d)
        # centred on the support mean: x_t moves by alpha_t mu and the field by d_alpha_t mu
        x_c = x - self.path.alpha(t_col) * mu
        s_c = support - mu

        wdtype = self.out.weight.dtype
        scale = self.input_scale.to(io_dtype)
        feats = [x_c / scale]
        if self.exact_head:
            # the exact field never runs under mixed precision
            with torch.autocast(device_type=x.device.type, enabled=False):
                u_nw = self.head(x, support, t_full)
            u_c = u_nw - self.path.d_alpha(t_col) * mu
            local_mean_c = self.path.mean_from_velocity(u_c, x_c, t_col)
            feats.append(local_mean_c / scale)
        h = self.query_embed(torch.cat(feats, dim=-1).to(wdtype))
        h = h + self.time(t_full.to(wdtype))
        if context is not None:
            h = h + self._context_token(context.to(io_dtype), support.shape[1]).to(wdtype)
        if self.size_embedding:  # attention averages over the rows: it cannot count them
            # filled on the device: no host-to-device copy at every solver step
            size = torch.stack([
                torch.full((), v, device=x.device, dtype=wdtype)
                for v in self.size_features(support.shape[1])
            ])  # fmt: skip
            h = h + self.size_mlp(size)
        s_tok = self.support_embed((s_c / scale).to(wdtype))
        if self.support_summary:
            summary = self.summary_mlp(s_tok).mean(dim=1, keepdim=True)
            h = h + summary + self.mean_embed((mu / scale).to(wdtype))

        attns = []
        for block in self.blocks:
            h, attn = block(h, s_tok, return_attention)
            attns.append(attn)
        z = self.norm_out(h)
        correction = (self.out(z) * self.output_scale).to(io_dtype)
        if self.base == "gaussian":
            u_g = self.gaussian_velocity(x, t_col)
            v = u_g + correction
            if self.exact_head:
                v = v + self.gate(z).to(io_dtype) * (u_nw - u_g)
        elif self.exact_head:
            gate = self.gate(z).to(io_dtype)
            v = u_nw + gate * u_c + correction
        else:
            v = mu + correction
        if return_attention:
            return v, torch.stack(attns, dim=0)
        return v
