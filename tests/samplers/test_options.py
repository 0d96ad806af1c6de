"""NWFlowSampler's option groups (``solver``, ``density``, ``engine``): validation, clone and
get_params, and the former keywords, which keep working for one release with a FutureWarning."""

import inspect
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skflow import (
    DensityOptions,
    EngineOptions,
    KernelOptions,
    NWFlowSampler,
    SigmaMinSearch,
    SolverOptions,
)
from skflow.samplers.options import DEPRECATED_KEYWORDS

S = np.random.default_rng(0).normal(size=(30, 2))
X = np.random.default_rng(1).normal(size=(6, 2))
Y = np.repeat(np.arange(3), 10)  # task labels of S, for the search of sigma_min

#: former keyword -> (a value other than the default, the other parameters of the case)
FORMER = {
    "n_steps": (7, {}),
    "rtol": (1e-3, {"solver": "dopri5"}),
    "atol": (1e-2, {"solver": "dopri5"}),
    "time_tolerance": (1e-6, {}),
    "density_rtol": (1e-4, {"bandwidth": 1.0}),
    "density_atol": (1e-3, {"bandwidth": 1.0}),
    "density_max_error": (1e-12, {"bandwidth": 1.0}),
    "chunk_size": (3, {}),
    "support_chunk_size": (4, {}),
    "pruned_rtol": (1e-2, {"engine": "pruned"}),
    "n_jobs": (2, {}),
    "kernel_reg": (1e-3, {"kernel": "mahalanobis"}),
    "sigma_min_grid": ((0.05, 0.5), {}),
    "cv": (2, {}),
}
#: former keywords whose value changes the numbers (time_tolerance: a refusal past t = 1;
#: the others say where and how they are computed)
CHANGES_NUMBERS = {"n_steps", "rtol", "atol", "time_tolerance", "density_rtol", "density_atol"}
CHANGES_NUMBERS |= {"pruned_rtol", "kernel_reg", "sigma_min_grid", "cv"}


def _new_spelling(key, value, params):
    group, field = DEPRECATED_KEYWORDS[key]
    cls = {
        "solver": SolverOptions,
        "density": DensityOptions,
        "engine": EngineOptions,
        "kernel": KernelOptions,
        "sigma_min_search": SigmaMinSearch,
    }[group]
    base = params.get(group)
    grouped = cls(base, **{field: value}) if base is not None else cls(**{field: value})
    return {**params, group: grouped}


