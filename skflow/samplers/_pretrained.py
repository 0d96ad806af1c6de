"""Reading and writing shipped priors: weights (``.npz``) and model cards (``.json``).

One format, defined here only: :func:`write_prior` (used by ``python -m skflow.pretrain``) and
:func:`read_prior` (used by :meth:`~skflow.LearnedFlowSampler.from_pretrained`). The weights
are checked against the card's SHA-256 before they are loaded, so a corrupted or swapped file
is refused rather than silently sampled from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import InvalidParameterError

__all__ = ["PRETRAINED_DIR", "file_sha256", "pretrained_cards", "read_prior", "write_prior"]

#: Folder of the shipped priors (inside the package: nothing is downloaded).
PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
#: Fitted attributes of the estimator that a card restores (with the network).
FITTED = ("task_scale_", "support_range_", "normalize_", "augment_", "n_iter_", "training_time_")


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pretrained_cards(folder: str | Path | None = None) -> dict[str, dict]:
    """``{name: model card}`` of every prior in ``folder`` (default: the shipped ones)."""
    folder = PRETRAINED_DIR if folder is None else Path(folder)
    cards = {}
    for path in sorted(folder.glob("*.json")):
        cards[path.stem] = json.loads(path.read_text())
    return cards


def read_prior(name: str, folder: str | Path | None = None) -> tuple[dict, dict]:
    """The model card and the checked float32 ``state_dict`` (NumPy arrays) of a prior.

    Raises
    ------
    InvalidParameterError
        Unknown ``name`` (the message lists the known ones).
    ValueError
        The weights' SHA-256 differs from the card's.
    """
    folder = PRETRAINED_DIR if folder is None else Path(folder)
    cards = pretrained_cards(folder)
    if name not in cards:
        raise InvalidParameterError(
            f"unknown pretrained prior {name!r}; available: {sorted(cards)}."
        )
    card, weights = cards[name], folder / f"{name}.npz"
    digest = file_sha256(weights)
    if digest != card["weights_sha256"]:
        raise ValueError(
            f"the weights of {name!r} ({weights}) have SHA-256 {digest}, but its model card "
            f"says {card['weights_sha256']}: the file is corrupted or was replaced."
        )
    with np.load(weights) as data:
        state = {k: data[k] for k in data.files}
    return card, state


def write_prior(
    sampler: Any, name: str, folder: str | Path, training: dict, finetune_params: dict
) -> Path:
    """Write a fitted :class:`~skflow.LearnedFlowSampler`'s weights and model card.

    Parameters
    ----------
    sampler : LearnedFlowSampler
        Fitted (on a task source); its network is stored in float32.
    name : str
        File stem of the prior.
    folder : str or Path
        Destination folder (created if needed).
    training : dict
        What the card says of the training run (command, wall time, machine, curves ...).
    finetune_params : dict
        Estimator parameters that :meth:`~skflow.LearnedFlowSampler.from_pretrained` sets
        over the training ones (``warm_start=True`` and the fine-tuning schedule).

    Returns
    -------
    card_path : Path
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().float().numpy() for k, v in sampler.model_.state_dict().items()}
    weights = folder / f"{name}.npz"
    np.savez_compressed(weights, **state)
    fitted = {k: getattr(sampler, k) for k in FITTED}  # tuples are written as JSON lists
    params = {k: v for k, v in sampler.get_params().items() if k not in ("verbose", "device")}
    card = {
        "name": name,
        "network": dict(sampler.model_.config),
        "estimator_params": params,
        "finetune_params": dict(finetune_params),
        "fitted": fitted,
        "weights_file": weights.name,
        "weights_sha256": file_sha256(weights),
        "n_parameters": int(sum(v.size for v in state.values())),
        "training": training,
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(card, indent=1, sort_keys=True) + "\n")
    return path
