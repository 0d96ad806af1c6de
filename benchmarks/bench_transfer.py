"""What transfers from the training classes: every few-shot generator against the Bayes limit.

Settings (each task is one unseen class: ``m`` support rows, the others its reference):

* ``hier-gauss``: :class:`skflow.tasks.HierarchicalTasks`, ``d = 16``, anisotropic rotated
  class-mean prior ``T`` and within-class covariance ``W`` (fixed by seed 12345), Gaussian rows;
  the exact Bayes predictive is known (closed form);
* ``hier-t``: the same with Student-t rows (``df = 4``); Bayes predictive by Gibbs sampling;
* ``hier-gauss-K`` / ``hier-t-K``: the same families with ``K`` training classes instead of 30
  (:func:`training_classes`);
* ``mixtures``: 30 training classes, each a task of
  :class:`skflow.tasks.GaussianMixtureTasks` (``d = 16``: 2 to 8 anisotropic components in
  a box), test classes fresh tasks of it: classes that share a law of shapes, not a
  location or a covariance (no Bayes limit);
* ``digits``: scikit-learn's digits, PCA to 16 components and standardisation fitted on the
  training classes 0-6; test classes 7, 8, 9 (no Bayes limit);
* ``digits-rows``: seen classes, new rows: half of every digit's rows (all ten digits) to
  ``fit`` (PCA and scaling fitted on them), supports and references from the other half;
* ``digits-loco``: leave one class out, ten times: trained on nine digits (PCA and scaling
  fitted on them), tested on the tenth; a tenth of the tasks per held-out digit.

Arms, all fitted on the training classes only (``fit(X_train, y_train)``, public API):
``oracle`` (hierarchical settings: fresh rows of the test class itself, the noise floor of
the estimator), ``bayes`` (hierarchical settings), ``ledoit_wolf``, ``pooled``, ``emp_bayes``
(Ledoit-Wolf estimate of the class means' covariance), ``emp_bayes_mom`` (its sample
covariance), ``gmm_bic``,
``best_classical`` (:class:`skflow.BestClassicalSampler`, its default candidates, chosen per
``m`` on class-grouped folds of the training classes), ``plugin`` (``sigma_min = 0.01``),
``plugin_tuned`` (``sigma_min`` from a grid chosen per ``m`` on the training classes, the same
selector with plug-in candidates only), ``prior`` (``LearnedFlowSampler.from_pretrained(
"general-16")`` zero-shot), ``learned`` (``LearnedFlowSampler(max_time=...).fit(X, y)``,
defaults otherwise: one network that sees the support size; with 10 classes or more in the
predictive frame, as ``pred_sized`` (validated on held-out classes), with fewer in each
support's own frame, as ``learned_support`` (validated on a fifth of every class's rows);
``pred_sized_rows`` in runs saved before that: the predictive frame with fewer classes too;
``learned_two_frames`` in runs saved before that:
with 10 classes or more a model in the predictive frame and one in each support's own frame,
each support size served by the one that validated better at the nearest size, with fewer the
support's frame alone; ``learned_one_frame`` in runs saved before that: one of the two for
every size),
``learned_support`` (each support's own frame, ``normalize=True``: the default with fewer than
10 classes, and with any number before the predictive frame became the default;
``support_no_aug`` the same without rotation), ``learned_sigma01`` and ``learned_sigma03``
(the defaults with ``sigma_min`` 0.1 and 0.3: the path, and the untrained exact head, end
wider) and the ablation
arms of :data:`LEARNED_ARMS` (the same with one or two
parameters changed: the network seeing its frame, ``frame_context=True``, with each
augmentation; ``learned_abs``, no per-task frame; ``learned_pred``, ``normalize="predictive"``,
the frame of the best Gaussian arm's predictive, ``pred_no_aug``, the same without the
rotation in that frame, ``pred_recentre``, with recentring instead of the rotation, and
``pred_big``, with a wider and deeper network; ``pred_rows``, trained with a fifth of every
class's rows held out for early stopping: the predictive frame is otherwise untrained with
fewer than 10 classes), ``best_with_learned`` (:class:`skflow.BestClassicalSampler` over its
default candidates and the defaults of ``learned``, chosen per ``m`` on
:data:`SELECTION_SPLITS` class-grouped folds: a network trained per fold), ``prior_ft`` (the
shipped prior fine-tuned on the training classes with its card's recipe, ``max_time=120``
for the whole fit: with 10 classes or more split between the prior, continued, and a new
predictive-frame model, chosen per support size as in ``learned``; ``prior_ft_support`` in
runs saved before the card set ``normalize="auto"``: the prior alone; ``prior_ft_choice_extra`` and
``prior_ft_lr_choice_extra`` in runs saved before ``max_time`` bounded the whole fit: 120 s
for the two trainings, the choice between them on top, with the card's former schedule and
its current one; ``prior_ft_gentle``, the same with the card's former schedule,
``learning_rate=3e-4, warmup=0``) and, on the Gaussian hierarchical
settings, the oracle ``eb_true_T`` (empirical Bayes with the family's true between-class
covariance: what estimating it from the training classes costs) and, on the Student-t ones,
the oracle ``bayes_est`` (the exact Bayes predictive of Student-t rows with the family's
``df`` and the other hyperparameters estimated on the training classes: what a generator
that knew the form could reach with these classes).

Scores per task: MMD² (unbiased) with the median-heuristic bandwidth of the reference rows
(``mmd2_med``), MMD² at a quarter of that bandwidth (``mmd2_q``, sensitive to the covariance),
at twice it (``mmd2_2x``, the bandwidth-sensitivity table) and
:func:`skflow.metrics.memorization_ratio` (``copy``); the panel's energy distance (``energy``)
and 1-NN leave-one-out C2ST accuracy (``c2st``), each with its noise floor (``energy_floor``,
``c2st_floor``: the metric between two random halves of the reference, as
:func:`skflow.metrics.metric_panel` computes it; runs saved before lack these four keys,
"not measured"). The tables give means with 95 %
bootstrap intervals over tasks, the percentage by which each arm's mean MMD² is below the tuned
plug-in's (paired bootstrap interval) and, with a Bayes limit, the excess over Bayes; the panel
table gives every measured arm on each panel metric against ``learned`` (paired interval of the
difference), the noise floors, and a reading per arm: where it wins or loses beyond it.

Usage::

    python benchmarks/bench_transfer.py --settings hier-gauss --seeds 0 --json out/g.json
    python benchmarks/bench_transfer.py --docs-from out/g.json out/t.json out/d.json --write-docs
    python benchmarks/bench_transfer.py --docs-from --write-docs  # the saved runs of the docs

``--learned-arms`` picks the learned arms (default: ``learned`` and the ablation arms; none
given: none trained; ``few_shot``, :class:`skflow.FewShotSampler` with ``new="rows"`` on
``digits-rows`` and ``"classes"`` elsewhere, its training within ``--few-shot-budget`` seconds,
default 360, is picked there too). ``--merge SAVED MORE [MORE ...] --json OUT`` adds the arms
of the runs in the ``MORE`` files (the same settings and seeds, more learned arms; one file per
seed is fine) to the runs of ``SAVED``; ``--rename OLD=NEW`` first renames an arm of the saved runs
(an arm whose definition changed since, e.g. ``learned=learned_support`` for runs saved when
the default was the support's frame), recorded in the runs and the docs.

One Torch thread; each learned model is capped by ``--max-time`` seconds of wall time (its CPU
seconds are recorded). ``--write-docs`` writes the tables into ``docs/transfer.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    FewShotSampler,
    LearnedFlowSampler,
    LedoitWolfSampler,
    NWFlowSampler,
    PooledGaussianSampler,
)
from skflow.metrics import (
    classifier_two_sample_test,
    energy_distance,
    memorization_ratio,
    metric_panel,
    mmd2,
)
from skflow.samplers.options import learned_params_from_flat, nested_learned_params
from skflow.tasks import GaussianMixtureTasks, HierarchicalTasks
from skflow.threads import limit_threads

SUPPORT_SIZES = (5, 10, 20)
GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
PAGE = Path(__file__).resolve().parents[1] / "docs" / "transfer.md"
#: Learned arms: name -> parameters of ``LearnedFlowSampler`` besides the budget and the seed.
#: ``learned`` is the default recipe; the others change one thing each (the ablation).
LEARNED_ARMS = {
    # the defaults: one network in the predictive frame (rotated in it) that sees the size m
    "learned": {},
    "learned_support": {"normalize": True},  # each support's own frame, rotation augmentation
    "support_no_aug": {"normalize": True, "augment": None},  # ... not rotated
    # the defaults on a path that ends 10 or 30 times wider (sigma_min in the network's frame):
    # the untrained exact head is then a smoothing plug-in instead of a copying one
    "learned_sigma01": {"sigma_min": 0.1},
    "learned_sigma03": {"sigma_min": 0.3},
    "ctx_rotate": {"frame_context": True},  # the network also sees its frame
    "ctx_no_aug": {"frame_context": True, "augment": None},  # ... without augmentation
    "ctx_recentre": {"frame_context": True, "augment": "recentre"},  # ... recentring instead
    "learned_abs": {"normalize": False, "augment": None},  # no per-task frame at all
    # the frame of the best Gaussian arm's predictive; the network starts as that Gaussian
    "learned_pred": {"normalize": "predictive"},  # rotated in that frame about its origin
    "pred_no_aug": {"normalize": "predictive", "augment": None},  # ... not rotated
    "pred_recentre": {"normalize": "predictive", "augment": "recentre"},  # ... new centres instead
    # ... with twice the width and one more layer (capacity)
    "pred_big": {"normalize": "predictive", "d_model": 128, "n_layers": 3},
    # ... trained with a fifth of every class's rows held out for early stopping: with fewer
    # than 10 classes the predictive frame is otherwise not trained (nothing validates it)
    "pred_rows": {"normalize": "predictive", "validation_fraction": 0.2},
    # the defaults with a network that sees the support size m
    "learned_sized": {"size_embedding": True},
    # one network for every m: the predictive frame and a network that sees m (held-out
    # classes validate it with 10 classes or more; with fewer, a fifth of every class's rows)
    "pred_sized": {"normalize": "predictive", "size_embedding": True},
    "pred_sized_rows": {
        "normalize": "predictive",
        "size_embedding": True,
        "validation_fraction": 0.2,
    },  # fmt: skip
    # the shipped prior fine-tuned (its card's fine-tuning recipe, normalize="auto") with a
    # budget of PRIOR_FT_SECONDS for the whole fit
    "prior_ft": {"from_pretrained": "general-16"},
    # ... with the card's former, gentler schedule (the card now sets a fit's own 1e-3, 100)
    "prior_ft_gentle": {"from_pretrained": "general-16", "learning_rate": 3e-4, "warmup": 0},
    # the prior that sees the support size, fine-tuned like prior_ft
    "prior_sized_ft": {"from_pretrained": "general-16-sized"},
    # the defaults as one more candidate of BestClassicalSampler: chosen per m against the
    # classical arms on class-grouped folds of the training classes (cross-fitted: a network
    # per fold, trained on the other folds' classes), refitted on all of them where chosen
    "best_with_learned": {"candidate_of": "BestClassicalSampler"},
}
#: Class-grouped folds of ``best_with_learned`` (a network is trained per fold, and once more
#: on every class if it is chosen at some size).
SELECTION_SPLITS = 3
#: ``max_time`` of the ``prior_ft`` arm: the whole fit's wall-time budget (with 10 classes or
#: more both trainings and the choice between them; one Torch thread: at most about as many
#: CPU seconds).
PRIOR_FT_SECONDS = 120.0
DEFAULT_LEARNED = ("learned", "ctx_rotate", "ctx_no_aug", "ctx_recentre")
# Learned arms of saved runs only (an arm renamed by ``--rename`` when its definition changed):
# name -> what it was, for the tables that compare learned arms.
SAVED_ONLY_ARMS = {
    "learned_one_frame": "the former defaults: one frame for every support size",
    "learned_two_frames": (
        "the former defaults: two networks (predictive and support frame) chosen per support "
        "size with 10 classes or more, the support's frame alone with fewer"
    ),
    "prior_ft_support": "the prior fine-tuned in its own frame only (the former card recipe)",
    "prior_ft_choice_extra": (
        "the former card schedule (learning_rate=3e-4, warmup=0) with the former budget: "
        "120 s of training, the choice on top"
    ),
    "prior_ft_lr_choice_extra": (
        "the card's schedule (learning_rate=1e-3, warmup=100) with the former budget"
    ),
}
#: Learned arms that are not ``LearnedFlowSampler`` parameters: name -> what they are (picked
#: by ``--learned-arms`` like those of :data:`LEARNED_ARMS`, fitted by :func:`run_one`).
OTHER_ARMS = {
    "few_shot": (
        "skflow.FewShotSampler: the classical candidates and a learned one, its training "
        "within --few-shot-budget seconds, chosen per m (new='rows' on digits-rows, else "
        "'classes')"
    ),
}
#: The panel's keys of a task's scores -> (column title, scale, the key of its noise floor).
#: Lower is better for each (the C2ST accuracy is 0.5 for a generator of the law itself).
PANEL = {
    "mmd2_med": ("MMD² median bw ×10³", 1e3, None),
    "mmd2_q": ("MMD² ¼ bw ×10³", 1e3, None),
    "energy": ("energy ×10³", 1e3, "energy_floor"),
    "c2st": ("C2ST accuracy", 1.0, "c2st_floor"),
}
#: Random halvings of each task's reference behind its noise floors (``metric_panel``'s).
FLOOR_SPLITS = 5
NOT_MEASURED = "not measured"
BEGIN, END = "<!-- transfer:begin -->", "<!-- transfer:end -->"
DEFAULTS_BEGIN, DEFAULTS_END = "<!-- defaults:begin -->", "<!-- defaults:end -->"
PANEL_BEGIN, PANEL_END = "<!-- one-liner:begin -->", "<!-- one-liner:end -->"
RESULTS = Path(__file__).resolve().parent / "results" / "transfer"
#: The saved runs behind the tables of ``docs/transfer.md``, in the page's order
#: (``--docs-from`` with no file).
DOCS_RUNS = ("hier-gauss", "hier-gauss-300", "hier-t", "hier-t-345", "hier-t-300", "mixtures",
             "mixtures-345", "digits", "digits-345", "digits-loco", "digits-rows",
             "panel-hier-gauss", "panel-mixtures", "panel-digits", "panel-digits-rows")  # fmt: skip
MERGED = "` merged with `"  # joins the commands of merged runs (the docs quote each)
D = 16


def family(within: str) -> HierarchicalTasks:
    """The hierarchical family of the benchmark: rotated anisotropic ``T`` and ``W``."""
    rng = np.random.default_rng(12345)
    q1, _ = np.linalg.qr(rng.standard_normal((D, D)))
    q2, _ = np.linalg.qr(rng.standard_normal((D, D)))
    T = (q1 * np.geomspace(4.0, 0.05, D)) @ q1.T
    W = (q2 * np.geomspace(1.0, 0.02, D)) @ q2.T
    return HierarchicalTasks(D, prior_cov=T, within_cov=W, within=within, df=4.0)


def training_classes(name: str) -> int:
    """Training classes of a hierarchical setting: 30, or ``K`` for a name ending in ``-K``
    (``hier-gauss-300``: the same family with 300 training classes).

    >>> training_classes("hier-gauss"), training_classes("hier-t-300")
    (30, 300)
    """
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 30


def setting_data(name: str, n_tasks: int, seed: int) -> dict:
    """Training rows and labels, support pools (B, 20, d), references, the Bayes sampler."""
    max_m = max(SUPPORT_SIZES)
    if name == "mixtures":
        return mixtures_data(n_tasks, seed)
    if name.startswith("hier"):
        fam = family("gaussian" if name.startswith("hier-gauss") else "student_t")
        X, y = fam.make_classes(training_classes(name), 40, random_state=seed)
        pools, refs, means = fam.sample_tasks(
            n_tasks, max_m, 200, random_state=seed + 1000, return_means=True
        )
        return {"X": X, "y": y, "pools": pools, "refs": list(refs), "bayes": fam,
                "oracle": FreshRows(fam, means)}  # fmt: skip
    if name == "digits-rows":
        return digits_rows_data(n_tasks, seed)
    Xd, yd = load_digits(return_X_y=True)
    held = [int(name.rsplit("-", 1)[1])] if name.startswith("digits-loco-") else [7, 8, 9]
    train = ~np.isin(yd, held)
    pca = PCA(n_components=D, random_state=0).fit(Xd[train])
    Z = StandardScaler().fit(pca.transform(Xd[train])).transform(pca.transform(Xd))
    rng = np.random.default_rng(seed + 1000 + 100 * held[0] * (len(held) == 1))
    pools, refs = [], []
    for j in range(n_tasks):
        rows = Z[yd == held[j % len(held)]]
        rows = rows[rng.permutation(len(rows))]
        pools.append(rows[:max_m])
        refs.append(rows[max_m:])
    return {"X": Z[train], "y": yd[train], "pools": np.stack(pools), "refs": refs, "bayes": None,
            "oracle": None}  # fmt: skip


def digits_rows_data(n_tasks: int, seed: int) -> dict:
    """The ``digits-rows`` setting: half of every digit's rows (a seeded split) train, the
    other half gives each task's support (task ``j`` is digit ``j % 10``) and reference."""
    Xd, yd = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed + 2000)
    train = np.zeros(len(yd), dtype=bool)
    for c in range(10):
        rows = rng.permutation(np.flatnonzero(yd == c))
        train[rows[: len(rows) // 2]] = True
    pca = PCA(n_components=D, random_state=0).fit(Xd[train])
    Z = StandardScaler().fit(pca.transform(Xd[train])).transform(pca.transform(Xd))
    pools, refs = [], []
    for j in range(n_tasks):
        rows = Z[~train & (yd == j % 10)]
        rows = rows[rng.permutation(len(rows))]
        pools.append(rows[: max(SUPPORT_SIZES)])
        refs.append(rows[max(SUPPORT_SIZES) :])
    return {"X": Z[train], "y": yd[train], "pools": np.stack(pools), "refs": refs, "bayes": None,
            "oracle": None}  # fmt: skip


def mixtures_data(n_tasks: int, seed: int, n_classes: int = 30) -> dict:
    """The ``mixtures`` setting: training classes and test tasks, each a Gaussian mixture of
    :class:`skflow.tasks.GaussianMixtureTasks` (its own components, weights and covariances)."""
    source = GaussianMixtureTasks(n_features=D)
    S, _ = source.sample_tasks(n_classes, 40, 1, random_state=seed)
    y = np.repeat(np.arange(n_classes), S.shape[1])
    pools, refs = source.sample_tasks(n_tasks, max(SUPPORT_SIZES), 200, random_state=seed + 1000)
    return {"X": S.reshape(-1, D), "y": y, "pools": pools, "refs": list(refs), "bayes": None,
            "oracle": None}  # fmt: skip


def true_between_arm(family: HierarchicalTasks, eb) -> HierarchicalTasks:
    """The ``eb_true_T`` arm (Gaussian hierarchical settings): the empirical-Bayes predictive
    with the class means' mean and the within-class covariance estimated on the training
    classes (``eb``, a fitted ``EmpiricalBayesGaussianSampler``) but the family's true
    between-class covariance ``T``. An oracle, not a user's arm: its gap to ``emp_bayes`` is
    what estimating ``T`` from the training classes' means costs."""
    return HierarchicalTasks(
        D, prior_mean=eb.prior_mean_, prior_cov=family.prior_cov, within_cov=eb.within_covariance_
    )


def estimated_family_arm(family: HierarchicalTasks, eb) -> HierarchicalTasks:
    """The ``bayes_est`` arm (Student-t hierarchical settings): the exact Bayes predictive of
    the family's *form* (Student-t rows, its ``df``) with every other hyperparameter
    estimated on the training classes by ``eb`` (a fitted ``EmpiricalBayesGaussianSampler``):
    the class means' mean and covariance, and the scale ``W`` from the pooled within-class
    covariance, which is ``W * df / (df - 2)`` for Student-t rows. An oracle of the form, not
    a user's arm: its gap to ``bayes`` is what the training classes cannot tell about the
    hyperparameters, its gap to the learned models what these do not learn of the form."""
    scale = (family.df - 2.0) / family.df
    return HierarchicalTasks(
        D, prior_mean=eb.prior_mean_, prior_cov=eb.prior_covariance_,
        within_cov=eb.within_covariance_ * scale, within=family.within, df=family.df,
    )  # fmt: skip


class FreshRows:
    """The ``oracle`` arm of a hierarchical setting: new rows of each test task's own class
    (``HierarchicalTasks.sample_rows`` around its mean). No generator can do better; its MMD²
    is the estimator's noise floor (unbiased MMD²: mean about 0, spread the noise)."""

    def __init__(self, family: HierarchicalTasks, means: np.ndarray):
        self.family, self.means = family, means

    def sample(self, n: int, support: np.ndarray, random_state: int) -> np.ndarray:
        return self.family.sample_rows(self.means[: len(support)], n, random_state=random_state)


def task_scores(gen: np.ndarray, support: np.ndarray, ref: np.ndarray, seed: int = 0) -> dict:
    """MMD² at the reference's median bandwidth, at a quarter and at twice it; copy ratio;
    energy distance and the 1-NN leave-one-out C2ST accuracy (``seed``: its subsampling of
    the larger sample to the smaller, balanced)."""
    med, h = mmd2(gen, ref, reference=ref, return_bandwidth=True)
    return {
        "mmd2_med": float(med),
        "mmd2_q": float(mmd2(gen, ref, bandwidth=h / 4.0)),
        "mmd2_2x": float(mmd2(gen, ref, bandwidth=2.0 * h)),
        "copy": float(memorization_ratio(gen, support, ref)),
        "energy": float(energy_distance(gen, ref)),
        "c2st": float(classifier_two_sample_test(gen, ref, random_state=seed)),
    }


def reference_floors(pool: np.ndarray, ref: np.ndarray, seed: int) -> dict:
    """The noise floors of ``energy`` and ``c2st`` for one task: each metric between two random
    halves of the reference (mean over :data:`FLOOR_SPLITS` halvings), as
    :func:`skflow.metrics.metric_panel` computes them. They do not depend on the generated
    sample (the pool stands in for it: the panel needs one) nor on ``m``: once per task."""
    panel = metric_panel(pool, pool, ref, n_splits=FLOOR_SPLITS, random_state=seed)
    return {
        "energy_floor": panel["energy_distance"].floor,
        "c2st_floor": panel["c2st_accuracy"].floor,
    }


def fit_learned(X, y, seed: int, max_time: float, **params) -> tuple[LearnedFlowSampler, dict]:
    """A learned model with a wall-time cap; its record (iterations, seconds, CPU seconds).
    ``from_pretrained=NAME``: that prior fine-tuned with its card's recipe, capped at
    :data:`PRIOR_FT_SECONDS`."""
    wall, cpu = time.perf_counter(), time.process_time()
    prior = params.pop("from_pretrained", None)
    if prior is None:
        flat = {"max_time": max_time, "random_state": seed, **params}
        model = LearnedFlowSampler(**learned_params_from_flat(flat))
    else:
        model = LearnedFlowSampler.from_pretrained(prior, n_features=X.shape[1])
        budget = {"max_time": min(max_time, PRIOR_FT_SECONDS), **params}
        model.set_params(**nested_learned_params(budget), random_state=seed)
    start = getattr(model, "n_iter_", 0)  # a prior's own training iterations
    model.fit(X, y)
    record = {
        "n_iter": int(model.n_iter_ - start),
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "params": params if prior is None else {"from_pretrained": prior, **params},
    }
    frame = getattr(model, "predictive_frame_", None)
    if frame is not None:  # the Gaussian arm of the frame, per support size
        names = [type(e).__name__.replace("Sampler", "") for e in frame.best_estimators_]
        record["frame"] = dict(zip(map(str, frame.support_sizes_.tolist()), names, strict=True))
    return model, record


def fixed_arms(X, y, seed: int, max_time: float, max_iter, records: dict, learned=()) -> dict:
    """Arms that do not depend on ``m``: name -> fitted sampler (``learned``: the names of
    :data:`LEARNED_ARMS` to train)."""
    arms = {
        "ledoit_wolf": LedoitWolfSampler(),
        "pooled": PooledGaussianSampler(),
        "emp_bayes": EmpiricalBayesGaussianSampler(),  # Ledoit-Wolf estimate of Cov(means)
        "emp_bayes_mom": EmpiricalBayesGaussianSampler(shrinkage=None),  # sample covariance
        "gmm_bic": BICGaussianMixtureSampler(),
        "plugin": NWFlowSampler(sigma_min=0.01, sigma_min_search=None),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arms = {k: v.set_params(random_state=seed).fit(X, y) for k, v in arms.items()}
    arms["prior"] = LearnedFlowSampler.from_pretrained("general-16", n_features=X.shape[1])
    if max_time > 0:
        budget = {} if max_iter is None else {"max_iter": max_iter}
        for name in (n for n in learned if n in LEARNED_ARMS):  # OTHER_ARMS: run_one's
            params = LEARNED_ARMS[name] | budget
            fit = fit_selected if "candidate_of" in params else fit_learned
            arms[name], records[name] = fit(X, y, seed, max_time, **params)
    return arms


def few_shot_new(name: str) -> str:
    """``FewShotSampler``'s ``new`` on a setting: its tasks are new rows of the training
    classes on ``digits-rows``, new classes elsewhere.

    >>> few_shot_new("digits-rows"), few_shot_new("digits-loco-3"), few_shot_new("hier-t")
    ('rows', 'classes', 'classes')
    """
    return "rows" if name == "digits-rows" else "classes"


def fit_few_shot(X, y, seed: int, budget_s: float, new: str) -> tuple[FewShotSampler, dict]:
    """The ``few_shot`` arm: ``skflow.FewShotSampler`` (``new``: ``"rows"`` on
    ``digits-rows``, else ``"classes"``) chosen at each of :data:`SUPPORT_SIZES` within
    ``budget_s`` seconds of training; its record (wall and CPU seconds, choice per m)."""
    wall = time.perf_counter()
    model = FewShotSampler(
        new=new, budget_s=budget_s, support_size=list(SUPPORT_SIZES), random_state=seed
    ).fit(X, y)
    record = {
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(float(model.training_cpu_seconds_), 1),
        "params": {"new": new, "budget_s": budget_s, "support_size": list(SUPPORT_SIZES)},
    }
    chosen = getattr(model, "chosen_", None)
    if chosen is not None:
        record["chosen"] = {str(m): str(name) for m, name in chosen.items()}
    return model, record


def fit_selected(X, y, seed: int, max_time: float, **params) -> tuple:
    """``best_with_learned``: :class:`skflow.BestClassicalSampler` over its default candidates
    and the default ``LearnedFlowSampler`` (same budget as ``learned``), chosen at each of
    :data:`SUPPORT_SIZES` on :data:`SELECTION_SPLITS` class-grouped folds; its record."""
    from skflow.samplers.classical import default_candidates

    wall, cpu = time.perf_counter(), time.process_time()
    params.pop("candidate_of")
    net = LearnedFlowSampler(
        **learned_params_from_flat({"max_time": max_time, "random_state": seed, **params})
    )
    sel = BestClassicalSampler(
        [*default_candidates(), net], support_size=list(SUPPORT_SIZES),
        n_splits=SELECTION_SPLITS, random_state=seed,
    ).fit(X, y)  # fmt: skip
    names = [type(e).__name__.replace("Sampler", "") for e in sel.best_estimators_]
    record = {
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "params": {"n_splits": SELECTION_SPLITS, **params},
        "choice": dict(zip(map(str, sel.support_sizes_.tolist()), names, strict=True)),
        "learned_validation_mmd2": [round(float(v), 5) for v in sel.validation_mmd2_[:, -1]],
        "best_validation_mmd2": [round(float(v), 5) for v in sel.validation_mmd2_.min(axis=1)],
    }
    return sel, record


def selected_arms(X, y, m: int, seed: int, records: dict) -> dict:
    """Arms chosen per ``m`` on the training classes: best classical, tuned plug-in."""
    plugins = [NWFlowSampler(sigma_min=s, sigma_min_search=None) for s in GRID]
    out = {}
    for name, cands in (("best_classical", None), ("plugin_tuned", plugins)):
        sel = BestClassicalSampler(cands, support_size=m, random_state=seed).fit(X, y)
        est = sel.best_estimator_
        records[f"{name}_m{m}"] = {
            "choice": type(est).__name__
            + (f"(sigma_min={est.sigma_min:g})" if hasattr(est, "sigma_min") else ""),
            "validation_mmd2": [round(float(v), 5) for v in sel.validation_mmd2_],
        }
        out[name] = sel
    return out


def generate(model, supports: np.ndarray, n: int, seed: int) -> np.ndarray:
    if isinstance(model, HierarchicalTasks):  # bayes, eb_true_T, bayes_est: exact predictives
        return model.sample_predictive(n, supports, random_state=seed, n_burnin=100)
    return model.sample(n, support=supports, random_state=seed)


def run_setting(
    name: str, seed: int, n_tasks: int, n_gen: int, max_time: float, max_iter, learned=(),
    few_shot_budget: float = 360.0,
) -> dict:  # fmt: skip
    """Per m and arm: per-task score lists; plus the training records. ``digits-loco``: one
    run per held-out digit (trained on the other nine), ``n_tasks // 10`` tasks each, the
    tables concatenated."""
    fixed = (n_gen, max_time, max_iter, learned, few_shot_budget)
    if name != "digits-loco":
        return run_one(name, seed, n_tasks, *fixed)
    folds = [run_one(f"digits-loco-{c}", seed, max(1, n_tasks // 10), *fixed) for c in range(10)]
    table = {
        m: {arm: {k: [v for f in folds for v in f["table"][m][arm][k]] for k in scores}
            for arm, scores in arms.items()}
        for m, arms in folds[0]["table"].items()
    }  # fmt: skip
    records = {f"{k} (digit {c})": v for c, f in enumerate(folds) for k, v in f["records"].items()}
    return {"setting": name, "seed": seed, "table": table, "records": records}


def run_one(
    name: str, seed: int, n_tasks: int, n_gen: int, max_time: float, max_iter, learned=(),
    few_shot_budget: float = 360.0,
) -> dict:  # fmt: skip
    """One training set: per m and arm, per-task score lists; plus the training records."""
    data = setting_data(name, n_tasks, seed)
    records: dict = {}
    arms = fixed_arms(data["X"], data["y"], seed, max_time, max_iter, records, learned)
    if "few_shot" in learned:
        fit = fit_few_shot(data["X"], data["y"], seed, few_shot_budget, few_shot_new(name))
        arms["few_shot"], records["few_shot"] = fit
    if data["bayes"] is not None:
        arms["bayes"], arms["oracle"] = data["bayes"], data["oracle"]
        if data["bayes"].within == "gaussian":
            arms["eb_true_T"] = true_between_arm(data["bayes"], arms["emp_bayes"])
        else:
            arms["bayes_est"] = estimated_family_arm(data["bayes"], arms["emp_bayes"])
    # the floors depend on the reference alone: once per task, beside every arm's scores
    pools, refs = data["pools"], data["refs"]
    pairs = enumerate(zip(pools, refs, strict=True))
    floors = [reference_floors(pool, ref, 1000 * seed + j) for j, (pool, ref) in pairs]
    table = {}
    for m in SUPPORT_SIZES:
        t0 = time.perf_counter()
        all_arms = arms | selected_arms(data["X"], data["y"], m, seed, records)
        table[str(m)] = {
            arm: arm_scores(model, pools[:, :m], refs, floors, n_gen, seed + 7 * m)
            for arm, model in all_arms.items()
        }
        print(f"{name} seed {seed} m={m}: {time.perf_counter() - t0:.0f} s", flush=True)
    return {"setting": name, "seed": seed, "table": table, "records": records}


def arm_scores(model, supports, refs, floors: list[dict], n_gen: int, seed: int) -> dict:
    """One arm's per-task score lists at one ``m``: :func:`task_scores` and the floors."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen = generate(model, supports, n_gen, seed)
    rows = [
        task_scores(g, s, r, seed + j) | f
        for j, (g, s, r, f) in enumerate(zip(gen, supports, refs, floors, strict=True))
    ]
    return {k: [r[k] for r in rows] for k in rows[0]}


ORDER = (
    "oracle", "bayes", "eb_true_T", "bayes_est", "learned", "few_shot", "learned_two_frames",
    "learned_one_frame", "learned_support", "support_no_aug", "learned_sigma01", "learned_sigma03",
    "learned_pred", "pred_no_aug",
    "pred_recentre", "pred_big", "pred_rows", "learned_sized", "pred_sized", "pred_sized_rows",
    "ctx_rotate", "ctx_no_aug", "ctx_recentre",
    "learned_abs", "best_with_learned",
    "prior", "prior_ft", "prior_ft_gentle", "prior_sized_ft", "prior_ft_choice_extra",
    "prior_ft_lr_choice_extra", "prior_ft_support",
    "best_classical", "emp_bayes", "emp_bayes_mom", "pooled",
    "ledoit_wolf", "gmm_bic", "plugin_tuned", "plugin",
)  # fmt: skip
N_BOOT = 2000


def _boot(values: np.ndarray, stat, seed: int = 12345) -> list[float]:
    """95 % percentile interval of ``stat`` over a bootstrap of the tasks (axis -1).

    ``stat`` maps an array whose last axis holds the tasks to its value along that axis
    (``values[..., idx]`` with ``idx`` of shape (N_BOOT, n): all replicates at once)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.shape[-1], size=(N_BOOT, values.shape[-1]))
    reps = stat(values[..., idx])
    return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]


def _mean(v: np.ndarray) -> np.ndarray:
    return v.mean(axis=-1)


def _pooled(runs: list[dict], m: str, arm: str, key: str) -> np.ndarray | None:
    """Per-task values of ``arm`` over the seeds (tasks of every seed side by side); None
    where a run lacks the arm or the key (a run saved before the key was measured)."""
    parts = [r["table"][m][arm][key] for r in runs if key in r["table"][m].get(arm, {})]
    return np.concatenate(parts) if len(parts) == len(runs) else None


def _paired_pct(runs, m, arm, key, base) -> tuple[float, float, float]:
    """% by which ``arm``'s mean ``key`` is below ``base``'s, and its paired 95 % interval."""
    a, b = _pooled(runs, m, arm, key), _pooled(runs, m, base, key)
    lo, hi = _boot(np.stack([a, b]), lambda v: 100 * (1 - _mean(v[0]) / _mean(v[1])))
    return 100 * (1 - a.mean() / b.mean()), lo, hi


def _cell(runs, m, arm, key, base) -> tuple[str, str]:
    """``mean x1e3 [CI]`` and ``% below base [CI]`` (paired) of one arm."""
    a = _pooled(runs, m, arm, key)
    if a is None:
        return "", ""
    mean = f"{1e3 * a.mean():.2f} [{1e3 * _boot(a, _mean)[0]:.2f}, {1e3 * _boot(a, _mean)[1]:.2f}]"
    pct, lo, hi = _paired_pct(runs, m, arm, key, base)
    return mean, f"{pct:+.0f} % [{lo:+.0f}, {hi:+.0f}]"


def score_table(runs: list[dict], key: str) -> str:
    """Markdown: rows = arms, per m the mean and the % below the tuned plug-in."""
    ms = list(runs[0]["table"])
    head = "| arm | " + " | ".join(f"m={m} ×10³ | m={m} vs tuned plug-in" for m in ms) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(ms))]
    for arm in ORDER:
        if _pooled(runs, ms[0], arm, key) is None:
            continue
        cells = [c for m in ms for c in _cell(runs, m, arm, key, "plugin_tuned")]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ablation_table(runs: list[dict], base: str = "learned", only=None) -> str:
    """Markdown: each learned arm (``only``: these) against ``base`` (% lower MMD², paired
    interval), at the median bandwidth and at a quarter of it. ``base="learned_pred"``: only
    the arms that change one thing of ``normalize="predictive"``."""
    ms = list(runs[0]["table"])
    head = "| arm | parameters | " + " | ".join(f"m={m}: median / quarter bw" for m in ms) + " |"
    lines = [head, "|" + "---|" * (2 + len(ms))]
    for arm, params in (LEARNED_ARMS | SAVED_ONLY_ARMS).items():
        if arm == base or _pooled(runs, ms[0], arm, "mmd2_med") is None:
            continue
        if only is not None and arm not in only:
            continue
        if base == "learned_pred" and (
            isinstance(params, str) or params.get("normalize") != "predictive"
        ):
            continue
        cells = [
            " / ".join(_cell(runs, m, arm, key, base)[1] for key in ("mmd2_med", "mmd2_q"))
            for m in ms
        ]
        text = (
            params
            if isinstance(params, str)
            else ", ".join(f"{k}={v!r}" for k, v in params.items()) or "defaults"
        )
        lines.append(f"| {arm} | {text} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def versus_best_table(runs: list[dict]) -> str:
    """Markdown: each learned arm and the prior against ``best_classical`` (% lower MMD² at the
    median bandwidth, paired interval; > 0: the learned arm wins)."""
    ms = list(runs[0]["table"])
    lines = ["| arm | " + " | ".join(f"m={m}" for m in ms) + " |", "|" + "---|" * (1 + len(ms))]
    for arm in [*LEARNED_ARMS, *SAVED_ONLY_ARMS, "prior"]:
        if _pooled(runs, ms[0], arm, "mmd2_med") is None:
            continue
        cells = [_cell(runs, m, arm, "mmd2_med", "best_classical")[1] for m in ms]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bayes_gap_table(runs: list[dict], key: str = "mmd2_med") -> str:
    """Markdown: excess MMD² over the Bayes predictive (x1e3, paired interval)."""
    ms = list(runs[0]["table"])
    lines = ["| arm | " + " | ".join(f"m={m}" for m in ms) + " |", "|" + "---|" * (1 + len(ms))]
    for arm in (a for a in ORDER if a != "bayes"):
        cells = []
        for m in ms:
            a, b = _pooled(runs, m, arm, key), _pooled(runs, m, "bayes", key)
            if a is None:
                break
            lo, hi = _boot(np.stack([a, b]), lambda v: 1e3 * (_mean(v[0]) - _mean(v[1])))
            cells.append(f"{1e3 * (a.mean() - b.mean()):+.2f} [{lo:+.2f}, {hi:+.2f}]")
        if cells:
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bandwidth_table(runs: list[dict]) -> str:
    """Markdown: % lower MMD² than the tuned plug-in at a quarter, one and twice the median
    bandwidth (paired interval): is a ranking an artefact of the bandwidth rule?"""
    ms = list(runs[0]["table"])
    keys = ("mmd2_q", "mmd2_med", "mmd2_2x")
    head = "| arm | " + " | ".join(f"m={m}: ¼ / 1 / 2 × median" for m in ms) + " |"
    lines = [head, "|" + "---|" * (1 + len(ms))]
    for arm in ORDER:
        if arm == "plugin_tuned" or _pooled(runs, ms[0], arm, "mmd2_2x") is None:
            continue
        cells = [" / ".join(_cell(runs, m, arm, k, "plugin_tuned")[1] for k in keys) for m in ms]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: Arms the defaults must not lose to (``defaults_table``), with their column titles.
DEFAULTS_VERSUS = {
    "best_classical": "best classical",
    "emp_bayes": "empirical Bayes",
    "plugin_tuned": "tuned plug-in",
    "learned_two_frames": "former defaults (two networks)",
}


def defaults_table(saved: list[dict]) -> str:
    """Markdown: for every setting and ``m``, the defaults' (``learned``) median-bandwidth
    MMD² and the % by which it is below each arm of :data:`DEFAULTS_VERSUS` (paired interval
    over the tasks of every seed; "worse" where the interval lies below 0), the copy ratio,
    and the % below the best classical arm at a quarter and twice the bandwidth."""
    cols = [c for c in DEFAULTS_VERSUS.values()]
    head = ["setting", "m", "seeds × tasks", "learned ×10³", *(f"vs {c}" for c in cols)]
    head += ["vs best classical, ¼ / 2× bandwidth", "copy ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for title, runs in sections(saved).items():
        for m in runs[0]["table"]:
            a = _pooled(runs, m, "learned", "mmd2_med")
            if a is None:
                continue
            cells = [
                title,
                m,
                f"{len(runs)} × {len(a) // len(runs)}",
                _cell(runs, m, "learned", "mmd2_med", "plugin_tuned")[0],
            ]
            for arm in DEFAULTS_VERSUS:
                if _pooled(runs, m, arm, "mmd2_med") is None:
                    cells.append("—")
                    continue
                text = _cell(runs, m, "learned", "mmd2_med", arm)[1]
                # worse: the interval's upper end, as printed (rounded), is below 0
                worse = round(_paired_pct(runs, m, "learned", "mmd2_med", arm)[2]) < 0
                cells.append(f"**{text} worse**" if worse else text)
            bw = [
                f"{_paired_pct(runs, m, 'learned', k, 'best_classical')[0]:+.0f} %"
                for k in ("mmd2_q", "mmd2_2x")
            ]
            cells += [" / ".join(bw), f"{np.median(_pooled(runs, m, 'learned', 'copy')):.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _paired_diff(runs, m, arm, key, base) -> tuple[float, float, float]:
    """``arm``'s mean ``key`` minus ``base``'s and its paired 95 % bootstrap interval."""
    a, b = _pooled(runs, m, arm, key), _pooled(runs, m, base, key)
    lo, hi = _boot(np.stack([a, b]), lambda v: _mean(v[0]) - _mean(v[1]))
    return float(a.mean() - b.mean()), lo, hi


def verdict(lo: float, hi: float) -> str | None:
    """``"wins"`` where the interval of (arm − base) lies below 0 (lower is better for every
    panel metric), ``"loses"`` where it lies above 0, None where it holds 0.

    >>> verdict(-0.3, -0.1), verdict(0.1, 0.2), verdict(-0.1, 0.2)
    ('wins', 'loses', None)
    """
    return "wins" if hi < 0 else "loses" if lo > 0 else None


def panel_arms(runs: list[dict]) -> list[str]:
    """The arms of :data:`ORDER` with every panel key and floor in every run and at every m."""
    keys = [k for k, (_, _, floor) in PANEL.items() for k in (k, floor) if k is not None]
    return [
        arm
        for arm in ORDER
        if all(_pooled(runs, m, arm, k) is not None for m in runs[0]["table"] for k in keys)
    ]


def panel_base(arms: list[str]) -> str | None:
    """The base of the panel: the defaults (``learned``) where measured, else the best
    classical arm, else the first arm measured."""
    for base in ("learned", "best_classical"):
        if base in arms:
            return base
    return arms[0] if arms else None


def _mean_ci(a: np.ndarray, scale: float) -> str:
    """``mean [95 % interval over tasks]``, scaled (×10³: two decimals, else three)."""
    digits = 2 if scale > 1 else 3
    lo, hi = _boot(a, _mean)
    return f"{scale * a.mean():.{digits}f} [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]"


def _panel_row(runs, m, arm, base) -> str:
    cells = [m, f"{arm} (base)" if arm == base else arm]
    for key, (_, scale, _) in PANEL.items():
        a, digits = _pooled(runs, m, arm, key), 2 if scale > 1 else 3
        if arm == base:
            cells.append(_mean_ci(a, scale))
            continue
        diff, lo, hi = (scale * v for v in _paired_diff(runs, m, arm, key, base))
        text = f"{scale * a.mean():.{digits}f}"
        cells.append(f"{text} ({diff:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}])")
    return "| " + " | ".join(cells) + " |"


def _floor_row(runs, m, arm) -> str:
    """The noise floors of one m (the same for every arm: ``arm`` is any measured one)."""
    cells = [m, "noise floor"]
    for _, scale, floor in PANEL.values():
        if floor is None:  # not a panel floor (unbiased MMD²: about 0 for the law itself)
            cells.append("—")
            continue
        cells.append(_mean_ci(_pooled(runs, m, arm, floor), scale))
    return "| " + " | ".join(cells) + " |"


def panel_table(runs: list[dict]) -> str:
    """Markdown: per m, every arm measured on the panel: each metric's mean and, against the
    base (:func:`panel_base`), the difference (arm − base) with its paired 95 % interval over
    tasks; the noise-floor row after each m; :data:`NOT_MEASURED` where no arm has the keys."""
    arms = panel_arms(runs)
    base = panel_base(arms)
    if base is None:
        return f"Panel: {NOT_MEASURED} (runs saved before the energy distance and the C2ST)."
    head = ["m", "arm", *(title for title, _, _ in PANEL.values())]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = [base, *(a for a in arms if a != base)]  # the base first
    for m in runs[0]["table"]:
        lines += [_panel_row(runs, m, arm, base) for arm in rows]
        lines.append(_floor_row(runs, m, base))
    return "\n".join(lines)


def panel_readings(runs: list[dict]) -> str:
    """One generated line per arm of the panel: the metrics (and m) where it wins or loses
    against the base beyond the paired interval (:func:`verdict`)."""
    arms = panel_arms(runs)
    base = panel_base(arms)
    lines = []
    for arm in (a for a in arms if a != base):
        found: dict[str, dict[str, list[str]]] = {"wins": {}, "loses": {}}
        for key, (title, _, _) in PANEL.items():
            for m in runs[0]["table"]:
                said = verdict(*_paired_diff(runs, m, arm, key, base)[1:])
                if said is not None:
                    found[said].setdefault(title, []).append(m)
        parts = [
            f"{said} on " + ", ".join(f"{t} (m={', '.join(ms)})" for t, ms in by.items())
            for said, by in found.items()
            if by
        ]
        text = "; ".join(parts) if parts else "no metric beyond the interval"
        lines.append(f"- `{arm}` against `{base}`: {text}.")
    return "\n".join(lines)


#: The arm whose panel verdict against every other arm the docs state (``skflow.FewShotSampler``).
ONE_LINER = "few_shot"
#: Arms that a user cannot fit (they know the test class or the family's law).
ORACLE_ARMS = ("oracle", "bayes", "eb_true_T", "bayes_est")
#: Short names of the panel's metrics in the verdict tables.
SHORT = {"mmd2_med": "mmd", "mmd2_q": "mmd/4", "energy": "energy", "c2st": "c2st"}


def panel_counts(runs, m, arm, other) -> tuple[list[str], list[str]]:
    """The panel metrics (:data:`SHORT` names) on which ``arm`` is better and worse than
    ``other`` at ``m``, each beyond the paired 95 % interval (:func:`verdict` of arm − other)."""
    better, worse = [], []
    for key in PANEL:
        said = verdict(*_paired_diff(runs, m, arm, key, other)[1:])
        if said is not None:
            (better if said == "wins" else worse).append(SHORT[key])
    return better, worse


def beaten_by(runs, m, arm) -> list[str]:
    """The user-fittable arms better than ``arm`` at ``m`` on a majority of the panel's
    metrics (more than half, each beyond the paired interval) and at least as new
    (median memorisation ratio no lower than ``arm``'s, or at least 0.5)."""
    own_memo = np.median(_pooled(runs, m, arm, "copy"))
    out = []
    for other in panel_arms(runs):
        if other == arm or other in ORACLE_ARMS:
            continue
        _, worse = panel_counts(runs, m, arm, other)
        memo = np.median(_pooled(runs, m, other, "copy"))
        if 2 * len(worse) > len(PANEL) and memo >= min(own_memo, 0.5):
            out.append(other)
    return out


def versus_every_arm_table(runs: list[dict], arm: str = ONE_LINER) -> str:
    """Markdown: per ``m`` and every other arm measured on the panel, the metrics on which
    ``arm`` is better and worse beyond the paired interval, and the other arm's median
    memorisation ratio; "**majority**" marks an arm better on more than half the panel."""
    head = ["m", "against", "better on", "worse on", "their memorisation", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in runs[0]["table"]:
        beaten = beaten_by(runs, m, arm)
        for other in (a for a in panel_arms(runs) if a != arm):
            better, worse = panel_counts(runs, m, arm, other)
            memo = np.median(_pooled(runs, m, other, "copy"))
            said = (
                "**they lead on the majority**"
                if other in beaten
                else ("oracle (not fittable)" if other in ORACLE_ARMS else "not led")
            )
            lines.append(f"| {m} | {other} | {', '.join(better) or '—'} | "
                         f"{', '.join(worse) or '—'} | {memo:.2f} | {said} |")  # fmt: skip
    return "\n".join(lines)


def one_liner_summary(saved: list[dict], arm: str = ONE_LINER) -> str:
    """Markdown: for every section measured on the panel with ``arm``, per ``m``: the arms
    that lead it on the majority of the panel (:func:`beaten_by`), its memorisation ratio and
    its C2ST accuracy against the noise floor."""
    head = ["setting", "m", "seeds × tasks", f"arms leading `{arm}` on most of the panel",
            f"`{arm}` memorisation", f"`{arm}` C2ST", "C2ST noise floor"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for title, runs in sections(saved).items():
        if arm not in panel_arms(runs):
            continue
        for m in runs[0]["table"]:
            c2st, n = _pooled(runs, m, arm, "c2st"), len(runs)
            leaders = ", ".join(beaten_by(runs, m, arm)) or "none"
            cells = [title, m, f"{n} × {len(c2st) // n}", leaders,
                     f"{np.median(_pooled(runs, m, arm, 'copy')):.2f}", _mean_ci(c2st, 1.0),
                     _mean_ci(_pooled(runs, m, arm, "c2st_floor"), 1.0)]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def copy_table(runs: list[dict]) -> str:
    ms = list(runs[0]["table"])
    lines = ["| arm | " + " | ".join(f"m={m}" for m in ms) + " |", "|" + "---|" * (1 + len(ms))]
    for arm in ORDER:
        vals = [_pooled(runs, m, arm, "copy") for m in ms]
        if vals[0] is not None:
            lines.append(f"| {arm} | " + " | ".join(f"{np.median(v):.2f}" for v in vals) + " |")
    return "\n".join(lines)


def records_text(runs: list[dict]) -> str:
    out = []
    for r in runs:
        rec = r["records"]
        learned = [
            f"{k}: {v['n_iter']} iterations, {v['wall_s']} s wall, {v['cpu_s']} s CPU"
            + (f" (frame per m: {v['frame']})" if "frame" in v else "")
            + (
                f" (validation MMD² per size, each frame: {v['frame_validation_mmd2']})"
                if "frame_validation_mmd2" in v
                else ""
            )
            + (f" (frame chosen per size: {v['frame_by_size']})" if "frame_by_size" in v else "")
            for k, v in rec.items()
            if "n_iter" in v
        ]
        selected = [
            f"{k}: {v['wall_s']} s wall, {v['cpu_s']} s CPU, {v['params']['n_splits']} "
            f"class-grouped folds (validation MMD² per m, the learned candidate: "
            f"{v['learned_validation_mmd2']}, the best candidate: {v['best_validation_mmd2']})"
            for k, v in rec.items()
            if "learned_validation_mmd2" in v
        ]
        few = [
            f"{k}: {v['wall_s']} s wall, {v['cpu_s']} s CPU (budget {v['params']['budget_s']} s, "
            f"new={v['params']['new']!r}; chosen per m: {v.get('chosen', NOT_MEASURED)})"
            for k, v in rec.items()
            if "budget_s" in v.get("params", {})
        ]
        chosen = [f"{k}: {v['choice']}" for k, v in rec.items() if "choice" in v]
        out.append(f"- seed {r['seed']}: " + "; ".join(learned + selected + few + chosen))
    return "\n".join(out)


def section(runs: list[dict], title: str | None = None) -> str:
    meta = runs[0]["meta"]
    name = title or runs[0]["setting"]
    n_tasks = sum(len(r["table"]["5"]["plugin"]["mmd2_med"]) for r in runs)
    parts = [
        f"### {name}\n",
        f"{len(runs)} seed(s) ({', '.join(str(r['seed']) for r in runs)}), {n_tasks} tasks in "
        f"all, {meta['n_generated']} generated rows per task; learned models capped at "
        f"{meta['max_time']} s wall and {meta.get('max_iter') or 2000} iterations each, "
        f"1 Torch thread. Command: `{MERGED.join(_run_commands(runs))}`; "
        f"machine: {meta['machine']}.{_renamed_text(meta)}\n",
        "MMD² at the reference's median-heuristic bandwidth (mean ×10³ [95 % interval over "
        'tasks]; "vs tuned plug-in": % lower MMD² than `plugin_tuned`, paired interval):\n',
        score_table(runs, "mmd2_med") + "\n",
        "MMD² at a quarter of that bandwidth (covariance-sensitive):\n",
        score_table(runs, "mmd2_q") + "\n",
    ]
    if _pooled(runs, "5", "plugin", "mmd2_2x") is not None:
        parts += [
            "Sensitivity to the MMD bandwidth: % lower MMD² than `plugin_tuned` at a quarter, "
            "one and twice the reference's median-heuristic bandwidth (paired interval):\n",
            bandwidth_table(runs) + "\n",
        ]
    if "bayes" in runs[0]["table"]["5"]:
        parts += [
            "Excess median-bandwidth MMD² over the Bayes predictive (×10³, paired interval; "
            "0 is the ceiling):\n",
            bayes_gap_table(runs) + "\n",
        ]
    if any(_pooled(runs, "5", arm, "mmd2_med") is not None for arm in LEARNED_ARMS):
        parts += [
            "Learned arms and the prior against `best_classical` (% lower median-bandwidth "
            "MMD², paired interval; > 0: better than the best classical arm):\n",
            versus_best_table(runs) + "\n",
        ]
    if _pooled(runs, "5", "learned", "mmd2_med") is not None:
        parts += [
            "Ablation: % lower MMD² than `learned` (the defaults of `fit(X, y)`), median / "
            "quarter bandwidth, paired interval over tasks:\n",
            ablation_table(runs) + "\n",
        ]
    variants = [a for a, p in LEARNED_ARMS.items() if p.get("normalize") == "predictive"]
    present = [a for a in variants if _pooled(runs, "5", a, "mmd2_med") is not None]
    if "learned_pred" in present and len(present) > 1:  # the base and an arm against it
        parts += [
            "Ablation of the predictive frame: % lower MMD² than `learned_pred`, median / "
            "quarter bandwidth, paired interval over tasks:\n",
            ablation_table(runs, "learned_pred") + "\n",
        ]
    support_ft = ("learned_support", "prior_ft_support")
    if all(_pooled(runs, "5", a, "mmd2_med") is not None for a in support_ft):
        parts += [
            "The prior fine-tuned in its own frame only (the former recipe) against the same "
            "frame trained from scratch (`learned_support`), median / quarter bandwidth:\n",
            ablation_table(runs, "learned_support", only=support_ft[1:]) + "\n",
        ]
    panel = [
        "The metric panel: each metric's mean over tasks and, against the base arm, the "
        "difference (arm − base) with its paired 95 % bootstrap interval over tasks (lower is "
        "better for each; C2ST: 1-NN leave-one-out accuracy of generated against reference "
        "rows, 0.5 for the law itself). The noise floor is each metric between two random "
        f"halves of the reference ({FLOOR_SPLITS} halvings per task, as `metric_panel`): "
        "what the target law itself scores. Only arms measured on the panel are listed:\n",
    ]
    parts += [*(panel if panel_arms(runs) else []), panel_table(runs) + "\n"]
    if len(panel_arms(runs)) > 1:
        parts += ["Reading (beyond the paired interval):\n", panel_readings(runs) + "\n"]
    if ONE_LINER in panel_arms(runs):
        parts += [
            f"`{ONE_LINER}` against every arm on the panel (beyond the paired interval; "
            "an arm leads on the majority where it is better on more than half of the "
            "metrics and copies no more):\n",
            versus_every_arm_table(runs) + "\n",
        ]
    parts += [
        "Memorisation ratio (median over tasks; about 1 = new points, near 0 = copies):\n",
        copy_table(runs) + "\n",
        "Training and selection records:\n",
        records_text(runs) + "\n",
    ]
    return "\n".join(parts)


def _commands(run: dict) -> list[str]:
    """The commands behind a run: its own, then those of the runs merged into it."""
    return run["meta"]["command"].split(MERGED)


def _run_commands(runs: list[dict]) -> list[str]:
    """The commands behind the runs of a section, each once, in order (merged runs of one
    seed per command each add theirs)."""
    return list(dict.fromkeys(c for run in runs for c in _commands(run)))


def _renames(meta: dict) -> list[list[str]]:
    """The renamings of a run, oldest first, as ``[old, new]`` pairs (runs saved before an arm
    could be renamed twice hold a ``{old: new}`` dict)."""
    renamed = meta.get("renamed") or []
    return [list(p) for p in (renamed.items() if isinstance(renamed, dict) else renamed)]


def _renamed_text(meta: dict) -> str:
    renamed = _renames(meta)
    if not renamed:
        return ""
    pairs = ", ".join(f"`{old}` as `{new}`" for old, new in renamed)
    return f" Arms saved under another name (`--rename`, their definition changed since): {pairs}."


def rename_arms(runs: list[dict], mapping: dict[str, str]) -> list[dict]:
    """The runs with arms renamed (``{old: new}``, all at once: two arms may swap names, or
    one take the name another gives up): scores, training records (``"old"`` and
    ``"old (digit c)"``) and ``meta["renamed"]`` (``[old, new]`` pairs appended: a name
    renamed twice keeps both). An arm saved under a name whose definition changed since keeps
    its scores under the name of what it was.

    >>> run = {"table": {"5": {"learned": [1]}}, "records": {"learned (digit 0)": {}},
    ...        "meta": {"command": "c"}}
    >>> out = rename_arms([run], {"learned": "learned_support"})[0]
    >>> list(out["table"]["5"]), list(out["records"]), out["meta"]["renamed"]
    (['learned_support'], ['learned_support (digit 0)'], [['learned', 'learned_support']])
    """

    def new_key(key: str) -> str:
        head, sep, tail = key.partition(" (")
        return mapping.get(head, head) + sep + tail

    if not mapping:
        return runs
    out = []
    for run in runs:
        for old, new in mapping.items():
            if new not in mapping and any(new in arms for arms in run["table"].values()):
                raise ValueError(f"{run['setting']}: arm {new} exists; cannot rename {old} to it")
        table = {m: {new_key(a): v for a, v in arms.items()} for m, arms in run["table"].items()}
        records = {new_key(k): v for k, v in run["records"].items()}
        renamed = _renames(run["meta"]) + [[old, new] for old, new in mapping.items()]
        meta = run["meta"] | {"renamed": renamed}
        out.append({**run, "table": table, "records": records, "meta": meta})
    return out


def take_arms(runs: list[dict], mapping: dict[str, str]) -> list[dict]:
    """The runs with only the arms of ``mapping`` (``{old: new}``), renamed: what ``--take``
    adds from saved runs to new ones (e.g. the former defaults, beside a fresh run of every
    other arm).

    >>> run = {"setting": "s", "table": {"5": {"learned": [1], "plugin": [2]}},
    ...        "records": {"learned": {}, "plugin_tuned_m5": {}}, "meta": {"command": "c"}}
    >>> out = take_arms([run], {"learned": "learned_two_frames"})[0]
    >>> out["table"], list(out["records"])
    ({'5': {'learned_two_frames': [1]}}, ['learned_two_frames'])
    """
    kept = set(mapping.values())
    out = []
    for run in rename_arms(runs, mapping):
        table = {
            m: {a: v for a, v in arms.items() if a in kept} for m, arms in run["table"].items()
        }
        records = {k: v for k, v in run["records"].items() if k.partition(" (")[0] in kept}
        out.append({**run, "table": table, "records": records})
    return out


def merge_runs(first: list[dict], second: list[dict]) -> list[dict]:
    """The runs of ``first`` with the arms of the runs of ``second`` added (same setting and
    seed; ``second`` may hold several runs of one setting and seed, from several commands).

    A second command that trains more learned arms on the same setting and seeds adds them to
    the saved run. The tasks and every seeded arm are the same in both (one Torch thread): an
    arm present in both must have identical scores, else a ``ValueError`` (the runs did not see
    the same tasks, or a change in between altered an arm) on the keys both measured, and
    keeps the keys of either (a saved run that lacks the panel's gains them); so does a run
    of either list without a counterpart in the other."""
    index: dict[tuple, list[dict]] = {}
    for other in second:
        index.setdefault((other["setting"], other["seed"]), []).append(other)
    missing = set(index) - {(r["setting"], r["seed"]) for r in first}
    if missing:
        raise ValueError(f"no saved run to merge {sorted(missing)} into")
    return [_merged(run, index.get((run["setting"], run["seed"]), [])) for run in first]


def _merged(run: dict, others: list[dict]) -> dict:
    if not others:
        raise ValueError(f"no run of {run['setting']} seed {run['seed']} to merge")
    table = {m: dict(arms) for m, arms in run["table"].items()}
    records, commands = dict(run["records"]), [run["meta"]["command"]]
    renamed = list(run["meta"].get("renamed", []))  # and the arms --take renamed, quoted too
    for other in others:
        renamed += other["meta"].get("renamed", [])
        for m, arms in other["table"].items():
            for arm, scores in arms.items():
                saved = table[m].get(arm, {})
                # a run saved before a key was measured: the keys both have must agree
                if any(saved[k] != scores[k] for k in saved.keys() & scores.keys()):
                    raise ValueError(f"{run['setting']} seed {run['seed']} m={m}: {arm} differs")
                table[m][arm] = saved | scores
        records |= other["records"]
        commands.append(other["meta"]["command"])
    meta = run["meta"] | {"command": MERGED.join(commands)}
    if renamed:
        meta["renamed"] = renamed
    return {**run, "table": table, "records": records, "meta": meta}


def sections(saved: list[dict]) -> dict[str, list[dict]]:
    """Title -> runs of one section: the runs of one setting by one first command (a run with
    runs merged into it is grouped by its own command, whatever the merged ones were)."""
    by_setting: dict[tuple, list] = {}
    for run in saved:  # runs of one setting by another command: a section of their own
        by_setting.setdefault((run["setting"], _commands(run)[0]), []).append(run)
    # runs measured on the whole panel are titled apart ("digits (panel)")
    names = [f"{name} (panel)" if panel_arms(runs) else name
             for (name, _), runs in by_setting.items()]  # fmt: skip
    seen: dict[str, int] = {}
    titles = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        titles.append(name if names.count(name) == 1 else f"{name} ({seen[name]})")
    return dict(zip(titles, by_setting.values(), strict=True))


def saved_runs(paths) -> list[dict]:
    """The runs of saved JSON files, in order."""
    return [run for p in paths for run in json.loads(Path(p).read_text())]


def write_docs(saved: list[dict], page: Path = PAGE) -> None:
    block = "\n".join(section(runs, t) for t, runs in sections(saved).items())
    text = page.read_text() if page.exists() else ""
    if DEFAULTS_BEGIN in text:  # the summary table of the defaults, near the top
        head, tail = text.split(DEFAULTS_BEGIN, 1)
        tail = tail[tail.index(DEFAULTS_END) :]
        text = f"{head}{DEFAULTS_BEGIN}\n{defaults_table(saved)}\n{tail}"
    if PANEL_BEGIN in text:  # the one-liner against every arm, on the panel
        head, tail = text.split(PANEL_BEGIN, 1)
        tail = tail[tail.index(PANEL_END) :]
        text = f"{head}{PANEL_BEGIN}\n{one_liner_summary(saved)}\n{tail}"
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) :].lstrip("\n")
    page.write_text(text.rstrip("\n") + f"\n\n{BEGIN}\n{block}\n{END}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", nargs="+", default=["hier-gauss", "hier-t", "digits"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--generated", type=int, default=200)
    ap.add_argument("--max-time", type=float, default=180.0)
    ap.add_argument("--max-iter", type=int, default=None, help="else the default (2000)")
    ap.add_argument("--json", default=None, help="write the runs here (after every run)")
    ap.add_argument(
        "--docs-from", nargs="*", default=None,
        help="saved JSON files (none: the runs of docs/transfer.md, DOCS_RUNS)",
    )  # fmt: skip
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument(
        "--learned-arms", nargs="*", default=list(DEFAULT_LEARNED),
        choices=[*LEARNED_ARMS, *OTHER_ARMS],
    )  # fmt: skip
    ap.add_argument(
        "--few-shot-budget", type=float, default=360.0,
        help="few_shot: training wall seconds of FewShotSampler, all its fits together",
    )  # fmt: skip
    ap.add_argument(
        "--merge", nargs="+", default=None, metavar="SAVED MORE",
        help="add the arms of the runs MORE (one or more files, same settings and seeds) to "
        "the runs SAVED; written to --json, else over SAVED",
    )  # fmt: skip
    ap.add_argument(
        "--rename", nargs="+", default=[], metavar="OLD=NEW",
        help="with --merge: rename these arms of SAVED first (their definition changed since)",
    )  # fmt: skip
    ap.add_argument(
        "--take", nargs="+", default=[], metavar="ARM=NEW",
        help="with --merge: add only these arms of the MORE runs, under the new names",
    )  # fmt: skip
    args = ap.parse_args()
    if args.merge:
        if len(args.merge) < 2 and not args.rename:
            ap.error("--merge needs SAVED and at least one MORE (or --rename)")
        first, *more = (json.loads(Path(p).read_text()) for p in args.merge)
        first = rename_arms(first, dict(pair.split("=", 1) for pair in args.rename))
        if args.take:  # only these arms of the MORE runs, renamed
            more = [take_arms(runs, dict(p.split("=", 1) for p in args.take)) for runs in more]
        merged = merge_runs(first, [run for runs in more for run in runs]) if more else first
        Path(args.json or args.merge[0]).write_text(json.dumps(merged))
        return
    if args.docs_from is not None:  # tables from saved runs: printed, or written
        saved = saved_runs(args.docs_from or [RESULTS / f"{n}.json" for n in DOCS_RUNS])
        if args.write_docs:
            write_docs(saved)
        else:
            for runs_name in dict.fromkeys(r["setting"] for r in saved):
                print(section([r for r in saved if r["setting"] == runs_name]))
            print(defaults_table(saved))
            print(one_liner_summary(saved))
        return
    machine = f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    command = "python benchmarks/bench_transfer.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in vars(args).items()
        if (k in ("settings", "seeds", "tasks", "generated", "max_time", "max_iter", "learned_arms")
            and v is not None)
        or (k == "few_shot_budget" and "few_shot" in args.learned_arms)
    )  # fmt: skip
    meta = {"n_generated": args.generated, "max_time": args.max_time, "machine": machine,
            "max_iter": args.max_iter, "few_shot_budget": args.few_shot_budget,
            "command": command, "python": platform.python_version()}  # fmt: skip
    saved = []
    for name in args.settings:
        for seed in args.seeds:
            with limit_threads(1):
                saved.append(
                    run_setting(
                        name,
                        seed,
                        args.tasks,
                        args.generated,
                        args.max_time,
                        args.max_iter,
                        args.learned_arms,
                        args.few_shot_budget,
                    )
                )
            saved[-1]["meta"] = meta | {"load_end": round(os.getloadavg()[0], 1)}
            if args.json:
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(saved))
    for runs_name in dict.fromkeys(r["setting"] for r in saved):
        print(section([r for r in saved if r["setting"] == runs_name]))
    if args.write_docs:
        write_docs(saved)


if __name__ == "__main__":
    main()
