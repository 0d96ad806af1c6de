"""Recording of the attention calls made inside any ``torch.nn.Module`` forward.

:class:`AttentionRecorder` is a context manager. While it is open, every call of
:func:`torch.nn.functional.scaled_dot_product_attention` (intercepted with a
:class:`torch.overrides.TorchFunctionMode`, wherever it is called: a hand-written module, an HF
transformer, a diffusers attention processor) and every forward of a
:class:`torch.nn.MultiheadAttention` (read by a forward hook from its inputs, recomputing the
in-projection ``q = x W_q^T + b_q``, ``k = y W_k^T + b_k`` from the module's own weights; the
self-attention of a :class:`torch.nn.TransformerEncoderLayer` likewise from the layer's
input, since its fused kernel never calls ``self_attn``) made inside the model is stored as an
:class:`AttentionRecord`: the calling module's qualified name, the step (forward of the root
model), the call index, the heads, ``q`` and ``k`` (and ``v`` if asked), the scale and the
mask. Global module hooks (:func:`torch.nn.modules.module.register_module_forward_pre_hook`
and ``register_module_forward_hook``), filtered to the model's modules, tell which module is
running when the attention function is called.

Nothing is changed in the computation: the intercepted call receives its original arguments;
:class:`torch.nn.MultiheadAttention`, :class:`torch.nn.TransformerEncoderLayer` and
:class:`torch.nn.TransformerEncoder` run with the mode popped, and no hook is attached to any
module (encoder layers turn their fused kernel off when a module of theirs has hooks), so their
fused "fast paths" (eval mode without autograd, nested tensors for padded batches) run exactly
as without the recorder. Outputs are equal bit for bit. On exit (also after an exception) the
hooks are removed and the mode is popped.

Memory stays bounded by the filters: module-name patterns (:func:`fnmatch.fnmatchcase`, or
compiled regular expressions), steps, per-module call indices, heads, and a seeded subsample of
query rows; ``v`` is kept only with ``record_values=True``. Tensors are copied to the host as
NumPy arrays only for the selected calls, heads and rows.
"""

from __future__ import annotations

import fnmatch
import inspect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode

from .._array import to_numpy
from .._validation import InvalidParameterError, check_bool, check_random_state

__all__ = ["AttentionRecord", "AttentionRecorder"]

_SDPA = F.scaled_dot_product_attention
_SDPA_PARAMS = (
    "query",
    "key",
    "value",
    "attn_mask",
    "dropout_p",
    "is_causal",
    "scale",
    "enable_gqa",
)


