r"""A certified pruned engine for the exact NW local mean on large supports.

The exact field needs the softmax-weighted mean ``m(q) = sum_i w_i v_i`` of the (centred)
values over the whole support, ``w = softmax_i(l_i)``, ``l_i = a <q, k_i> - b ||k_i||^2``
(:func:`skflow.field.kernel_coefficients`). Late in the flow almost all of the weight sits on
a handful of points, so most of the support can be skipped -- here with a proof of how much
was skipped and of the error this causes in the mean.

Derivation of the bound
-----------------------
*Completing the square.* For ``b > 0`` put ``z = (a / 2b) q`` (``a / 2b = 1 / t`` for every
bandwidth of :func:`~skflow.field.kernel_coefficients`: ``a = 1 / (t h^2)``, ``b = 1 / (2 h^2)``).
Then

.. math::

    l_i = -b \|k_i - z\|^2 + b \|z\|^2 ,

and the last term is the same for every ``i``, so it cancels in the softmax; the engine works
with the *shifted logits* ``s_i = -b ||k_i - z||^2 <= 0``. The keys are clustered once
(:class:`ClusteredSupport`); cluster ``j`` has centre ``c_j``, key radius
``r_j = max_{i in j} ||k_i - c_j||`` and size ``n_j``. By the triangle inequality
``||k_i - z|| >= max(0, ||c_j - z|| - r_j)`` for every member, hence

.. math::

    s_i \le \mathrm{ub}_j := -b \, \max(0, \|c_j - z\| - r_j)^2 , \qquad
    \sum_{i \in j} e^{s_i} \le n_j e^{\mathrm{ub}_j}.

(For ``b <= 0`` the square cannot be completed and no bound of this kind exists; such
coefficients are refused. ``a = b = 0`` is the ``t = 0`` limit: uniform weights, computed
exactly.)

*Neglected mass.* Let ``E`` be the evaluated points, ``Z_E = sum_{i in E} e^{s_i}`` (computed
exactly), ``Z_S`` the same sum over the skipped points and ``U = sum_{skipped j} n_j
e^{ub_j} >= Z_S``. The true total weight of the skipped points is

.. math::

    \varepsilon = \frac{Z_S}{Z_E + Z_S} \le \frac{U}{Z_E + U}
    \qquad (x \mapsto x / (Z_E + x) \text{ is increasing}).

*Error of the mean.* With ``m_E`` the normalised mean over ``E`` and ``m_S`` the one over the
skipped points, ``m_true = (1 - eps) m_E + eps m_S``, so

.. math::

    \|m_E - m_{\mathrm{true}}\| = \varepsilon \|m_E - m_S\|
    \le \varepsilon \max_{\text{skipped } i} \|v_i - m_E\|
    \le \varepsilon \max_{\text{skipped } j} (\|\hat c_j - m_E\| + \hat r_j),

where ``hat c_j`` and ``hat r_j`` are the value-space centre and radius of cluster ``j`` (the
values need not equal the keys, e.g. with a projection).

*Rounding.* The reported ``mean_error`` also covers the floating-point error of the evaluated
part, in the standard model ``fl(x op y) = (x op y)(1 + delta)``, ``|delta| <= eps`` (taken as
the machine epsilon, twice the unit roundoff, to stay conservative), ``gamma_n = n eps /
(1 - n eps)``. Per block the shifted logits are computed as ``-b (||k_i - c0||^2 - 2 <k_i - c0,
z - c0> + ||z - c0||^2)`` around a reference centre ``c0`` of the block, so with
``R0 >= max_{evaluated i} ||k_i - c0||`` every shifted logit is off by at most
``Delta = gamma_{k+4} b (R0 + ||z - c0||)^2``, and ``exp(s_i - M)`` by a further ``~760 eps``
relative (its argument is at most ~745 in magnitude where it does not underflow). Writing
``w'`` for the computed weights, each ``w'_i / w_i`` lies in ``[e^{-2 delta}, e^{2 delta}]``
(``delta`` the total per-point logit error), hence

.. math::

    \|m'_E - m_E\| \le (e^{2\delta} - 1) \sum_i w_i \|v_i - m_E\|
    \le (e^{2\delta} - 1) e^{2 \delta} \sqrt{\textstyle\sum_i w'_i \|v_i - m'_E\|^2},

plus the summation error of ``sum_i e^{s_i - M} v_i`` and of the normaliser,
``<= 3 gamma_N max_i ||v_i||`` (``N`` the rows summed in one working-precision product, the
rest accumulated in float64). ``Z_E`` enters the neglected-mass bound through a lower bound
``Z_E e^{-delta - 2 gamma_N}``. The upper bounds ``ub_j`` are computed in float64 from
lower bounds of ``||c_j - z||`` (inflated for rounding) and are rounded upwards.

Algorithm
---------
Exactly one pass over the evaluated rows, no ``(n, m)`` matrix:

1. (host, float64) ``z``, the distances ``||c_j - z||`` and the cluster bounds
   ``L_j = ub_j + log n_j`` for all queries, ``O(n C k)`` for ``C`` clusters;
2. queries are sorted by their best cluster (``argmax_j L_j``) and cut into blocks of
   ``block_size`` spatially coherent queries; per block:
3. the union of the block's best clusters is evaluated exactly (online log-sum-exp: running
   maximum, normaliser and weighted sums), which gives each query a lower bound ``lse_1`` of
   its log-normaliser;
4. a cluster is needed by a query if ``L_j > lse_1 + log(rtol) - log(C)`` (skipping all the
   others then leaves ``eps <= rtol``); the union over the block is evaluated -- or, when it
   covers more than ``dense_fraction`` of the support, every remaining row (the plain dense
   block, so early times cost about one dense evaluation);
5. each query's ``neglected`` and ``mean_error`` are computed from the clusters actually
   skipped for its block.

Rows of a cluster are contiguous (the support is permuted once), so runs of kept clusters are
read as views; short runs are gathered into chunks of at most ``2**22 / block_size`` rows.
Working precision: float64, or float32 when index and queries are float32 and the block's
float32 logit error bound ``Delta`` is below ``float32_tolerance``; accumulators are float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._array import get_backend, to_numpy
from .._validation import as_generator, check_int, check_real

__all__ = [
    "ClusteredSupport",
    "PrunedMean",
    "default_n_clusters",
    "evaluated_share",
    "pruned_local_mean",
]

_EPS64 = float(np.finfo(np.float64).eps)
_EPS32 = float(np.finfo(np.float32).eps)
# Budget of one (block, rows) logits tile, in elements (32 MiB in float64).
_TILE_ELEMENTS = 2**22
# Budget of one logits tile of the evaluation (8 MiB in float64, about the L3 cache).
_EVAL_ELEMENTS = 2**20
# exp arguments are clamped here: e^-700 and e^-80 are still normal numbers.
_CLAMP = {"float64": -700.0, "float32": -80.0}
# Queries that share one gathered copy of a tile in the batched (query, tile) products.
_GROUP = 8
# Queries of one batch that need a cluster, from which it is evaluated by one product over
# its contiguous rows instead (one Python-level call, no gathered copies).
_CROWDED = 64
# Relative inflation of host-side float64 bounds (their own rounding, a few operations each).
_HOST_SLACK = 64 * _EPS64


def _gamma(n: int, eps: float) -> float:
    """Higham's ``gamma_n = n eps / (1 - n eps)``; ``inf`` once ``n eps >= 1``."""
    ne = n * eps
    return ne / (1.0 - ne) if ne < 1.0 else math.inf


