"""The exact velocity field of a support set: a Nadaraya-Watson smoother.

For the OT path ``X_t = t X_1 + sigma_t X_0`` and the empirical target measure of a support
``S = {s_1, ..., s_m}``, the marginal velocity is

.. math::

    w_i(x, t) = \\operatorname{softmax}_i\\Big(-\\frac{\\|x - t s_i\\|^2}{2 \\sigma_t^2}\\Big),
    \\qquad u_t(x) = \\frac{\\sum_i w_i s_i - (1 - \\sigma_{\\min}) x}{\\sigma_t}.

The weights are Gaussian-kernel weights at ``x / t`` with bandwidth ``h(t) = sigma_t / t``; the
sum is the Nadaraya-Watson local mean. This module computes the form above, which is finite at
``t = 0`` (uniform weights there), through two matrix products per query chunk:

    logits_i = a(t) <x, s_i> - b(t) ||s_i||^2,   a = t / tau^2,  b = t^2 / (2 tau^2),

where ``tau(t) = t h(t)`` is the kernel width in x-space (``tau = sigma_t`` for the OT
bandwidth); the term ``||x||^2`` is constant over ``i`` and cancels in the softmax. Support
and queries are centred on the support mean first (``x - t mu``, ``s - mu``), which leaves the
weights unchanged and keeps the cancellation between the two terms small. Memory is
``O(chunk_size * m + m * d)``, never ``O(n * m * d)``.

Any other Gaussian path ``X_t = alpha_t X_1 + sigma_t X_0`` (:class:`skflow.paths.GaussianPath`)
is passed to :class:`NWField` as ``path``: ``t`` becomes ``alpha_t`` in the kernel
(``h = sigma_t / alpha_t``) and the velocity is ``(gain_t sum_i w_i s_i - decay_t x) / sigma_t``
with the path's coefficients (``gain = 1``, ``decay = 1 - sigma_min`` for OT).

Every function accepts NumPy arrays or Torch tensors (on any device) and returns the same kind.
``t`` is a scalar or an array of shape ``(n,)`` (one time per query).

**dtypes** (one rule for every function): when ``x`` and ``support`` are both float32 the
result is float32, computed accurately (in float64 where float32 would lose precision, see
*Precision*; :func:`nw_log_density` always accumulates in float64); every other input dtype
(float64, integers, bool, and also float16/bfloat16 tensors) is computed and returned in
float64. Half precision is therefore never used by this module, on the CPU or on CUDA;
:func:`kernel_coefficients` returns float64 coefficients.

Engines
-------
*NumPy*: chunked GEMMs (``(chunk, m)`` logits blocks of about 64 MiB).

*Torch*: :func:`nw_local_mean` and :func:`nw_velocity` run the attention realization: one
``scaled_dot_product_attention`` call per query block with query ``a x``, keys ``s_i``, values
``s_i``, scale 1 and the per-key bias ``-b ||s_i||^2`` either as a broadcast additive mask (one
time for all queries, on CPU) or as a lifted coordinate (query ``[a x, -b]``, key
``[s_i, ||s_i||^2]``; per-row times, and CUDA), see :mod:`skflow.field._sdpa`. On CPU (float32
and float64) and on CUDA (float32; half precision inputs are promoted to float64, see the dtype
rule above) it runs fused kernels in memory linear in ``n + m``; where only the reference
(math) kernel applies (float64 on CUDA) queries are processed in blocks sized from the free
memory. The weights, ``n_eff`` and the divergence need
explicit logits and keep the GEMM path. Per-row time tensors stay on the device.

*Streaming over the support* (both libraries, every function): for supports too large for the
dense path (``m * max(d, 64)`` above the block budget, e.g. ``m = 10^6`` in ``d = 64``) or when
``support_chunk_size`` is given, the support is read in chunks of rows and the softmax is
accumulated in one pass with an online log-sum-exp: per query a running maximum ``M`` of the
logits, a running normaliser ``Z = sum_i exp(l_i - M)`` and running weighted sums
``sum_i exp(l_i - M) v_i`` (and ``... ||k_i||^2`` for the divergence, ``exp(2 (l_i - M))`` for
``n_eff``), all rescaled by ``exp(M_old - M_new)`` when the maximum grows. The support mean is
computed once (chunked, float64 accumulation) and each chunk is centred (and cast, and
projected) on its own, so no full-size copy of the support is made: memory is
``O(n d + chunk * (d + k) + block)``. The result equals the dense one to rounding (~1e-15
relative in float64).

Precision
---------
float64 results equal a float64 brute force to about ``1e-12`` relative. In float32 the
expansion costs about ``eps_32 * a(t) * R^2`` in the logits, ``R = max_i ||s_i - mu||`` (after
the projection, if any), which grows like ``1 / sigma_t^2`` as ``t -> 1``. When ``a(t) R^2``
exceeds ``NWField``'s ``float32_logit_limit`` (default ``1e4``; for standardized data that is
``t`` above about 0.92 in d = 64 and 0.975 in d = 2) float32 inputs are computed in float64
and the result is cast back to float32, so the float32 velocity stays within ``1e-4``
(normwise relative: ``max |v_32 - v_64| / max |v_64|``) of the float64 field at every ``t`` in
``[0, 1]`` on standardized data; without the fallback it reaches ~2e-4 in d = 2 at
``t >= 0.99``. Set ``NWField(..., float32_logit_limit=float("inf"))`` to stay in float32
throughout. See ``docs/performance.md`` for the measurements.
"""

from ._coefficients import kernel_coefficients
from ._plan import default_chunk_size
from .functions import (
    nw_divergence,
    nw_effective_sample_size,
    nw_local_mean,
    nw_log_density,
    nw_logits,
    nw_velocity,
    nw_velocity_and_divergence,
    nw_weights,
)
from .prepared import ATTENTION_BIASES, ENGINES, FALLBACKS, NWField

__all__ = [
    "ATTENTION_BIASES",
    "ENGINES",
    "FALLBACKS",
    "NWField",
    "kernel_coefficients",
    "nw_logits",
    "nw_weights",
    "nw_local_mean",
    "nw_velocity",
    "nw_divergence",
    "nw_velocity_and_divergence",
    "nw_effective_sample_size",
    "nw_log_density",
    "default_chunk_size",
]
