"""Diagnostics of the failure regimes of the plug-in (exact Nadaraya-Watson) flow.

The exact field of a support set ``S = {s_1, ..., s_m}`` is a kernel smoother (see
:mod:`skflow.field`). The paper behind skflow names three regimes in which it fails:

1. **nearest-neighbour collapse** -- in high dimension the isotropic weights concentrate on one
   support point (Kish ``n_eff -> 1``) already at moderate ``t``; the flow then transports every
   trajectory onto a single support point and the sampler memorizes ``S``;
2. **geometric mismatch** -- an isotropic kernel wastes bandwidth on uninformative directions
   of anisotropic data, or cannot follow data whose variation is organised radially
   (spherical shells);
3. **support scarcity** -- with few support points the nonparametric estimate lacks data.

:func:`diagnose` measures all three for one support set and returns a :class:`FailureReport`
with the numbers, one boolean flag per regime and the rule behind each flag. The rules and
the reasons for their thresholds are documented on :func:`diagnose` and in
``docs/diagnostics.md``. :func:`neff_along_path` is the underlying measurement of ``n_eff(t)``
along the plug-in flow's own trajectories.

This module sits on the field layer: it uses :mod:`skflow.field`, :mod:`skflow.solvers`,
NumPy and SciPy, never estimators. Matplotlib is optional and imported
only by :meth:`FailureReport.plot`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import betaln, gammaln

from ._install import install_hint
from ._validation import as_generator, check_int, check_times
from .field import NWField
from .metrics import distance_to_closest_record
from .paths import GaussianPath, as_path
from .solvers import integrate

__all__ = ["FailureReport", "diagnose", "neff_along_path"]

#: Time at which collapse and the mid-path kernel n_eff are read: ``h(0.5) = sigma_t / t``
#: is about 1, the scale of the source noise, i.e. halfway between the global average
#: (``t = 0``) and the nearest neighbour (``t = 1``).
MID_TIME = 0.5
#: Collapse: the median ``n_eff`` at ``MID_TIME`` is below this (fewer than two support points
#: effectively carry the local mean).
COLLAPSE_NEFF = 2.0
#: Mismatch (anisotropy): the normalised effective dimension
#: ``(D - 1) / (D_iso - 1)`` is below this.
ANISOTROPY_THRESHOLD = 0.25
#: Mismatch (radial profile): smallest factor between the radial ``CV^2`` of the data and its
#: Gaussian expectation that is flagged ...
RADIAL_FACTOR = 2.0
#: ... and the number of (approximate) standard errors it must also exceed.
RADIAL_N_SE = 3.0
#: Standard error of ``log(CV^2_data / CV^2_gauss)`` for Gaussian data is about
#: ``RADIAL_SE_CONSTANT / sqrt(m)`` (calibrated by simulation for d = 1 .. 64, m = 10 .. 500).
RADIAL_SE_CONSTANT = 1.5
#: Geometric statistics are reported for every support but only flagged from this size on.
MIN_GEOMETRY_SUPPORT = 10
#: Scarcity: ``m < max(SCARCITY_MIN_SUPPORT, SCARCITY_PER_DIM * d)``.
SCARCITY_MIN_SUPPORT = 10
SCARCITY_PER_DIM = 2
#: Memorisation: the median distance of the samples to the support is below this fraction of
#: that of real points (held-out points, or the support's own leave-one-out nearest
#: neighbours). Fresh draws of the data's law give about 1; copies give about 0.
MEMORIZATION_RATIO = 0.5


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


def _check_support(support: Any) -> np.ndarray:
    """Return ``support`` as a finite, non-empty float64 array of shape (m, d)."""
    if hasattr(support, "detach") and hasattr(support, "cpu"):  # torch tensor
        support = support.detach().cpu().numpy()
    try:
        arr = np.asarray(support)
    except Exception as exc:  # pragma: no cover - exotic array-likes
        raise TypeError(f"support must be a numeric array, got {type(support).__name__}.") from exc
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"support must be a real numeric array, got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(
            f"support must be a 2-D array of shape (m, d), got a {arr.ndim}-D array of shape "
            f"{arr.shape}; reshape a single feature with support.reshape(-1, 1)."
        )
    if arr.shape[0] == 0:
        raise ValueError("support is empty: at least one support point (row) is required.")
    if arr.shape[1] == 0:
        raise ValueError("support has 0 features: at least one column is required.")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError("support contains NaN or infinity.")
    return arr


def _check_times(times: Any) -> np.ndarray | None:
    """The requested report times (sorted, unique) or None; at least one time in [0, 1]."""
    if times is None:
        return None
    arr = np.atleast_1d(check_times(times, "times"))
    if arr.size == 0:
        raise ValueError("times is empty: give at least one time in [0, 1].")
    return np.unique(arr)


# --------------------------------------------------------------------------------------------
# regime 1: n_eff along the flow
# --------------------------------------------------------------------------------------------


def _path_neff(support, path, n_steps, times, n_trajectories, random_state, **kernel):
    """n_eff (len(times), n_trajectories) at ``times`` along the flow's trajectories on
    ``path`` (a :class:`~skflow.paths.GaussianPath`), with the kernel options ``kernel``
    (``bandwidth``, ``projection`` of :class:`~skflow.field.NWField`; none: the OT bandwidth,
    isotropic).

    The flow is integrated with Heun's method on the uniform grid of ``n_steps`` steps,
    whatever ``times`` holds. A time on the grid reads the grid state; a time ``tau`` inside
    a step ``[t_k, t_k+1]`` reads the state of the same Heun step from ``(t_k, x_k)`` shortened
    to ``tau - t_k``. So the state at a time depends on that time alone (not on the other
    reported times), is second-order accurate like the grid states and is continuous in
    ``tau`` (the shortened step is the grid step at ``tau = t_k+1``).
    """
    m, d = support.shape
    x0 = as_generator(random_state).standard_normal((n_trajectories, d))
    # prepared once (centring, norms, engine choice), evaluated at every solver stage
    field = NWField(support, path=path, **kernel)

    def velocity(t, x):
        return field.velocity(x, t)

    grid = np.linspace(0.0, 1.0, n_steps + 1)
    states = integrate(velocity, x0, grid, method="heun", return_trajectory=True).y
    neff = []
    for tau in times:
        k = min(int(np.searchsorted(grid, tau, side="right")) - 1, n_steps)
        x = states[k]
        if tau != grid[k]:
            x = integrate(velocity, x, (grid[k], tau), method="heun").y
        neff.append(np.asarray(field.effective_sample_size(x, tau)))
    neff = np.stack(neff)
    if not np.all(np.isfinite(neff)):
        raise ValueError(
            "n_eff is not finite: the support's magnitude is too large for floating-point "
            "arithmetic (squared distances overflow). Rescale it, e.g. with StandardScaler."
        )
    return neff


def _default_times(n_steps: int) -> np.ndarray:
    """The uniform integration grid plus ``MID_TIME``: where n_eff is read by default."""
    return np.union1d(np.linspace(0.0, 1.0, n_steps + 1), [MID_TIME])


def neff_along_path(
    support: Any,
    *,
    sigma_min: float = 0.01,
    path: GaussianPath | None = None,
    bandwidth: Any = "ot",
    projection: Any = None,
    times: Any = None,
    n_trajectories: int = 256,
    n_steps: int = 50,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Kish effective sample size of the NW weights along the plug-in flow's own trajectories.

    ``n_trajectories`` noise draws ``x_0 ~ N(0, I)`` are integrated through the exact field of
    ``support`` (one :class:`skflow.field.NWField`, prepared once) with Heun's method
    (:func:`skflow.solvers.integrate`); at each reported time ``t`` the state ``x_t`` of every
    trajectory gives ``n_eff(x_t, t) = 1 / sum_i w_i(x_t, t)^2``. It equals ``m`` at
    ``t = 0`` and tends to 1 as the kernel collapses onto the nearest support point.

    Parameters
    ----------
    support : array-like of shape (m, d)
        Support set (finite, non-empty).
    sigma_min : float in (0, 1), default=0.01
        Noise level of the OT path at ``t = 1``; ignored when ``path`` is given.
    path : GaussianPath or None, default=None
        The probability path of the flow (:mod:`skflow.paths`, e.g. ``CosinePath(0.05)``);
        None is ``OTPath(sigma_min)``.
    bandwidth : {"ot"} or float or callable, default="ot"
        The kernel bandwidth of the flow, as in :class:`skflow.field.NWField`.
    projection : array-like of shape (k, d), optional
        The kernel's projection (a Mahalanobis kernel), as in :class:`skflow.field.NWField`.
    times : array-like of float in [0, 1], optional
        Times at which ``n_eff`` is reported (sorted, duplicates removed). Default: the uniform
        integration grid ``linspace(0, 1, n_steps + 1)`` plus ``t = 0.5``. The flow is always
        integrated from ``t = 0`` on that uniform grid, whatever ``times`` holds; a time
        between two grid times reads the state of the Heun step from the grid time below it,
        shortened to end there. So the state (and ``n_eff``) at a time does not depend on
        which other times are reported.
    n_trajectories : int, default=256
        Number of flow trajectories.
    n_steps : int, default=50
        Number of uniform Heun steps on [0, 1].
    random_state : None, int, numpy Generator or RandomState, default=None
        Source of the initial noise.

    Returns
    -------
    times : ndarray of shape (T,)
        Reported times, increasing.
    n_eff : ndarray of shape (T, n_trajectories)
        ``n_eff`` of every trajectory at every reported time, in ``[1, m]``.

    Raises
    ------
    ValueError
        If ``support`` is not a finite non-empty 2-D array, ``sigma_min`` is not in (0, 1),
        ``times`` has values outside [0, 1], or a count is not a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.diagnostics import neff_along_path
    >>> S = np.random.default_rng(0).standard_normal((20, 2))
    >>> t, n_eff = neff_along_path(S, times=[0.0, 0.5, 1.0], n_trajectories=8, random_state=0)
    >>> t.tolist(), n_eff.shape
    ([0.0, 0.5, 1.0], (3, 8))
    >>> round(float(n_eff[0, 0]), 6)  # uniform weights at t = 0
    20.0
    >>> bool(np.all(n_eff[2] < 1.01))  # nearest neighbour at t = 1
    True
    """
    support = _check_support(support)
    path = as_path(path, sigma_min)
    times = _check_times(times)
    n_trajectories = check_int(n_trajectories, "n_trajectories")
    n_steps = check_int(n_steps, "n_steps")
    times = _default_times(n_steps) if times is None else times
    kernel = {"bandwidth": bandwidth, "projection": projection}
    return times, _path_neff(support, path, n_steps, times, n_trajectories, random_state, **kernel)