def default_n_clusters(n_points: int) -> int:
    """Default number of clusters: ``ceil(2 sqrt(m))``, at most ``m``.

    With ``C`` clusters the bound work per query is ``O(C k)`` and a kept cluster costs about
    ``m / C`` rows, so ``C ~ sqrt(m)`` balances the two; the factor 2 makes clusters tighter
    (smaller radii) at little cost.

    Examples
    --------
    >>> default_n_clusters(10_000)
    200
    """
    return int(min(n_points, math.ceil(2.0 * math.sqrt(n_points))))


# --------------------------------------------------------------------------- array helpers
def _float_dtype_name(a: Any) -> str:
    name = str(a.dtype).replace("torch.", "")
    return "float32" if name == "float32" else "float64"


def _host64(a: Any) -> np.ndarray:
    return np.asarray(to_numpy(a), dtype=np.float64)


def _check_matrix(xp: Any, a: Any, name: str) -> Any:
    """``a`` (an array of the backend ``xp``, or array-like for NumPy) checked 2-D, floating
    and finite."""
    a = xp.as_array(a)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {tuple(a.shape)}.")
    if str(a.dtype).replace("torch.", "") not in ("float32", "float64"):
        a = xp.astype(a, "float64")
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"{name} contains NaN or infinity.")
    return a


def _argmax_rows(xp: Any, a: Any) -> np.ndarray:
    return np.asarray(to_numpy(xp.argmax(a, 1)))


def _segment_sums(x64: np.ndarray, labels: np.ndarray, total: np.ndarray) -> None:
    """Add the rows of ``x64`` to ``total[labels]``; ``labels`` sorted (contiguous runs)."""
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    np.add.at(total, labels[starts], np.add.reduceat(x64, starts, axis=0))


def _segment_max(x: np.ndarray, labels: np.ndarray, total: np.ndarray) -> None:
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    np.maximum.at(total, labels[starts], np.maximum.reduceat(x, starts))


