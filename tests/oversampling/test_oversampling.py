"""skflow.oversampling: the imbalanced-learn over-sampler and the memorisation of its new rows."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("imblearn")

from imblearn.pipeline import Pipeline  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions, make_sampling_pipeline  # noqa: E402
from skflow.exceptions import MemorizationWarning  # noqa: E402
from skflow.metrics import distance_to_closest_record, memorization_ratio  # noqa: E402
from skflow.oversampling import FlowOverSampler, oversampling_memorization  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def imbalanced(n_major=120, n_minor=12, d=5, seed=0, low_rank=False):
    rng = np.random.default_rng(seed)
    major = rng.normal(size=(n_major, d))
    if low_rank:  # the minority class on a 2-D plane of the d-dimensional space
        minor = 4.0 + rng.normal(size=(n_minor, 2)) @ rng.normal(size=(2, d))
    else:
        minor = rng.normal(3.0, 0.5, size=(n_minor, d))
    return np.vstack([major, minor]), np.r_[np.zeros(n_major, int), np.ones(n_minor, int)]


@pytest.mark.parametrize("generator", ["nw", "pretrained"])
def test_originals_unchanged_and_classes_balanced(generator):
    X, y = imbalanced()
    X_res, y_res = FlowOverSampler(generator=generator, random_state=0).fit_resample(X, y)
    assert np.array_equal(X_res[: len(X)], X) and np.array_equal(y_res[: len(y)], y)
    assert np.bincount(y_res).tolist() == [120, 120]
    new = X_res[len(X) :]
    # the new rows belong to the minority class: nearer its mean than the majority's
    assert np.linalg.norm(new.mean(0) - X[y == 1].mean(0)) < 0.5
    assert np.isfinite(new).all()


def test_sampling_strategy_dict_and_multiclass():
    X, y = imbalanced()
    X = np.vstack([X, np.random.default_rng(1).normal(-3, 0.5, size=(20, 5))])
    y = np.r_[y, np.full(20, 2)]
    _, y_res = FlowOverSampler(sampling_strategy={1: 30, 2: 25}, random_state=0).fit_resample(X, y)
    assert np.bincount(y_res).tolist() == [120, 30, 25]


def test_same_seed_same_rows_other_seed_other_rows():
    X, y = imbalanced()
    a = FlowOverSampler(random_state=3).fit_resample(X, y)[0]
    b = FlowOverSampler(random_state=3).fit_resample(X, y)[0]
    c = FlowOverSampler(random_state=4).fit_resample(X, y)[0]
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_spread_sets_the_distance_to_the_support():
    # the nw generator's bandwidth is relative to the class's nearest-neighbour spacing: new
    # rows lie about `spread` spacings from their support rows, whatever the data's units
    X, y = imbalanced(n_minor=40, d=2)
    dcr = {}
    for spread in (0.25, 1.0):
        for units in (1.0, 1000.0):
            over = FlowOverSampler(n_components=None, spread=spread, random_state=0)
            X_res, _ = over.fit_resample(X * units, y)
            support = X[y == 1] * units
            d = np.median(distance_to_closest_record(X_res[len(X) :], support)) / units
            dcr[spread, units] = d
    assert dcr[0.25, 1.0] == pytest.approx(dcr[0.25, 1000.0], rel=1e-6)
    assert 2.5 < dcr[1.0, 1.0] / dcr[0.25, 1.0] < 5.0
    minor = X[y == 1]
    nn = np.median(np.sort(np.linalg.norm(minor[:, None] - minor[None], axis=-1), 1)[:, 1])
    assert 0.1 * nn < dcr[0.25, 1.0] < 0.4 * nn


def test_sigma_min_attribute_follows_the_rule():
    X, y = imbalanced(n_minor=30, d=4)
    over = FlowOverSampler(n_components=None, spread=0.5, random_state=0).fit(X, y)
    over.fit_resample(X, y)
    minor = X[y == 1]
    nn = np.sort(np.linalg.norm(minor[:, None] - minor[None], axis=-1), 1)[:, 1]
    # all 30 rows are queried; the distances come from a Gram expansion (rounding)
    assert over.sigma_min_[1] == pytest.approx(0.5 / 2.0 * np.median(nn), rel=1e-3)
    assert over.n_components_ == {1: None}


def test_auto_components_follow_the_class_rank():
    X, y = imbalanced(n_minor=30, d=12, low_rank=True)
    over = FlowOverSampler(random_state=0)
    X_res, _ = over.fit_resample(X, y)
    assert over.n_components_[1] <= 2
    # new rows stay on the class's plane (isotropic noise in 12-D would leave it)
    minor = X[y == 1]
    pca = PCA(2).fit(minor)
    new = X_res[len(X) :]
    residual = new - pca.inverse_transform(pca.transform(new))
    assert np.abs(residual).max() < 1e-8


def test_pretrained_projects_wide_data_and_refuses_without_projection():
    X, y = imbalanced(d=20)
    over = FlowOverSampler(generator="pretrained", random_state=0)
    X_res, _ = over.fit_resample(X, y)
    assert X_res.shape == (240, 20) and over.n_components_[1] <= 11
    # an explicit size above the class's rank is capped at m - 1 (12 minority rows)
    over = FlowOverSampler(generator="pretrained", n_components=16, random_state=0)
    over.fit_resample(X, y)
    assert over.n_components_[1] == 11
    over = FlowOverSampler(n_components=50, random_state=0)
    over.fit_resample(X, y)
    assert over.n_components_[1] == 11
    with pytest.raises(ValueError, match="at most 16 features"):
        FlowOverSampler(generator="pretrained", n_components=None).fit_resample(X, y)


def test_given_fitted_learned_sampler_is_used_in_context():
    X, y = imbalanced(d=4)
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    prior.set_params(solver__n_steps=10)
    over = FlowOverSampler(generator=prior, random_state=0)
    X_res, _ = over.fit_resample(X, y)
    assert over.n_components_ == {1: None}  # its width is d: no projection
    centred = X[y == 1] - X[y == 1].mean(0)
    expect = prior.sample(108, support=centred, random_state=_first_seed(0)) + X[y == 1].mean(0)
    np.testing.assert_allclose(X_res[len(X) :], expect, rtol=1e-10, atol=1e-10)
    # a prior narrower than the data: "auto" projects on its width
    narrow = LearnedFlowSampler.from_pretrained("general-16", n_features=3)
    over = FlowOverSampler(generator=narrow, random_state=0)
    over.fit_resample(X, y)
    assert over.n_components_ == {1: 3}


def test_pretrained_generator_is_the_sized_prior_in_context():
    """``generator="pretrained"`` conditions ``general-16-sized`` (whose network sees the
    support size) on the centred class, with the generator's ``n_steps``."""
    X, y = imbalanced(d=4)
    over = FlowOverSampler(generator="pretrained", n_components=None, n_steps=6, random_state=0)
    X_res, _ = over.fit_resample(X, y)
    prior = LearnedFlowSampler.from_pretrained("general-16-sized", n_features=4)
    prior.set_params(solver__n_steps=6)
    centred = X[y == 1] - X[y == 1].mean(0)
    expect = prior.sample(108, support=centred, random_state=_first_seed(0)) + X[y == 1].mean(0)
    np.testing.assert_allclose(X_res[len(X) :], expect, rtol=1e-10, atol=1e-10)


