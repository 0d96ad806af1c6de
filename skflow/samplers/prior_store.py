"""The stored form of a prior: weights (``.npz``) and model card (``.json``), SHA-256 checked.

One format, defined here only: :func:`write_prior` (used by ``python -m skflow.priors``) and
:func:`load_prior` (the one call of :meth:`~skflow.LearnedFlowSampler.from_pretrained`). The
card holds the configuration that rebuilds the fitted estimator (as TabPFN stores its
config with its weights): the network's architecture (``"network"``), the fitted attributes
(``"fitted"``) and the estimator parameters; the weights are the network's float32
``state_dict``. A card is checked against one schema (:data:`CARD_SCHEMA`) when it is read,
and the weights against the card's SHA-256 before they are loaded.

**What the SHA-256 proves.** That the weights file is the one its card was written for: a
file corrupted on disk or in transit, or weights and card mismatched by accident, are refused
rather than silently sampled from. It does not prove who wrote them (integrity, not
authenticity): the hash sits in the card beside the weights, so whoever can replace the
weights can rewrite the card too. Load priors only from sources you trust.

This module reads and writes files only (NumPy and JSON): the estimator is built from what
:func:`load_prior` returns by the same function that ends ``fit`` and unpickling. It sits with
the estimators that load priors, below :mod:`skflow.priors` (the task law, the recipes and the
training command, which build estimators), so that the imports run one way.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, check_int
from ..exceptions import PriorCardError

__all__ = [
    "CARD_SCHEMA",
    "PRIORS_DIR",
    "check_card",
    "check_prior_name",
    "file_sha256",
    "folder_card",
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
#: The field that marks a JSON file as a prior's model card (others in a folder are ignored).
CARD_MARKER = "weights_sha256"
_NORMALIZE = ("auto", "predictive", True, False)  # LearnedFlowSampler(normalize=...)


def _plain_file(value: str) -> bool:
    return PurePosixPath(value).name == value == PureWindowsPath(value).name


#: The model-card format, checked at every read (:func:`check_card`): dotted field -> (JSON
#: type(s), check of the value or None, what the value must be). A field of
#: :data:`_OPTIONAL_FIELDS` may be absent; a bool is never taken for a number.
CARD_SCHEMA: dict[str, tuple[type | tuple[type, ...], Callable[[Any], bool] | None, str]] = {
    "network": (dict, None, "an object (the network's architecture)"),
    "network.n_features": (int, lambda v: v >= 1, "an integer >= 1"),
    "network.d_model": (int, lambda v: v >= 1, "an integer >= 1"),
    "network.n_heads": (int, lambda v: v >= 1, "an integer >= 1"),
    "network.n_layers": (int, lambda v: v >= 1, "an integer >= 1"),
    "network.sigma_min": ((int, float), lambda v: 0 < v < 1, "a finite number in (0, 1)"),
    "estimator_params": (dict, None, "an object (the estimator parameters of training)"),
    "estimator_params.normalize": ((str, bool), lambda v: v in _NORMALIZE, f"one of {_NORMALIZE}"),
    "finetune_params": (dict, None, "an object (the parameters from_pretrained sets)"),
    "finetune_params.normalize": ((str, bool), lambda v: v in _NORMALIZE, f"one of {_NORMALIZE}"),
    "fitted": (dict, None, "an object (the fitted attributes)"),
    "fitted.support_range_": (
        list,
        lambda v: len(v) == 2 and all(_is(a, int) for a in v) and 1 <= v[0] <= v[1],
        "a list [low, high] of integers, 1 <= low <= high",
    ),
    "fitted.augment_": ((str, type(None)), None, "a string or null"),
    "fitted.normalize_": (bool, None, "true or false"),
    "fitted.task_scale_": ((int, float), lambda v: v > 0, "a finite number > 0"),
    "fitted.n_iter_": (int, lambda v: v >= 0, "an integer >= 0"),
    "fitted.training_time_": ((int, float), lambda v: v >= 0, "a finite number >= 0"),
    "weights_file": (str, lambda v: _plain_file(v) and v.endswith(".npz"), "a file name NAME.npz"),
    CARD_MARKER: (str, lambda v: re.fullmatch("[0-9a-f]{64}", v) is not None, "64 hex digits"),
    "n_parameters": (int, lambda v: v >= 1, "an integer >= 1"),
    "training": (dict, None, "an object (the record of the training run)"),
    "name": (str, None, "a string"),
}  # fmt: skip
_OPTIONAL_FIELDS = frozenset({"finetune_params.normalize", "n_parameters", "training", "name"})
_CARD_FIX = (
    "restore the card from the source of the prior, or write it again with "
    "LearnedFlowSampler.save_pretrained (python -m skflow.priors NAME --out DIR)"
)


def _is(value: Any, types: type | tuple[type, ...]) -> bool:
    """``isinstance`` in JSON's terms: a bool is no number, a number is finite."""
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, types)


