"""Which frame a :class:`~skflow.LearnedFlowSampler` uses, chosen per support size.

``normalize="auto"`` with whole classes held out trains two models: one in the frame of the
Gaussian predictive of the training classes (``normalize="predictive"``), one in each
support's own frame (``normalize=True``). Which is better depends on the support size ``m``:
where the training classes share a law of means, shrinking a small support toward them pays,
and a large support can speak for itself. So the choice is made at a few support sizes on
the validation classes, by the few-shot MMD² of the generated rows (a score in data units:
the two models' flow-matching losses are each in their own frame), and a support of ``m``
rows uses the frame chosen at the nearest of those sizes (on a log scale), as
:class:`~skflow.BestClassicalSampler` does with ``support_size=[...]``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ._frame import log_spaced_sizes

__all__ = [
    "FRAMES",
    "choice_support_sizes",
    "frame_for_size",
    "frames_by_size",
    "fewshot_validation_mmd2",
    "scoring_seconds",
]

#: The two frames, in the order of ``frame_validation_mmd2_``.
FRAMES = ("predictive", "support")

# MMD² below this counts as this: about the unbiased estimator's noise with 128 rows, so two
# models both at the noise tie (and the tie goes to the predictive frame).
_NOISE_FLOOR = 1e-4


def choice_support_sizes(
    support_range: tuple[int, int], source: Any, n_sizes: int = 4
) -> np.ndarray:
    """Support sizes at which the frame is chosen: ``n_sizes`` spread over the training
    range on a log scale, up to half the smallest validation class (the other half at least
    is the reference).

    Parameters
    ----------
    support_range : (int, int)
        The training tasks' support sizes.
    source : task source or None
        The validation classes (its ``class_sizes_`` bound the sizes), or None.
    n_sizes : int, default=4

    Returns
    -------
    ndarray of int
        Sorted, distinct.

    Examples
    --------
    >>> choice_support_sizes((2, 50), None).tolist()
    [2, 6, 17, 50]
    """
    lo, hi = support_range
    class_sizes = getattr(source, "class_sizes_", None)
    if class_sizes is not None:
        hi = max(min(lo, 2), min(hi, int(np.min(class_sizes)) // 2))
    lo = min(lo, hi)
    return log_spaced_sizes(lo, hi, n_sizes)


def fewshot_validation_mmd2(
    sampler: Any, source: Any, sizes: Any, seed: int, n_tasks: int = 32
) -> np.ndarray:
    """Mean few-shot MMD² of a fitted sampler on tasks of the validation classes, per size.

    At each support size, ``n_tasks`` tasks of ``source`` (a support, and as the reference
    the distinct rows among 128 drawn from the rest of its class); 128 generated rows per
    task; MMD² with the reference's median-heuristic bandwidth.

    Parameters
    ----------
    sampler : fitted sampler
        With ``sample(n, support=(B, m, d), random_state=...)``.
    source : task source
        The validation classes (:class:`~skflow.tasks.FewShotClassTasks`).
    sizes : array-like of int
        Support sizes (:func:`choice_support_sizes`).
    seed : int
        Tasks and noise: the same for every sampler scored with it.
    n_tasks : int, default=32

    Returns
    -------
    ndarray of shape (n_sizes,)
        The mean over the tasks of each size.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import LedoitWolfSampler
    >>> from skflow.tasks import FewShotClassTasks
    >>> X, y = np.random.default_rng(0).normal(size=(60, 2)), np.repeat(np.arange(3), 20)
    >>> est = LedoitWolfSampler().fit(X, y)
    >>> fewshot_validation_mmd2(est, FewShotClassTasks(X, y), [2, 10], seed=0).round(3)
    array([0.187, 0.025])
    """
    from ..metrics import mmd2

    rng, n = np.random.default_rng(seed), 128
    means = []
    for m in sizes:
        S, Q = source.sample_tasks(n_tasks, int(m), n, random_state=rng)
        gen = sampler.sample(n, support=S, random_state=int(rng.integers(2**31 - 1)))
        scores = []
        for g, q in zip(gen, Q, strict=True):  # the reference: the distinct rows drawn
            ref = np.unique(q, axis=0)
            scores.append(mmd2(g, ref, reference=ref))
        means.append(np.mean(scores))
    return np.asarray(means)


def scoring_seconds(
    model: Any, n_features: int, sizes: Any, n_evaluations: int, n_tasks: int = 32
) -> float:
    """Predicted wall time of :func:`fewshot_validation_mmd2` for one model, so that a
    ``max_time`` can keep room for the choice.

    Sampling a size's tasks is ``n_evaluations`` forward passes of the network on ``n_tasks``
    supports and 128 queries each; one pass at the largest size is timed (the faster of two,
    after a first call that warms up) and counted for every size (a smaller support costs no
    more).

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x (B, n, d), support (B, m, d), t)``, e.g. a
        :class:`~skflow.nn.transformer.CrossAttentionVelocity`.
    n_features : int
        ``d`` of the data.
    sizes : array-like of int
        Support sizes (:func:`choice_support_sizes`).
    n_evaluations : int
        Network evaluations of one flow (:func:`skflow.solvers.evaluations_per_flow`).
    n_tasks : int, default=32

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from skflow.nn.transformer import CrossAttentionVelocity
    >>> net = CrossAttentionVelocity(n_features=2, d_model=8, n_heads=2, n_layers=1)
    >>> 0.0 < scoring_seconds(net, 2, [2, 4], n_evaluations=10) < 10.0
    True
    """
    import torch

    param = next(model.parameters())
    gen = torch.Generator().manual_seed(0)  # a local generator: the global seed is untouched
    x = torch.randn(n_tasks, 128, n_features, generator=gen).to(param.device, param.dtype)
    support = torch.randn(n_tasks, int(np.max(sizes)), n_features, generator=gen)
    support = support.to(param.device, param.dtype)
    seconds = []
    with torch.no_grad():
        for _ in range(3):
            start = time.perf_counter()
            model(x, support, 0.5)
            if param.device.type == "cuda":  # the pass has run when the clock stops
                torch.cuda.synchronize(param.device)
            seconds.append(time.perf_counter() - start)
    return min(seconds[1:]) * int(n_evaluations) * len(sizes)


def frames_by_size(predictive: Any, support: Any) -> list[str]:
    """The frame chosen at each size: ``"predictive"`` where its model's MMD² is at most the
    support-frame model's (MMD² under 1e-4, the estimator's noise, counts as 1e-4: a tie),
    else ``"support"``.

    Parameters
    ----------
    predictive, support : array-like of shape (n_sizes,)
        Each model's :func:`fewshot_validation_mmd2`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> frames_by_size([0.10, 0.05, 0.03], [0.20, 0.04, 0.03])
    ['predictive', 'support', 'predictive']
    >>> frames_by_size([0.0, 5e-5], [1e-5, 0.0])
    ['predictive', 'predictive']
    """
    pred = np.maximum(np.asarray(predictive, dtype=float), _NOISE_FLOOR)
    supp = np.maximum(np.asarray(support, dtype=float), _NOISE_FLOOR)
    return [FRAMES[0] if p <= s else FRAMES[1] for p, s in zip(pred, supp, strict=True)]


def frame_for_size(choice: dict, m: int) -> str:
    """The frame of a support of ``m`` rows: the one chosen at the nearest size of
    ``choice`` (``{"sizes": [...], "frames": [...]}``) on a log scale, the smaller size on a
    tie.

    Examples
    --------
    >>> choice = {"sizes": [2, 6, 17], "frames": ["predictive", "support", "support"]}
    >>> [frame_for_size(choice, m) for m in (1, 3, 4, 5, 40)]
    ['predictive', 'predictive', 'support', 'support', 'support']
    """
    sizes = np.asarray(choice["sizes"], dtype=float)
    gap = np.abs(np.log(sizes) - np.log(max(int(m), 1)))
    nearest = np.flatnonzero(gap <= gap.min() + 1e-9)[0]  # rounding must not break a tie
    return choice["frames"][int(nearest)]