def _first_seed(random_state):
    return int(np.random.RandomState(random_state).randint(np.iinfo(np.int32).max))


@pytest.mark.parametrize(
    "generator",
    [
        NWFlowSampler(sigma_min=0.2, solver=SolverOptions(n_steps=10)),
        make_sampling_pipeline(PCA(2), NWFlowSampler()),
    ],
)
def test_unfitted_sampler_is_fitted_per_class(generator):
    X, y = imbalanced()
    X_res, y_res = FlowOverSampler(generator=generator, random_state=0).fit_resample(X, y)
    assert X_res.shape == (240, 5) and np.array_equal(X_res[:132], X)
    with pytest.raises(Exception, match="not fitted|NotFitted|fit"):
        generator.sample(1)  # the given estimator itself is left unfitted (clones are fitted)


def test_imblearn_pipeline_and_grid_search():
    X, y = imbalanced(n_major=150, n_minor=18)
    pipe = Pipeline(
        [
            ("scale", StandardScaler()),
            ("over", FlowOverSampler(random_state=0)),
            ("clf", LogisticRegression()),
        ]
    )
    grid = GridSearchCV(pipe, {"over__spread": [0.25, 1.0]}, cv=StratifiedKFold(3), scoring="f1")
    grid.fit(X, y)
    assert grid.best_params_["over__spread"] in (0.25, 1.0)
    assert grid.predict(X).shape == (168,)