def check_card(card: Any, source: str | Path, fix: str = _CARD_FIX) -> dict:
    """``card`` if it follows :data:`CARD_SCHEMA`, else a :class:`PriorCardError`.

    Parameters
    ----------
    card : object
        A parsed model card.
    source : str or Path
        The file it was read from (or is written to), named in the message.
    fix : str, optional
        What the message tells the reader to do.

    Returns
    -------
    card : dict

    Raises
    ------
    PriorCardError
        Every field that is missing, of a wrong type, not finite or outside its allowed
        values, each named with what it must be.

    Examples
    --------
    >>> card = check_card(pretrained_cards()["general-16"], "general-16.json")
    >>> try:
    ...     nan = {**card["fitted"], "task_scale_": float("nan")}
    ...     check_card({**card, "fitted": nan}, "x.json")
    ... except PriorCardError as exc:
    ...     print(str(exc).split(". Fix")[0])
    model card x.json is not valid: field 'fitted.task_scale_' must be a finite number > 0, got nan
    """
    problems = []
    for field, (types, check, must) in CARD_SCHEMA.items():
        *parents, key = field.split(".")
        owner = card
        for parent in parents:  # a missing or mistyped parent is reported as itself
            owner = owner.get(parent) if isinstance(owner, dict) else None
        if not isinstance(owner, dict):
            continue
        if key not in owner:
            if field not in _OPTIONAL_FIELDS:
                problems.append(f"field {field!r} is missing (it must be {must})")
            continue
        value = owner[key]
        if not _is(value, types) or (check is not None and not check(value)):
            problems.append(f"field {field!r} must be {must}, got {value!r}")
    if not isinstance(card, dict):
        problems.append(f"it must be a JSON object, got {type(card).__name__}")
    if problems:
        raise PriorCardError(
            f"model card {source} is not valid: {'; '.join(problems)}. Fix: {fix}."
        )
    return card


def check_prior_name(name: Any) -> str:
    """A prior's name: a plain file stem (no folder, no ``..``, not absolute, not empty).

    Examples
    --------
    >>> check_prior_name("general-16")
    'general-16'
    >>> try:
    ...     check_prior_name("../escape")
    ... except InvalidParameterError as exc:
    ...     print(str(exc)[:60])
    a prior's name must be a plain file stem such as 'general-16
    """
    plain = isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name
    if not (plain and _plain_file(name)):
        raise InvalidParameterError(
            f"a prior's name must be a plain file stem such as 'general-16' (no path "
            f"separator, not '..', not absolute, not empty), got {name!r}; give the "
            "directory as folder=... instead."
        )
    return name


class _NotACard(PriorCardError):
    """A ``.json`` file that is not a model card (unreadable, or without the marker)."""


def _read_card(path: Path) -> dict:
    """The checked card of ``path``; :class:`_NotACard` for a file that is none."""
    try:
        card = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _NotACard(f"{path} is not a readable JSON file ({exc})") from exc
    if not isinstance(card, dict) or CARD_MARKER not in card:
        raise _NotACard(
            f"{path} is not a prior's model card (a JSON object with a {CARD_MARKER!r} field)"
        )
    return check_card(card, path)


