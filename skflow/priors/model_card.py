"""Model-card pages of the shipped priors, written from their cards (``docs/pretrained.md``).

``python -m skflow.priors --write-docs`` rewrites the page from the ``.json`` cards in
``skflow/priors/data/``: every number on it is a field of a card that the training command
wrote, so the page cannot drift from the weights (``tests/priors/test_pretrained.py`` checks it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..samplers.prior_store import PRIORS_DIR, pretrained_cards

__all__ = ["card_markdown", "current_command", "write_docs"]

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "pretrained.md"
#: Start of the block that benchmarks/prior_family_ablation.py writes (kept on a rewrite).
_ABLATION = "<!-- prior-ablation:begin -->"
_INTRO = """# Pretrained priors

skflow ships in-context priors: meta-trained {class} networks whose weights live inside the
package (`skflow/priors/data/`, a few hundred kB each; nothing is downloaded). Load one and sample
from a few examples with no training:

```python
from skflow import LearnedFlowSampler
prior = LearnedFlowSampler.from_pretrained("general-16", n_features=X.shape[1])  # d <= 16
X_new = prior.sample(200, support=X[:10], random_state=0)
```

**Two priors.** `general-16-sized` is `general-16` retrained with one change: its network
sees the support size m (`NetworkOptions(size_embedding=True)`). Attention, the support
summary and the exact head all average over a support's rows, so `general-16` cannot count
them and serves every m with about the same spread: on held-out tasks of its own training law
it copies part of a 5-row support and over-smooths a 50-row one (the last ablation on this
page). Both are compared zero-shot on real data in {results}: there `general-16-sized`
copies far less of a 5-row support and is the one to use zero-shot
([learned.md](learned.md)); the demo (`python -m skflow demo`) and the oversampler's
`"pretrained"` strategy use it (level with `general-16` on every classifier score of
[oversampling.md](oversampling.md), copying less). The fine-tuning arms of
[transfer.md](transfer.md) (but `prior_sized_ft`) use `general-16`.

**Width.** A prior of width 16 serves any number of features `d <= 16` (the network
restricted to `d` coordinates is exactly the zero-padded one), but the width is chosen at load,
`from_pretrained(name, n_features=d)`, because a fitted scikit-learn estimator has one
`n_features_in_` that every call checks. `from_pretrained("general-16")` alone expects 16
features; a support of another width raises a `ValueError` that names the remedy:
`from_pretrained('general-16', n_features=4)` for 4 features, or, for more than 16, the limit
and a reduction such as `sklearn.decomposition.PCA(n_components=16)`.

`LearnedFlowSampler.pretrained_models()` lists the priors with their cards. A prior is a fitted
`LearnedFlowSampler` with `warm_start=True`: `prior.fit(X_train, y_train)` fine-tunes it on your
own classes (set `max_iter` or `max_time`). The card sets `normalize="auto"` for fine-tuning:
the prior is continued in its own frame (each support's), validated on a fifth of the
classes (10 classes or more) or of every class's rows ([transfer.md](transfer.md) measures
it). How the priors compare with the plug-in field on
real data sets they never saw (digits, iris, wine, breast cancer: every class a task, with
intervals, the tuned plug-in and the memorisation ratio), on which data they lose, and what
fine-tuning adds, is measured in {results} (`python -m skflow_experiments pretrained --quick
--write-docs`).

The training losses below are means over intervals of iterations: tasks with 2 support rows
normalised by their own spread put some targets far from the support, so a few batches have
losses thousands of times the median and dominate the means (the validation set holds such
tasks too). Gradient clipping bounds their steps.