@dataclass(frozen=True)
class AttentionRecord:
    """One recorded attention call (selected heads and query rows only).

    Attributes
    ----------
    module : str
        Qualified name of the calling module in the model (``""``: the model itself).
    step : int
        Number of forwards of the model begun before this call, from 0 (the denoising step
        when the model is called once per step).
    call : int
        Index of this call among all attention calls of ``module`` during the recording.
    position : int
        Index of this call within the current forward of ``module`` (an IP-Adapter processor
        makes two calls per forward: 0 for the text tokens, 1 for the image tokens).
    kind : {"sdpa", "multihead_attention"}
        How the call was seen.
    q : ndarray of shape (batch, n_kept_heads, n_kept_queries, head_dim)
        Queries, before any scaling.
    k : ndarray of shape (batch, n_kept_heads, n_keys, head_dim)
        Keys (grouped-query keys repeated to the query heads).
    v : ndarray of shape (batch, n_kept_heads, n_keys, value_dim) or None
        Values, only with ``record_values=True``.
    scale : float
        Factor of ``q k^T`` in the logits (``1 / sqrt(head_dim)`` unless the call set one).
    mask : ndarray of shape (batch, n_kept_heads, n_kept_queries, n_keys) or None
        Additive float64 mask of the logits (0 where a key takes part, ``-inf`` where it is
        masked), from boolean masks, float masks, ``is_causal`` or key padding masks.
    heads : ndarray of shape (n_kept_heads,)
        Head indices kept.
    query_index : ndarray of shape (n_kept_queries,)
        Query rows kept (sorted).
    n_heads : int
        Number of query heads of the call.
    n_queries : int
        Number of query rows of the call.
    """

    module: str
    step: int
    call: int
    position: int
    kind: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray | None
    scale: float
    mask: np.ndarray | None
    heads: np.ndarray
    query_index: np.ndarray
    n_heads: int
    n_queries: int

    def logits(self) -> np.ndarray:
        """Model logits ``scale * q k^T + mask`` in float64.

        Returns
        -------
        logits : ndarray of shape (batch, n_kept_heads, n_kept_queries, n_keys)
        """
        q = self.q.astype(np.float64, copy=False)
        k = self.k.astype(np.float64, copy=False)
        out = self.scale * (q @ np.swapaxes(k, -1, -2))
        return out if self.mask is None else out + self.mask

    def weights(self) -> np.ndarray:
        """Model attention weights ``softmax(scale * q k^T + mask)`` over the keys.

        Returns
        -------
        weights : ndarray of shape (batch, n_kept_heads, n_kept_queries, n_keys)
            Rows whose keys are all masked are NaN.
        """
        logits = self.logits()
        top = np.max(logits, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore"):
            e = np.exp(logits - top)
            return e / e.sum(axis=-1, keepdims=True)


def _as_4d(x: torch.Tensor) -> torch.Tensor:
    """(..., H, L, E) -> (B, H, L, E); (B, L, E) -> (B, 1, L, E); (L, E) -> (1, 1, L, E)."""
    if x.ndim >= 4:
        return x.reshape(-1, *x.shape[-3:])
    if x.ndim == 3:
        return x[:, None]
    if x.ndim == 2:
        return x[None, None]
    raise ValueError(f"attention input of shape {tuple(x.shape)}: expected at least (L, E)")


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """A boolean SDPA mask (True: takes part) or a float mask as an additive float64 mask."""
    if mask.dtype == torch.bool:
        zero = torch.zeros((), dtype=torch.float64, device=mask.device)
        return torch.where(mask, zero, torch.full_like(zero, -torch.inf))
    return mask.to(torch.float64)


def _patterns(modules: Any) -> list[Any] | None:
    if modules is None:
        return None
    items = [modules] if isinstance(modules, str | re.Pattern) else list(modules)
    if not items or not all(isinstance(p, str | re.Pattern) for p in items):
        raise InvalidParameterError(
            "modules must be None, a pattern string, a compiled regular expression or a "
            f"non-empty sequence of them, got {modules!r}"
        )
    return items


def _indices(value: Any, name: str) -> frozenset[int] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, Integral) else value
    try:
        items = list(items)
    except TypeError:
        raise InvalidParameterError(
            f"{name} must be None, an int or a sequence of ints, got {value!r}"
        ) from None
    if not items or not all(
        isinstance(i, Integral) and not isinstance(i, bool) and i >= 0 for i in items
    ):
        raise InvalidParameterError(
            f"{name} must be None, a non-negative int or a non-empty sequence of them, "
            f"got {value!r}"
        )
    return frozenset(int(i) for i in items)


def _name_matches(name: str, patterns: Sequence[Any] | None) -> bool:
    if patterns is None:
        return True
    for p in patterns:
        if isinstance(p, re.Pattern):
            if p.fullmatch(name):
                return True
        elif fnmatch.fnmatchcase(name, p):
            return True
    return False


class _InterceptMode(TorchFunctionMode):
    """Sends every ``scaled_dot_product_attention`` call to the recorder, then runs it as is."""

    def __init__(self, recorder: AttentionRecorder):
        super().__init__()
        self._recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _SDPA:
            self._recorder._on_sdpa(args, kwargs)
        return func(*args, **kwargs)


_MHA_SIGNATURE = inspect.signature(torch.nn.MultiheadAttention.forward)
_ENCODER_LAYER_SIGNATURE = inspect.signature(torch.nn.TransformerEncoderLayer.forward)
#: Modules with a fused "fast path" that any active TorchFunctionMode turns off: the mode is
#: popped while they run, so their outputs stay bit for bit those of an unrecorded run.
_FAST_PATH = (
    torch.nn.MultiheadAttention,
    torch.nn.TransformerEncoderLayer,
    torch.nn.TransformerEncoder,
)


