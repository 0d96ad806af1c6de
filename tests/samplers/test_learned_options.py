"""The option groups of LearnedFlowSampler: ``network`` (NetworkOptions), ``training``
(TrainingOptions) and the ``solver`` shared with NWFlowSampler (SolverOptions); the former
flat keywords folded into them with a FutureWarning; scikit-learn's parameter protocol,
pickles and the shipped priors (whose cards keep the flat form) on the grouped form."""

from __future__ import annotations

import inspect
import json
import math
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skflow import (
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow.exceptions import InvalidParameterError
from skflow.samplers._meta_training import TrainingParams
from skflow.samplers.options import (
    LEARNED_DEPRECATED_KEYWORDS,
    flat_learned_params,
    learned_params_from_flat,
)

#: A valid value other than the default for every former keyword.
NEW_VALUES = {
    "d_model": 8,
    "n_heads": 2,
    "n_layers": 1,
    "mlp_ratio": 3,
    "exact_head": False,
    "frame_context": True,
    "size_embedding": True,
    "max_iter": 3,
    "max_time": 5.0,
    "batch_tasks": 2,
    "support_size": (2, 9),
    "n_targets": 4,
    "learning_rate": 1e-2,
    "weight_decay": 0.0,
    "warmup": 0,
    "lr_schedule": "constant",
    "clip_grad": None,
    "time_sampling": "log-bandwidth",
    "target": "exact",
    "ema_decay": 0.9,
    "validation_fraction": 0.2,
    "n_iter_no_change": 3,
    "tol": 0.0,
    "validation_interval": 7,
    "mixed_precision": True,
    "compile": True,
    "n_steps": 5,
    "rtol": 1e-3,
    "atol": 1e-4,
    "time_tolerance": 1e-6,
}
#: The effective parameters as meta-training reads them: the flat defaults of the former
#: signature, except ``size_embedding`` (``"auto"`` since one network serves every support
#: size; it was False).
FORMER_DEFAULTS = {
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 2,
    "mlp_ratio": 2,
    "exact_head": True,
    "sigma_min": 0.01,
    "path": None,
    "max_iter": 2000,
    "max_time": None,
    "batch_tasks": 32,
    "support_size": "auto",
    "n_targets": 128,
    "augment": "auto",
    "normalize": "auto",
    "frame_context": False,
    "size_embedding": "auto",
    "learning_rate": 1e-3,
    "weight_decay": 1e-4,
    "warmup": 100,
    "lr_schedule": "cosine",
    "clip_grad": 1.0,
    "time_sampling": "uniform",
    "target": "conditional",
    "ema_decay": None,
    "warm_start": False,
    "validation_fraction": "auto",
    "n_iter_no_change": "auto",
    "tol": 1e-4,
    "validation_interval": 50,
    "solver": "heun",
    "n_steps": 100,
    "rtol": 1e-5,
    "atol": 1e-5,
    "time_tolerance": math.inf,
    "device": "cpu",
    "mixed_precision": False,
    "compile": False,
    "random_state": None,
    "verbose": 0,
}
TINY = dict(
    network=NetworkOptions(d_model=8, n_heads=2, n_layers=1),
    training=TrainingOptions(
        max_iter=2, batch_tasks=2, support_size=4, n_targets=4, validation_interval=1
    ),
    solver=SolverOptions(n_steps=2),
    random_state=0,
)
GROUP_CLASSES = {"network": NetworkOptions, "training": TrainingOptions, "solver": SolverOptions}


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(0).normal(size=(24, 2))


def test_the_signature_has_at_most_15_parameters():
    params = list(inspect.signature(LearnedFlowSampler).parameters)
    assert len(params) <= 15
    assert params == [
        "network",
        "sigma_min",
        "path",
        "training",
        "augment",
        "normalize",
        "warm_start",
        "solver",
        "device",
        "random_state",
        "verbose",
    ]
    assert set(LearnedFlowSampler().get_params()) == set(params)


def test_every_former_keyword_has_a_test_value():
    assert set(NEW_VALUES) == set(LEARNED_DEPRECATED_KEYWORDS)
    kept = set(LearnedFlowSampler().get_params()) - {"network", "training"}
    assert set(FORMER_DEFAULTS) == {*LEARNED_DEPRECATED_KEYWORDS, *kept}


def test_defaults_are_the_former_defaults():
    """The effective parameters of the default estimator are exactly the former flat
    defaults, as meta-training reads them (``size_embedding`` excepted)."""
    assert vars(TrainingParams.of(LearnedFlowSampler())) == FORMER_DEFAULTS


@pytest.mark.parametrize("key", sorted(NEW_VALUES))
def test_a_former_keyword_warns_and_is_folded_into_its_group(key):
    group, field = LEARNED_DEPRECATED_KEYWORDS[key]
    value = NEW_VALUES[key]
    cls = GROUP_CLASSES[group]
    with pytest.warns(FutureWarning, match=rf"{group}={cls.__name__}\(\.\.\., {field}=") as rec:
        est = LearnedFlowSampler(**{key: value})
    assert len(rec) == 1 and rec[0].filename == __file__  # points at the caller's line
    options = est.get_params()[group]
    assert isinstance(options, cls) and getattr(options, field) == value
    # nothing else moves: the same as the new spelling
    assert options == cls(**{**flat_fields(cls()), field: value})
    assert getattr(est, key) == value  # the read-only view of the former name
    flat = vars(TrainingParams.of(est))
    assert flat == {**FORMER_DEFAULTS, key: value}


def flat_fields(options):
    return {f: getattr(options, f) for f in options.__dataclass_fields__}


@pytest.mark.parametrize("key", sorted(NEW_VALUES))
def test_set_params_with_a_former_keyword_warns_and_folds(key):
    group, field = LEARNED_DEPRECATED_KEYWORDS[key]
    est = LearnedFlowSampler(solver="rk4", training=TrainingOptions(warmup=7))
    with pytest.warns(FutureWarning, match=rf"LearnedFlowSampler\({group}=") as rec:
        assert est.set_params(**{key: NEW_VALUES[key]}) is est
    assert rec[0].filename == __file__
    assert getattr(est.get_params()[group], field) == NEW_VALUES[key]
    assert est._solver_options().method == "rk4" and est.training.warmup == (
        NEW_VALUES[key] if key == "warmup" else 7
    )


def test_folding_onto_a_given_group_keeps_its_other_settings():
    with pytest.warns(FutureWarning):
        est = LearnedFlowSampler(
            solver="rk4", training=TrainingOptions(warmup=7), n_steps=5, max_iter=3, d_model=8
        )
    assert est.solver == SolverOptions("rk4", n_steps=5)
    assert est.training == TrainingOptions(max_iter=3, warmup=7)
    assert est.network == NetworkOptions(d_model=8)


def test_the_example_of_the_issue_equals_the_new_spelling():
    with pytest.warns(FutureWarning):
        old = LearnedFlowSampler(max_iter=3, n_steps=5, d_model=8)
    new = LearnedFlowSampler(
        NetworkOptions(d_model=8),
        training=TrainingOptions(max_iter=3),
        solver=SolverOptions(n_steps=5),
    )
    assert old.get_params() == new.get_params()


def test_the_new_spelling_never_warns(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = LearnedFlowSampler(**TINY)
        clone(est).set_params(training__max_iter=1, solver__n_steps=3, network__n_layers=1)
        est.get_params(deep=True)
        repr(est)
        fitted = est.fit(data)
        fitted.sample(3, random_state=0)


def test_an_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_step'"):
        LearnedFlowSampler(n_step=5)


def test_nested_names_set_one_field():
    est = LearnedFlowSampler(solver="rk4")
    est.set_params(solver__n_steps=3, training__max_iter=7, network__d_model=16)
    assert est.solver == SolverOptions("rk4", n_steps=3)
    assert est.training == TrainingOptions(max_iter=7)
    assert est.network == NetworkOptions(d_model=16)
    with pytest.raises(ValueError, match="no field 'max_iters'"):
        est.set_params(training__max_iters=7)


def test_get_params_set_params_and_clone_round_trip():
    est = LearnedFlowSampler(**TINY)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert copy.training is not None and copy.training == est.training
    other = LearnedFlowSampler().set_params(**est.get_params())
    assert other.get_params() == est.get_params()


def test_invalid_settings_are_refused_by_name(data):
    with pytest.raises(InvalidParameterError, match="max_iter"):
        TrainingOptions(max_iter=-1)
    with pytest.raises(InvalidParameterError, match="lr_schedule"):
        TrainingOptions(lr_schedule="step")
    with pytest.raises(InvalidParameterError, match="d_model"):
        NetworkOptions(d_model=0)
    with pytest.raises(InvalidParameterError, match="training must be None or TrainingOptions"):
        LearnedFlowSampler(training=5).fit(data)
    with pytest.raises(InvalidParameterError, match="divisible"):
        LearnedFlowSampler(NetworkOptions(d_model=10, n_heads=4)).fit(data)


def test_a_former_attribute_can_still_be_assigned():
    est = LearnedFlowSampler()
    with pytest.warns(FutureWarning, match="TrainingOptions"):
        est.max_iter = 4
    assert est.training == TrainingOptions(max_iter=4)


def test_grid_search_over_whole_options_and_nested_names(data):
    est = LearnedFlowSampler(**TINY)
    grid = {
        "solver": [SolverOptions(n_steps=2), SolverOptions("euler", n_steps=3)],
        "training__max_iter": [0, 1],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        search = GridSearchCV(est, grid, cv=2, error_score="raise").fit(data)
    assert len(search.cv_results_["params"]) == 4
    best = search.best_estimator_
    assert best.solver in grid["solver"]
    assert best.training.max_iter == search.best_params_["training__max_iter"]
    assert best.training.batch_tasks == 2  # the other fields are kept


@pytest.mark.exactness
def test_pickle_round_trip(data):
    est = LearnedFlowSampler(**TINY).fit(data)
    back = pickle.loads(pickle.dumps(est))
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.sample(5, random_state=1), est.sample(5, random_state=1))


def test_a_pickle_of_the_flat_form_loads_grouped_without_warnings():
    est = LearnedFlowSampler(**TINY)
    state = est.__getstate__()
    groups = {k: state.pop(k) for k in ("network", "training", "solver")}
    state.update(flat_learned_params(groups))  # as the former version pickled it
    assert "max_iter" in state and "training" not in state
    old = LearnedFlowSampler.__new__(LearnedFlowSampler)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old.__setstate__(state)
    assert old.get_params() == est.get_params()


@pytest.mark.parametrize("name", ["general-16", "general-16-sized"])
def test_from_pretrained_loads_without_warnings_into_the_groups(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prior = LearnedFlowSampler.from_pretrained(name, n_features=3)
    assert prior.warm_start is True
    assert prior.training.max_iter == 300 and prior.training.ema_decay == 0.999
    assert prior.training.support_size == "auto" and prior.normalize == "auto"
    assert prior.network.d_model == 64
    assert prior.solver == SolverOptions()


@pytest.mark.exactness
def test_save_pretrained_writes_the_flat_card_form_that_loads_back(tmp_path):
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    S = np.random.default_rng(0).normal(size=(10, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        card = prior.save_pretrained(
            "mine", tmp_path, finetune_params={"training": TrainingOptions(max_iter=5)}
        )
        same = LearnedFlowSampler.from_pretrained("mine", folder=tmp_path)
    written = json.loads(card.read_text())
    assert (
        "max_iter" in written["estimator_params"] and "training" not in written["estimator_params"]
    )
    assert written["finetune_params"]["max_iter"] == 5
    # a group among the fine-tuning parameters replaces the whole group
    assert same.training == TrainingOptions(max_iter=5) and same.network == prior.network
    np.testing.assert_array_equal(
        same.sample(3, support=S, random_state=0), prior.sample(3, support=S, random_state=0)
    )


def test_flat_form_round_trip():
    est = LearnedFlowSampler(**TINY)
    flat = flat_learned_params(est.get_params())
    assert flat["solver"] == "heun" and flat["n_steps"] == 2 and flat["d_model"] == 8
    assert learned_params_from_flat(flat) == {
        **est.get_params(),
        "solver": est.solver,
    }


def test_one_solver_spelling_for_both_estimators():
    solver = SolverOptions("rk4", n_steps=7)
    learned, nw = LearnedFlowSampler(solver=solver), NWFlowSampler(solver=solver)
    assert learned._solver_options() == nw._solver_options() == solver


def test_paper_config_uses_the_groups():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = LearnedFlowSampler(**LearnedFlowSampler.paper_config())
    assert est.network.n_layers == 3 and est.training.max_iter == 100_000
    assert est.solver == SolverOptions("euler", n_steps=100)


def test_several_former_keywords_fold_into_one_group():
    with pytest.warns(FutureWarning) as rec:
        est = LearnedFlowSampler(max_iter=3, warmup=5, n_steps=4, atol=1e-3)
    assert len(rec) == 4
    assert est.training == TrainingOptions(max_iter=3, warmup=5)
    assert est.solver == SolverOptions(n_steps=4, atol=1e-3)
    with pytest.warns(FutureWarning):
        est.set_params(tol=0.5, max_iter=9, training__warmup=6)
    assert est.training == TrainingOptions(max_iter=9, warmup=6, tol=0.5)
