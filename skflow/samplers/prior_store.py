"""The stored form of a prior: weights (``.npz``) and model card (``.json``), SHA-256 checked.

One format, defined here only: :func:`write_prior` (used by ``python -m skflow.priors``) and
:func:`load_prior` (the one call of :meth:`~skflow.LearnedFlowSampler.from_pretrained`). The
card holds the configuration that rebuilds the fitted estimator (as TabPFN stores its
config with its weights): the network's architecture (``"network"``), the fitted attributes
(``"fitted"``) and the estimator parameters; the weights are the network's float32
``state_dict``. They are checked against the card's SHA-256 before they are loaded, so a
corrupted or swapped file is refused rather than silently sampled from.

This module reads and writes files only (NumPy and JSON): the estimator is built from what
:func:`load_prior` returns by the same function that ends ``fit`` and unpickling. It sits with
the estimators that load priors, below :mod:`skflow.priors` (the task law, the recipes and the
training command, which build estimators), so that the imports run one way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .._validation import InvalidParameterError, check_int

__all__ = [
    "PRIORS_DIR",
    "file_sha256",
    "load_prior",
    "pretrained_cards",
    "read_prior",
    "update_finetune_params",
    "write_prior",
]

#: Folder of the shipped priors (package data: nothing is downloaded).
PRIORS_DIR = Path(__file__).resolve().parents[1] / "priors" / "data"
#: Estimator parameters a card does not record (where and how loudly it runs, not the model).
_EXECUTION = ("verbose", "device")


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes.

    Examples
    --------
    >>> len(file_sha256(PRIORS_DIR / "general-16.npz"))
    64
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pretrained_cards(folder: str | Path | None = None) -> dict[str, dict]:
    """``{name: model card}`` of every prior in ``folder`` (default: the shipped ones).

    Examples
    --------
    >>> pretrained_cards()["general-16"]["weights_file"]
    'general-16.npz'
    """
    folder = PRIORS_DIR if folder is None else Path(folder)
    cards = {}
    for path in sorted(folder.glob("*.json")):
        cards[path.stem] = json.loads(path.read_text())
    return cards


def read_prior(name: str, folder: str | Path | None = None) -> tuple[dict, dict]:
    """The model card and the checked float32 ``state_dict`` (NumPy arrays) of a prior.

    Parameters
    ----------
    name : str
        File stem of the prior, e.g. ``"general-16"``.
    folder : str or Path, optional
        Where its files are (default: the shipped priors).

    Returns
    -------
    card : dict
    state : dict of str to ndarray

    Raises
    ------
    InvalidParameterError
        Unknown ``name`` (the message lists the known ones).
    ValueError
        The weights' SHA-256 differs from the card's.

    Examples
    --------
    >>> card, state = read_prior("general-16")
    >>> state["out.weight"].shape == (card["network"]["n_features"], card["network"]["d_model"])
    True
    """
    folder = PRIORS_DIR if folder is None else Path(folder)
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


def load_prior(
    name: str, n_features: int | None = None, folder: str | Path | None = None
) -> tuple[dict, dict, dict]:
    """What builds the fitted estimator of a prior: ``(params, config, state)``.

    Parameters
    ----------
    name : str
        File stem of the prior.
    n_features : int, optional
        Features of the data, at most the prior's width (default: the width).
    folder : str or Path, optional
        Where its files are (default: the shipped priors).

    Returns
    -------
    params : dict
        Estimator parameters: the training ones overridden by the card's fine-tuning ones.
    config : dict
        ``{"network": architecture, "fitted": fitted attributes with "n_features_in_",
        "prior": [name, width]}``.
    state : dict of str to ndarray
        The network's weights at the prior's width (checked against the card).

    Examples
    --------
    >>> params, config, state = load_prior("general-16", n_features=3)
    >>> params["warm_start"], config["fitted"]["n_features_in_"], config["prior"]
    (True, 3, ['general-16', 16])
    """
    card, state = read_prior(name, folder)
    width = int(card["network"]["n_features"])
    d = width if n_features is None else check_int(n_features, "n_features")
    if d > width:
        raise InvalidParameterError(
            f"the prior {name!r} serves at most {width} features, got n_features={d}; "
            "reduce the data first (e.g. sklearn.decomposition.PCA)."
        )
    params = {**card["estimator_params"], **card["finetune_params"]}
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    config = {
        "network": dict(card["network"]),
        "fitted": {**card["fitted"], "n_features_in_": d},
        "prior": [name, width],
    }
    return params, config, state


def write_prior(
    name: str,
    folder: str | Path,
    config: dict,
    state: dict,
    estimator_params: dict,
    training: dict,
    finetune_params: dict,
) -> Path:
    """Write a fitted :class:`~skflow.LearnedFlowSampler`'s weights and model card.

    Parameters
    ----------
    name : str
        File stem of the prior.
    folder : str or Path
        Destination folder (created if needed).
    config : dict
        The estimator's configuration without its run record (``"network"`` and
        ``"fitted"``, as :meth:`~skflow.LearnedFlowSampler.save_pretrained` passes it).
    state : dict
        The network's ``state_dict`` (stored in float32).
    estimator_params : dict
        The estimator's ``get_params()`` (execution settings are left out).
    training : dict
        What the card says of the training run (command, wall time, machine, curves ...).
    finetune_params : dict
        Estimator parameters that :meth:`~skflow.LearnedFlowSampler.from_pretrained` sets
        over the training ones (``warm_start=True`` and the fine-tuning schedule).

    Returns
    -------
    card_path : Path

    Examples
    --------
    >>> import tempfile
    >>> card, state = read_prior("general-16")
    >>> config = {"network": card["network"], "fitted": card["fitted"]}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = write_prior("copy", folder, config, state, card["estimator_params"],
    ...                        card["training"], card["finetune_params"])
    ...     copy = read_prior("copy", folder)[1]
    >>> all(np.array_equal(copy[k], state[k]) for k in state)
    True
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in state.items()}
    weights = folder / f"{name}.npz"
    np.savez_compressed(weights, **arrays)
    card = {
        "name": name,
        "network": dict(config["network"]),
        "estimator_params": {k: v for k, v in estimator_params.items() if k not in _EXECUTION},
        "finetune_params": dict(finetune_params),
        "fitted": dict(config["fitted"]),  # tuples are written as JSON lists
        "weights_file": weights.name,
        "weights_sha256": file_sha256(weights),
        "n_parameters": int(sum(v.size for v in arrays.values())),
        "training": training,
    }
    return _write_card(folder / f"{name}.json", card)