def _mha_mask(
    attn_mask: Any, key_padding_mask: Any, B: int, H: int, L: int, S: int, n_extra: int
) -> torch.Tensor | None:
    """MultiheadAttention masks (boolean True: masked) as one additive (B, H, L, S) mask.

    ``n_extra`` zero columns stand for the keys appended by ``bias_k`` / ``add_zero_attn``,
    which no mask covers (as in :func:`torch.nn.functional.multi_head_attention_forward`).
    """
    total = None
    for mask, kind in ((attn_mask, "attn"), (key_padding_mask, "kpm")):
        if mask is None:
            continue
        if mask.dtype == torch.bool:
            m = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device)
            m = m.masked_fill(mask, -torch.inf)
        else:
            m = mask.to(torch.float64)
        if kind == "kpm":
            m = m.reshape(-1, 1, 1, m.shape[-1])
        elif m.ndim == 3:
            m = m.reshape(B, H, L, m.shape[-1])
        if n_extra:
            m = F.pad(m, (0, n_extra))
        total = m if total is None else total + m
    return None if total is None else total.expand(B, H, L, S)


def _mha_qkv(module: torch.nn.MultiheadAttention, p: dict, values: bool) -> tuple:
    """q, k, (v) of a MultiheadAttention call, (B, H, L, hd), and its additive mask."""
    query, key, value = p["query"], p["key"], p["value"]
    if query.dim() == 2:  # unbatched (L, E)
        query, key, value = query[None], key[None], value[None]
    elif not module.batch_first:  # (L, B, E)
        query, key, value = (x.transpose(0, 1) for x in (query, key, value))
    E, H = module.embed_dim, module.num_heads
    b = module.in_proj_bias
    b_q, b_k, b_v = (None,) * 3 if b is None else b.chunk(3)
    if module.in_proj_weight is not None:
        w_q, w_k, w_v = module.in_proj_weight.chunk(3)
    else:
        w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
    q = F.linear(query, w_q, b_q)
    k = F.linear(key, w_k, b_k)
    v = F.linear(value, w_v, b_v) if values else None
    B, L = q.shape[:2]
    n_extra = 0
    if module.bias_k is not None:
        k = torch.cat([k, module.bias_k.expand(B, 1, E)], dim=1)
        v = None if v is None else torch.cat([v, module.bias_v.expand(B, 1, E)], dim=1)
        n_extra += 1
    if module.add_zero_attn:
        k = F.pad(k, (0, 0, 0, 1))
        v = None if v is None else F.pad(v, (0, 0, 0, 1))
        n_extra += 1
    S = k.shape[1]
    kpm = p["key_padding_mask"]
    if kpm is not None and kpm.dim() == 1:
        kpm = kpm[None]
    mask = _mha_mask(p["attn_mask"], kpm, B, H, L, S, n_extra)

    def heads(x):
        return x.reshape(B, x.shape[1], H, -1).transpose(1, 2)

    return heads(q), heads(k), None if v is None else heads(v), mask


