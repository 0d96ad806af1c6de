"""Nadaraya-Watson correspondence of recorded attention calls.

For one head of one recorded call with queries ``q_j``, keys ``k_i``, scale ``c`` and additive
mask ``M``, the model's weights are

.. math::

    a_{ji} = \\operatorname{softmax}_i\\big(c\\, \\langle q_j, k_i \\rangle + M_{ji}\\big),

and the Gaussian-kernel Nadaraya-Watson weights of the same queries and keys are

.. math::

    w_{ji} = \\operatorname{softmax}_i\\Big(-\\frac{\\lVert q_j - k_i \\rVert^2}{2 h^2}
    + M_{ji}\\Big), \\qquad h = 1 / \\sqrt{c}.

**Convention.** With the matched bandwidth ``h = 1/sqrt(c)`` the two logits differ only by the
key-norm term: ``-c ||q_j - k_i||^2 / 2 = c <q_j, k_i> - c ||k_i||^2 / 2 - c ||q_j||^2 / 2``,
and the last term is constant along a row, so

.. math::

    \\log a_{ji} - \\log w_{ji} = \\frac{c}{2} \\lVert k_i \\rVert^2 + \\text{const}_j .

Keys of equal norm make the attention exactly Gaussian-kernel smoothing (correlation 1); the
spread of ``c ||k_i||^2 / 2`` over the keys (``key_norm_dispersion``, its standard deviation)
is what separates the two.

**Masks and padding.** Only what the model attends to is compared. A key is *masked* in a row
where the additive mask is at most ``-1e4`` (:data:`MASKED_BELOW`): ``-inf`` (boolean masks,
``is_causal``, key padding masks), ``-1e4`` (diffusers' ``encoder_attention_mask``) and the
dtype's minimum (transformers) all mask alike; larger values (position biases) stay part of
both logits. Each row is correlated over its unmasked keys only, so masked keys never count
as agreeing ties. A row is left out (NaN) when all its keys are masked and, in
self-attention (as many keys as query positions), when its own position is masked as a key:
the query rows of padding. A padded batch therefore gives the numbers of its sequences run
one at a time.

The NW logits are computed by :func:`skflow.field.nw_logits` at ``t = 1`` with the constant
bandwidth ``h`` (``a = 1/h^2``, ``b = 1/(2 h^2)``: exactly the kernel above). Spearman
correlations rank the logits, which have the ranks of the weights without their underflow to
exact zeros (ties) in sharp rows; Pearson correlations compare the weights themselves. Both are
computed row by row by :func:`skflow.metrics.nw_weight_correlation`; a head's number is the
median over its rows (all batch items and kept query rows).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, fields
from numbers import Real
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, check_choice
from ..field import nw_logits
from ..metrics import nw_weight_correlation
from .recording import AttentionRecord, AttentionRecorder

__all__ = ["MASKED_BELOW", "NWCorrespondence", "attention_weights", "nw_correspondence"]

#: Additive mask values at or below this mask their key: ``-inf`` and the large finite
#: negatives that libraries write instead (``-1e4``, a dtype's minimum). No attention bias
#: that leaves a key in play comes near it: ``exp(-1e4)`` is 0 in every floating-point type.
MASKED_BELOW = -1e4

_GROUPS = ("step", "call", "position", "module", "head")


@dataclass(frozen=True)
class NWCorrespondence:
    """NW correspondence per (module, step, call, head): aligned 1-D arrays, one entry each.

    Attributes
    ----------
    module : ndarray of str, shape (n_entries,)
        Qualified module name of the call.
    step, call, position, head : ndarray of int, shape (n_entries,)
        As in :class:`~skflow.inspection.AttentionRecord`; ``head`` is the head index.
    spearman : ndarray of shape (n_entries,)
        Median over rows of the row-wise Spearman correlation of model and NW weights.
    pearson : ndarray of shape (n_entries,)
        Median over rows of the row-wise Pearson correlation of model and NW weights.
    fraction_above : ndarray of shape (n_entries,)
        Fraction of the head's rows with Spearman above ``threshold``.
    key_norm_dispersion : ndarray of shape (n_entries,)
        Standard deviation over the keys of ``scale * ||k_i||^2 / 2`` (mean over the batch):
        0 means the head is exactly Gaussian-kernel smoothing.
    n_rows : ndarray of int, shape (n_entries,)
        Rows (batch items times kept queries) behind each median.
    row_spearman : tuple of ndarray
        Per entry, the row-wise Spearman correlations (NaN for constant rows).
    threshold : float
        Spearman above which a head counts as NW-like.
    """

    module: np.ndarray
    step: np.ndarray
    call: np.ndarray
    position: np.ndarray
    head: np.ndarray
    spearman: np.ndarray
    pearson: np.ndarray
    fraction_above: np.ndarray
    key_norm_dispersion: np.ndarray
    n_rows: np.ndarray
    row_spearman: tuple
    threshold: float

    def __len__(self) -> int:
        return len(self.spearman)

    def to_records(self) -> list[dict]:
        """One plain dict per entry (without the per-row arrays), e.g. for a DataFrame.

        Returns
        -------
        records : list of dict
            Keys ``module``, ``step``, ``call``, ``position``, ``head``, ``spearman``,
            ``pearson``, ``fraction_above``, ``key_norm_dispersion``, ``n_rows``.
        """
        names = [f.name for f in fields(self) if f.name not in ("row_spearman", "threshold")]
        cols = {n: getattr(self, n).tolist() for n in names}
        return [{n: cols[n][i] for n in names} for i in range(len(self))]

    def _groups(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        check_choice(by, "by", _GROUPS)
        keys = getattr(self, by)
        return np.unique(keys), keys

    def fraction_nw_like(self, by: str = "step") -> tuple[np.ndarray, np.ndarray]:
        """Fraction of (module, head) entries with median Spearman above ``threshold``.

        Parameters
        ----------
        by : {"step", "call", "position", "module", "head"}, default="step"
            Grouping key.

        Returns
        -------
        keys : ndarray of shape (n_groups,)
            Sorted group keys.
        fraction : ndarray of shape (n_groups,)
            Per group, over its entries with a finite Spearman value (NaN if none).
        """
        keys, col = self._groups(by)
        frac = np.full(len(keys), np.nan)
        for g, key in enumerate(keys):
            rho = self.spearman[col == key]
            rho = rho[np.isfinite(rho)]
            if rho.size:
                frac[g] = np.mean(rho > self.threshold)
        return keys, frac

    def median_by(self, by: str = "step", stat: str = "spearman") -> tuple[np.ndarray, np.ndarray]:
        """Median over entries of ``stat`` per group.

        Parameters
        ----------
        by : {"step", "call", "position", "module", "head"}, default="step"
            Grouping key.
        stat : {"spearman", "pearson", "key_norm_dispersion", "fraction_above"}
            Statistic.

        Returns
        -------
        keys, median : ndarray of shape (n_groups,)
        """
        check_choice(stat, "stat", ("spearman", "pearson", "key_norm_dispersion", "fraction_above"))
        keys, col = self._groups(by)
        values = getattr(self, stat)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med = np.array([np.nanmedian(values[col == key]) for key in keys])
        return keys, med


def _as_records(recording: Any) -> list[AttentionRecord]:
    records = recording.records_ if isinstance(recording, AttentionRecorder) else recording
    if isinstance(records, AttentionRecord):
        records = [records]
    if not isinstance(records, Iterable):
        raise TypeError(f"expected an AttentionRecorder or AttentionRecords, got {recording!r}")
    records = list(records)
    if not records:
        raise ValueError("the recording is empty: no attention call to analyse")
    for r in records:
        if not isinstance(r, AttentionRecord):
            raise TypeError(f"expected AttentionRecord items, got {type(r).__name__}")
    return records


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax; masked (-inf) entries get weight 0, rows with no finite entry are uniform
    (constant, so their correlation is NaN)."""
    finite = np.isfinite(logits)
    top = np.where(finite, logits, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(finite, np.exp(np.where(finite, logits, 0.0) - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 1.0 / logits.shape[-1])


def _nw_logits(record: AttentionRecord) -> np.ndarray:
    """Gaussian-kernel NW logits (B, h, l, S) at ``h = 1/sqrt(scale)``, without the mask."""
    h = 1.0 / np.sqrt(record.scale)

    def bandwidth(t):
        return np.full(np.shape(t), h)

    q = record.q.astype(np.float64, copy=False)
    k = record.k.astype(np.float64, copy=False)
    out = np.empty(q.shape[:-1] + (k.shape[-2],))
    for b in range(q.shape[0]):
        for j in range(q.shape[1]):
            out[b, j] = nw_logits(q[b, j], k[b, j], 1.0, bandwidth=bandwidth)
    return out


def _kept_keys(record: AttentionRecord) -> np.ndarray:
    """(B, h, l, S): True where the key takes part in the row (mask above MASKED_BELOW)."""
    shape = record.q.shape[:-1] + (record.k.shape[-2],)
    if record.mask is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(record.mask > MASKED_BELOW, shape)


def _valid_rows(record: AttentionRecord, keep: np.ndarray) -> np.ndarray:
    """(B, h, l): rows that see a key and, in self-attention, whose own position is a key."""
    valid = keep.any(axis=-1)
    if record.n_queries == keep.shape[-1]:  # self-attention: query row j is key position j
        rows = np.arange(keep.shape[-2])
        valid = valid & keep[..., rows, record.query_index]
    return valid


def _rows(a: np.ndarray) -> np.ndarray:
    """(B, h, l, S) -> (h, B * l, S)."""
    return np.swapaxes(a, 0, 1).reshape(a.shape[1], -1, a.shape[-1])


def _record_stats(record: AttentionRecord) -> dict:
    keep = _kept_keys(record)
    valid = _valid_rows(record, keep)
    bias = 0.0 if record.mask is None else np.where(keep, record.mask, 0.0)
    q = record.q.astype(np.float64, copy=False)
    k = record.k.astype(np.float64, copy=False)
    model = np.where(keep, record.scale * (q @ np.swapaxes(k, -1, -2)) + bias, -np.inf)
    nw = np.where(keep, _nw_logits(record) + bias, -np.inf)
    spear = nw_weight_correlation(_rows(model), _rows(nw), mask=_rows(keep)).per_row
    pear = nw_weight_correlation(
        _rows(_softmax(model)), _rows(_softmax(nw)), method="pearson", mask=_rows(keep)
    ).per_row
    invalid = ~_rows(valid[..., None])[..., 0]
    spear[invalid], pear[invalid] = np.nan, np.nan
    # key norms of the keys some valid row attends to (padding keys left out)
    used = (keep & valid[..., None]).any(axis=-2)  # (B, h, S)
    half_norms = np.where(used, 0.5 * record.scale * np.sum(k * k, axis=-1), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        disp = np.nanmean(np.nanstd(half_norms, axis=-1), axis=0)
    return {"spear": spear, "pear": pear, "disp": disp}


def nw_correspondence(recording: Any, *, threshold: float = 0.9) -> NWCorrespondence:
    """Compare every recorded head with Gaussian-kernel NW weights at the matched bandwidth.

    Parameters
    ----------
    recording : AttentionRecorder or sequence of AttentionRecord
        A closed recorder (its ``records_``) or records.
    threshold : float, default=0.9
        Median Spearman above which a head counts as NW-like (the paper's figure uses 0.9).

    Returns
    -------
    result : NWCorrespondence
        One entry per (record, kept head); see the module docstring for the formulas.

    Raises
    ------
    ValueError
        If the recording is empty or ``threshold`` is not a real number.

    Examples
    --------
    >>> import torch
    >>> from skflow.inspection import AttentionRecorder, nw_correspondence
    >>> class Attend(torch.nn.Module):
    ...     def forward(self, q, k):
    ...         return torch.nn.functional.scaled_dot_product_attention(q, k, k)
    >>> g = torch.Generator().manual_seed(0)
    >>> q = torch.randn(1, 2, 8, 4, generator=g)
    >>> k = torch.nn.functional.normalize(torch.randn(1, 2, 6, 4, generator=g), dim=-1)
    >>> with AttentionRecorder(Attend()) as rec:  # keys of equal norm: exactly NW
    ...     _ = rec.model(q, k)
    >>> res = nw_correspondence(rec)
    >>> res.spearman.round(6).tolist(), res.key_norm_dispersion.round(6).tolist()
    ([1.0, 1.0], [0.0, 0.0])
    """
    if isinstance(threshold, bool) or not isinstance(threshold, Real):
        # the wording of metrics.nw_weight_correlation, which receives the threshold
        raise InvalidParameterError(f"threshold must be a real number, got {threshold!r}.")
    cols: dict[str, list] = {n: [] for n in ("module", "step", "call", "position", "head")}
    stats: dict[str, list] = {n: [] for n in ("spearman", "pearson", "frac", "disp", "n", "rows")}
    for record in _as_records(recording):
        s = _record_stats(record)
        for j, head in enumerate(record.heads):
            rho, r = s["spear"][j], s["pear"][j]
            ok = np.isfinite(rho)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                stats["spearman"].append(np.nanmedian(rho) if ok.any() else np.nan)
                stats["pearson"].append(np.nanmedian(r) if np.isfinite(r).any() else np.nan)
            stats["frac"].append(np.mean(rho[ok] > threshold) if ok.any() else np.nan)
            stats["disp"].append(s["disp"][j])
            stats["n"].append(int(ok.sum()))
            stats["rows"].append(rho)
            for name, value in (
                ("module", record.module),
                ("step", record.step),
                ("call", record.call),
                ("position", record.position),
                ("head", int(head)),
            ):
                cols[name].append(value)
    return NWCorrespondence(
        module=np.asarray(cols["module"], dtype=str),
        step=np.asarray(cols["step"], dtype=int),
        call=np.asarray(cols["call"], dtype=int),
        position=np.asarray(cols["position"], dtype=int),
        head=np.asarray(cols["head"], dtype=int),
        spearman=np.asarray(stats["spearman"], dtype=float),
        pearson=np.asarray(stats["pearson"], dtype=float),
        fraction_above=np.asarray(stats["frac"], dtype=float),
        key_norm_dispersion=np.asarray(stats["disp"], dtype=float),
        n_rows=np.asarray(stats["n"], dtype=int),
        row_spearman=tuple(stats["rows"]),
        threshold=float(threshold),
    )


def attention_weights(recording: Any, module: str) -> np.ndarray:
    """The model's attention weights of one module, its calls joined along the query rows.

    Parameters
    ----------
    recording : AttentionRecorder or sequence of AttentionRecord
        A closed recorder or records.
    module : str
        Qualified module name (exact).

    Returns
    -------
    weights : ndarray of shape (batch, n_kept_heads, n_rows, n_keys)
        ``softmax(scale * q k^T + mask)`` of each call of ``module`` (in call order), joined
        along the rows; useful when a model splits its queries into several calls.

    Raises
    ------
    ValueError
        If no record of ``module`` exists, or its calls differ in batch, heads or keys.

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> from skflow.inspection import AttentionRecorder, attention_weights
    >>> class Chunked(torch.nn.Module):
    ...     def forward(self, q, k):  # queries in two chunks: two calls
    ...         parts = [F.scaled_dot_product_attention(c, k, k) for c in q.chunk(2, dim=2)]
    ...         return torch.cat(parts, dim=2)
    >>> m = Chunked()
    >>> with AttentionRecorder(m) as rec:
    ...     _ = m(torch.randn(1, 2, 6, 4), torch.randn(1, 2, 5, 4))
    >>> attention_weights(rec, "").shape
    (1, 2, 6, 5)
    """
    records = [r for r in _as_records(recording) if r.module == module]
    if not records:
        names = sorted({r.module for r in _as_records(recording)})
        raise ValueError(f"no record of module {module!r}; recorded modules: {names}")
    parts = [r.weights() for r in records]
    shapes = {(p.shape[0], p.shape[1], p.shape[3]) for p in parts}
    if len(shapes) != 1:
        raise ValueError(
            f"the calls of module {module!r} differ in batch, heads or keys: {sorted(shapes)}"
        )
    return np.concatenate(parts, axis=2)
