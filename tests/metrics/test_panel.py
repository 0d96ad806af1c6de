"""The metric panel (issue #64): energy distance, classifier two-sample test, multi-scale MMD²,
k-NN precision/recall and the panel with its noise floors, against float64 brute-force
oracles (scipy ``cdist``), a closed form, scipy, and NumPy vs Torch."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist, pdist
from scipy.stats import energy_distance as scipy_energy_distance
from scipy.stats import norm

from skflow.metrics import (
    MetricPanel,
    PanelEntry,
    classifier_two_sample_test,
    energy_distance,
    memorization_ratio,
    metric_panel,
    mmd2,
    multiscale_mmd2,
    precision_recall,
)

torch = pytest.importorskip("torch")

#: NumPy and Torch sum the same float64 distances in other orders: they agree to rounding.
BACKEND_TOL = 1e-12

# --------------------------------------------------------------------------------------------
# oracles (float64, whole matrices)
# --------------------------------------------------------------------------------------------


def oracle_energy(X, Y, unbiased=True):
    n, m = len(X), len(Y)
    dxx, dyy = cdist(X, X).sum(), cdist(Y, Y).sum()
    nxx, nyy = (n * (n - 1), m * (m - 1)) if unbiased else (n * n, m * m)
    return 2.0 * cdist(X, Y).mean() - dxx / nxx - dyy / nyy


def mean_abs_difference(mu1, s1, mu2, s2):
    """E|X - Y| for independent X ~ N(mu1, s1²), Y ~ N(mu2, s2²) (closed form)."""
    s, delta = math.hypot(s1, s2), mu1 - mu2
    return s * math.sqrt(2 / math.pi) * math.exp(-(delta**2) / (2 * s * s)) + delta * (
        1 - 2 * norm.cdf(-delta / s)
    )


def oracle_c2st(G, R):
    """Leave-one-out 1-NN accuracy of the pooled equal-size samples, ties sharing the vote."""
    Z = np.vstack([G, R])
    labels = np.r_[np.ones(len(G)), np.zeros(len(R))]
    D = cdist(Z, Z)
    np.fill_diagonal(D, np.inf)
    correct = []
    for i in range(len(Z)):
        nearest = D[i] == D[i].min()
        correct.append(np.mean(labels[nearest] == labels[i]))
    return float(np.mean(correct))


def oracle_precision_recall(G, R, k):
    def radii(A):
        D = cdist(A, A)
        np.fill_diagonal(D, np.inf)
        return np.sort(D, axis=1)[:, k - 1]

    precision = np.mean(np.any(cdist(G, R) <= radii(R)[None, :], axis=1))
    recall = np.mean(np.any(cdist(R, G) <= radii(G)[None, :], axis=1))
    return precision, recall


def oracle_gaussian_mmd2(X, Y, bandwidths):
    def gram(A, B):
        return sum(np.exp(-cdist(A, B, "sqeuclidean") / (2 * h * h)) for h in bandwidths)

    n, m = len(X), len(Y)
    Kxx, Kyy = gram(X, X), gram(Y, Y)
    return (
        (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1))
        + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1))
        - 2 * gram(X, Y).mean()
    )


@pytest.fixture
def xy():
    rng = np.random.default_rng(3)
    return rng.normal(size=(37, 3)), rng.normal(size=(29, 3)) * 1.3 + 0.4


# --------------------------------------------------------------------------------------------
# energy distance
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unbiased", [True, False])
def test_energy_matches_bruteforce(xy, unbiased):
    X, Y = xy
    got = energy_distance(X, Y, unbiased=unbiased)
    assert isinstance(got, float)
    assert abs(got - oracle_energy(X, Y, unbiased)) < 1e-12


def test_energy_vstatistic_is_scipy_squared_in_1d():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=60), rng.standard_t(3, size=45)
    got = energy_distance(x[:, None], y[:, None], unbiased=False)
    assert got == pytest.approx(scipy_energy_distance(x, y) ** 2, rel=1e-12)


def test_energy_of_two_gaussians_matches_the_closed_form():
    # Deterministic "samples": the n quantiles of each law, whose empirical energy distance
    # (V-statistic) converges to the law's at rate ~ log(n) / n, no sampling noise.
    mu1, s1, mu2, s2, n = 0.3, 1.0, -0.5, 1.7, 4000
    q = norm.ppf((np.arange(n) + 0.5) / n)
    X, Y = (mu1 + s1 * q)[:, None], (mu2 + s2 * q)[:, None]
    expected = (
        2 * mean_abs_difference(mu1, s1, mu2, s2)
        - mean_abs_difference(0, s1, 0, s1)
        - mean_abs_difference(0, s2, 0, s2)
    )
    assert expected > 0.3
    assert energy_distance(X, Y, unbiased=False) == pytest.approx(expected, abs=2e-3)


def test_energy_same_law_is_zero_within_sampling_noise():
    rng = np.random.default_rng(1)
    values = [
        energy_distance(rng.normal(size=(100, 2)), rng.normal(size=(100, 2))) for _ in range(30)
    ]
    # unbiased: mean 0; the spread of 30 draws bounds the mean's standard error
    assert abs(np.mean(values)) < 3 * np.std(values) / math.sqrt(30)


def test_energy_is_homogeneous_even_for_huge_and_tiny_data(xy):
    X, Y = xy
    base = energy_distance(X, Y)
    for a in (1e-200, 1e200):
        assert energy_distance(a * X, a * Y) == pytest.approx(a * base, rel=1e-12)


# --------------------------------------------------------------------------------------------
# classifier two-sample test
# --------------------------------------------------------------------------------------------


def test_c2st_matches_bruteforce_loo_1nn():
    rng = np.random.default_rng(2)
    G, R = rng.normal(size=(40, 3)), rng.normal(size=(40, 3)) + 0.5
    assert classifier_two_sample_test(G, R) == oracle_c2st(G, R)


def test_c2st_balances_by_subsampling_the_larger_side():
    rng = np.random.default_rng(4)
    G, R = rng.normal(size=(30, 2)), rng.normal(size=(75, 2))
    draw = np.random.RandomState(7)
    R_sub = R[np.sort(draw.choice(75, 30, replace=False))]
    assert classifier_two_sample_test(G, R, random_state=7) == oracle_c2st(G, R_sub)


def test_c2st_same_law_is_chance_and_copies_are_found():
    rng = np.random.default_rng(5)
    support, real = rng.normal(size=(20, 2)), rng.normal(size=(300, 2))
    same = [classifier_two_sample_test(rng.normal(size=(300, 2)), real) for _ in range(5)]
    assert abs(np.mean(same) - 0.5) < 0.05
    copies = support[rng.integers(0, 20, 300)]
    assert classifier_two_sample_test(copies, real) > 0.9
    assert classifier_two_sample_test(copies, real, metric="auc") > 0.9


def test_c2st_exact_duplicates_share_the_vote():
    Z = np.random.default_rng(6).normal(size=(25, 2))
    # each row's nearest other row is its twin of the other label: 0, copies of the reference
    assert classifier_two_sample_test(Z, Z.copy()) == 0.0
    # each row twice in each sample: three tied neighbours, one of its own label
    ZZ = np.vstack([Z, Z])
    assert classifier_two_sample_test(ZZ, ZZ[::-1].copy()) == pytest.approx(1 / 3, abs=1e-15)


def test_c2st_auc_of_the_default_rule_is_its_balanced_accuracy():
    rng = np.random.default_rng(8)
    G, R = rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 0.7
    acc = classifier_two_sample_test(G, R)
    assert classifier_two_sample_test(G, R, metric="auc") == pytest.approx(acc, abs=1e-12)


@pytest.mark.parametrize("metric", ["accuracy", "auc"])
def test_c2st_with_a_classifier_is_stratified_cross_validation(metric):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    rng = np.random.default_rng(9)
    G, R = rng.normal(size=(60, 2)) + [1.0, 0.0], rng.normal(size=(60, 2))
    got = classifier_two_sample_test(
        G, R, classifier=LogisticRegression(), cv=4, metric=metric, random_state=3
    )
    folds = StratifiedKFold(4, shuffle=True, random_state=np.random.RandomState(3))
    y = np.r_[np.ones(60, int), np.zeros(60, int)]
    scoring = "roc_auc" if metric == "auc" else "accuracy"
    expected = cross_val_score(
        LogisticRegression(), np.vstack([G, R]), y, cv=folds, scoring=scoring
    )
    assert got == pytest.approx(expected.mean(), abs=1e-12)
    assert 0.6 < got < 1.0


# --------------------------------------------------------------------------------------------
# multi-scale MMD²
# --------------------------------------------------------------------------------------------


def test_multiscale_mmd2_matches_bruteforce(xy):
    X, Y = xy
    h = np.median(pdist(np.vstack([X, Y])))
    scales = (0.25, 1.0, 4.0)
    expected = oracle_gaussian_mmd2(X, Y, [s * h for s in scales])
    got, bw = multiscale_mmd2(X, Y, scales=scales, return_bandwidth=True)
    assert abs(got - expected) < 1e-12
    assert bw == pytest.approx([s * h for s in scales], rel=1e-14)


def test_multiscale_mmd2_reference_sets_the_median(xy):
    X, Y = xy
    ref = np.random.default_rng(0).normal(size=(50, 3)) * 2.0
    h = np.median(pdist(ref))
    got = multiscale_mmd2(X, Y, scales=(0.5, 2.0), reference=ref)
    assert got == pytest.approx(mmd2(X, Y, bandwidth=[0.5 * h, 2 * h]), abs=1e-13)


def test_multiscale_mmd2_sees_what_the_median_kernel_misses():
    # a copy-heavy sample (repeated support rows) against fresh points of the same law: the
    # median kernel barely reacts, the fine scale does
    rng = np.random.default_rng(10)
    support, real = rng.normal(size=(15, 2)), rng.normal(size=(300, 2))
    copies = support[rng.integers(0, 15, 300)]
    fine = multiscale_mmd2(copies, real, scales=(0.1,))
    assert fine > 10 * multiscale_mmd2(rng.normal(size=(300, 2)), real, scales=(0.1,))


# --------------------------------------------------------------------------------------------
# precision / recall
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_precision_recall_matches_bruteforce(xy, k):
    X, Y = xy
    assert precision_recall(X, Y, n_neighbors=k) == pytest.approx(
        oracle_precision_recall(X, Y, k), abs=0
    )


def test_precision_recall_balls_are_closed():
    # reference 0 and 1 (k = 1: both radii 1); generated 2 lies on the ball of 1, 5 outside
    assert precision_recall([[2.0], [5.0]], [[0.0], [1.0]], n_neighbors=1) == (0.5, 1.0)


def test_precision_recall_see_collapse_and_spread():
    rng = np.random.default_rng(11)
    real = rng.normal(size=(300, 2))
    p, r = precision_recall(0.1 * rng.normal(size=(300, 2)), real)
    assert p > 0.95 and r < 0.3
    p, r = precision_recall(4.0 * rng.normal(size=(300, 2)), real)
    assert p < 0.5 and r > 0.95


# --------------------------------------------------------------------------------------------
# the panel
# --------------------------------------------------------------------------------------------


def _panel_oracle(G, S, R, seed, n_splits, k=3, scales=(0.25, 1.0, 4.0)):
    rng = np.random.RandomState(seed)
    splits = [rng.permutation(len(R)) for _ in range(n_splits)]
    half = len(R) // 2

    def measure(A, B):
        p, r = precision_recall(A, B, n_neighbors=k)
        return {
            "energy_distance": oracle_energy(A, B),
            "c2st_accuracy": classifier_two_sample_test(A, B, random_state=rng),
            "mmd2_multiscale": multiscale_mmd2(A, B, scales=scales, reference=R),
            "precision": p,
            "recall": r,
            "memorization_ratio": memorization_ratio(A, S, B),
        }

    value = measure(G, R)
    floors = [measure(R[p[:half]], R[p[half : 2 * half]]) for p in splits]
    return value, floors


def test_panel_values_and_floors_match_the_metrics_on_the_halves():
    rng = np.random.default_rng(12)
    S, R, G = rng.normal(size=(30, 2)), rng.normal(size=(81, 2)), rng.normal(size=(50, 2)) + 0.2
    panel = metric_panel(G, S, R, n_splits=3, random_state=5)
    value, floors = _panel_oracle(G, S, R, 5, 3)
    assert panel.names == tuple(value)
    for name in panel.names:
        entry = panel[name]
        f = [fl[name] for fl in floors]
        assert entry.value == pytest.approx(value[name], abs=1e-12)
        assert entry.floor == pytest.approx(np.mean(f), abs=1e-12)
        assert entry.floor_std == pytest.approx(np.std(f, ddof=1), abs=1e-12)


def test_panel_same_law_sits_on_its_floors():
    rng = np.random.default_rng(13)
    S, R = rng.normal(size=(40, 2)), rng.normal(size=(300, 2))
    panel = metric_panel(rng.normal(size=(300, 2)), S, R, random_state=0)
    for name in panel.names:
        e = panel[name]
        assert e.floor_std > 0
        assert abs(e.value - e.floor) < 4 * e.floor_std + 0.02, (name, e)
    assert abs(panel["c2st_accuracy"].floor - 0.5) < 0.08
    assert abs(panel["energy_distance"].floor) < 3 * panel["energy_distance"].floor_std
    assert 0.8 < panel["memorization_ratio"].floor < 1.25


def test_panel_copies_of_the_support_stand_out():
    rng = np.random.default_rng(14)
    S, R = rng.normal(size=(30, 2)), rng.normal(size=(300, 2))
    panel = metric_panel(S[rng.integers(0, 30, 300)], S, R, random_state=0)
    assert panel["memorization_ratio"].value == 0.0
    c2st = panel["c2st_accuracy"]
    assert c2st.value > 0.9 and c2st.value > c2st.floor + 5 * c2st.floor_std
    recall = panel["recall"]
    assert recall.value < recall.floor - 5 * recall.floor_std


def test_panel_result_is_frozen_readable_and_serialisable():
    import json

    rng = np.random.default_rng(15)
    panel = metric_panel(
        rng.normal(size=(20, 2)),
        rng.normal(size=(10, 2)),
        rng.normal(size=(40, 2)),
        n_splits=1,
        random_state=0,
    )
    assert isinstance(panel, MetricPanel) and isinstance(panel["recall"], PanelEntry)
    assert math.isnan(panel["recall"].floor_std)  # one split: no spread
    d = json.loads(json.dumps(panel.to_dict()))
    assert d["n_reference"] == 40 and set(d["metrics"]) == set(panel.names)
    text = repr(panel)
    assert str(panel) == text and all(name in text for name in panel.names)
    assert "20 generated vs 40 reference" in text
    with pytest.raises(AttributeError):
        panel.n_splits = 3
    with pytest.raises(KeyError, match="'mmd2' is not a metric of the panel"):
        panel["mmd2"]


def test_panel_same_seed_same_panel_and_generator_accepted():
    rng = np.random.default_rng(16)
    G, S, R = rng.normal(size=(30, 2)), rng.normal(size=(10, 2)), rng.normal(size=(40, 2))
    a = metric_panel(G, S, R, random_state=3).to_dict()
    assert a == metric_panel(G, S, R, random_state=3).to_dict()
    g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
    assert (
        metric_panel(G, S, R, random_state=g1).to_dict()
        == metric_panel(G, S, R, random_state=g2).to_dict()
    )


# --------------------------------------------------------------------------------------------
# NumPy and Torch
# --------------------------------------------------------------------------------------------


def test_numpy_and_torch_agree():
    rng = np.random.default_rng(17)
    G, S, R = rng.normal(size=(45, 3)), rng.normal(size=(20, 3)), rng.normal(size=(60, 3))
    t = torch.as_tensor
    assert energy_distance(t(G), t(R)) == pytest.approx(energy_distance(G, R), abs=BACKEND_TOL)
    assert energy_distance(t(G), R, unbiased=False) == pytest.approx(
        energy_distance(G, R, unbiased=False), abs=BACKEND_TOL
    )
    assert classifier_two_sample_test(t(G), t(R), random_state=0) == (
        classifier_two_sample_test(G, R, random_state=0)
    )
    assert multiscale_mmd2(t(G), t(R), reference=t(R)) == pytest.approx(
        multiscale_mmd2(G, R, reference=R), abs=BACKEND_TOL
    )
    assert precision_recall(t(G), R) == precision_recall(G, R)
    a = metric_panel(t(G), t(S), t(R), random_state=1)
    b = metric_panel(G, S, R, random_state=1)
    for name in a.names:
        for field in ("value", "floor", "floor_std"):
            got, expected = getattr(a[name], field), getattr(b[name], field)
            assert got == pytest.approx(expected, abs=BACKEND_TOL), (name, field)


def test_float32_tensors_are_computed_in_float64():
    rng = np.random.default_rng(18)
    X, Y = rng.normal(size=(30, 2)).astype(np.float32), rng.normal(size=(25, 2)).astype(np.float32)
    expected = oracle_energy(X.astype(np.float64), Y.astype(np.float64))
    assert abs(energy_distance(torch.as_tensor(X), torch.as_tensor(Y)) - expected) < 1e-12


NEW_MODULES = ("_distances", "energy", "c2st", "multiscale", "precision_recall", "panel")


@pytest.mark.parametrize("module", NEW_MODULES)
def test_new_metrics_do_not_branch_on_the_array_type(module):
    """NumPy/Torch is the backend's decision (skflow/_array.py): no type tests here."""
    path = Path(__file__).resolve().parents[2] / "skflow" / "metrics" / f"{module}.py"
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    type_tests = [
        ast.unparse(n.args[1])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "isinstance"
    ]
    assert not any(w in t for t in type_tests for w in ("torch", "Tensor", "ndarray")), module
    assert not ({"is_torch", "type"} & names), module
    assert not ({"is_torch", "name", "Tensor"} & attrs), module  # backend.name == "torch"
    assert "torch" not in imported and "is_torch" not in imported, module


