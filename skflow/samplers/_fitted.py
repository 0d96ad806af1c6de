"""The fitted state of a :class:`~skflow.LearnedFlowSampler`: one list, one construction.

A fitted sampler is its parameters plus ``(config, state)``: ``config`` names the network's
architecture (``"network"``), the fitted attributes (``"fitted"``) and, for a shipped prior,
its name and width (``"prior"``); ``state`` is the network's ``state_dict``. :func:`restore`
is the only place that turns them into a fitted estimator. The end of ``fit``, unpickling
and :meth:`~skflow.LearnedFlowSampler.from_pretrained` (a model card and its weights, see
:mod:`skflow.samplers.prior_store`) all go through it, and :data:`FITTED` is the only list of the
fitted attributes, as TabPFN stores its architecture config with its weights.
"""

from __future__ import annotations

import warnings
from typing import Any

from .._validation import InvalidParameterError
from ._frame import build_model

__all__ = ["FITTED", "REQUIRED", "fitted_config", "legacy_pickle", "restore"]

#: Marks a fitted attribute that every stored state holds (a prior's card too).
REQUIRED = "required"


def _support_range(value: Any) -> tuple:
    return tuple(int(v) for v in value)


def _copy(value: Any) -> Any:
    return value


def _optional_list(value: Any) -> list | None:
    return None if value is None else list(value)


#: The fitted attributes besides ``model_``, ``n_features_in_`` and ``frame_context_`` (all
#: given by the network): name -> (how a stored value is read back, the value when a state
#: omits it). The REQUIRED ones describe the model; the others are the record of one training run
#: (curves, default support, held-out classes), which a pickle keeps and a prior's card
#: leaves out (its curves are in the card's training section).
FITTED = {
    "support_range_": (_support_range, REQUIRED),
    "augment_": (_copy, REQUIRED),
    "normalize_": (bool, REQUIRED),
    "predictive_frame_": (_copy, None),
    "task_scale_": (float, REQUIRED),
    "n_iter_": (int, REQUIRED),
    "training_time_": (float, REQUIRED),
    "support_": (_copy, None),
    "loss_curve_": (list, []),
    "validation_scores_": (_optional_list, None),
    "best_validation_score_": (_copy, None),
    "validation_classes_": (_copy, None),
}
#: Fitted attributes of former versions that a stored state may still hold: one fit trained
#: two networks and served some support sizes with the second (``support_frame_sampler_``).
_FORMER_SECOND_MODEL = "support_frame_sampler_"


def fitted_config(estimator: Any, *, run_record: bool = True) -> tuple[dict, dict]:
    """``(config, state)`` of a fitted sampler: what :func:`restore` rebuilds it from.

    Parameters
    ----------
    estimator : LearnedFlowSampler
        Fitted.
    run_record : bool, default=True
        Keep the record of the training run (the non-REQUIRED attributes of
        :data:`FITTED`); False for a prior's card.

    Returns
    -------
    config : dict
        ``{"network", "fitted", "prior"}`` (``"prior"``: ``[name, width]`` or None).
    state : dict of str to torch.Tensor
        The network's weights, on the CPU.

    Examples
    --------
    >>> from skflow import LearnedFlowSampler
    >>> prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    >>> config, state = fitted_config(prior, run_record=False)
    >>> sorted(config["fitted"])[:3], config["network"]["n_features"]
    (['augment_', 'n_features_in_', 'n_iter_'], 2)
    """
    fitted = {
        name: getattr(estimator, name)
        for name, (_, default) in FITTED.items()
        if run_record or default is REQUIRED
    }
    fitted["n_features_in_"] = int(estimator.n_features_in_)
    prior = getattr(estimator, "_prior", None)
    config = {
        "network": dict(estimator.model_.config),
        "fitted": fitted,
        "prior": None if prior is None else list(prior),
    }
    model = estimator.model_
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return config, state


def _network(config: dict, state: dict, n_features: int) -> Any:
    """The network of ``config`` with the weights ``state`` (tensors or arrays), on the
    device of the tensors, restricted to the first ``n_features`` coordinates (a prior
    serves every width up to its own: the zero-padded network)."""
    import torch

    from ..nn.transformer import CrossAttentionVelocity

    net = build_model(CrossAttentionVelocity, config)
    tensors = {k: torch.as_tensor(v) for k, v in state.items()}
    device = next(iter(tensors.values())).device if tensors else torch.device("cpu")
    net.to(device).load_state_dict(tensors)
    if n_features > net.n_features:
        raise InvalidParameterError(
            f"n_features_in_={n_features} exceeds the network's {net.n_features} features."
        )
    if n_features < net.n_features:
        net = net.restrict_features(n_features)
    return net.eval()


def restore(estimator: Any, config: dict, state: dict) -> Any:
    """Make ``estimator`` the fitted sampler of ``(config, state)`` (in place).

    Parameters
    ----------
    estimator : LearnedFlowSampler
        Its parameters are kept; every fitted attribute is set.
    config : dict
        ``"network"``: the network's constructor arguments; ``"fitted"``: values of
        :data:`FITTED` (the REQUIRED ones at least) and optionally ``"n_features_in_"``
        (default: the network's width); ``"prior"`` (optional): ``[name, width]``.
    state : dict
        The network's ``state_dict`` (Torch tensors or NumPy arrays).

    Returns
    -------
    estimator : LearnedFlowSampler

    Examples
    --------
    >>> from skflow import LearnedFlowSampler
    >>> prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    >>> clone = restore(LearnedFlowSampler(), *fitted_config(prior))
    >>> clone.n_features_in_, clone.normalize_, clone.loss_curve_
    (2, True, [])
    """
    fitted = config["fitted"]
    if fitted.get(_FORMER_SECOND_MODEL) is not None:
        warnings.warn(
            "this sampler was stored by a former skflow that kept a second network for some "
            "support sizes (support_frame_sampler_); it is dropped, and every size is served "
            "by the stored main network. Refit to get one network trained for every size.",
            UserWarning,
            stacklevel=3,
        )
    width = int(config["network"]["n_features"])
    d = int(fitted.get("n_features_in_", width))
    estimator.model_ = _network(config["network"], state, d)
    estimator.n_features_in_ = d
    estimator.frame_context_ = bool(estimator.model_.frame_context)
    for name, (read, default) in FITTED.items():
        if default is REQUIRED:
            setattr(estimator, name, read(fitted[name]))
        else:
            value = fitted.get(name, default)
            setattr(estimator, name, None if value is None else read(value))
    prior = config.get("prior")
    # names the remedy when a support has another width than the loaded one
    estimator._prior = None if prior is None else (str(prior[0]), int(prior[1]))
    return estimator


def legacy_pickle(state: dict) -> dict:
    """The pickled state of an older skflow (network as ``model_`` =
    ``{"__skflow_model__", "config", "state_dict"}``, fitted attributes beside it) in
    today's form: the other entries plus ``"_fitted": {"config", "state"}``.

    Examples
    --------
    >>> legacy_pickle({"d_model": 8})  # unfitted: nothing to convert
    {'d_model': 8}
    """
    model = state.get("model_")
    if not (isinstance(model, dict) and model.get("__skflow_model__")):
        return state
    fitted = {k: state[k] for k in FITTED if k in state}
    fitted["n_features_in_"] = state.get("n_features_in_", model["config"]["n_features"])
    rest = {k: v for k, v in state.items() if k not in {*FITTED, "model_", "_prior"}}
    config = {"network": model["config"], "fitted": fitted, "prior": state.get("_prior")}
    rest["_fitted"] = {"config": config, "state": model["state_dict"]}
    return rest