# --------------------------------------------------------------------------------------------
# regime 2: geometry
# --------------------------------------------------------------------------------------------


def _chi_cv2(k: float) -> float:
    """Squared coefficient of variation of a chi variable with ``k`` (real) degrees of freedom."""
    log_mean = 0.5 * math.log(2.0) + gammaln((k + 1.0) / 2.0) - gammaln(k / 2.0)
    return float(k * math.exp(-2.0 * log_mean) - 1.0)


def _sqrt_beta_cv2(a: float, b: float) -> float:
    """Squared coefficient of variation of ``sqrt(B)`` for ``B ~ Beta(a, b)``."""
    mean_sqrt = math.exp(betaln(a + 0.5, b) - betaln(a, b))
    return float(a / (a + b) / mean_sqrt**2 - 1.0)


def _geometry(support: np.ndarray) -> dict:
    """Covariance spectrum, effective dimension and radial-profile statistics of ``support``."""
    m, d = support.shape
    nan = float("nan")
    out = {
        "eigenvalues": np.zeros(d),
        "condition_number": nan,
        "effective_dimension": nan,
        "isotropic_effective_dimension": nan,
        "anisotropy": nan,
        "radial_cv2": nan,
        "radial_cv2_gaussian": nan,
        "radial_ratio": nan,
        "radial_tolerance": nan,
        "radial_metric": "euclidean",
    }
    if m < 2:
        return out
    centred = support - support.mean(axis=0)
    # Every statistic below but the eigenvalues is scale-free: compute them on the support
    # scaled to unit magnitude, so that squares of tiny (or huge) coordinates do not underflow
    # (or overflow); the eigenvalues are scaled back.
    scale = float(np.max(np.abs(centred)))
    if not scale > 0:
        return out  # all support points coincide: no geometry to assess
    centred = centred / scale
    n = m - 1  # degrees of freedom of the covariance
    cov = centred.T @ centred / n
    lam = np.clip(np.linalg.eigvalsh(cov)[::-1], 0.0, None)
    out["eigenvalues"] = lam * scale**2
    total = float(lam.sum())
    total2 = float(np.sum(lam * lam))
    out["condition_number"] = float(lam[0] / lam[-1]) if lam[-1] > 1e-12 * lam[0] else float("inf")
    pr = total * total / total2
    out["effective_dimension"] = pr
    # Ratio of expectations of (tr C)^2 and tr C^2 for C = W / n, W ~ Wishart_d(n, s^2 I):
    # the participation ratio an isotropic Gaussian sample of the same size would show.
    pr_iso = (n * d + 2.0) / (n + d + 1.0)
    out["isotropic_effective_dimension"] = pr_iso
    out["anisotropy"] = (pr - 1.0) / (pr_iso - 1.0) if pr_iso > 1.0 + 1e-12 else 1.0

    # Radial profile around the mean, compared with a Gaussian of the same covariance.
    lam_asc = lam[::-1]
    whiten = m >= SCARCITY_PER_DIM * d and m > d + 1 and lam_asc[0] > 1e-10 * lam_asc[-1]
    if whiten:
        # Mahalanobis radii with the sample covariance. For Gaussian data
        # m r^2 / (m - 1)^2 ~ Beta(d/2, (m - d - 1)/2) exactly, so the reference is exact, and
        # whitening removes the "few directions" structure of clustered data (counted by the
        # anisotropy criterion instead), leaving the radial profile.
        w, vecs = np.linalg.eigh(cov)
        r = np.sqrt(np.sum((centred @ vecs / np.sqrt(w)) ** 2, axis=1))
        cv2_gauss = _sqrt_beta_cv2(d / 2.0, (m - d - 1) / 2.0)
    else:
        # Euclidean radii: for a Gaussian, r^2 is about s^2 chi^2_k with k the population
        # participation ratio (Satterthwaite); k uses the unbiased Gaussian estimator of
        # tr(Sigma^2), so that a rank-deficient sample covariance (m <= d) does not shrink it.
        r = np.sqrt(np.sum(centred * centred, axis=1))
        if n > 1:
            t2 = n * n / ((n - 1.0) * (n + 2.0)) * (total2 - total * total / n)
            k = total * total / t2 if t2 > 0 else float(d)
        else:
            k = pr
        cv2_gauss = _chi_cv2(float(np.clip(k, 1.0, d)))
    out["radial_metric"] = "mahalanobis" if whiten else "euclidean"
    mean_r = float(r.mean())
    if mean_r > 0:
        cv2 = float(r.var(ddof=1) / mean_r**2)
        out["radial_cv2"] = cv2
        out["radial_cv2_gaussian"] = cv2_gauss
        out["radial_ratio"] = cv2 / cv2_gauss
        out["radial_tolerance"] = max(
            RADIAL_FACTOR, math.exp(RADIAL_N_SE * RADIAL_SE_CONSTANT / math.sqrt(m))
        )
    return out