# --------------------------------------------------------------------------------------------
# invariances (hypothesis)
# --------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(4, 30), ties=st.booleans())
def test_metrics_are_invariant_to_row_order(seed, n, ties):
    rng = np.random.default_rng(seed)
    G, R = rng.normal(size=(n, 2)), rng.normal(size=(n, 2)) + 0.3
    if ties:  # rounded rows: exact duplicates and tied neighbours
        G, R = np.round(G), np.round(R)
    pg, pr = rng.permutation(n), rng.permutation(n)
    assert energy_distance(G[pg], R[pr]) == pytest.approx(energy_distance(G, R), abs=1e-12)
    assert classifier_two_sample_test(G[pg], R[pr]) == pytest.approx(
        classifier_two_sample_test(G, R), abs=1e-12
    )
    assert precision_recall(G[pg], R[pr], n_neighbors=2) == precision_recall(G, R, n_neighbors=2)
    if not ties:  # the median of a rounded sample can be 0
        assert multiscale_mmd2(G[pg], R[pr]) == pytest.approx(multiscale_mmd2(G, R), abs=1e-12)


# --------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------

GOOD = np.zeros((10, 2)) + np.arange(10)[:, None]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: energy_distance(GOOD, GOOD[:, :1]), ValueError, "Y has 1 features but X has 2"),
        (lambda: energy_distance(GOOD[:1], GOOD), ValueError, "use unbiased=False"),
        (lambda: energy_distance(np.arange(3.0), GOOD), ValueError, "must be a 2-D array"),
        (lambda: energy_distance(GOOD * np.nan, GOOD), ValueError, "X contains NaN"),
        (
            lambda: classifier_two_sample_test(GOOD, GOOD[:1]),
            ValueError,
            "at least 2 rows in generated and in reference",
        ),
        (
            lambda: classifier_two_sample_test(GOOD, GOOD, metric="f1"),
            ValueError,
            r"metric must be one of \('accuracy', 'auc'\)",
        ),
        (
            lambda: classifier_two_sample_test(GOOD, GOOD[:, :1]),
            ValueError,
            "reference has 1 features but generated has 2",
        ),
        (
            lambda: classifier_two_sample_test(GOOD, GOOD, classifier=_tree(), cv=11),
            ValueError,
            "cv=11 folds need 2 <= cv <= 10",
        ),
        (lambda: multiscale_mmd2(GOOD, GOOD, scales=()), ValueError, "scales is empty"),
        (lambda: multiscale_mmd2(GOOD, GOOD, scales=(1, -2)), ValueError, "positive finite"),
        (lambda: multiscale_mmd2(GOOD, GOOD, scales=2.0), ValueError, "must be a sequence"),
        (
            lambda: multiscale_mmd2(GOOD, GOOD, reference=GOOD[:, :1]),
            ValueError,
            "reference has 1 features but X has 2",
        ),
        (
            lambda: precision_recall(GOOD[:3], GOOD),
            ValueError,
            "generated has 3 rows; the k-NN radius needs more than n_neighbors=3",
        ),
        (lambda: precision_recall(GOOD, GOOD, n_neighbors=0), ValueError, "positive integer"),
        (
            lambda: metric_panel(GOOD, GOOD[:3], GOOD[:7]),
            ValueError,
            "pass at least 8 reference rows or a smaller n_neighbors",
        ),
        (
            lambda: metric_panel(GOOD, GOOD[:, :1], GOOD),
            ValueError,
            "support has 1 features but generated has 2",
        ),
        (lambda: metric_panel(GOOD, GOOD, GOOD, n_splits=0), ValueError, "n_splits must be"),
    ],
)
def test_input_validation_names_the_problem(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _tree():
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier()