**Stored form.** A prior is two files in `skflow/priors/data/`: its weights (`NAME.npz`, the
network's float32 `state_dict`) and its card (`NAME.json`), which holds the configuration that
rebuilds the fitted estimator (the network's architecture, `network`; the fitted attributes,
`fitted`; the estimator parameters), as TabPFN stores its config with its weights.
`from_pretrained` checks the card against one schema (required fields, types, finite
numbers, allowed values such as `normalize`; an error names the file, the field and the fix)
and the weights' SHA-256 against the card, then builds the sampler with the same function
that ends `fit` and unpickling. The format, the task law, the recipes and the training
command live in one package, `skflow.priors`. A prior trained elsewhere, e.g. with `python -m
skflow.priors NAME --out DIR` after changing a recipe, loads the same way from its folder:
`LearnedFlowSampler.from_pretrained(NAME, n_features=d, folder=DIR)` (`pretrained_models(DIR)`
lists a folder's cards; another `.json` file there, which has no `weights_sha256` field, is
ignored). `NAME` is a plain file stem: a name with a path separator, `..`, an absolute path
or an empty name is refused by `from_pretrained` and `save_pretrained`.

**What the SHA-256 proves.** That the weights file is the one its card was written for: a
file damaged on disk or in transit, or weights and card mismatched by accident, are refused
rather than sampled from. It does not prove who wrote them (integrity, not authenticity):
the hash sits in the card beside the weights, so whoever can replace the weights can rewrite
the card too. Load priors only from sources you trust. (The weights are read with NumPy,
without pickle, and a training checkpoint, `--checkpoint DIR`, is tensors read with
`torch.load(weights_only=True)` plus JSON.)

**Support sizes.** A prior serves the support sizes it was trained on (its card's
`support_range_`, 2 to 100 rows for both shipped priors). A support outside that range, e.g.
500 rows, issues a `skflow.exceptions.SupportSizeWarning`: fine-tune the prior on your data
(`prior.fit(X, y)`) or train a sampler for it (`LearnedFlowSampler().fit(X, y)`).

Each card below is written from the prior's `.json` card by `python -m skflow.priors
--write-docs`; the card itself is written by the training command it names.
"""


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else f"`{value!r}`"


def _curve_rows(curve: list, n_rows: int = 12) -> list[list]:
    """At most ``n_rows`` evenly spaced points of a ``[iteration, value]`` curve (ends kept)."""
    if len(curve) <= n_rows:
        return curve
    idx = np.unique(np.round(np.linspace(0, len(curve) - 1, n_rows)).astype(int))
    return [curve[i] for i in idx]


def _machine(info: dict) -> str:
    load = " / ".join(f"{v:.2f}" for v in info["load_average_1_5_15"])
    return (
        f"{info['cpu_count']} cores, {info['platform']}, Python {info['python']}, Torch "
        f"{info['torch']} on {info['torch_threads']} thread(s); load average (1 / 5 / 15 min) "
        f"{load}"
    )


def current_command(recorded: str) -> str:
    """A card's recorded training command as it runs today: the cards keep their history, and
    the command was ``python -m skflow.pretrain`` before the priors moved to one package.

    Examples
    --------
    >>> current_command("python -m skflow.pretrain general-16 --no-progress")
    'python -m skflow.priors general-16 --no-progress'
    """
    return recorded.replace("python -m skflow.pretrain ", "python -m skflow.priors ", 1)


def _training_lines(tr: dict) -> list[str]:
    command = current_command(tr["command"])
    if command != tr["command"]:
        command += f"` (recorded in the card as `{tr['command']}`, its former name)"
    else:
        command += "`"
    return [
        f"- Command: `{command}" + (" (resumed from a checkpoint)" if tr["resumed"] else ""),
        f"- Iterations: {tr['iterations']}; wall time {tr['wall_time_s'] / 60:.1f} min, CPU "
        f"time {tr['cpu_time_s'] / 60:.1f} min (one Torch thread, one BLAS thread).",
        f"- Machine at the start: {_machine(tr['machine_start'])}.",
        f"- Machine at the end: {_machine(tr['machine_end'])}.",
    ]


def card_markdown(name: str, card: dict) -> str:
    """The markdown section of one prior's model card.

    Examples
    --------
    >>> from skflow import LearnedFlowSampler
    >>> card = LearnedFlowSampler.pretrained_models()["general-16"]
    >>> card_markdown("general-16", card).splitlines()[0]
    '## `general-16`'
    """
    tr, net = card["training"], card["network"]
    lines = [f"## `{name}`", "", tr["description"], ""]
    lines += [
        f"- Network: `CrossAttentionVelocity` of width {net['n_features']} (serves 1 to "
        f"{net['n_features']} features), d_model {net['d_model']}, {net['n_heads']} heads, "
        f"{net['n_layers']} layers, exact NW head {net['exact_head']}, sigma_min "
        f"{net['sigma_min']}, support-size embedding {net.get('size_embedding', False)}; "
        f"{card['n_parameters']} parameters.",
        f"- Weights: `skflow/priors/data/{card['weights_file']}`, float32, SHA-256 "
        f"`{card['weights_sha256']}`.",
        f"- Support sizes seen in training: {card['fitted']['support_range_'][0]} to "
        f"{card['fitted']['support_range_'][1]}; per-task normalisation "
        f"{card['fitted']['normalize_']}; task scale {card['fitted']['task_scale_']:.4g}.",
        "- Training task law: `skflow.priors.PriorTasks(" + ", ".join(
            f"{k}={v!r}" for k, v in tr["recipe"]["tasks"].items()
        ) + ")`.",
        "- Estimator parameters of training: " + ", ".join(
            f"{k}={_fmt(v)}" for k, v in sorted(card["estimator_params"].items())
        ) + ".",
        "- Set by `from_pretrained` (fine-tuning): " + ", ".join(
            f"{k}={_fmt(v)}" for k, v in sorted(card["finetune_params"].items())
        ) + ".",
        *_training_lines(tr),
        "",
        "| iteration | training loss (mean of the interval) |",
        "|---:|---:|",
        *[f"| {int(i)} | {v:.4g} |" for i, v in _curve_rows(tr["loss_curve"])],
        "",
        "| iteration | validation loss (fixed synthetic tasks, m = 2, 14, 100) |",
        "|---:|---:|",
        *[f"| {int(i)} | {v:.4g} |" for i, v in _curve_rows(tr["validation_curve"])],
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def write_docs(path: str | Path | None = None, folder: str | Path | None = None) -> Path:
    """Write the model-card page from the cards in ``folder`` (default: the shipped ones)."""
    path = DOCS_PAGE if path is None else Path(path)
    cards = pretrained_cards(PRIORS_DIR if folder is None else folder)
    text = _INTRO.format(
        **{"class": "`CrossAttentionVelocity`", "results": "[the results page](results.md)"}
    )
    text += "\n" + "\n".join(card_markdown(n, c) for n, c in cards.items())
    if path.exists() and _ABLATION in path.read_text():  # benchmarks/prior_family_ablation.py
        old = path.read_text()
        text += "\n## Which synthetic families transfer\n\n" + old[old.index(_ABLATION) :]
    path.write_text(text)
    return path