# --------------------------------------------------------------------------- clustering
def _assign(xp: Any, keys: Any, centres64: np.ndarray) -> np.ndarray:
    """Nearest centre of every row of ``keys`` (in the keys' backend and dtype), on the host."""
    centres = xp.from_host(centres64, keys, _float_dtype_name(keys))
    half_norms = 0.5 * (centres * centres).sum(1)
    rows = max(1, _TILE_ELEMENTS // centres64.shape[0])
    out = np.empty(keys.shape[0], dtype=np.int64)
    for start in range(0, keys.shape[0], rows):
        # argmin ||k - c||^2 = argmax <k, c> - ||c||^2 / 2: one GEMM per chunk.
        out[start : start + rows] = _argmax_rows(
            xp, keys[start : start + rows] @ centres.T - half_norms
        )
    return out


def _lloyd(xp, keys: Any, n_clusters: int, rng: np.random.Generator, n_iter: int) -> np.ndarray:
    """Lloyd iterations on a subsample of ``32 n_clusters`` rows; float64 centres (host).

    The centres only steer how tight the bounds are, never their validity, so a subsample
    and a few iterations suffice; the radii are measured exactly afterwards.
    """
    m = keys.shape[0]
    size = min(m, 32 * n_clusters)
    rows = np.sort(rng.choice(m, size, replace=False)) if size < m else np.arange(m)
    sample = keys[xp.index(rows, keys)]
    sample64 = _host64(sample)
    centres = sample64[rng.choice(size, n_clusters, replace=False)].copy()
    for _ in range(n_iter):
        labels = _assign(xp, sample, centres)
        order = np.argsort(labels, kind="stable")
        sums = np.zeros_like(centres)
        _segment_sums(sample64[order], labels[order], sums)
        counts = np.bincount(labels, minlength=n_clusters)
        full = counts > 0  # an empty cluster keeps its centre (it is dropped later if still empty)
        centres[full] = sums[full] / counts[full, None]
    return centres


def _cluster_stats(x: Any, labels: np.ndarray, n_clusters: int) -> tuple[np.ndarray, ...]:
    """Per-cluster float64 centre and radius (inflated for rounding), and ``max_i ||x_i||``.

    ``x`` is permuted (clusters contiguous) and ``labels`` sorted accordingly.
    """
    rows = max(1, _TILE_ELEMENTS // max(1, x.shape[1]))
    sums = np.zeros((n_clusters, x.shape[1]))
    for start in range(0, x.shape[0], rows):
        _segment_sums(_host64(x[start : start + rows]), labels[start : start + rows], sums)
    centres = sums / np.bincount(labels, minlength=n_clusters)[:, None]
    radii = np.zeros(n_clusters)
    norm_max = 0.0
    for start in range(0, x.shape[0], rows):
        chunk, lab = _host64(x[start : start + rows]), labels[start : start + rows]
        _segment_max(np.linalg.norm(chunk - centres[lab], axis=1), lab, radii)
        norm_max = max(norm_max, float(np.linalg.norm(chunk, axis=1).max()))
    # Each distance above is off by at most gamma_{dim+3} relative (float64 differences,
    # squares, sum, sqrt); the inflation covers it and the tiny absolute term covers radius 0.
    grow = 1.0 + _gamma(x.shape[1] + 8, _EPS64)
    return centres, radii * grow + 1e-300, norm_max * grow


class ClusteredSupport:
    """Support keys and values clustered once, for :func:`pruned_local_mean`.

    Rows are permuted so that every cluster is contiguous; per cluster the key-space centre
    ``c_j``, key radius ``r_j = max ||k_i - c_j||``, size ``n_j`` and the value-space centre
    and radius are kept (float64, on the host). Memory ``O(m (d + k))``.

    Clustering: Lloyd iterations (in the keys' library and device, one GEMM per chunk) on a
    subsample of ``32 n_clusters`` rows, then one assignment pass over all rows. Scikit-learn
    estimators are not used: the field is a core layer (SPEC section 5).

    Parameters
    ----------
    keys : array of shape (m, k)
        Centred (and projected) keys ``k_i = P(s_i - mu)``; NumPy or Torch, float32 or float64
        (other dtypes are cast to float64).
    values : array of shape (m, d), optional
        Centred values ``v_i = s_i - mu``; default: the keys themselves (stored once).
    n_clusters : int, optional
        Default :func:`default_n_clusters` (``ceil(2 sqrt(m))``). Empty clusters are dropped.
    random_state : int, Generator or None, default=0
        Seeds the subsample and the initial centres.
    n_iter : int, default=8
        Lloyd iterations on the subsample.

    Attributes
    ----------
    keys_, values_ : arrays of shape (m, k) and (m, d)
        Permuted rows, same library, device and dtype as the inputs.
    perm_ : ndarray of shape (m,)
        ``keys_[p] = keys[perm_[p]]``.
    labels_ : ndarray of shape (m,)
        Cluster of every input row (input order).
    offsets_ : ndarray of shape (n_clusters_ + 1,)
        Cluster ``j`` is rows ``offsets_[j]:offsets_[j + 1]`` of ``keys_``.
    centres_, radii_, sizes_ : ndarrays of shape (C, k), (C,), (C,)
    value_centres_, value_radii_ : ndarrays of shape (C, d), (C,)
    backend_ : array backend
        NumPy or Torch (of :func:`skflow._array.get_backend`), decided from ``keys``.
    key_norm_max_, value_norm_max_ : float
    value_mean_ : ndarray of shape (d,)
        Mean of the values (float64), the local mean at ``t = 0``.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.random.default_rng(0).normal(size=(1000, 3))
    >>> index = ClusteredSupport(S - S.mean(0), n_clusters=20)
    >>> index.n_clusters_, index.keys_.shape
    (20, (1000, 3))
    """

    def __init__(
        self,
        keys: Any,
        values: Any = None,
        *,
        n_clusters: int | None = None,
        random_state: Any = 0,
        n_iter: int = 8,
    ) -> None:
        self.backend_ = xp = get_backend(keys)  # the index's one NumPy/Torch decision
        shared = values is None or values is keys
        keys = _check_matrix(xp, keys, "keys")
        if not (shared or xp.owns(values)):
            raise ValueError("keys and values must be the same kind of array with the same rows.")
        values = keys if shared else _check_matrix(xp, values, "values")
        if values.shape[0] != keys.shape[0]:
            raise ValueError("keys and values must be the same kind of array with the same rows.")
        if _float_dtype_name(keys) != _float_dtype_name(values):
            keys, values = xp.astype(keys, "float64"), xp.astype(values, "float64")
        m = keys.shape[0]
        c = check_int(n_clusters, "n_clusters", allow_none=True)
        c = default_n_clusters(m) if c is None else c
        if c > m:
            raise ValueError(f"n_clusters must be at most the number of rows {m}, got {c}.")
        check_int(n_iter, "n_iter", minimum=0)
        labels = _assign(xp, keys, _lloyd(xp, keys, c, as_generator(random_state), n_iter))
        self._build(keys, values, shared, labels)

    def _build(self, keys: Any, values: Any, shared: bool, labels: np.ndarray) -> None:
        used, labels = np.unique(labels, return_inverse=True)  # drops empty clusters
        self.labels_ = labels.astype(np.int64)
        self.perm_ = np.argsort(self.labels_, kind="stable")
        self.sizes_ = np.bincount(self.labels_, minlength=used.size)
        self.offsets_ = np.concatenate([[0], np.cumsum(self.sizes_)])
        self.n_clusters_ = int(used.size)
        xp = self.backend_
        perm = xp.index(self.perm_, keys)
        self.keys_ = keys[perm]
        self.values_ = self.keys_ if shared else values[perm]
        sorted_labels = self.labels_[self.perm_]
        self.centres_, self.radii_, self.key_norm_max_ = _cluster_stats(
            self.keys_, sorted_labels, self.n_clusters_
        )
        if shared:
            self.value_centres_, self.value_radii_ = self.centres_, self.radii_
            self.value_norm_max_ = self.key_norm_max_
        else:
            self.value_centres_, self.value_radii_, self.value_norm_max_ = _cluster_stats(
                self.values_, sorted_labels, self.n_clusters_
            )
        norms2 = (self.values_ * self.values_).sum(1)[:, None]
        lifted = [self.values_, norms2, norms2 * 0 + 1]
        self.lifted_values_ = xp.concat(lifted, axis=1)
        norms2 = (self.keys_ * self.keys_).sum(1)[:, None]
        lifted = [self.keys_, norms2, norms2 * 0 + 1]
        self.lifted_keys_ = xp.concat(lifted, axis=1)
        self.value_mean_ = (self.sizes_ @ self.value_centres_) / keys.shape[0]
        self.dtype_name_ = _float_dtype_name(self.keys_)
        self._build_tiles()

    def _build_tiles(self) -> None:
        """Fixed-size tiles of every cluster, for the batched (query, cluster) evaluation.

        A cluster of ``n_j`` rows is cut into ``ceil(n_j / B)`` tiles of ``B`` rows (``B``:
        :func:`_tile_size`); the padding repeats the cluster's first key (so a tile's largest
        logit is a real one) with zero lifted values (so it adds nothing to any sum).
        """
        xp, size = self.backend_, _tile_size(self.sizes_)
        per = -(-self.sizes_ // size)
        self.tile_size_ = size
        self.tile_offsets_ = np.concatenate([[0], np.cumsum(per)])
        self.tile_cluster_ = np.repeat(np.arange(self.n_clusters_), per)
        start = self.offsets_[self.tile_cluster_]
        rows = (
            start[:, None]
            + (np.arange(per.sum()) - self.tile_offsets_[self.tile_cluster_])[:, None] * size
            + np.arange(size)[None, :]
        )
        pad = rows >= self.offsets_[self.tile_cluster_ + 1][:, None]
        self.tile_rows_ = np.where(pad, start[:, None], rows)
        # each cluster's reference centre, exactly representable in the index's dtype
        f32 = self.dtype_name_ == "float32"
        self.references_ = (
            self.centres_.astype(np.float32).astype(np.float64) if f32 else self.centres_
        )
        self.reaches_ = np.linalg.norm(self.centres_ - self.references_, axis=1) + self.radii_
        like = self.lifted_values_
        values = self.lifted_values_[xp.index(self.tile_rows_.ravel(), like)]
        keep = xp.from_host((~pad).ravel()[:, None].astype(np.float64), like, self.dtype_name_)
        self.tile_values_ = (values * keep).reshape(*rows.shape, -1)
        self._tile_keys: dict[str, Any] = {}

    def tile_keys(self, name: str) -> Any:
        """Lifted keys ``[k - c_j, ||k - c_j||^2, 1]`` of every tile, shape (T, B, k + 2), in
        ``name`` (float32 or float64), around the tile's cluster reference ``c_j``; computed
        in float64 and rounded once, on first use."""
        if name not in self._tile_keys:
            xp, like = self.backend_, self.keys_
            flat = self.tile_rows_.ravel()
            refs = self.references_[self.tile_cluster_].repeat(self.tile_size_, axis=0)
            k0 = xp.to_float64(like[xp.index(flat, like)]) - xp.from_host(refs, like, "float64")
            norms = (k0 * k0).sum(1)[:, None]
            lifted = xp.concat([k0, norms, norms * 0 + 1], axis=1)
            self._tile_keys[name] = xp.astype(lifted, name).reshape(*self.tile_rows_.shape, -1)
        return self._tile_keys[name]


def _tile_size(sizes: np.ndarray) -> int:
    """Rows per tile: the power of two nearest half the mean cluster size, within [8, 1024]
    and at most the largest cluster rounded up to a power of two (little padding)."""
    mean = max(float(sizes.mean()) / 2.0, 1.0)
    top = 2 ** math.ceil(math.log2(max(int(sizes.max()), 1)))
    return int(min(max(2 ** round(math.log2(mean)), 8), 1024, max(top, 8)))


# --------------------------------------------------------------------------- evaluation
@dataclass
class PrunedMean:
    """Result of :func:`pruned_local_mean`.

    Attributes
    ----------
    mean : array of shape (n, d)
        Pruned centred local mean ``sum_i w_i v_i`` (normalised over the evaluated points);
        queries' library and device; float32 when index and queries are float32.
    neglected : array of shape (n,)
        Proven upper bound on the true total weight of the skipped points (float64).
    mean_error : array of shape (n,)
        Proven upper bound on ``||mean - mean_true||`` (rounding included, float64).
    evaluated : ndarray of shape (n, n_clusters)
        Which clusters were evaluated for each query (host, bool).
    evaluated_fraction : float
        Evaluated (query, point) pairs over ``n m`` (rows at ``t = 0``, computed in closed
        form, count as fully evaluated).

    Examples
    --------
    >>> import numpy as np
    >>> K = np.random.default_rng(0).normal(size=(500, 2))
    >>> res = pruned_local_mean(ClusteredSupport(K - K.mean(0)), np.zeros((3, 2)), 1.0, 0.5)
    >>> res.mean.shape, res.neglected.shape, res.evaluated.shape[0]
    ((3, 2), (3,), 3)
    """

    mean: Any
    neglected: Any
    mean_error: Any
    evaluated: np.ndarray
    evaluated_fraction: float


class _State:
    """Online log-sum-exp state of the live queries (float64, on the index's device), and the
    host-side bookkeeping of rounding (per query) and of the evaluated clusters.

    ``acc[:, :d]`` holds ``sum_i e^{s_i - M} v_i``, ``acc[:, d]`` the same sum of
    ``||v_i||^2`` and ``acc[:, d + 1]`` the normaliser: one GEMM with the lifted values
    ``[v_i, ||v_i||^2, 1]`` updates all three.
    """

    def __init__(self, xp: Any, like: Any, n: int, dim: int, n_clusters: int) -> None:
        self.xp = xp
        self.M = xp.from_host(np.full(n, -np.inf), like, "float64")
        self.acc = xp.from_host(np.zeros((n, dim + 2)), like, "float64")
        self.delta = np.zeros(n)  # bound on every evaluated shifted logit's error
        self.gemm_gamma = np.zeros(n)  # gamma of the working-precision products
        self.updates = np.zeros(n, dtype=np.int64)  # float64 accumulation steps
        self.done = np.zeros((n, n_clusters), dtype=bool)

    def add(self, sel: Any, s: Any, lifted: Any) -> None:
        """Fold the shifted logits ``s`` (|sel|, r) of lifted values (r, d + 2) into ``sel``."""
        xp, old = self.xp, self.M[sel]
        new = xp.maximum(xp.to_float64(xp.amax(s, 1)), old)
        scale = xp.exp(old - new)
        shift = xp.astype(new, _float_dtype_name(s))[:, None]
        # In place, in a cache-sized tile; the clamp keeps exp out of the (slow) subnormal
        # range; it raises weights below e^CLAMP of the maximum (accounted in the bound).
        xp.shifted_exp_(s, shift, _CLAMP[_float_dtype_name(s)])
        self.M[sel] = new
        self.acc[sel] = self.acc[sel] * scale[:, None] + xp.to_float64(s @ lifted)

    def fold(self, sel: Any, top: Any, acc: Any) -> None:
        """Merge partial results (``top``: float64 log-shift, ``acc``: float64 sums at that
        shift, one row per query of ``sel``) into the state of ``sel``."""
        xp, old = self.xp, self.M[sel]
        new = xp.maximum(top, old)
        self.acc[sel] = (
            self.acc[sel] * xp.exp(old - new)[:, None] + acc * xp.exp(top - new)[:, None]
        )
        self.M[sel] = new


def _chunks(offsets: np.ndarray, clusters: np.ndarray, max_rows: int) -> list[list[tuple]]:
    """Row ranges of ``clusters`` merged into runs, packed into chunks of <= max_rows rows."""
    starts, stops = offsets[clusters], offsets[clusters + 1]
    breaks = np.flatnonzero(starts[1:] != stops[:-1]) + 1
    run_starts = starts[np.r_[0, breaks]]
    run_stops = stops[np.r_[breaks - 1, len(clusters) - 1]]
    out, current, size = [], [], 0
    for lo, hi in zip(run_starts.tolist(), run_stops.tolist(), strict=True):
        for s in range(lo, hi, max_rows):
            e = min(hi, s + max_rows)
            if size + e - s > max_rows and current:
                out.append(current)
                current, size = [], 0
            current.append((s, e))
            size += e - s
    if current:
        out.append(current)
    return out


def _rows(xp: Any, a: Any, pieces: list[tuple]) -> Any:
    if len(pieces) == 1:
        return a[pieces[0][0] : pieces[0][1]]  # a view: no copy for long runs
    return xp.concat([a[s:e] for s, e in pieces])


def _precision(index, spread: np.ndarray, opts) -> tuple[str, float]:
    """Working dtype of a group: float32 only if its logit error bound stays small."""
    k = index.centres_.shape[1]
    if opts["float32"] and _gamma(2 * k + 8, _EPS32) * spread.max() <= opts["float32_tolerance"]:
        return "float32", _EPS32
    return "float64", _EPS64


def _evaluate(index, st: _State, sel: np.ndarray, clusters: np.ndarray, c0, z, b, opts) -> None:
    """Add the rows of ``clusters`` (sorted ids) exactly to the live queries ``sel``.

    Logits are taken around the reference ``c0`` (see the module docstring, *Rounding*);
    ``c0 = None`` means the origin (the support mean), whose lifted keys are stored.
    """
    origin = c0 is None
    c0 = np.zeros(index.centres_.shape[1]) if origin else c0
    reach = np.linalg.norm(index.centres_[clusters] - c0, axis=1) + index.radii_[clusters]
    z0 = z[sel] - c0
    zdist = np.linalg.norm(z0, axis=1)
    spread = b[sel] * ((float(reach.max()) + zdist) * (1.0 + _HOST_SLACK)) ** 2
    name, eps = _precision(index, spread, opts)
    like, xp = index.keys_, index.backend_
    max_rows = max(1, _EVAL_ELEMENTS // sel.size)
    pieces = _chunks(index.offsets_, clusters, max_rows)
    # Lifted query [2b (z - c0), -b, -b ||z - c0||^2] against [k - c0, ||k - c0||^2, 1]:
    # the shifted logits in one GEMM.
    zl = np.hstack([2.0 * b[sel, None] * z0, -b[sel, None], -b[sel, None] * zdist[:, None] ** 2])
    zl = xp.from_host(zl, like, name)
    c0w = xp.from_host(c0, like, name)
    sel_lib = xp.index(sel, like)
    for chunk in pieces:
        if origin and name == index.dtype_name_:  # stored lifted keys: no per-chunk copy
            s = zl @ xp.astype(_rows(xp, index.lifted_keys_, chunk), name).T
        else:
            k0 = xp.astype(_rows(xp, index.keys_, chunk), name) - c0w
            s = zl @ xp.concat([k0, (k0 * k0).sum(1)[:, None], k0[:, :1] * 0 + 1], axis=1).T
        st.add(sel_lib, s, xp.astype(_rows(xp, index.lifted_values_, chunk), name))
    k = index.centres_.shape[1]
    # GEMM (k + 2 terms), ||k - c0||^2 (k terms) and the rounding of k - c0 itself.
    st.delta[sel] = np.maximum(st.delta[sel], _gamma(2 * k + 8, eps) * spread + 762 * eps)
    longest = max(sum(e - s for s, e in chunk) for chunk in pieces)  # inner size of e @ vals
    st.gemm_gamma[sel] = np.maximum(st.gemm_gamma[sel], _gamma(longest, eps))
    st.updates[sel] += len(pieces)
    st.done[np.ix_(sel, clusters)] = True


def _expand_tiles(index, queries: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, ...]:
    """(query, cluster) pairs -> (query, tile) pairs, every tile of each cluster."""
    per = np.diff(index.tile_offsets_)[clusters]
    rep = np.repeat(np.arange(clusters.size), per)
    first = np.cumsum(per) - per
    tiles = index.tile_offsets_[clusters][rep] + np.arange(rep.size) - first[rep]
    return queries[rep], tiles


def _evaluate_pairs(index, st: _State, queries: np.ndarray, clusters: np.ndarray, z, b, opts):
    """Add cluster ``clusters[p]`` exactly to query ``queries[p]`` for every pair ``p``.

    All pairs at once, in batched products over the clusters' tiles
    (:meth:`ClusteredSupport.tile_keys`): logits around each cluster's reference centre
    (module docstring, *Rounding*), a per-(query, tile) maximum, and a log-sum-exp merge
    per query. float32 where the pair's logit error bound allows, else float64.
    """
    if queries.size == 0:
        return
    queries, clusters = _crowded_clusters(index, st, queries, clusters, z, b, opts)
    k = index.centres_.shape[1]
    refs = index.references_[clusters]
    zdist = np.linalg.norm(z[queries] - refs, axis=1)
    spread = b[queries] * ((index.reaches_[clusters] + zdist) * (1.0 + _HOST_SLACK)) ** 2
    low32 = opts["float32"] & (_gamma(2 * k + 8, _EPS32) * spread <= opts["float32_tolerance"])
    for name, eps, pick in (("float32", _EPS32, low32), ("float64", _EPS64, ~low32)):
        if not pick.any():
            continue
        q, c = queries[pick], clusters[pick]
        np.maximum.at(st.delta, q, _gamma(2 * k + 8, eps) * spread[pick] + 762 * eps)
        np.maximum.at(st.gemm_gamma, q, _gamma(index.tile_size_, eps))
        st.done[q, c] = True
        q, tiles = _expand_tiles(index, q, c)
        np.add.at(st.updates, q, 2)  # the tile's own sum and its merge into the query
        order = np.lexsort((q, tiles))
        _fold_tiles(index, st, q[order], tiles[order], z, b, name)


def _crowded_clusters(index, st: _State, queries, clusters, z, b, opts) -> tuple:
    """Evaluate the clusters that :data:`_CROWDED` or more of the pairs' queries need, one
    product per cluster over its contiguous rows (no gathered copies); return the other pairs.
    """
    counts = np.bincount(clusters, minlength=index.n_clusters_)
    crowded = counts[clusters] >= _CROWDED
    if not crowded.any():
        return queries, clusters
    order = np.lexsort((queries[crowded], clusters[crowded]))
    cq, cc = queries[crowded][order], clusters[crowded][order]
    cuts = np.flatnonzero(cc[1:] != cc[:-1]) + 1
    for sel, group in zip(np.split(cq, cuts), np.split(cc, cuts), strict=True):
        j = int(group[0])
        _evaluate(index, st, sel, np.array([j]), index.references_[j], z, b, opts)
    return queries[~crowded], clusters[~crowded]


def _fold_tiles(index, st: _State, q: np.ndarray, tiles: np.ndarray, z, b, name: str) -> None:
    """(query, tile) pairs sorted by tile: up to ``_GROUP`` queries of one tile share one
    gathered copy of it (a group); groups are evaluated in chunks of batched products."""
    starts = np.flatnonzero(np.r_[True, tiles[1:] != tiles[:-1]])
    rank = np.arange(q.size) - np.repeat(starts, np.diff(np.r_[starts, q.size]))
    first = rank % _GROUP == 0
    group, slot = np.cumsum(first) - 1, rank % _GROUP
    group_tiles = tiles[first]
    width = index.tile_values_.shape[2] + index.centres_.shape[1] + 2
    step = max(1, _TILE_ELEMENTS // (index.tile_size_ * (_GROUP + width) + _GROUP * width))
    bounds = np.searchsorted(group, np.arange(0, group_tiles.size + step, step))
    for n, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=False)):
        if hi > lo:
            chunk = group_tiles[n * step : (n + 1) * step]
            pairs = (q[lo:hi], group[lo:hi] - n * step, slot[lo:hi])
            _fold_groups(index, st, pairs, chunk, z, b, name)


def _fold_groups(index, st: _State, pairs, tiles: np.ndarray, z, b, name: str) -> None:
    """Batched logits, exp and weighted sums of groups of queries against their tiles, then a
    log-sum-exp merge of every (query, tile) result into its query."""
    xp, like = index.backend_, index.keys_
    q, group, slot = pairs
    z0 = z[q] - index.references_[index.tile_cluster_[tiles]][group]
    bq = b[q, None]
    # Lifted query [2b (z - c), -b, -b ||z - c||^2] against [k - c, ||k - c||^2, 1].
    zl = np.zeros((tiles.size, _GROUP, z0.shape[1] + 2))
    zl[group, slot] = np.hstack([2.0 * bq * z0, -bq, -bq * (z0 * z0).sum(1)[:, None]])
    tiles_lib = xp.index(tiles, like)
    s = xp.from_host(zl, like, name) @ xp.mT(index.tile_keys(name)[tiles_lib])  # (g, G, B)
    top = xp.amax(s, 2)
    xp.shifted_exp_(s, top[..., None], _CLAMP[name])
    sums = s @ xp.astype(index.tile_values_[tiles_lib], name)  # (g, G, d + 2)
    order = np.argsort(q, kind="stable")
    flat = xp.index((group * _GROUP + slot)[order], like)
    top = xp.to_float64(top.reshape(-1)[flat])
    sums = xp.to_float64(sums.reshape(tiles.size * _GROUP, -1)[flat])
    uniq, rows = np.unique(q[order], return_inverse=True)
    rows_lib = xp.index(rows, like)
    best = xp.segment_max(rows_lib, top, uniq.size)
    scaled = sums * xp.exp(top - best[rows_lib])[:, None]
    st.fold(xp.index(uniq, like), best, xp.segment_sum(rows_lib, scaled, uniq.size))


def _coefficient(value: Any, n: int, name: str) -> np.ndarray:
    arr = _host64(value).reshape(-1) if not np.isscalar(value) else np.array([float(value)])
    if arr.size == 1:
        arr = np.full(n, arr[0])
    if arr.size != n or not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(
            f"{name} must be a finite non-negative float or an (n, 1) column with n = {n}."
        )
    return arr


def _coefficients(a: Any, b: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    a_h, b_h = _coefficient(a, n, "a"), _coefficient(b, n, "b")
    if ((a_h == 0) != (b_h == 0)).any():
        raise ValueError("a and b must both be positive (t > 0) or both zero (t = 0).")
    return a_h, b_h


def _cluster_bounds(index: ClusteredSupport, z: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Safe upper bounds ``L_ij = ub_ij + log n_j`` (float64, rounded upwards)."""
    c = index.centres_
    zn, cn = (z**2).sum(1), (c**2).sum(1)
    d2 = zn[:, None] - 2.0 * (z @ c.T) + cn[None, :]
    # Rounding of the expansion: gamma_{k+3} (||z|| + ||c||)^2; subtract it (lower bound).
    err = _gamma(c.shape[1] + 3, _EPS64) * (np.sqrt(zn)[:, None] + np.sqrt(cn)[None, :]) ** 2
    dist = np.sqrt(np.maximum(d2 - err, 0.0)) * (1.0 - 4 * _EPS64)
    gap = np.maximum(dist - index.radii_[None, :], 0.0)
    bound = -b[:, None] * gap**2 * (1.0 - 8 * _EPS64) + np.log(index.sizes_)[None, :]
    return bound + _HOST_SLACK * (np.abs(bound) + 1.0)


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x - safe[:, None]).sum(1)) + safe


def _finish(index, st: _State, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean, neglected-mass bound and mean-error bound of the live queries (host, float64)."""
    M, acc = _host64(st.M), _host64(st.acc)
    S, A, Z = acc[:, :-2], acc[:, -2], acc[:, -1]
    mean, second = S / Z[:, None], A / Z
    sum_gamma = st.gemm_gamma + (2 * st.updates + 4) * _EPS64 * (1.0 + 1e-6)
    var = np.maximum(second - (mean**2).sum(1), 0.0) + 4 * (sum_gamma + 8 * _EPS64) * second
    rounding = np.expm1(2 * st.delta) * np.exp(2 * st.delta) * np.sqrt(var)
    rounding += (3 * sum_gamma + 4 * _EPS64) * index.value_norm_max_
    # The exp clamp adds at most e^CLAMP (relative to the largest weight) per row.
    rounding += 2.0 * index.offsets_[-1] * math.exp(_CLAMP["float32"]) * index.value_norm_max_
    skipped = ~st.done
    log_u = _logsumexp_rows(np.where(skipped, bounds, -np.inf))
    log_u += _gamma(index.n_clusters_ + 4, _EPS64)
    log_z = np.log(Z)
    lse_low = M + log_z - st.delta - 2 * sum_gamma - 8 * _EPS64 * (np.abs(M) + np.abs(log_z))
    with np.errstate(invalid="ignore"):
        neglected = np.exp(log_u - np.logaddexp(lse_low, log_u)) * (1.0 + 16 * _EPS64)
    neglected = np.where(skipped.any(axis=1), neglected, 0.0)
    cv = index.value_centres_
    mn, cvn = (mean**2).sum(1), (cv**2).sum(1)
    d2 = mn[:, None] - 2.0 * (mean @ cv.T) + cvn[None, :]
    err = _gamma(cv.shape[1] + 3, _EPS64) * (np.sqrt(mn)[:, None] + np.sqrt(cvn)[None, :]) ** 2
    far = np.sqrt(np.maximum(d2, 0.0) + err) + index.value_radii_[None, :]
    far = np.where(skipped, far, 0.0).max(axis=1)
    error = rounding + neglected * (far + rounding)
    return mean, neglected, error * (1.0 + _HOST_SLACK)


def _index_queries(index: ClusteredSupport, queries: Any) -> Any:
    """``queries`` checked against the index: same library, 2-D, floating, finite, width k."""
    xp, mismatch = index.backend_, "queries must match the index: same library and key dimension k."
    if not xp.owns(queries):
        raise ValueError(mismatch)
    queries = _check_matrix(xp, queries, "queries")
    if queries.shape[1] != index.keys_.shape[1]:
        raise ValueError(mismatch)
    return queries


def _options(index, queries, rtol, dense_fraction, float32_tolerance, block_size) -> dict:
    """The validated settings of one evaluation (see :func:`pruned_local_mean`)."""
    return {
        "rtol": check_real(rtol, "rtol", low=0.0, high=1.0, low_open=True),
        "dense_fraction": check_real(dense_fraction, "dense_fraction", low=0.0, high=1.0),
        "float32_tolerance": check_real(float32_tolerance, "float32_tolerance", low=0.0),
        "float32": index.dtype_name_ == "float32" and _float_dtype_name(queries) == "float32",
        "block_size": check_int(block_size, "block_size"),
    }


def pruned_local_mean(
    index: ClusteredSupport,
    queries: Any,
    a: Any,
    b: Any,
    *,
    rtol: float = 1e-10,
    block_size: int = 256,
    dense_fraction: float = 0.5,
    float32_tolerance: float = 1e-4,
) -> PrunedMean:
    """Centred NW local mean over a clustered support, skipping provably negligible clusters.

    Parameters
    ----------
    index : ClusteredSupport
    queries : array of shape (n, k)
        Centred (projected) queries ``q = P(x - t mu)``; same library (and device) as the index.
    a, b : float or array of shape (n, 1)
        Logit coefficients (:func:`skflow.field.kernel_coefficients`), ``a > 0`` and ``b > 0``
        finite; rows with ``a = b = 0`` (``t = 0``) get the exact uniform mean.
    rtol : float, default=1e-10
        Target for the neglected weight: the skipped clusters of a query together weigh at
        most ``rtol`` (up to rounding); ``neglected`` reports the proven bound.
    block_size, dense_fraction : int, default=256, and float, default=0.5
        Queries that need more than ``dense_fraction`` of the rows run dense, in blocks.
    float32_tolerance : float, default=1e-4
        float32 index and queries are computed in float32 while the block's logit error bound
        stays below this, else in float64.

    Returns
    -------
    PrunedMean
        ``mean`` (n, d), ``neglected`` (n,), ``mean_error`` (n,), ``evaluated`` (n, C).

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.field import kernel_coefficients
    >>> S = np.random.default_rng(0).normal(size=(2000, 2)) * [1.0, 3.0]
    >>> mu, (a, b, _) = S.mean(0), kernel_coefficients(0.95)
    >>> res = pruned_local_mean(ClusteredSupport(S - mu), 0.95 * (S[:4] - mu), a, b)
    >>> bool(res.mean_error.max() < 1e-8), res.evaluated_fraction < 0.2
    (True, True)
    """
    queries = _index_queries(index, queries)
    opts = _options(index, queries, rtol, dense_fraction, float32_tolerance, block_size)
    a_h, b_h = _coefficients(a, b, queries.shape[0])
    out = _assemble(index, _host64(queries), a_h, b_h, opts["block_size"], opts)
    return _package(index, queries, *out)


def _rest_dense(index, st: _State, heavy: np.ndarray, best, z, b, opts) -> None:
    """Every cluster not yet evaluated, for queries that need most of the support: the
    clusters no query of a block has seen in one dense pass, the others one by one."""
    heavy = heavy[np.argsort(best[heavy], kind="stable")]
    for s in range(0, heavy.size, opts["block_size"]):
        sel = heavy[s : s + opts["block_size"]]
        seen = st.done[sel].any(axis=0)
        missing = ~st.done[sel] & seen[None, :]
        _evaluate(index, st, sel, np.flatnonzero(~seen), None, z, b, opts)
        rows, clusters = np.nonzero(missing)
        _evaluate_pairs(index, st, sel[rows], clusters, z, b, opts)


def _needed(index, st: _State, sparse, bounds, best, z, b, opts) -> tuple[np.ndarray, ...]:
    """Evaluate the best cluster of each query (a lower bound of its normaliser); return the
    clusters still needed for ``rtol``, whether most of the support is, and what is done."""
    _evaluate_pairs(index, st, sparse, best[sparse], z, b, opts)
    lse_1 = _host64(st.M)[sparse] + np.log(_host64(st.acc[:, -1])[sparse])
    cut = lse_1 + math.log(opts["rtol"]) - math.log(index.n_clusters_)
    done = st.done[sparse]
    need = (bounds[sparse] > cut[:, None]) & ~done
    heavy = (need | done) @ index.sizes_ > opts["dense_fraction"] * index.offsets_[-1]
    return need, heavy, done


def _sparse_phases(index, st: _State, sparse, bounds, best, z, b, opts) -> None:
    """Best cluster of each query first, then the needed clusters: each phase one batch of
    (query, cluster) pairs (queries that need most of the support: :func:`_rest_dense`)."""
    need, heavy, _ = _needed(index, st, sparse, bounds, best, z, b, opts)
    _rest_dense(index, st, sparse[heavy], best, z, b, opts)
    need[heavy] = False
    rows, clusters = np.nonzero(need)
    _evaluate_pairs(index, st, sparse[rows], clusters, z, b, opts)


def _front(index, q: np.ndarray, a: np.ndarray, b: np.ndarray, opts) -> tuple:
    """Live rows (t > 0), their centres ``z``, cluster bounds, best clusters, the rows that
    go dense on the upper bounds alone, and a fresh state."""
    live = np.flatnonzero(a != 0)
    z = (a[live] / (2.0 * b[live]))[:, None] * q[live]
    bl, c = b[live], index.n_clusters_
    bounds = _cluster_bounds(index, z, bl)
    best = np.argmax(bounds, axis=1)
    # Upper bound of each log-normaliser: if even then most rows are needed, go dense.
    lse_up = _logsumexp_rows(bounds) + math.log(opts["rtol"]) - math.log(c)
    dense = (bounds > lse_up[:, None]) @ index.sizes_ > opts["dense_fraction"] * index.offsets_[-1]
    st = _State(index.backend_, index.keys_, live.size, index.values_.shape[1], c)
    return live, z, bl, bounds, best, dense, st


def _assemble(index, q: np.ndarray, a: np.ndarray, b: np.ndarray, block_size: int, opts):
    """Host-side driver: closed form at t = 0; dense blocks where nothing is prunable; the
    sparse phases for the other queries; the bounds."""
    n, m, c = q.shape[0], int(index.offsets_[-1]), index.n_clusters_
    mean = np.zeros((n, index.values_.shape[1]))
    neglected, error = np.zeros(n), np.zeros(n)
    evaluated = np.zeros((n, c), dtype=bool)
    zero = a == 0
    # t = 0: uniform weights, the mean of the values (float64 sums of m rows).
    mean[zero], evaluated[zero] = index.value_mean_, True
    error[zero] = _gamma(m + c + 4, _EPS64) * index.value_norm_max_
    if not zero.all():
        live, z, bl, bounds, best, dense, st = _front(index, q, a, b, opts)
        grp = np.flatnonzero(dense)
        grp = grp[np.argsort(best[grp], kind="stable")]  # spatially coherent blocks
        for s in range(0, grp.size, block_size):
            sel = grp[s : s + block_size]
            _evaluate(index, st, sel, np.arange(c), None, z, bl, opts)
        _sparse_phases(index, st, np.flatnonzero(~dense), bounds, best, z, bl, opts)
        mean[live], neglected[live], error[live] = _finish(index, st, bounds)
        evaluated[live] = st.done
    fraction = float((evaluated @ index.sizes_).sum()) / (n * m)
    return mean, neglected, error, evaluated, fraction


def evaluated_share(
    index: ClusteredSupport, queries: Any, a: Any, b: Any, *, rtol: float = 1e-10
) -> float:
    """Share of the (query, support point) pairs :func:`pruned_local_mean` would evaluate.

    Cheap: the cluster bounds and each query's best cluster only (rows that need most of
    the support on the bounds alone, or after their best cluster, count as fully
    evaluated, as they are; ``t = 0`` rows too). Used to decide whether pruning pays.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.field import kernel_coefficients
    >>> K = np.random.default_rng(0).normal(size=(2000, 2)) * [1.0, 3.0]
    >>> index = ClusteredSupport(K - K.mean(0))
    >>> a, b, _ = kernel_coefficients(0.99)
    >>> evaluated_share(index, 0.99 * (K[:8] - K.mean(0)), a, b) < 0.2
    True
    """
    queries = _index_queries(index, queries)
    # the defaults of pruned_local_mean, which the field's pruned evaluations use
    opts = _options(index, queries, rtol, 0.5, 1e-4, 256)
    a_h, b_h = _coefficients(a, b, queries.shape[0])
    share = np.ones(queries.shape[0])
    if (a_h != 0).any():
        live, z, bl, bounds, best, dense, st = _front(index, _host64(queries), a_h, b_h, opts)
        sparse = np.flatnonzero(~dense)
        need, heavy, done = _needed(index, st, sparse, bounds, best, z, bl, opts)
        rows = np.where(heavy, 1.0, ((need | done) @ index.sizes_) / index.offsets_[-1])
        share[live[sparse]] = rows
    return float(share.mean())


def _package(index, queries, mean, neglected, error, evaluated, fraction) -> PrunedMean:
    name = "float32" if index.dtype_name_ == _float_dtype_name(queries) == "float32" else "float64"
    if name == "float32":  # the cast of the result rounds each component once
        error = error + _EPS32 * np.linalg.norm(mean, axis=1) * (1.0 + _HOST_SLACK)
    xp = index.backend_
    return PrunedMean(
        mean=xp.from_host(mean, queries, name),
        neglected=xp.from_host(neglected, queries, "float64"),
        mean_error=xp.from_host(error, queries, "float64"),
        evaluated=evaluated,
        evaluated_fraction=fraction,
    )