def test_float32_kept():
    X, y = imbalanced()
    X_res, _ = FlowOverSampler(random_state=0).fit_resample(X.astype(np.float32), y)
    assert X_res.dtype == np.float32


@pytest.mark.parametrize(
    "params, error",
    [
        ({"generator": "smote"}, "generator must be"),
        ({"generator": LogisticRegression()}, "sample method"),
        ({"n_components": 0}, "n_components"),
        ({"spread": -1.0}, "spread"),
        ({"n_steps": 0}, "n_steps"),
    ],
)
def test_bad_params(params, error):
    X, y = imbalanced()
    with pytest.raises((ValueError, TypeError), match=error):
        FlowOverSampler(**params).fit_resample(X, y)


def test_single_row_class_copied_and_non_finite_rejected():
    X, y = imbalanced(n_minor=1)  # one row has no scale (issue 63): copies, with a warning
    with pytest.warns(MemorizationWarning, match="no spread"):
        X_res, y_res = FlowOverSampler().fit_resample(X, y)
    np.testing.assert_array_equal(X_res[len(X) :], np.repeat(X[y == 1], len(X_res) - len(X), 0))
    X, y = imbalanced()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FlowOverSampler().fit_resample(X, y)


def test_oversampling_memorization():
    X, y = imbalanced(n_major=200, n_minor=80, d=3)
    train = np.r_[0:150, 200:240]
    test = np.setdiff1d(np.arange(280), train)
    X_res, y_res = FlowOverSampler(spread=1.0, random_state=0).fit_resample(X[train], y[train])
    ratios = oversampling_memorization(X[train], y[train], X_res, y_res, X[test], y[test])
    assert list(ratios) == [1] and 0.5 < ratios[1] < 2.0
    # exactly the metric on the new rows only (X_res[len(train):]), the class's rows as support
    minor_train, minor_test = X[train][y[train] == 1], X[test][y[test] == 1]
    expect = memorization_ratio(X_res[len(train) :], minor_train, minor_test)
    assert ratios[1] == expect
    # copies of the support score near 0
    copies = X_res.copy()
    minor = X[train][y[train] == 1]
    copies[len(train) :] = minor[np.arange(len(X_res) - len(train)) % len(minor)] + 1e-9
    low = oversampling_memorization(X[train], y[train], copies, y_res, X[test], y[test])
    assert low[1] < 0.01
    changed = X_res.copy()
    changed[0, 0] += 1.0
    with pytest.raises(ValueError, match="unchanged"):
        oversampling_memorization(X[train], y[train], changed, y_res, X[test], y[test])


def test_skflow_imports_without_imblearn():
    # imbalanced-learn is an optional extra: skflow and its other modules import without it,
    # and skflow.oversampling says how to install it
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "imblearn" or name.startswith("imblearn."):
                    raise ImportError(f"No module named {name!r} (blocked)")
        sys.meta_path.insert(0, Block())
        import skflow, skflow.pipeline, skflow.metrics, skflow.__main__
        try:
            import skflow.oversampling
        except ImportError as exc:
            assert "skflow-matching[imbalanced]" in str(exc), exc
            print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# -- benchmarks/bench_oversampling.py ----------------------------------------------------------