def _geometry_flags(geo: dict, m: int) -> dict:
    """Sub-flags of the mismatch regime from the statistics of :func:`_geometry`."""
    assessed = m >= MIN_GEOMETRY_SUPPORT and math.isfinite(geo["anisotropy"])
    anisotropic = bool(assessed and geo["anisotropy"] < ANISOTROPY_THRESHOLD)
    ratio, tol = geo["radial_ratio"], geo["radial_tolerance"]
    radial = bool(
        assessed
        and math.isfinite(ratio)
        and (ratio <= 0.0 or abs(math.log(ratio)) > math.log(tol))  # ratio 0: a perfect sphere
    )
    return {
        "anisotropic": anisotropic,
        "radial": radial,
        "shell_like": bool(radial and ratio < 1.0),
        "geometry_assessed": bool(assessed),
    }


# --------------------------------------------------------------------------------------------
# memorisation
# --------------------------------------------------------------------------------------------


def _memorization(support: np.ndarray, samples: np.ndarray, reference: Any) -> dict:
    """Median DCR of ``samples`` against that of real points (held out, or leave-one-out)."""
    dcr = float(np.median(distance_to_closest_record(samples, support)))
    if reference is not None:
        real = float(np.median(distance_to_closest_record(reference, support)))
        kind = "held-out"
        if not real > 0:
            raise ValueError(
                "reference points lie on the support (median distance 0): the reference must "
                "be held-out points, not the support itself."
            )
    elif support.shape[0] >= 2:
        # each support point's distance to its nearest *other* support point: what a new
        # point of the same law would show, without held-out data
        real = float(np.median(cKDTree(support).query(support, k=2)[0][:, 1]))
        kind = "leave-one-out"
    else:
        real, kind = float("nan"), "leave-one-out"
    ratio = dcr / real if real > 0 else float("nan")
    return {
        "sample_dcr_median": dcr,
        "real_dcr_median": real,
        "memorization_ratio": ratio,
        "memorization_reference": kind,
    }