def update_finetune_params(
    name: str, finetune_params: dict, folder: str | Path | None = None
) -> Path:
    """Rewrite the fine-tuning parameters of a stored model card, nothing else.

    The weights, their hash and the training record do not depend on the parameters
    :meth:`~skflow.LearnedFlowSampler.from_pretrained` sets for fine-tuning, so a changed
    recipe (``RECIPES[name]["finetune"]``) reaches the card without retraining.

    Parameters
    ----------
    name : str
        File stem of the prior.
    finetune_params : dict
        The new fine-tuning parameters (e.g. ``RECIPES[name]["finetune"]``).
    folder : str or Path, optional
        Folder of the card (default: the shipped priors).

    Returns
    -------
    card_path : Path

    Examples
    --------
    >>> import shutil, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = shutil.copy(PRIORS_DIR / "general-16.json", folder)
    ...     path = update_finetune_params("general-16", {"warm_start": True}, folder)
    ...     json.loads(path.read_text())["finetune_params"]
    {'warm_start': True}
    """
    path = Path(PRIORS_DIR if folder is None else folder) / f"{name}.json"
    card = json.loads(path.read_text())
    card["finetune_params"] = dict(finetune_params)
    return _write_card(path, card)


def _write_card(path: Path, card: dict) -> Path:
    """The one JSON layout of a model card (sorted keys: a diff shows what changed)."""
    path.write_text(json.dumps(card, indent=1, sort_keys=True) + "\n")
    return path