def _folder(folder: str | Path | None) -> Path:
    folder = PRIORS_DIR if folder is None else Path(folder)
    if not folder.is_dir():
        raise InvalidParameterError(
            f"folder of priors {str(folder)!r} is not a directory; pass the folder that holds "
            "NAME.json and NAME.npz (e.g. the --out of python -m skflow.priors)."
        )
    return folder


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

    A ``.json`` file that is not a model card (not JSON, or without a ``weights_sha256``
    field) is ignored; a card that breaks :data:`CARD_SCHEMA` is left out with a warning.

    Examples
    --------
    >>> pretrained_cards()["general-16"]["weights_file"]
    'general-16.npz'
    """
    cards = {}
    for path in sorted(_folder(folder).glob("*.json")):
        try:
            cards[path.stem] = _read_card(path)
        except _NotACard:
            continue  # another file (package.json, a training checkpoint's metadata)
        except PriorCardError as exc:  # a card, but broken: say so, list the others
            warnings.warn(f"{exc} It is left out of the list.", UserWarning, stacklevel=2)
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
        Unknown ``name`` (the message lists the known ones), or a name with a folder in it.
    PriorCardError
        ``NAME.json`` is not a model card or breaks :data:`CARD_SCHEMA`; the weights are
        missing.
    ValueError
        The weights' SHA-256 differs from the card's: the file is damaged or is not the one
        the card was written for. (A match does not prove where the files came from.)

    Examples
    --------
    >>> card, state = read_prior("general-16")
    >>> state["out.weight"].shape == (card["network"]["n_features"], card["network"]["d_model"])
    True
    """
    path = folder_card(check_prior_name(name), _folder(folder))
    folder = path.parent
    if not path.is_file():
        raise InvalidParameterError(
            f"unknown pretrained prior {name!r}; available: {sorted(pretrained_cards(folder))}."
        )
    try:  # only this prior's card is read: another broken file does not matter
        card = _read_card(path)
    except _NotACard as exc:
        raise PriorCardError(
            f"{exc}: {name!r} is not a prior. The priors of {folder}: "
            f"{sorted(pretrained_cards(folder))}."
        ) from exc
    weights = folder / f"{name}.npz"
    if not weights.is_file():
        raise PriorCardError(
            f"the weights {weights} of the prior {name!r} are missing: copy NAME.npz beside "
            "its card NAME.json."
        )
    digest = file_sha256(weights)
    if digest != card["weights_sha256"]:
        raise ValueError(
            f"the weights of {name!r} ({weights}) have SHA-256 {digest}, but its model card "
            f"says {card['weights_sha256']}: the file is corrupted or is not the one the card "
            "was written for. Restore both files from the source of the prior."
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
    check_prior_name(name)  # before anything is written: nothing lands outside folder
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
    path = folder / f"{name}.json"
    fix = "the sampler's fitted state is no usable prior (a diverged fit?): refit it"
    check_card(json.loads(json.dumps(card)), path, fix)  # as it will be read (tuples: lists)
    return _write_card(path, card)


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
    path = folder_card(check_prior_name(name), _folder(folder))
    card = _read_card(path)
    card["finetune_params"] = dict(finetune_params)
    return _write_card(path, card)


def folder_card(name: str, folder: str | Path | None = None) -> Path:
    """Path of the model card of prior ``name`` in ``folder`` (default: the shipped priors).

    Examples
    --------
    >>> folder_card("general-16").name
    'general-16.json'
    """
    return Path(PRIORS_DIR if folder is None else folder) / f"{check_prior_name(name)}.json"


def _write_card(path: Path, card: dict) -> Path:
    """The one JSON layout of a model card (sorted keys: a diff shows what changed)."""
    path.write_text(json.dumps(card, indent=1, sort_keys=True) + "\n")
    return path