def _numbers(est, labels=False):
    """What the groups act on: samples, a field call past t = 1, the log-density and, with
    task labels, the search of ``sigma_min`` (its choice and scores)."""
    est.fit(S, Y if labels else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the AccuracyWarning of density_max_error
        log_p = est.score_samples(X) if est.bandwidth != "ot" else None
    try:
        late = est.velocity(X, 1.2)
    except ValueError as exc:  # a finite time_tolerance refuses it
        late = str(exc)
    search = (getattr(est, "sigma_min_", None), getattr(est, "cv_scores_", None))
    return est.sample(5, random_state=0), late, log_p, *search


def _same(a, b):
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def test_signature_lists_the_parameters_only():
    params = list(inspect.signature(NWFlowSampler).parameters)
    assert len(params) <= 14 and not set(params) & set(DEPRECATED_KEYWORDS)
    assert list(NWFlowSampler().get_params()) == sorted(params)


@pytest.mark.exactness
@pytest.mark.parametrize("key", sorted(FORMER))
def test_former_keyword_warns_and_equals_the_new_spelling(key):
    value, params = FORMER[key]
    group, field = DEPRECATED_KEYWORDS[key]
    with pytest.warns(FutureWarning, match=rf"{key}=.*deprecated.*{group}=\w+\("):
        old = NWFlowSampler(**params, **{key: value})
    new = NWFlowSampler(**_new_spelling(key, value, params))
    assert old.get_params() == new.get_params() == clone(old).get_params()
    assert getattr(old.get_params()[group], field) == value
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new spelling does not warn
        labels = group == "sigma_min_search"
        numbers = _numbers(new, labels)
        _same(_numbers(old, labels), numbers)
        if key in CHANGES_NUMBERS:  # the value is used, not only stored
            with pytest.raises((AssertionError, ValueError)):
                _same(_numbers(NWFlowSampler(**params), labels), numbers)


@pytest.mark.parametrize("key", sorted(FORMER))
def test_former_keyword_in_set_params(key):
    value, params = FORMER[key]
    with pytest.warns(FutureWarning, match=key):
        old = NWFlowSampler(**params).set_params(**{key: value})
    assert old.get_params() == NWFlowSampler(**_new_spelling(key, value, params)).get_params()


def test_former_keywords_fold_into_one_group_and_keep_its_name():
    with pytest.warns(FutureWarning):
        est = NWFlowSampler(solver="rk4", n_steps=9, rtol=1e-3, engine="pruned", chunk_size=5)
    assert est.solver == SolverOptions("rk4", n_steps=9, rtol=1e-3)
    assert est.engine == EngineOptions("pruned", chunk_size=5)
    assert est.density is None


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_step'"):
        NWFlowSampler(n_step=3)
    with pytest.raises(ValueError, match="Invalid parameter"):
        NWFlowSampler().set_params(n_step=3)


@pytest.mark.exactness
def test_pickle_of_a_former_version_keeps_its_settings():
    est = NWFlowSampler(random_state=0).fit(S)
    state = est.__getstate__()
    state.update(n_steps=7, pruned_rtol=1e-3, density_max_error=5.0)  # the former attributes
    former = NWFlowSampler.__new__(NWFlowSampler)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # nothing for the user to change
        former.__setstate__(state)
    assert former.solver == SolverOptions(n_steps=7)
    assert former.engine == EngineOptions(pruned_rtol=1e-3)
    assert former.density == DensityOptions(max_error=5.0)
    assert not {"n_steps", "pruned_rtol", "density_max_error"} & set(vars(former))
    expected = NWFlowSampler(solver=SolverOptions(n_steps=7), random_state=0).fit(S).sample(4)
    np.testing.assert_array_equal(former.sample(4), expected)


def test_options_clone_pickle_and_search():
    est = NWFlowSampler(solver=SolverOptions("rk4", n_steps=5), density=DensityOptions(rtol=1e-6))
    assert clone(est).get_params() == est.get_params()
    assert pickle.loads(pickle.dumps(est)).get_params() == est.get_params()
    assert "SolverOptions(method='rk4'" in repr(est) and "n_steps=5" in repr(est)
    grid = {"solver": [SolverOptions(n_steps=2), SolverOptions(n_steps=4)]}
    search = GridSearchCV(NWFlowSampler(random_state=0), grid, cv=2).fit(S)
    assert search.best_params_["solver"] in grid["solver"]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SolverOptions("leapfrog"), r"^method of SolverOptions must be one of"),
        (lambda: SolverOptions(n_steps=0), r"^n_steps of SolverOptions must be an integer"),
        (lambda: SolverOptions(rtol=0.0), r"^rtol of SolverOptions must be"),
        (lambda: SolverOptions(atol=-1.0), r"^atol of SolverOptions must be"),
        (lambda: SolverOptions(time_tolerance=-1), r"^time_tolerance of SolverOptions must"),
        (lambda: DensityOptions(rtol=0.0), r"^rtol of DensityOptions must be"),
        (lambda: DensityOptions(atol=np.nan), r"^atol of DensityOptions must be"),
        (lambda: DensityOptions(max_error=-1), r"^max_error of DensityOptions must be"),
        (lambda: EngineOptions("sparse"), r"^engine of EngineOptions must be one of"),
        (lambda: EngineOptions(pruned_rtol=1.5), r"^pruned_rtol of EngineOptions must be"),
        (lambda: EngineOptions(chunk_size=0), r"^chunk_size of EngineOptions must be"),
        (lambda: EngineOptions(support_chunk_size=1.5), r"^support_chunk_size of EngineOp"),
        (lambda: KernelOptions("rbf"), r"^kernel of KernelOptions must be one of"),
        (lambda: KernelOptions(reg=0.0), r"^reg of KernelOptions must be"),
        (lambda: SigmaMinSearch(grid=None), r"^grid of SigmaMinSearch must be"),
        (lambda: SigmaMinSearch(grid=()), r"^grid of SigmaMinSearch must be"),
        (lambda: SigmaMinSearch(grid=(1.5,)), r"sigma_min"),
        (lambda: SigmaMinSearch(cv=1), r"^cv of SigmaMinSearch must be an integer >= 2"),
    ],
)
def test_options_validate_their_fields(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"solver": "leapfrog"}, r"^solver must be one of"),
        ({"solver": DensityOptions()}, r"^solver must be a name or SolverOptions"),
        ({"engine": "sparse"}, r"^engine must be one of"),
        ({"density": "tight"}, r"^density must be None or DensityOptions"),
        ({"kernel": "rbf"}, r"^kernel must be one of"),
        ({"kernel": 0.1}, r"^kernel must be a name or KernelOptions"),
        ({"sigma_min_search": "grid"}, r"^sigma_min_search must be 'default', None or"),
    ],
)
def test_group_parameters_are_checked_at_fit(params, match):
    est = NWFlowSampler(**params)  # nothing is checked in __init__ (scikit-learn's rule)
    with pytest.raises(ValueError, match=match):
        est.fit(S)


def test_sigma_min_grid_none_is_sigma_min_search_none():
    with pytest.warns(FutureWarning) as record:
        est = NWFlowSampler(sigma_min_grid=None, cv=3)
    assert "use NWFlowSampler(sigma_min_search=None)" in str(record[0].message)
    assert est.sigma_min_search is None
    with pytest.warns(FutureWarning):
        est.set_params(sigma_min_grid=(0.1,))
    assert est.sigma_min_search == SigmaMinSearch(grid=(0.1,))


def test_execution_settings_reach_the_field_and_the_workers(monkeypatch):
    """The settings that never change the numbers (so the tests above cannot see them) are
    passed on: block sizes to the field, workers to joblib."""
    from skflow.samplers import _base, nw

    fields, pools = [], []
    field_class = nw.F.NWField

    def record_field(*args, **kwargs):
        fields.append(kwargs)
        return field_class(*args, **kwargs)

    def record_pool(func, jobs, n_jobs):
        pools.append(n_jobs)
        return [func(*job) for job in jobs]

    monkeypatch.setattr(nw.F, "NWField", record_field)
    monkeypatch.setattr(_base, "parallel_map", record_pool)
    engine = EngineOptions(chunk_size=3, support_chunk_size=4, n_jobs=2)
    est = NWFlowSampler(solver=SolverOptions(n_steps=2), engine=engine).fit(S)
    est.sample(_base.SAMPLING_BATCH_SIZE + 1)  # two row batches: the workers are used
    assert fields and all(f["chunk_size"] == 3 for f in fields)
    assert all(f["support_chunk_size"] == 4 for f in fields)
    assert pools == [2]