def _from_sampler(obj: Any, sigma_min: Any) -> tuple[Any, Any, Any]:
    """``(support, path, sampler)`` from a fitted sampler (duck-typed) or an array; ``path``
    is the OT path of ``sigma_min`` when one is given (an array's default: 0.01)."""
    if not (hasattr(obj, "sample") and hasattr(obj, "get_params")):
        return obj, as_path(None, 0.01 if sigma_min is None else sigma_min), None
    support = getattr(obj, "support_", None)
    if support is None:
        raise ValueError(
            f"diagnose needs a fitted sampler with a support: {type(obj).__name__} is not "
            "fitted, or was fitted on tasks (no support_); fit it on a support array first."
        )
    if sigma_min is not None:
        return support, as_path(None, sigma_min), obj
    if _runs_in_a_frame(obj):
        return support, obj.path_, obj
    # the sampler's own path (a CosinePath, say), else the OT path of its sigma_min
    return support, as_path(getattr(obj, "path", None), obj.sigma_min), obj


def _runs_in_a_frame(obj: Any) -> bool:
    """Whether a fitted NW sampler runs its flow in the support's frame (``normalize=True`` or
    an automatic ``sigma_min``): the field to diagnose is then that of the framed support."""
    if not hasattr(obj, "kde_bandwidth_"):
        return False
    return obj.normalize is True or isinstance(getattr(obj, "sigma_min_", obj.sigma_min), str)


def _sampler_kernel(sampler: Any) -> dict:
    """The kernel options of a fitted NW sampler's field (its ``bandwidth`` and fitted
    ``projection_``), none for another sampler or an array (the OT bandwidth, isotropic)."""
    if sampler is None or not hasattr(sampler, "kde_bandwidth_"):
        return {}
    return {"bandwidth": sampler.bandwidth, "projection": getattr(sampler, "projection_", None)}


def _flow_support(support: np.ndarray, sampler: Any) -> np.ndarray:
    """The support as the diagnosed flow sees it: in the sampler's frame when it has one
    (centred on the support mean, in units of ``kde_bandwidth_ / path_.sigma_min``), else as
    given. n_eff, collapse and geometry are those of the flow that runs; memorisation stays in
    data units."""
    if sampler is None or not _runs_in_a_frame(sampler):
        return support
    scale = sampler.kde_bandwidth_ / sampler.path_.sigma_min
    return (support - support.mean(axis=0)) / scale


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "never"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