def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_oversampling", ROOT / "benchmarks" / "bench_oversampling.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_tasks_have_their_imbalance():
    bench = _bench()
    for spec in [*bench.TASKS.values(), *bench.DEV_TASKS.values()]:
        X, y = bench.make_task(spec)
        n_min, n_maj = int(y.sum()), int((y == 0).sum())
        assert n_min == max(n_maj // spec[2], 6) and X.shape[0] == n_min + n_maj
    assert not set(bench.TASKS) & set(bench.DEV_TASKS)  # the rule's tasks are not in the table


def test_benchmark_verdicts_are_paired_intervals():
    bench = _bench()
    folds = np.arange(9.0)
    scores = {
        "SMOTE": {"logistic f1": 0.5 + 0.01 * folds},
        "skflow a": {"logistic f1": 0.6 + 0.01 * folds + 0.001 * (folds % 2)},  # always ahead
        "skflow b": {"logistic f1": 0.4 + 0.01 * folds},
    }
    behind = {arm: {"logistic f1": np.array(v["logistic f1"]) - 0.2} for arm, v in scores.items()}
    behind["SMOTE"] = scores["SMOTE"]
    wobble = 0.05 * (-1.0) ** folds  # paired differences straddling 0: level
    level = {arm: {"logistic f1": np.array(v["logistic f1"]) + wobble} for arm, v in scores.items()}
    level["SMOTE"] = {"logistic f1": np.array(scores["skflow a"]["logistic f1"])}
    results = {"t1": {"arms": scores}, "t2": {"arms": behind}, "t3": {"arms": level}}
    for r in results.values():
        for v in r["arms"].values():
            v["logistic bacc"] = v["logistic f1"]
    best = bench.summarize(results, ("logistic",))["best"]["logistic f1"]
    assert best["arm"] == "skflow a"
    assert best["tasks"]["t1"]["verdict"] == "skflow ahead"
    assert best["tasks"]["t2"]["verdict"] == "SMOTE ahead"
    assert best["tasks"]["t3"]["verdict"] == "level"
    assert (best["n_ahead"], best["n_behind"]) == (1, 1)


@pytest.mark.slow
def test_benchmark_smoke(tmp_path):
    bench = _bench()
    saved = bench.main(["--smoke", "--no-progress", "--json", str(tmp_path / "r.json")])
    assert set(saved["summary"]["tasks"]) == set(list(bench.TASKS)[-2:])
    best = saved["summary"]["best"]["logistic f1"]
    assert best["arm"] in bench.SKFLOW_ARMS
    assert "| mean over tasks |" in bench.table(saved, "logistic f1")
    for task in saved["summary"]["tasks"].values():
        assert 0.0 < task["skflow nw"]["memorization"][0] < 3.0


def test_default_bandwidth_is_the_automatic_one():
    # spread="auto": NWFlowSampler(sigma_min="auto") on the projected class chooses it
    X, y = imbalanced(n_minor=30, d=4)
    over = FlowOverSampler(n_components=None, random_state=0)
    X_res, _ = over.fit_resample(X, y)
    minor = X[y == 1]
    auto = NWFlowSampler(sigma_min="auto").fit((minor - minor.mean(0)).astype(np.float32))
    assert over.sigma_min_[1] == pytest.approx(auto.kde_bandwidth_, rel=1e-5)
    assert FlowOverSampler().get_params()["spread"] == "auto"
    assert np.array_equal(X_res[: len(X)], X)


def test_imblearn_sampler_checks_all_pass_with_none_whitelisted():
    from imblearn.utils.estimator_checks import parametrize_with_checks

    names = []
    for param in parametrize_with_checks([FlowOverSampler(random_state=0)]).mark.args[1]:
        estimator, check = param if isinstance(param, tuple) else param.values
        check(estimator)  # every check the tags select must pass
        names.append(getattr(check, "func", check).__name__)
    # the tags claim no SciPy sparse input, so that check is not selected; the rest are
    assert "check_samplers_sparse" not in names
    assert {"check_samplers_pandas", "check_samplers_pandas_sparse"} <= set(names)


def test_tags_refuse_scipy_sparse_and_the_error_names_the_fix():
    from scipy import sparse
    from sklearn.utils import get_tags

    assert get_tags(FlowOverSampler()).input_tags.sparse is False
    X, y = imbalanced(n_minor=10, d=3)
    with pytest.raises(TypeError, match="dense data is required"):
        FlowOverSampler(random_state=0).fit_resample(sparse.csr_matrix(X), y)


def test_a_frame_of_sparse_columns_is_resampled_as_its_dense_values():
    pd = pytest.importorskip("pandas")
    X, y = imbalanced(n_minor=10, d=3)
    frame = pd.DataFrame(X, columns=list("abc")).astype(pd.SparseDtype(float, 0.0))
    X_df, y_df = FlowOverSampler(random_state=0).fit_resample(frame, y)
    X_np, y_np = FlowOverSampler(random_state=0).fit_resample(X, y)
    assert all(isinstance(t, pd.SparseDtype) for t in X_df.dtypes)
    np.testing.assert_allclose(X_df.to_numpy(), X_np, rtol=1e-12, atol=0)  # same arithmetic
    np.testing.assert_array_equal(y_df, y_np)