class AttentionRecorder:
    """Context manager recording the attention calls made inside a model's forward.

    Parameters
    ----------
    model : torch.nn.Module
        The model (its modules are watched by global module hooks, removed on exit).
    modules : str, re.Pattern or sequence of them, optional
        Keep only calls whose module's qualified name matches one of the patterns
        (:func:`fnmatch.fnmatchcase` for strings, ``fullmatch`` for compiled regular
        expressions), e.g. ``"decoder.layers.3.*"``. ``None``: every module. A pattern that
        matches no module name is an error.
    steps : int or sequence of int, optional
        Keep only calls made during these forwards of ``model`` (0 is the first forward in the
        recording; the denoising step when the model is called once per step).
    calls : int or sequence of int, optional
        Keep only these per-module call indices (the n-th attention call of a module).
    heads : int or sequence of int, optional
        Keep only these heads (a head index beyond a call's number of heads is an error).
    max_queries : int, optional
        Keep at most this many query rows per call, a uniform subsample without replacement
        drawn with a local :class:`torch.Generator` seeded from ``random_state``.
    record_values : bool, default=False
        Also keep ``v``.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        Seed of the query subsample.

    Attributes
    ----------
    records_ : list of AttentionRecord
        The kept calls, in call order.
    calls_seen_ : dict of str to int
        Number of attention calls of every module that made one, kept or not.

    Raises
    ------
    ValueError
        On exit without an exception, if nothing was recorded: the model made no attention
        call the recorder can see (the message says so), or the filters excluded all of them
        (the message lists the calls seen).

    Notes
    -----
    The recorder sees :func:`torch.nn.functional.scaled_dot_product_attention` and
    :class:`torch.nn.MultiheadAttention` (and modules built on it:
    :class:`torch.nn.TransformerDecoder`, :class:`torch.nn.TransformerEncoder`, ...).
    Attention written as explicit ``matmul`` and ``softmax`` is invisible to it. ``q``, ``k``
    are recorded before dropout. In the nested-tensor path of
    :class:`torch.nn.TransformerEncoder` (eval, no autograd, a key padding mask) the padded
    positions are no queries (the records have as many rows as the longest sequence). One
    recorder at a time.

    Examples
    --------
    >>> import torch
    >>> from skflow.inspection import AttentionRecorder
    >>> layer = torch.nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    >>> x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    >>> with AttentionRecorder(layer, modules="multihead_attn") as rec:
    ...     y = layer(x, memory)
    >>> [(r.module, r.q.shape, r.k.shape) for r in rec.records_]
    [('multihead_attn', (2, 4, 5, 4), (2, 4, 7, 4))]
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        modules: str | re.Pattern | Sequence[str | re.Pattern] | None = None,
        steps: int | Iterable[int] | None = None,
        calls: int | Iterable[int] | None = None,
        heads: int | Iterable[int] | None = None,
        max_queries: int | None = None,
        record_values: bool = False,
        random_state: Any = None,
    ):
        self.model = model
        self.modules = modules
        self.steps = steps
        self.calls = calls
        self.heads = heads
        self.max_queries = max_queries
        self.record_values = record_values
        self.random_state = random_state

    # -- set-up and tear-down ----------------------------------------------------------------
    def _validate(self) -> None:
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(self.model).__name__}")
        self._patterns = _patterns(self.modules)
        self._steps = _indices(self.steps, "steps")
        self._calls = _indices(self.calls, "calls")
        heads = _indices(self.heads, "heads")
        self._heads = None if heads is None else sorted(heads)
        mq = self.max_queries
        if mq is not None and (isinstance(mq, bool) or not isinstance(mq, Integral) or mq < 1):
            raise InvalidParameterError(f"max_queries must be None or a positive int, got {mq!r}.")
        check_bool(self.record_values, "record_values")
        names = [name for name, _ in self.model.named_modules()]
        if self._patterns is not None:
            for p in self._patterns:
                if not any(_name_matches(n, [p]) for n in names):
                    shown = ", ".join(repr(n) for n in names[1:8])
                    raise ValueError(
                        f"modules pattern {p!r} matches no module of "
                        f"{type(self.model).__name__}; its module names look like {shown}"
                    )

    def __enter__(self) -> AttentionRecorder:
        self._validate()
        seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        self._generator = torch.Generator().manual_seed(int(seed))
        self.records_: list[AttentionRecord] = []
        self.calls_seen_: dict[str, int] = {}
        self._stack: list[list] = []  # [name, position counter] of the running modules
        self._step = -1
        self._suspended = None
        self._covered: set = set()  # self_attn modules recorded by their encoder layer
        # Global module hooks, filtered to the model's modules: per-module hooks would turn
        # off nn.TransformerEncoderLayer's fused fast path (it checks for them).
        self._names = {id(m): (name, m) for name, m in self.model.named_modules()}
        self._handles = [
            register_module_forward_pre_hook(self._pre_hook),
            register_module_forward_hook(self._post_hook, with_kwargs=True, always_call=True),
        ]
        self._mode = _InterceptMode(self)
        self._mode.__enter__()
        self._mode_on = True
        self._depth = torch._C._len_torch_function_stack()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._mode_on:
            self._mode.__exit__(None, None, None)
            self._mode_on = False
        self._suspended = None
        self._stack = []
        if exc_type is None and not self.records_:
            raise ValueError(self._nothing_recorded())
        return False

    def _nothing_recorded(self) -> str:
        model = type(self.model).__name__
        if not self.calls_seen_:
            return (
                f"no attention call was made inside {model} while recording: the recorder sees "
                "torch.nn.functional.scaled_dot_product_attention and "
                "torch.nn.MultiheadAttention, not attention written as explicit matmul and "
                "softmax (did the forward run inside the 'with' block?)"
            )
        seen = ", ".join(f"{name or '<model>'!r} ({n})" for name, n in self.calls_seen_.items())
        return (
            f"none of the attention calls made inside {model} passed the filters "
            f"(modules={self.modules!r}, steps={self.steps!r}, calls={self.calls!r}); "
            f"calls seen per module: {seen}"
        )

    # -- suspension of the mode around MultiheadAttention --------------------------------------
    def _suspend(self, module: torch.nn.Module) -> None:
        # Popping is only safe while our mode is on top of the stack.
        if self._mode_on and torch._C._len_torch_function_stack() == self._depth:
            self._mode.__exit__(None, None, None)
            self._mode_on = False
            self._suspended = module

    def _resume(self, module: torch.nn.Module) -> None:
        if self._suspended is module:
            self._mode.__enter__()
            self._mode_on = True
            self._suspended = None

    # -- hooks -------------------------------------------------------------------------------
    def _name_of(self, module: torch.nn.Module) -> str | None:
        entry = self._names.get(id(module))
        return entry[0] if entry is not None and entry[1] is module else None

    def _pre_hook(self, module, args):
        name = self._name_of(module)
        if name is None:
            return  # a module of another model
        if module is self.model:
            self._step += 1
        self._stack.append([name, 0])
        if isinstance(module, _FAST_PATH):
            self._suspend(module)
        if isinstance(module, torch.nn.TransformerEncoderLayer):
            self._covered.add(module.self_attn)  # recorded from the layer's input

    def _post_hook(self, module, args, *rest):
        # rest is (kwargs, output) after a forward, (output,) after an exception in it.
        name = self._name_of(module)
        if name is None:
            return
        try:
            if len(rest) == 2:
                if isinstance(module, torch.nn.TransformerEncoderLayer):
                    self._on_encoder_layer(name, module, args, rest[0])
                elif isinstance(module, torch.nn.MultiheadAttention):
                    if module not in self._covered:
                        self._on_mha(module, args, rest[0])
        finally:
            if self._stack and self._stack[-1][0] == name:
                self._stack.pop()
            if isinstance(module, torch.nn.TransformerEncoderLayer):
                self._covered.discard(module.self_attn)
            self._resume(module)

    def _select(self, name: str | None = None) -> tuple[str, int, int] | None:
        """Count the call of the running module (or of ``name``, a module that is not running
        yet: position 0); its (name, call, position) if kept."""
        if name is not None:
            position = 0
        elif not self._stack:
            return None  # a call outside the model
        else:
            frame = self._stack[-1]
            name, position = frame[0], frame[1]
            frame[1] += 1
        call = self.calls_seen_.get(name, 0)
        self.calls_seen_[name] = call + 1
        if not _name_matches(name, self._patterns):
            return None
        if self._steps is not None and self._step not in self._steps:
            return None
        if self._calls is not None and call not in self._calls:
            return None
        return name, call, position

    def _on_sdpa(self, args: tuple, kwargs: dict) -> None:
        where = self._select()
        if where is None:
            return
        p = dict(zip(_SDPA_PARAMS, args, strict=False))
        p.update(kwargs)
        q, k, v = _as_4d(p["query"]), _as_4d(p["key"]), _as_4d(p["value"])
        if p.get("enable_gqa") and k.shape[1] != q.shape[1]:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        L, S = q.shape[-2], k.shape[-2]
        mask = p.get("attn_mask")
        if p.get("is_causal"):
            mask = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        if mask is not None:
            full = _additive(mask).expand(*p["query"].shape[:-1], S)
            mask = full.reshape(q.shape[0], q.shape[1], L, S)
        scale = p.get("scale")
        scale = 1.0 / float(np.sqrt(q.shape[-1])) if scale is None else float(scale)
        self._store(where, "sdpa", q, k, v, scale, mask)

    def _on_mha(self, module: torch.nn.MultiheadAttention, args: tuple, kwargs: dict) -> None:
        where = self._select()
        if where is None:
            return
        bound = _MHA_SIGNATURE.bind(module, *args, **kwargs)
        bound.apply_defaults()
        with torch.no_grad():
            q, k, v, mask = _mha_qkv(module, bound.arguments, self.record_values)
        scale = 1.0 / float(np.sqrt(module.head_dim))
        self._store(where, "multihead_attention", q, k, v, scale, mask)

    def _on_encoder_layer(self, name: str, layer: Any, args: tuple, kwargs: dict) -> None:
        """The self-attention of a TransformerEncoderLayer, from the layer's input.

        In eval mode without autograd the layer runs one fused kernel and never calls its
        ``self_attn``; the record is therefore made here, after the layer's forward, from its
        inputs (and ``self_attn``'s own hook skips it). Inside ``nn.TransformerEncoder``'s
        nested-tensor path the input is a nested tensor: it is padded and its padding becomes
        a key padding mask.
        """
        where = self._select(f"{name}.self_attn" if name else "self_attn")
        if where is None:
            return
        bound = _ENCODER_LAYER_SIGNATURE.bind(layer, *args, **kwargs)
        bound.apply_defaults()
        x, kpm = bound.arguments["src"], bound.arguments["src_key_padding_mask"]
        with torch.no_grad():
            if x.is_nested:
                lengths = torch.tensor([len(t) for t in x.unbind()], device=x.device)
                x = torch.nested.to_padded_tensor(x, 0.0)
                kpm = torch.arange(x.shape[1], device=x.device)[None] >= lengths[:, None]
            a = layer.norm1(x) if layer.norm_first else x
            p = {"query": a, "key": a, "value": a, "key_padding_mask": kpm}
            p["attn_mask"] = bound.arguments["src_mask"]
            q, k, v, mask = _mha_qkv(layer.self_attn, p, self.record_values)
        scale = 1.0 / float(np.sqrt(layer.self_attn.head_dim))
        self._store(where, "multihead_attention", q, k, v, scale, mask)

    def _store(self, where, kind, q, k, v, scale, mask) -> None:
        name, call, position = where
        _, H, L, _ = q.shape
        heads = list(range(H)) if self._heads is None else self._heads
        if heads[-1] >= H:
            raise ValueError(
                f"heads={self.heads!r}, but the attention call of module {name!r} has {H} heads"
            )
        rows = np.arange(L)
        if self.max_queries is not None and L > self.max_queries:
            perm = torch.randperm(L, generator=self._generator)[: self.max_queries]
            rows = np.sort(perm.numpy())
        hi = torch.as_tensor(heads, device=q.device)
        ri = torch.as_tensor(rows, device=q.device)

        def pick(x):  # keys/values shared by all heads are repeated to them
            return x.expand(-1, H, -1, -1)[:, hi]

        record = AttentionRecord(
            module=name,
            step=self._step,
            call=call,
            position=position,
            kind=kind,
            q=to_numpy(q[:, hi][:, :, ri]),
            k=to_numpy(pick(k)),
            v=None if (v is None or not self.record_values) else to_numpy(pick(v)),
            scale=scale,
            mask=None if mask is None else to_numpy(mask[:, hi][:, :, ri]),
            heads=np.asarray(heads),
            query_index=rows,
            n_heads=int(H),
            n_queries=int(L),
        )
        self.records_.append(record)