@dataclass
class FailureReport:
    """Measurements of the three failure regimes of the plug-in flow for one support set.

    Built by :func:`diagnose`; see there for the rules behind ``flags``. Arrays are NumPy.

    Attributes
    ----------
    n_support, n_features : int
        ``m`` and ``d`` of the support.
    sigma_min : float
        Noise level of the path used.
    times : ndarray of shape (T,)
        Times at which ``n_eff`` is reported.
    neff_median, neff_q25, neff_q75 : ndarray of shape (T,)
        Median and quartiles of ``n_eff`` over the trajectories at each time.
    neff_mid : float
        Median ``n_eff`` at ``t = 0.5`` (``mid_time``).
    neff_mid_q25, neff_mid_q75 : float
        Its quartiles.
    mid_time : float
        The time ``0.5``.
    collapse_time : float or None
        First time on the uniform integration grid (plus ``t = 0.5``) at which the median
        ``n_eff`` is below 2; None if it never is. It does not depend on ``times``. With
        ``sigma_min`` small every support of distinct points collapses near ``t = 1`` by
        design (the terminal law is a KDE of bandwidth ``sigma_min``): what matters is how early.
    eigenvalues : ndarray of shape (d,)
        Eigenvalues of the support covariance (``ddof=1``), descending; zeros when ``m = 1``.
    condition_number : float
        ``lambda_max / lambda_min``; ``inf`` when the covariance is singular (always when
        ``m <= d``), NaN when undefined.
    effective_dimension : float
        Participation ratio ``(sum lambda)^2 / sum lambda^2``, in ``[1, d]``.
    isotropic_effective_dimension : float
        Its expectation-ratio value for an isotropic Gaussian sample of the same size,
        ``((m-1) d + 2) / (m + d)``; below ``d`` when ``m`` is small.
    anisotropy : float
        ``(effective_dimension - 1) / (isotropic_effective_dimension - 1)``: about 1 for
        isotropic data, near 0 when the variance sits in one direction.
    radial_cv2 : float
        ``var(r) / mean(r)^2`` of the radii ``r_i`` of the support points around their mean.
    radial_cv2_gaussian : float
        Its value for Gaussian data with the support's covariance and size.
    radial_metric : {"mahalanobis", "euclidean"}
        How the radii are measured: Mahalanobis (whitened by the sample covariance; exact
        Gaussian reference, a Beta law) when ``m >= 2 d``, ``m > d + 1`` and the covariance is
        well conditioned; Euclidean otherwise (reference: a chi law with the effective number
        of dimensions).
    radial_ratio : float
        ``radial_cv2 / radial_cv2_gaussian``: about 1 for Gaussian data, well below 1 for a
        thin shell, above 1 for several shells of different radii or heavy tails.
    radial_tolerance : float
        Factor by which ``radial_ratio`` must differ from 1 (either way) to be flagged.
    support_ratio : float
        ``m / d``.
    sample_dcr_median : float
        Median distance of the samples (``n_trajectories`` of them) to their closest support
        point.
    real_dcr_median : float
        The same for real points: held-out ``reference`` points when given, else each support
        point's distance to its nearest other support point (NaN when ``m = 1``).
    memorization_ratio : float
        ``sample_dcr_median / real_dcr_median``: about 1 for new points, near 0 for copies
        (:func:`skflow.metrics.memorization_ratio` when a reference is given).
    memorization_reference : {"held-out", "leave-one-out"}
        Which real points ``real_dcr_median`` uses.
    flags : dict
        ``{"collapse": bool, "mismatch": bool, "scarcity": bool, "memorization": bool}``.
    details : dict
        Sub-flags ``"anisotropic"``, ``"radial"``, ``"shell_like"`` and ``"geometry_assessed"``
        (False when ``m < 10``: the geometric statistics are reported but not flagged).
    """

    n_support: int
    n_features: int
    sigma_min: float
    times: np.ndarray
    neff_median: np.ndarray
    neff_q25: np.ndarray
    neff_q75: np.ndarray
    neff_mid: float
    neff_mid_q25: float
    neff_mid_q75: float
    collapse_time: float | None
    eigenvalues: np.ndarray
    condition_number: float
    effective_dimension: float
    isotropic_effective_dimension: float
    anisotropy: float
    radial_cv2: float
    radial_cv2_gaussian: float
    radial_ratio: float
    radial_tolerance: float
    radial_metric: str
    support_ratio: float
    sample_dcr_median: float
    real_dcr_median: float
    memorization_ratio: float
    memorization_reference: str
    flags: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    mid_time: float = MID_TIME

    def to_dict(self) -> dict:
        """All fields as plain Python values (lists, floats, bools, None): JSON-serialisable.

        Returns
        -------
        report : dict
        """
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, dict):
                value = {
                    k: (bool(v) if isinstance(v, bool | np.bool_) else v) for k, v in value.items()
                }
            elif isinstance(value, np.generic):
                value = value.item()
            out[f.name] = value
        return out

    def summary(self) -> str:
        """A readable multi-line summary with the numbers and the rule behind each flag.

        Returns
        -------
        text : str
        """
        m, d = self.n_support, self.n_features

        def mark(name):
            return "YES" if self.flags.get(name) else "no "

        lam = self.eigenvalues
        spectrum = ", ".join(_fmt(float(v)) for v in lam[:5]) + (", ..." if len(lam) > 5 else "")
        geo_note = (
            ""
            if self.details.get("geometry_assessed", True)
            else (f"  (not flagged: fewer than {MIN_GEOMETRY_SUPPORT} support points)")
        )
        onset = (
            f"median n_eff never below {COLLAPSE_NEFF:g}"
            if self.collapse_time is None
            else f"median n_eff < {COLLAPSE_NEFF:g} from t={_fmt(self.collapse_time)}"
        )
        lines = [
            f"FailureReport: m={m} support points in d={d} (m/d={_fmt(self.support_ratio)}), "
            f"sigma_min={self.sigma_min:g}",
            f"[{mark('collapse')}] collapse: median n_eff at t={self.mid_time:g} is "
            f"{_fmt(self.neff_mid)} (IQR {_fmt(self.neff_mid_q25)}-{_fmt(self.neff_mid_q75)}) "
            f"of m={m}; {onset}",
            f"      rule: median n_eff(t={self.mid_time:g}) < {COLLAPSE_NEFF:g}",
            f"[{mark('mismatch')}] mismatch: covariance eigenvalues {spectrum}; "
            f"condition number {_fmt(self.condition_number)}",
            f"      effective dimension {_fmt(self.effective_dimension)} of d={d} "
            f"(isotropic sample of this size: {_fmt(self.isotropic_effective_dimension)}), "
            f"anisotropy {_fmt(self.anisotropy)} (flag < {ANISOTROPY_THRESHOLD:g})",
            f"      radial CV^2 ({self.radial_metric} radii) {_fmt(self.radial_cv2)} vs Gaussian "
            f"{_fmt(self.radial_cv2_gaussian)} (ratio {_fmt(self.radial_ratio)}; flag outside "
            f"[1/{_fmt(self.radial_tolerance)}, {_fmt(self.radial_tolerance)}])" + geo_note,
            f"[{mark('scarcity')}] scarcity: m={m}, d={d}, m/d={_fmt(self.support_ratio)}; "
            f"kernel n_eff at t={self.mid_time:g}: {_fmt(self.neff_mid)}",
            f"      rule: m < max({SCARCITY_MIN_SUPPORT}, {SCARCITY_PER_DIM}*d) = "
            f"{max(SCARCITY_MIN_SUPPORT, SCARCITY_PER_DIM * d)}",
            f"[{mark('memorization')}] memorization: samples lie {_fmt(self.sample_dcr_median)} "
            f"from the support (median), real points {_fmt(self.real_dcr_median)} "
            f"({self.memorization_reference}); ratio {_fmt(self.memorization_ratio)}",
            f"      rule: ratio < {MEMORIZATION_RATIO:g}",
            "flags: " + ", ".join(f"{k}={bool(v)}" for k, v in self.flags.items()),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def plot(self, ax: Any = None):
        """Draw ``n_eff(t)`` (median and interquartile band) and the covariance spectrum.

        Parameters
        ----------
        ax : sequence of two matplotlib Axes, optional
            Where to draw; by default a new figure with two side-by-side panels.

        Returns
        -------
        fig : matplotlib.figure.Figure
        axes : ndarray of two Axes

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError(
                "FailureReport.plot needs matplotlib; install it with `pip install matplotlib` "
                f"(or {install_hint('plot')})."
            ) from exc
        if ax is None:
            fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        else:
            axes = np.asarray(ax, dtype=object).ravel()
            if axes.size != 2:
                raise ValueError(f"ax must hold two matplotlib Axes, got {axes.size}.")
            fig = axes[0].figure
        axes = np.asarray(axes, dtype=object).ravel()
        a0, a1 = axes
        a0.fill_between(self.times, self.neff_q25, self.neff_q75, alpha=0.3, label="IQR")
        a0.plot(self.times, self.neff_median, lw=2, label="median $n_{\\mathrm{eff}}$")
        a0.axhline(
            COLLAPSE_NEFF,
            color="gray",
            ls="--",
            lw=1,
            label=f"$n_{{\\mathrm{{eff}}}}={COLLAPSE_NEFF:g}$",
        )
        if self.collapse_time is not None:
            a0.axvline(self.collapse_time, color="C3", ls=":", lw=1, label="collapse time")
        a0.set_yscale("log")
        a0.set_xlim(0.0, 1.0)
        a0.set_xlabel("t")
        a0.set_ylabel("$n_{\\mathrm{eff}}$ along the flow")
        a0.set_title(f"n_eff(t), m={self.n_support}, d={self.n_features}")
        a0.legend(fontsize=10)
        lam = np.asarray(self.eigenvalues, dtype=float)
        idx = np.arange(1, lam.size + 1)
        positive = lam > 0
        a1.plot(idx[positive], lam[positive], "o-")
        if np.any(positive):
            a1.set_yscale("log")
        a1.set_xlabel("eigenvalue index")
        a1.set_ylabel("covariance eigenvalue")
        a1.set_title(f"spectrum: eff. dim {_fmt(self.effective_dimension)} of {self.n_features}")
        fig.tight_layout()
        return fig, axes


# --------------------------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------------------------


def diagnose(
    support: Any,
    *,
    sigma_min: float | None = None,
    times: Any = None,
    n_trajectories: int = 256,
    n_steps: int = 50,
    reference: Any = None,
    random_state: Any = None,
) -> FailureReport:
    """Measure the failure regimes of the plug-in flow for a support set or a fitted sampler.

    **Collapse.** ``n_eff(t)`` of the NW weights along the flow's own trajectories
    (:func:`neff_along_path`): median and quartiles per time, the first time at which the
    median drops below 2 (``collapse_time``), and the flag

        ``collapse = median n_eff(t = 0.5) < 2``.

    At ``t = 0.5`` the OT bandwidth ``h = sigma_t / t`` is about 1, the scale of the source
    noise: halfway between the global average (``t = 0``, ``n_eff = m``) and the nearest
    neighbour (``t = 1``). ``n_eff < 2`` means fewer than two support points carry the local
    mean; if that already holds halfway, the second half of the flow only transports each
    trajectory onto the support point it has picked, and the sampler reproduces ``S`` (the
    paper reads ``n_eff`` at ``t = 0.56``). The rule uses ``t = 0.5`` rather than
    ``collapse_time`` because every support of distinct points collapses near ``t = 1``
    (the terminal law is a KDE of bandwidth ``sigma_min``).

    **Geometric mismatch.** From the support covariance (``ddof=1``): eigenvalues, condition
    number, participation-ratio effective dimension ``D = (sum lambda)^2 / sum lambda^2`` and
    the value ``D_iso = ((m-1) d + 2) / (m + d)`` an isotropic Gaussian sample of the same size
    shows. From the radii ``r_i`` of the support points around their mean: ``CV^2 =
    var(r) / mean(r)^2`` against its value for Gaussian data of the same covariance and size.
    When ``m >= 2 d`` (and the covariance is well conditioned) the radii are Mahalanobis
    distances under the sample covariance, whose Gaussian law is known exactly
    (``m r^2 / (m-1)^2 ~ Beta(d/2, (m-d-1)/2)``); whitening also removes the "few directions"
    structure of clustered data, which the anisotropy criterion counts instead. Otherwise they
    are Euclidean and the reference is a chi law with the (bias-corrected) effective number of
    dimensions. The flag is

        ``mismatch = anisotropic or radial``, with
        ``anisotropic = (D - 1) / (D_iso - 1) < 0.25`` and
        ``radial = radial_ratio`` outside ``[1/tol, tol]``,
        ``tol = max(2, exp(3 * 1.5 / sqrt(m)))``,

    and both are evaluated only when ``m >= 10``. Normalising ``D`` by ``D_iso`` rather than
    ``d`` keeps a small isotropic sample (whose covariance is singular when ``m <= d``) from
    reading as anisotropic; 0.25 means the data fill less than a quarter of the extra
    directions an isotropic sample would (in 2-D: a variance ratio above about 16). The
    condition number is reported, not flagged on: it is infinite whenever ``m <= d`` and its
    sampling distribution blows up as ``m`` approaches ``d``. The radial test is two-sided:
    a thin shell has a much smaller radial spread than a Gaussian (``ratio << 1``,
    ``details["shell_like"]``); shells of several radii, like heavy tails, a much larger one.
    ``tol`` requires a factor 2 and at least 3 standard errors (``1.5 / sqrt(m)`` on the log
    scale, calibrated on Gaussian data), so that Gaussian supports are flagged in about 1 % of
    draws at ``m = 10`` and under 1 % from ``m = 20``. An isotropic kernel matches
    Gaussian-like data; both criteria measure the departure from it. Mixtures of a few
    separated clusters often read as anisotropic (their covariance is dominated by the
    directions joining the means); a projection (PCA) or a Mahalanobis kernel is then the
    remedy, as for any anisotropic support.

    **Scarcity.** ``m``, ``d``, ``m / d`` and the kernel's median ``n_eff`` at ``t = 0.5``; the
    flag is

        ``scarcity = m < max(10, 2 d)``.

    With ``m <= d`` the support spans an ``(m-1)``-dimensional affine subspace, and the flow's
    terminal law (the KDE of ``S`` with bandwidth ``sigma_min``) is degenerate in the remaining
    directions; with ``m < 2 d`` the eigenvalues of the sample covariance of even isotropic data
    spread over a factor above 30 (Marchenko-Pastur, aspect ratio ``d / m > 1/2``), so the
    geometry itself is not estimable; below 10 points no nonparametric estimate is meaningful.
    The kernel's ``n_eff`` at mid-path (``neff_mid``) is reported beside these numbers: it is
    the number of support points a velocity estimate actually averages.

    **Memorisation.** The median distance of ``n_trajectories`` samples to their closest
    support point (DCR), over that of real points; the flag is

        ``memorization = memorization_ratio < 0.5``.

    The samples are those of the sampler when one is given (``sampler.sample``), else exact
    draws of the plug-in flow's terminal law (the Gaussian KDE of the support with bandwidth
    ``sigma_min``). The real points are the held-out ``reference`` when given
    (:func:`skflow.metrics.memorization_ratio`), else the support itself, each point against
    its nearest *other* support point (leave-one-out; no held-out data needed). New points
    of the data's law give a ratio near 1; a sampler that copies the support (a terminal
    bandwidth tiny against the spacing of the data, e.g. ``sigma_min = 0.01`` on raw 0-16
    pixel values) gives a ratio near 0, which MMD² does not penalise. 0.5 means the samples
    sit at half the distance real points do, well outside the spread of the medians of a
    few hundred distances.

    Parameters
    ----------
    support : array-like of shape (m, d) or fitted sampler
        Support set (finite, non-empty, 2-D), or a fitted sampler
        (:class:`~skflow.NWFlowSampler`, :class:`~skflow.LearnedFlowSampler`): its
        ``support_`` and ``sigma_min`` are used, and its own samples for memorisation (the
        ``n_eff`` statistics are those of the plug-in flow of that support: with an
        :class:`~skflow.NWFlowSampler`'s own kernel, its ``bandwidth`` and fitted
        ``projection_``; isotropic at the OT bandwidth for a learned sampler).
    sigma_min : float in (0, 1), optional
        Noise level at ``t = 1`` of the OT path to diagnose. Default: a sampler's own path
        (its ``path``, e.g. ``CosinePath(0.05)``, else the OT path of its ``sigma_min``), or
        the OT path of 0.01 for an array. A
        :class:`~skflow.NWFlowSampler` that runs in its support's frame
        (``sigma_min="auto"`` or ``normalize=True``) is diagnosed in that frame: the flow
        that runs, with the frame's ``path_.sigma_min`` (reported) on the support centred
        and divided by ``kde_bandwidth_ / path_.sigma_min``.
    times : array-like of float in [0, 1], optional
        Times at which ``n_eff`` is reported; see :func:`neff_along_path`.
    n_trajectories : int, default=256
        Number of flow trajectories started from ``N(0, I)`` (and of samples).
    n_steps : int, default=50
        Number of uniform Heun steps on [0, 1].
    reference : array-like of shape (n_reference, d), optional
        Real points held out from the support, for the memorisation ratio.
    random_state : None, int, numpy Generator or RandomState, default=None
        Source of the initial noise and of the samples (the only randomness).

    Returns
    -------
    report : FailureReport

    Raises
    ------
    ValueError
        If ``support`` contains NaN/inf, is not 2-D or is empty, ``sigma_min`` is not in
        (0, 1), ``times`` has values outside [0, 1], or a count is not a positive integer.
    TypeError
        If ``support`` is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.diagnostics import diagnose
    >>> S = np.random.default_rng(0).standard_normal((200, 2))
    >>> report = diagnose(S, n_trajectories=32, n_steps=10, random_state=0)
    >>> report.flags
    {'collapse': False, 'mismatch': False, 'scarcity': False, 'memorization': True}
    >>> bool(report.neff_mid > 50), report.collapse_time is not None
    (True, True)
    >>> print(report.summary().splitlines()[0])
    FailureReport: m=200 support points in d=2 (m/d=100), sigma_min=0.01
    >>> diagnose(S, sigma_min=0.1, n_trajectories=32, n_steps=10, random_state=0).flags[
    ...     "memorization"
    ... ]
    False

    A fitted sampler is diagnosed with its own support, ``sigma_min`` and samples:

    >>> from skflow import NWFlowSampler, SolverOptions
    >>> sampler = NWFlowSampler(sigma_min=0.1, solver=SolverOptions(n_steps=10)).fit(S)
    >>> diagnose(sampler, n_trajectories=32, n_steps=10, random_state=0).sigma_min
    0.1
    """
    support, path, sampler = _from_sampler(support, sigma_min)
    support = _check_support(support)
    sigma_min = path.sigma_min
    times = _check_times(times)
    n_trajectories = check_int(n_trajectories, "n_trajectories")
    n_steps = check_int(n_steps, "n_steps")
    m, d = support.shape

    # n_eff on the default times (collapse time and mid-path value) and the reported ones;
    # states depend on the time alone, so the flags do not depend on ``times``.
    base = _default_times(n_steps)
    report_times = base if times is None else times
    grid = np.union1d(base, report_times)
    rng = as_generator(random_state)
    flow_support = _flow_support(support, sampler)
    kernel = _sampler_kernel(sampler)
    neff = _path_neff(flow_support, path, n_steps, grid, n_trajectories, rng, **kernel)
    q25, med, q75 = np.percentile(neff, [25.0, 50.0, 75.0], axis=1)
    below = np.flatnonzero(med[np.searchsorted(grid, base)] < COLLAPSE_NEFF)
    collapse_time = float(base[below[0]]) if below.size else None
    mid = int(np.searchsorted(grid, MID_TIME))
    rows = np.searchsorted(grid, report_times)

    geo = _geometry(flow_support)
    details = _geometry_flags(geo, m)
    flags = {
        "collapse": bool(med[mid] < COLLAPSE_NEFF),
        "mismatch": details["anisotropic"] or details["radial"],
        "scarcity": bool(m < max(SCARCITY_MIN_SUPPORT, SCARCITY_PER_DIM * d)),
    }
    if sampler is None:  # exact draws of the plug-in flow's terminal law (the KDE)
        picks = rng.integers(0, m, size=n_trajectories)
        samples = support[picks] + sigma_min * rng.standard_normal((n_trajectories, d))
    else:
        samples = sampler.sample(n_trajectories, random_state=int(rng.integers(2**31)))
    memo = _memorization(support, np.asarray(samples, dtype=np.float64), reference)
    flags["memorization"] = bool(memo["memorization_ratio"] < MEMORIZATION_RATIO)
    return FailureReport(
        n_support=m,
        n_features=d,
        sigma_min=sigma_min,
        times=np.asarray(report_times, dtype=np.float64),
        neff_median=med[rows],
        neff_q25=q25[rows],
        neff_q75=q75[rows],
        neff_mid=float(med[mid]),
        neff_mid_q25=float(q25[mid]),
        neff_mid_q75=float(q75[mid]),
        collapse_time=collapse_time,
        support_ratio=m / d,
        flags=flags,
        details=details,
        **geo,
        **memo,
    )
