"""Experiment 4: do learned attention weights become Nadaraya-Watson weights along the flow?

The paper's claim: the cross-attention weights of a trained support-conditioned generator
(IP-Adapter in the paper) correlate with the exact Nadaraya-Watson weights of the support,
and increasingly so along the denoising path: the Spearman correlation rises to 0.89 at the
last step.

Here a :class:`~skflow.LearnedFlowSampler` is meta-trained on
:class:`skflow.tasks.GaussianMixtureTasks` (``d = 2``, ``m = 50``). The meaningful model is
the one **without** the exact head (``exact_head=False``): its attention has to discover
kernel-like weights by itself; the model with the head (whose query already carries the NW
local mean) is reported beside it. On held-out tasks, query points at time ``t`` are taken

* ``"trajectory"``: on the model's own sampling trajectories
  (:meth:`~skflow.LearnedFlowSampler.sample_trajectories` with ``support=S``), the states at
  the solver's grid time nearest to ``t``; and
* ``"conditional"``: on the conditional path, ``x_t = t x_1 + sigma_t x_0`` with ``x_1`` a
  true point of the task and ``x_0 ~ N(0, I)``.

At every ``t`` the learned weights (``(n_layers, n_heads, n, m)``) are read by the attention
inspector, :class:`skflow.inspection.AttentionRecorder`, from the model's own fused
``scaled_dot_product_attention`` calls during :meth:`~skflow.LearnedFlowSampler.velocity` (the
same numbers as :meth:`~skflow.LearnedFlowSampler.attention_weights`, which recomputes them
with an explicit softmax), and compared, row by row, with the NW weights of the same
support by the Spearman correlation over the ``m`` support points
(:func:`skflow.metrics.nw_weight_correlation`). The reported number of a (layer, head) is the
median over all query rows of all held-out tasks. Spearman only uses ranks, and the ranks of
the NW weights are those of their logarithms ``-||x - t s_i||^2 / (2 sigma_t^2)``; the primary
results (keys ``"trajectory"``, ``"conditional"``) rank these log-weights, because late in the
flow most float64 weights ``NWFlowSampler(...).fit(S).weights(X, t)`` underflow to exactly 0
and the resulting ties cap any rank correlation (at ``t = 0.99`` and ``d = 2``, typically 5 of
50 weights are non-zero). The correlations with the float64 weights themselves are reported
too (keys ``"trajectory_weights"``, ``"conditional_weights"``).

The same recording also gives the inspector's own diagnosis,
:func:`skflow.inspection.nw_correspondence` (key ``"inspector"``, trajectory queries): per
(t, layer, head) the median Spearman correlation of each head's weights with the
Gaussian-kernel NW weights of its *own* queries and keys at the matched bandwidth
(``h = 1/sqrt(scale)``), the fraction of NW-like heads (median Spearman above 0.9) and the
key-norm dispersion that separates the two.

Run it with ``python -m skflow_experiments attention --quick`` (or ``--full``); the results
go to ``output/experiments/attention/results.json`` and ``attention.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.field import nw_logits
from skflow.inspection import AttentionRecorder, attention_weights, nw_correspondence
from skflow.metrics import nw_weight_correlation
from skflow.samplers.options import learned_params_from_flat
from skflow.tasks import GaussianMixtureTasks

from ._experiment import Experiment, Run
from ._io import TorchThreads, derive_seed, save_figure, to_plain
from ._report import section_head
from .collapse import PRESETS as COLLAPSE_PRESETS

__all__ = ["PRESETS", "SPEC", "docs_section", "run", "write_docs"]

#: Times of the comparison (the paper's "last step" is the last one).
TIMES = (0.1, 0.3, 0.5, 0.7, 0.9, 0.99)
#: Query-point constructions.
MODES = ("trajectory", "conditional")
#: What the attention is ranked against: the NW log-weights (exact ranks; primary) and the
#: float64 NW weights of ``NWFlowSampler.weights`` (their underflowed zeros tie late in the flow).
TARGETS = ("logits", "weights")
#: Result keys: ``"trajectory"``, ``"conditional"`` (log-weights) and the same with
#: ``"_weights"`` appended (float weights).
VARIANTS = tuple(
    mode if target == "logits" else f"{mode}_weights" for target in TARGETS for mode in MODES
)

#: Experiment presets. ``exact_heads`` lists the trained models (``False`` is the meaningful
#: one and comes first); ``learned`` holds :class:`~skflow.LearnedFlowSampler` parameters;
#: ``torch_threads`` is the number of Torch threads of each job (``None``: leave it).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "times": TIMES,
        "exact_heads": (False, True),
        "n_eval_tasks": 2,
        "n_queries": 16,
        "learned": {**COLLAPSE_PRESETS["tiny"]["learned"], "n_layers": 2},  # heads of 2 layers
        "max_time": None,
        "torch_threads": 1,
    },
    # tries the pipeline in well under a minute on two cores: not a result (never in the docs)
    "smoke": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "times": TIMES,
        "exact_heads": (False, True),
        "n_eval_tasks": 4,
        "n_queries": 32,
        "learned": {
            "max_iter": 100,
            "warmup": 10,
            "solver": "heun",
            "n_steps": 30,
            "device": "cpu",
        },
        "max_time": None,
        "torch_threads": 1,
    },
    "quick": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "times": TIMES,
        "exact_heads": (False, True),
        "n_eval_tasks": 20,
        "n_queries": 128,
        "learned": {
            "max_iter": 2000,
            "warmup": 100,
            "solver": "heun",
            "n_steps": 100,
            "device": "cpu",
        },
        "max_time": 150.0,
        "torch_threads": 1,
    },
    "full": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "times": TIMES,
        "exact_heads": (False, True),
        "n_eval_tasks": 100,
        "n_queries": 256,
        "learned": {**LearnedFlowSampler.paper_config(), "device": "auto"},
        "max_time": None,
        "torch_threads": None,
    },
}


#: The cross-attention modules of :class:`skflow.nn.CrossAttentionVelocity` (the exact NW
#: head, which also calls SDPA, is left out).
ATTENTION_MODULES = "blocks.*.attn"
#: Median Spearman above which a head counts as NW-like in the inspector's diagnosis.
NW_LIKE = 0.9


def _recorded_attention(model: LearnedFlowSampler, X: np.ndarray, t: float, S: np.ndarray):
    """Attention weights (n_layers, n_heads, n, m) recorded during ``model.velocity``.

    Also returns the recording's :func:`~skflow.inspection.nw_correspondence` (the heads
    against Gaussian-kernel NW weights of their own queries and keys).
    """
    with AttentionRecorder(model.model_, modules=ATTENTION_MODULES) as rec:
        model.velocity(X, t, support=S)
    layers = list(dict.fromkeys(r.module for r in rec.records_))  # in call order
    att = np.stack([attention_weights(rec, name)[0] for name in layers])
    return att, nw_correspondence(rec, threshold=NW_LIKE)


def _inspector_rows(corr, n_layers: int, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise Spearman (L, H, n) and key-norm dispersion (L, H) of one recording."""
    layers = list(dict.fromkeys(corr.module.tolist()))
    rows = np.stack(corr.row_spearman)
    disp = corr.key_norm_dispersion
    order = [layers.index(m) * n_heads + h for m, h in zip(corr.module, corr.head, strict=True)]
    rows_lh = np.empty((n_layers * n_heads, rows.shape[-1]))
    disp_lh = np.empty(n_layers * n_heads)
    rows_lh[order], disp_lh[order] = rows, disp
    return rows_lh.reshape(n_layers, n_heads, -1), disp_lh.reshape(n_layers, n_heads)


def _correlations(att: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise Spearman of every (layer, head) of ``att`` (L, H, n, m) with ``w`` (n, m)."""
    return np.stack(
        [nw_weight_correlation(a, w, method="spearman").per_row for a in att]
    )  # (L, H, n)


def _task_job(model, S, X1, cfg: dict, random_state: int, b: int) -> dict:
    """Correlations of one held-out task at every time: per variant (T, L, H, n)."""
    sigma_min, times = cfg["sigma_min"], np.asarray(cfg["times"], dtype=float)
    nw = NWFlowSampler(sigma_min=sigma_min).fit(S)
    path = nw.path_  # the fitted flow's own path
    grid, traj = model.sample_trajectories(
        cfg["n_queries"], support=S, random_state=derive_seed(random_state, 3, b)
    )
    idx = np.abs(grid[None, :] - times[:, None]).argmin(axis=1)
    x0 = np.random.default_rng(derive_seed(random_state, 4, b)).standard_normal(X1.shape)
    per_key = {key: [] for key in VARIANTS}
    inspector = {"rho": [], "dispersion": []}
    for k, t in enumerate(times):
        queries = {
            "trajectory": (traj[idx[k]], float(grid[idx[k]])),
            "conditional": (path.sample_xt(x0, X1, t), float(t)),
        }
        for mode, (X, tt) in queries.items():
            att, corr = _recorded_attention(model, X, tt, S)  # (L, H, n, m)
            if mode == "trajectory":
                r, disp = _inspector_rows(corr, *att.shape[:2])
                inspector["rho"].append(r)
                inspector["dispersion"].append(disp)
            # the logits rank like the weights but never underflow to tied zeros
            logits = nw_logits(X, S, tt, sigma_min=sigma_min)
            per_key[mode].append(_correlations(att, logits))
            per_key[f"{mode}_weights"].append(_correlations(att, nw.weights(X, tt)))
    return {
        "rho": {key: np.stack(v) for key, v in per_key.items()},
        "inspector": {key: np.stack(v) for key, v in inspector.items()},
        "times_trajectory": grid[idx],
    }


def _model_job(exact_head: bool, cfg: dict, random_state: int) -> dict:
    """Train one model, then correlate its attention with NW weights on held-out tasks.

    Returns per mode an array ``rho`` of shape (T, n_layers, n_heads, n_rows) of row-wise
    Spearman correlations (rows of all held-out tasks), and the times actually used.
    """
    tasks = GaussianMixtureTasks(n_features=cfg["n_features"])
    params = {
        **cfg["learned"],
        "exact_head": exact_head,
        "sigma_min": cfg["sigma_min"],
        "support_size": cfg["n_support"],
        "max_time": cfg["max_time"],
        "random_state": derive_seed(random_state, 1),  # the same seed for both models
    }
    with TorchThreads(cfg["torch_threads"]):
        model = LearnedFlowSampler(**learned_params_from_flat(params))
        t0 = time.perf_counter()
        model.fit(tasks)
        train_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        supports, truths = tasks.sample_tasks(
            cfg["n_eval_tasks"],
            cfg["n_support"],
            cfg["n_queries"],
            random_state=derive_seed(random_state, 2),
        )
        per_task = [
            _task_job(model, S, X1, cfg, random_state, b)
            for b, (S, X1) in enumerate(zip(supports, truths, strict=True))
        ]
        eval_seconds = time.perf_counter() - t0
    tail = max(1, min(100, len(model.loss_curve_) // 5))
    return {
        "exact_head": exact_head,
        "rho": {k: np.concatenate([p["rho"][k] for p in per_task], axis=-1) for k in VARIANTS},
        "inspector_rho": np.concatenate([p["inspector"]["rho"] for p in per_task], axis=-1),
        "inspector_dispersion": np.mean([p["inspector"]["dispersion"] for p in per_task], axis=0),
        "times_trajectory": per_task[-1]["times_trajectory"],
        "train_iterations": int(model.n_iter_),
        "train_seconds": train_seconds,
        "final_loss": float(np.mean(model.loss_curve_[-tail:])),
        "eval_seconds": eval_seconds,
    }


def _trend(times: np.ndarray, curve: np.ndarray) -> float:
    """Spearman correlation between ``times`` and ``curve`` (NaN if undefined)."""
    from scipy.stats import spearmanr

    ok = np.isfinite(curve)
    if ok.sum() < 3 or np.ptp(curve[ok]) == 0:
        return float("nan")
    return float(spearmanr(times[ok], curve[ok]).statistic)


def _summarize_model(out: dict, times: np.ndarray) -> dict:
    """Median over rows per (t, layer, head) and the best-head statistics, per mode."""
    import warnings

    res: dict[str, Any] = {
        k: out[k] for k in ("train_iterations", "train_seconds", "final_loss", "eval_seconds")
    }
    res["times_trajectory"] = out["times_trajectory"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        inspector_med = np.nanmedian(out["inspector_rho"], axis=-1)  # (T, L, H)
    res["inspector"] = {
        "median_spearman": inspector_med,
        "best_median_per_t": np.nanmax(inspector_med.reshape(len(times), -1), axis=1),
        "fraction_nw_like": np.mean(inspector_med > NW_LIKE, axis=(1, 2)),
        "key_norm_dispersion": out["inspector_dispersion"],
    }
    for key in VARIANTS:
        rho = out["rho"][key]  # (T, L, H, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med = np.nanmedian(rho, axis=-1)  # (T, L, H)
            frac = np.nanmean(rho > 0.5, axis=-1)
        T, L, H = med.shape
        flat = med.reshape(T, L * H)
        best_per_t = np.nanmax(flat, axis=1)
        best_idx_per_t = np.nanargmax(flat, axis=1)
        final = int(best_idx_per_t[-1])  # the head that is best at the last time
        final_curve = flat[:, final]
        trends = np.array([_trend(times, flat[:, j]) for j in range(L * H)])
        rising = (flat[-1] > flat[0]) & (trends > 0)
        res[key] = {
            "median_spearman": med,  # (T, n_layers, n_heads)
            "fraction_above_0.5": frac,
            "n_rows": int(rho.shape[-1]),
            "best_median_per_t": best_per_t,
            "best_head_per_t": [[int(j // H), int(j % H)] for j in best_idx_per_t],
            "last_t_best_head": [final // H, final % H],
            "last_t_best_head_curve": final_curve,
            "last_t_best_head_trend": _trend(times, final_curve),
            "best_median_trend": _trend(times, best_per_t),
            "head_trends": trends.reshape(L, H),
            "heads_rising": [[int(j // H), int(j % H)] for j in np.flatnonzero(rising)],
            "any_head_rising": bool(rising.any()),
        }
    return res


def _plot(results: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = np.asarray(results["config"]["times"], dtype=float)
    models = results["models"]
    rows = (("", "NW log-weights (exact ranks)"), ("_weights", "float64 NW weights (ties at 0)"))
    fig, axes = plt.subplots(
        len(rows), len(models), figsize=(5.5 * len(models), 4.0 * len(rows)), squeeze=False
    )
    for r, (suffix, target) in enumerate(rows):
        for ax, (name, res) in zip(axes[r], models.items(), strict=True):
            med = {mode: np.asarray(res[mode + suffix]["median_spearman"]) for mode in MODES}
            _, L, H = med["trajectory"].shape
            colors = plt.cm.tab10(np.arange(L * H) % 10)
            for layer in range(L):
                for head in range(H):
                    c = colors[layer * H + head]
                    ax.plot(
                        times,
                        med["trajectory"][:, layer, head],
                        "-o",
                        ms=3,
                        color=c,
                        label=f"layer {layer}, head {head}",
                    )
                    ax.plot(times, med["conditional"][:, layer, head], "--", color=c, alpha=0.6)
            ax.axhline(0.0, color="grey", lw=0.8)
            ax.set_ylim(-1.0, 1.0)
            ax.set_xlabel("t")
            ax.set_ylabel("median Spearman")
            ax.set_title(f"{name} ({res['train_iterations']} it.) vs {target}", fontsize=10)
            if r == 0:
                ax.legend(fontsize=10, ncol=2, loc="lower left")
    fig.suptitle(
        f"Attention vs NW weights, GMM d = {results['config']['n_features']}, "
        f"m = {results['config']['n_support']} ({results['preset']} preset; "
        "solid: own trajectories, dashed: conditional path)",
        fontsize=10,
    )
    fig.tight_layout()
    return save_figure(fig, output_dir, "attention.png")


def _summary(models: dict) -> dict:
    """Per model: the key numbers of its trajectory, conditional and weight variants."""
    out = {}
    for name, res in models.items():
        traj = res["trajectory"]
        out[name] = {
            "best_median_per_t": traj["best_median_per_t"],
            "best_median_last_t": float(traj["best_median_per_t"][-1]),
            "best_head_per_t": traj["best_head_per_t"],
            "last_t_best_head": traj["last_t_best_head"],
            "last_t_best_head_curve": traj["last_t_best_head_curve"],
            "last_t_best_head_trend": traj["last_t_best_head_trend"],
            "any_head_rising": traj["any_head_rising"],
            "heads_rising": traj["heads_rising"],
            "conditional_best_median_per_t": res["conditional"]["best_median_per_t"],
            "conditional_any_head_rising": res["conditional"]["any_head_rising"],
            "weights_best_median_per_t": res["trajectory_weights"]["best_median_per_t"],
            "weights_any_head_rising": res["trajectory_weights"]["any_head_rising"],
            "train_iterations": res["train_iterations"],
            "inspector_best_median_per_t": res["inspector"]["best_median_per_t"],
            "inspector_fraction_nw_like_per_t": res["inspector"]["fraction_nw_like"],
        }
    return out


def _config(preset: str, seeds: int | None, n_tasks: int | None) -> dict[str, Any]:
    """The preset with the command line's task count; one seed only."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}.")
    if seeds not in (None, 1):
        raise ValueError(f"the attention experiment runs one seed, got seeds={seeds!r}.")
    cfg = dict(PRESETS[preset])
    if n_tasks is not None:
        cfg["n_eval_tasks"] = int(n_tasks)
    return cfg


def _measure(run: Run) -> list[dict]:
    """One training and its inspection per model (with and without the exact head)."""
    seed = run.seeds[0]
    return run.jobs(_model_job, [(bool(head), run.cfg, seed) for head in run.cfg["exact_heads"]])


def _assemble(run: Run, outputs: list[dict]) -> dict[str, Any]:
    """``results.json``: the per-model correlations, the config, the records, the summary."""
    cfg, times = run.cfg, np.asarray(run.cfg["times"], dtype=float)
    models = {
        ("exact_head" if o["exact_head"] else "no_head"): _summarize_model(o, times)
        for o in outputs
    }
    summary: dict[str, Any] = {"times": times, **_summary(models)}
    summary["wall_seconds"] = run.wall
    summary["paper"] = {"ip_adapter_spearman_last_step": 0.89}
    config = {k: v for k, v in cfg.items() if k != "learned"}
    config["learned"] = dict(cfg["learned"])
    return {
        "experiment": "attention",
        "preset": run.preset,
        "random_state": run.seeds[0],
        "config": config,
        "models": models,
        "machine": run.machine(),
        "summary": to_plain(summary),  # plain Python: printable as JSON
    }


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict:
    """Run the attention-vs-NW experiment and write ``results.json`` and ``attention.png``.

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "full"}, default="quick"
        ``"tiny"``: seconds (the end-to-end test; tiny untrained-ish models). ``"smoke"``:
        tries the pipeline (100 iterations per model, 4 tasks): not a result. ``"quick"``: two
        default :class:`~skflow.LearnedFlowSampler` models (without
        and with the exact head), at most 2000 iterations and 150 s of training each, 20
        held-out tasks x 128 query points, one Torch thread per job. ``"full"``: the paper's
        scale (:meth:`LearnedFlowSampler.paper_config`, ``device="auto"``), a GPU job.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/attention``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers over the models, one job per ``exact_head`` value; None
        runs them in this process, and under ``joblib.parallel_config(backend="dask")`` on a Dask
        cluster), ``random_state`` (the first seed; the seeds are ``random_state, random_state + 1,
        ...``), ``seeds`` and ``n_tasks`` (overrides of the preset's ``n_seeds`` and
        ``n_eval_tasks``). This experiment runs one seed (it compares weights, not samplers):
        ``seeds`` may only be None or 1.

    Returns
    -------
    results : dict
        ``config``, and per model (``"no_head"``, ``"exact_head"``) and per query mode the
        median Spearman correlation per (t, layer, head), the best head per t and the trend
        statistics; ``summary`` holds the key numbers: per model the best head's median
        Spearman per t on the model's own trajectories, the value at the last t, and whether a
        head's median increases with t (``any_head_rising``: higher at the last t than at the
        first and a positive Spearman trend over t).

    Examples
    --------
    >>> from skflow_experiments import attention
    >>> sorted(attention.PRESETS), attention.PRESETS["quick"]["times"]
    (['full', 'quick', 'smoke', 'tiny'], (0.1, 0.3, 0.5, 0.7, 0.9, 0.99))
    >>> res = attention.run("tiny", output_dir="out/attention")  # doctest: +SKIP
    >>> len(res["summary"]["no_head"]["best_median_per_t"])  # doctest: +SKIP
    6
    """
    return SPEC.run(preset, progress=progress, **options)


#: The sentence under the table of the results page: what it shows, in words.
_TABLE_NOTE = (
    "In words: one row per model and way of querying it; each number is, at flow time t, the "
    "median over held-out tasks and queries of the Spearman rank correlation between the best"
    " attention head's weights over the support and the Nadaraya–Watson weights (1: the head "
    "ranks the support exactly like the kernel)."
)


def _docs_table(results: dict) -> str:
    times = results["summary"]["times"]
    rows = [
        "| median Spearman (attention vs NW log-weights) at t = | "
        + " | ".join(f"{t:g}" for t in times)
        + " |",
        "|---|" + "---|" * len(times),
    ]
    for name, label in (("no_head", "no head"), ("exact_head", "exact head")):
        if name not in results["summary"]:
            continue
        s = results["summary"][name]
        for key, what in (
            ("best_median_per_t", "best head, own trajectories"),
            ("conditional_best_median_per_t", "best head, conditional path"),
            ("weights_best_median_per_t", "best head vs float64 weights"),
        ):
            rows.append(f"| {label}: {what} | " + " | ".join(f"{v:.2f}" for v in s[key]) + " |")
    return "\n".join(rows)


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the attention section of ``docs/results.md``.

    The command, the preset and the machine; per model, the median Spearman correlation of
    the best head's attention with the NW log-weights at each t (own trajectories,
    conditional path, float64 weights); whether a head's median rises with t.

    Parameters
    ----------
    results : dict
        The output of :func:`run` (``config``, ``summary``, ``random_state``).
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown; one seed, so no interval is claimed.
    """
    cfg, s = results["config"], results["summary"]
    its = {name: s[name]["train_iterations"] for name in ("no_head", "exact_head") if name in s}
    rising = {name: s[name]["any_head_rising"] for name in its}
    preset = (
        f"Preset `{results['preset']}`: seed {results['random_state']} (one training per "
        f"model), GMM tasks d = {cfg['n_features']}, m = {cfg['n_support']}, "
        f"{cfg['n_eval_tasks']} held-out tasks x {cfg['n_queries']} queries; training "
        f"iterations {its} (max_iter {cfg['learned'].get('max_iter', 'default')}, guard "
        f"{cfg['max_time']} s). Wall time {s['wall_seconds']:.0f} s."
    )
    return "\n".join(
        [
            *section_head(results, command, preset),
            "",
            "Paper: Spearman 0.89 at the last step (IP-Adapter).",
            "",
            _docs_table(results),
            "",
            _TABLE_NOTE,
            "",
            f"A head whose median rises with t (higher at the last t than the first, positive "
            f"trend): {rising}. One seed: no interval is claimed.",
        ]
    )


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    last = s["times"][-1]
    rows = []
    for name in ("no_head", "exact_head"):
        if name in s:
            label = name.replace("_", " ")
            rows.append(
                (
                    f"{label}: best head's median Spearman at t = {last:g} (one seed, no interval)",
                    f"{s[name]['best_median_last_t']:.2f}",
                )
            )
            rows.append((f"{label}: a head rising with t", str(s[name]["any_head_rising"])))
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="attention",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    configure=_config,
    units=lambda cfg, seeds: len(cfg["exact_heads"]),
    desc="attention: one training and its inspection per model",
    figure=lambda results, outputs, folder: _plot(results, folder),
    plain=False,
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``attention`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
