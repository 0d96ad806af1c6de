"""Tests of skflow.tasks: the task meta-distributions, the paper's families, class tasks.

Tests for skflow.tasks (task meta-distributions).

Tests for the paper's task families (rings, moons, spirals, mixtures of families) and for
the exact population velocity of Gaussian-mixture tasks.
"""

import doctest
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skflow.tasks as tasks_module
from skflow.field import nw_velocity
from skflow.paths import OTPath
from skflow.tasks import (
    ClassTasks,
    GaussianMixtureTasks,
    MixedTasks,
    MoonsTasks,
    RingTasks,
    SingleDatasetTasks,
    SphericalShellTasks,
    SpiralTasks,
)
from skflow.tasks._base import categorical, haar_rotations, masked_dirichlet


def _min_cover(values, width):
    """Minimal number of intervals of length ``width`` covering the 1-D ``values``."""
    values = np.sort(values)
    count, i = 0, 0
    while i < len(values):
        count += 1
        i = np.searchsorted(values, values[i] + width, side="right")
    return count


def _class_data(n_per_class=(30, 20, 12), d=3, seed=0):
    """Data whose first column is the row index, so returned rows can be identified."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(n_per_class)), n_per_class)
    n = len(y)
    X = np.column_stack([np.arange(n, dtype=float), rng.normal(size=(n, d - 1))])
    return X, y


SYNTHETIC = [
    lambda d: GaussianMixtureTasks(n_features=d),
    lambda d: GaussianMixtureTasks(n_features=d, anisotropic=False, n_components=3),
    lambda d: SphericalShellTasks(n_features=d),
    lambda d: SphericalShellTasks(n_features=d, center_box=2.0, n_shells=1),
]


# --------------------------------------------------------------------------------------
# shared interface
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", SYNTHETIC)
@pytest.mark.parametrize("d", [1, 2, 5])
def test_shapes_dtypes_and_finiteness(make, d):
    t = make(d)
    S, Q = t.sample_task(7, 11, random_state=0)
    assert S.shape == (7, d) and Q.shape == (11, d)
    assert S.dtype == np.float64 and Q.dtype == np.float64
    Ss, Qs = t.sample_tasks(4, 7, 11, random_state=0)
    assert Ss.shape == (4, 7, d) and Qs.shape == (4, 11, d)
    assert Ss.dtype == np.float64 and Qs.dtype == np.float64
    assert np.isfinite(Ss).all() and np.isfinite(Qs).all()
    assert t.n_features == d
    # empty query set is allowed
    S0, Q0 = t.sample_task(3, 0, random_state=1)
    assert S0.shape == (3, d) and Q0.shape == (0, d)


@pytest.mark.exactness
@pytest.mark.parametrize("make", SYNTHETIC)
def test_determinism_and_seed_dependence(make):
    t = make(3)
    a = t.sample_tasks(5, 6, 7, random_state=42)
    b = t.sample_tasks(5, 6, 7, random_state=42)
    c = t.sample_tasks(5, 6, 7, random_state=43)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.allclose(a[0], c[0])
    # Generator and RandomState are accepted and reproducible
    g1 = t.sample_tasks(2, 4, 4, random_state=np.random.default_rng(3))
    g2 = t.sample_tasks(2, 4, 4, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(g1[0], g2[0])
    r1 = t.sample_tasks(2, 4, 4, random_state=np.random.RandomState(3))
    r2 = t.sample_tasks(2, 4, 4, random_state=np.random.RandomState(3))
    np.testing.assert_array_equal(r1[1], r2[1])
    # sample_task is task 0 of sample_tasks(1, ...)
    S, Q = t.sample_task(6, 7, random_state=9)
    Ss, Qs = t.sample_tasks(1, 6, 7, random_state=9)
    np.testing.assert_array_equal(S, Ss[0])
    np.testing.assert_array_equal(Q, Qs[0])
    # tasks in a batch differ from each other
    assert not np.allclose(a[0][0], a[0][1])


@pytest.mark.exactness
def test_pickle_roundtrip_keeps_sampling():
    t = GaussianMixtureTasks(n_features=2, n_components=(1, 3))
    t2 = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(
        t.sample_tasks(3, 4, 5, random_state=0)[0], t2.sample_tasks(3, 4, 5, random_state=0)[0]
    )
    assert "n_components=(1, 3)" in repr(t)


@pytest.mark.parametrize("make", SYNTHETIC)
@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 5, 5), "n_tasks"),
        ((2, 0, 5), "n_support"),
        ((2, 5, -1), "n_query"),
        ((2.5, 5, 5), "n_tasks"),
        ((2, True, 5), "n_support"),
    ],
)
def test_size_validation(make, args, match):
    with pytest.raises(ValueError, match=match):
        make(2).sample_tasks(*args)


def test_sample_task_size_validation():
    with pytest.raises(ValueError, match="n_support"):
        GaussianMixtureTasks().sample_task(0, 3)
    with pytest.raises(ValueError, match="n_query"):
        SphericalShellTasks().sample_task(3, -2)


@pytest.mark.parametrize("bad", [-1, "seed", 1.5])
def test_bad_random_state(bad):
    with pytest.raises(ValueError):
        GaussianMixtureTasks().sample_task(3, 3, random_state=bad)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_features": 0}, "n_features"),
        ({"n_features": 2.0}, "n_features"),
        ({"n_components": 0}, "n_components"),
        ({"n_components": (5, 2)}, "n_components"),
        ({"n_components": (0, 2)}, "n_components"),
        ({"n_components": "many"}, "n_components"),
        ({"box": 0.0}, "box"),
        ({"box": np.inf}, "box"),
        ({"scale": 0.0}, "scale"),
        ({"scale": (1.0, 0.5)}, "scale"),
        ({"scale": (-0.1, 0.5)}, "scale"),
        ({"anisotropic": "yes"}, "anisotropic"),
    ],
)
def test_gmm_param_validation(kwargs, match):
    t = GaussianMixtureTasks(**kwargs)  # constructor only stores
    with pytest.raises(ValueError, match=match):
        t.sample_task(3, 3, random_state=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_features": -3}, "n_features"),
        ({"n_shells": (3, 2)}, "n_shells"),
        ({"n_shells": 0}, "n_shells"),
        ({"max_radius": 0.5}, "max_radius"),
        ({"max_radius": np.nan}, "max_radius"),
        ({"radial_noise": -0.1}, "radial_noise"),
        ({"center_box": -1.0}, "center_box"),
    ],
)
def test_shell_param_validation(kwargs, match):
    t = SphericalShellTasks(**kwargs)
    with pytest.raises(ValueError, match=match):
        t.sample_tasks(2, 3, 3, random_state=0)


def test_vectorized_batch_d16():
    for t in (GaussianMixtureTasks(n_features=16), SphericalShellTasks(n_features=16)):
        Ss, Qs = t.sample_tasks(256, 50, 256, random_state=0)
        assert Ss.shape == (256, 50, 16) and Qs.shape == (256, 256, 16)
        assert np.isfinite(Ss).all() and np.isfinite(Qs).all()


def _mixture_points_by_masked_sum(rng, B, n, d, k_lo, k_hi, box, s_lo, s_hi):
    """The anisotropic draw as it was first written: every slot's ``z A_k^T`` masked to
    zero and added to the means of the points' slots (the reference of the drawn values)."""
    n_active = rng.integers(k_lo, k_hi + 1, size=B)
    weights, _ = masked_dirichlet(rng, n_active, k_hi)
    means = rng.uniform(-box, box, size=(B, k_hi, d))
    rot = haar_rotations(rng, (B, k_hi), d)
    scales = rng.uniform(s_lo, s_hi, size=(B, k_hi, d))
    comp = categorical(rng, weights, n, n_active)
    z = rng.standard_normal((B, n, d))
    X = np.take_along_axis(means, comp[:, :, None], axis=1)
    A = rot * scales[..., None, :]
    for k in range(k_hi):
        mask = comp == k
        if mask.any():
            X += np.where(mask[:, :, None], z @ np.swapaxes(A[:, k], -1, -2), 0.0)
    return X, (weights, means, rot, scales)


@pytest.mark.exactness
@pytest.mark.parametrize("d", [1, 2, 16])
@pytest.mark.parametrize("n_components", [(2, 8), 1, (3, 5)])
@pytest.mark.parametrize("seed", [0, 11])
def test_gaussian_mixture_draws_are_bit_identical_to_the_masked_sum(d, n_components, seed):
    """The per-slot writes of the drawing code give the same points, bit for bit, as the
    masked sum over every slot (so a seed keeps drawing the same tasks)."""
    k = n_components if isinstance(n_components, tuple) else (n_components, n_components)
    S, Q, params = GaussianMixtureTasks(n_features=d, n_components=n_components).sample_tasks(
        6, 9, 13, random_state=seed, return_params=True
    )
    X, ref = _mixture_points_by_masked_sum(np.random.default_rng(seed), 6, 22, d, *k, 5.0, 0.3, 1.0)
    assert np.array_equal(S, X[:, :9]) and np.array_equal(Q, X[:, 9:])
    assert all(np.array_equal(a, b) for a, b in zip(params, ref, strict=True))


@pytest.mark.exactness
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    d=st.integers(1, 6),
    B=st.integers(1, 4),
    m=st.integers(1, 9),
    q=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
    which=st.sampled_from(["gmm", "gmm_iso", "shell"]),
)
def test_property_shapes_and_reproducibility(d, B, m, q, seed, which):
    t = {
        "gmm": GaussianMixtureTasks(n_features=d, n_components=(1, 4)),
        "gmm_iso": GaussianMixtureTasks(n_features=d, anisotropic=False),
        "shell": SphericalShellTasks(n_features=d, n_shells=(1, 3), center_box=1.0),
    }[which]
    Ss, Qs = t.sample_tasks(B, m, q, random_state=seed)
    assert Ss.shape == (B, m, d) and Qs.shape == (B, q, d)
    assert np.isfinite(Ss).all() and np.isfinite(Qs).all()
    Ss2, Qs2 = t.sample_tasks(B, m, q, random_state=seed)
    np.testing.assert_array_equal(Ss, Ss2)
    np.testing.assert_array_equal(Qs, Qs2)


# --------------------------------------------------------------------------------------
# Gaussian mixtures
# --------------------------------------------------------------------------------------
def test_gmm_points_stay_near_box_and_cluster():
    box, sigma = 2.0, 0.01
    t = GaussianMixtureTasks(n_features=3, n_components=(2, 4), box=box, scale=sigma)
    Ss, Qs = t.sample_tasks(20, 500, 500, random_state=0)
    X = np.concatenate([Ss, Qs], axis=1)  # (20, 1000, 3)
    assert np.abs(X).max() <= box + 6 * sigma
    # per task, points form at most n_components[1] tight clusters
    for Xt in X:
        centers = []
        for x in Xt:
            if not any(np.linalg.norm(x - c) < 0.2 for c in centers):
                centers.append(x)
        assert 1 <= len(centers) <= 4
    # the means spread over the box (not all near the origin)
    assert np.abs(X).max() > box / 2


def test_gmm_fixed_components_count():
    t = GaussianMixtureTasks(n_features=2, n_components=3, box=10.0, scale=0.001)
    S, _ = t.sample_task(3000, 0, random_state=1)
    centers = []
    for x in S:
        if not any(np.linalg.norm(x - c) < 0.05 for c in centers):
            centers.append(x)
    assert len(centers) <= 3


@pytest.mark.parametrize("anisotropic", [True, False])
def test_gmm_single_component_covariance(anisotropic):
    lo, hi = 0.3, 1.0
    t = GaussianMixtureTasks(n_features=3, n_components=1, scale=(lo, hi), anisotropic=anisotropic)
    Ss, _ = t.sample_tasks(6, 20000, 0, random_state=0)
    ratios = []
    for S in Ss:
        sd = np.sqrt(np.linalg.eigvalsh(np.cov(S.T)))
        assert sd.min() > 0.9 * lo and sd.max() < 1.1 * hi
        ratios.append(sd.max() / sd.min())
    if anisotropic:
        assert max(ratios) > 1.3  # axes get different scales
    else:
        assert max(ratios) < 1.1  # one sigma per component


def test_gmm_anisotropic_axes_are_rotated():
    # with random rotations the principal axes are not the coordinate axes
    t = GaussianMixtureTasks(n_features=2, n_components=1, scale=(0.1, 1.0))
    Ss, _ = t.sample_tasks(8, 5000, 0, random_state=2)
    off_diag = [abs(np.corrcoef(S.T)[0, 1]) for S in Ss]
    assert max(off_diag) > 0.3


# --------------------------------------------------------------------------------------
# spherical shells
# --------------------------------------------------------------------------------------
def test_shell_norms_cluster_around_few_radii():
    t = SphericalShellTasks(n_features=8, radial_noise=0.01, max_radius=5.0)
    Ss, Qs = t.sample_tasks(30, 1000, 1000, random_state=0)
    X = np.concatenate([Ss, Qs], axis=1)
    norms = np.linalg.norm(X, axis=2)
    assert norms.min() > 0.5 - 0.05 and norms.max() <= 5.0 + 0.05
    n_clusters = []
    for r in norms:
        # every norm within 0.05 of one of at most 5 radii
        k = _min_cover(r, 0.1)
        assert k <= 5
        n_clusters.append(k)
    assert max(n_clusters) >= 2  # several shells occur


def test_shell_noiseless_and_directions_uniform():
    t = SphericalShellTasks(n_features=4, n_shells=1, radial_noise=0.0)
    S, Q = t.sample_task(20000, 10, random_state=0)
    norms = np.linalg.norm(S, axis=1)
    np.testing.assert_allclose(norms, norms[0])  # one exact radius
    assert 0.5 < norms[0] <= 5.0
    # directions uniform: mean near 0, covariance near r^2/d I
    assert np.linalg.norm(S.mean(axis=0)) < 0.1 * norms[0]
    np.testing.assert_allclose(
        np.cov(S.T), norms[0] ** 2 / 4 * np.eye(4), atol=0.05 * norms[0] ** 2
    )


def test_shell_centers():
    t = SphericalShellTasks(n_features=3, n_shells=1, radial_noise=0.0, center_box=3.0)
    Ss, _ = t.sample_tasks(10, 4000, 0, random_state=1)
    centers = Ss.mean(axis=1)
    assert np.abs(centers).max() <= 3.0 + 0.2
    assert np.ptp(centers[:, 0]) > 1.0  # centers vary between tasks
    # default: centered at the origin
    S0, _ = SphericalShellTasks(n_features=3).sample_task(4000, 0, random_state=1)
    assert np.linalg.norm(S0.mean(axis=0)) < 0.3


# --------------------------------------------------------------------------------------
# ClassTasks
# --------------------------------------------------------------------------------------
@pytest.mark.exactness
def test_class_tasks_rows_come_from_one_class():
    X, y = _class_data()
    t = ClassTasks(X, y, random_state=0)
    assert t.n_features == 3
    np.testing.assert_array_equal(t.classes_, [0, 1, 2])
    Ss, Qs = t.sample_tasks(40, 5, 6, random_state=0)
    assert Ss.shape == (40, 5, 3) and Qs.shape == (40, 6, 3)
    seen = set()
    for S, Q in zip(Ss, Qs, strict=True):
        rows = np.concatenate([S, Q])
        ids = rows[:, 0].astype(int)
        np.testing.assert_array_equal(rows, X[ids])  # actual rows of X
        assert len(np.unique(y[ids])) == 1  # a single class
        assert len(np.unique(ids)) == len(ids)  # distinct (enough rows)
        seen.add(int(y[ids[0]]))
    assert seen == {0, 1, 2}
    # reproducible
    Ss2, _ = t.sample_tasks(40, 5, 6, random_state=0)
    np.testing.assert_array_equal(Ss, Ss2)
    S, Q = t.sample_task(5, 6, random_state=7)
    S1, Q1 = t.sample_tasks(1, 5, 6, random_state=7)
    np.testing.assert_array_equal(S, S1[0])
    np.testing.assert_array_equal(Q, Q1[0])


def test_class_tasks_without_replacement_uses_all_rows_when_exact():
    X, y = _class_data(n_per_class=(8, 8))
    t = ClassTasks(X, y)
    Ss, Qs = t.sample_tasks(10, 3, 5, random_state=0)
    for S, Q in zip(Ss, Qs, strict=True):
        ids = np.sort(np.concatenate([S, Q])[:, 0].astype(int))
        cls = y[ids[0]]
        np.testing.assert_array_equal(ids, np.flatnonzero(y == cls))


def _assert_no_leakage(Ss, Qs):
    """Rows are tagged by their index (column 0): support and targets share none."""
    for S, Q in zip(Ss, Qs, strict=True):
        s_ids, q_ids = S[:, 0].astype(int), Q[:, 0].astype(int)
        assert len(np.unique(s_ids)) == len(s_ids)
        assert not np.isin(q_ids, s_ids).any()


@pytest.mark.parametrize("split", ["train", "validation"])
def test_class_tasks_small_class_shrinks_targets_and_never_leaks(split):
    X, y = _class_data(n_per_class=(12, 40, 60))
    t = ClassTasks(X, y, validation_fraction=0.5, random_state=0)
    sizes = {"train": 6, "validation": 6}  # the 12-row class, halved
    with pytest.warns(UserWarning, match=rf"class 0 has {sizes[split]} rows .*n_query=2 "):
        Ss, Qs = t.sample_tasks(60, 4, 20, random_state=0, split=split)
    assert Ss.shape == (60, 4, 3) and Qs.shape == (60, 2, 3)
    _assert_no_leakage(Ss, Qs)
    assert set(y[Ss[:, 0, 0].astype(int)]) == {0, 1, 2}  # the small class is still drawn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.sample_tasks(30, 4, 20, random_state=1, split=split)  # warned once


def test_class_tasks_too_small_class_is_skipped_with_warning():
    X, y = _class_data(n_per_class=(4, 30))
    t = ClassTasks(X, y)
    with pytest.warns(UserWarning, match=r"class\(es\) \[0\] with \[4\] rows .*n_support=5"):
        Ss, Qs = t.sample_tasks(30, 5, 5, random_state=0)
    assert Ss.shape == (30, 5, 3) and Qs.shape == (30, 5, 3)
    assert set(y[Ss[..., 0].astype(int)].ravel()) == {1}
    _assert_no_leakage(Ss, Qs)
    with pytest.raises(ValueError, match="more than n_support=30 rows"):
        t.sample_tasks(3, 30, 5, random_state=0)


@pytest.mark.parametrize("m, q", [(1, 0), (3, 9), (5, 25), (29, 1)])
def test_class_tasks_never_leak_at_any_size(m, q):
    X, y = _class_data(n_per_class=(30, 20, 12))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        Ss, Qs = ClassTasks(X, y).sample_tasks(50, m, q, random_state=m)
    assert Ss.shape[1] == m and Qs.shape[1] <= q
    _assert_no_leakage(Ss, Qs)


@pytest.mark.exactness
def test_class_tasks_validation_split_disjoint():
    X, y = _class_data(n_per_class=(40, 30, 20))
    t = ClassTasks(X, y, validation_fraction=0.25, random_state=0)
    train_ids, val_ids = set(), set()
    for split, ids in (("train", train_ids), ("validation", val_ids)):
        Ss, Qs = t.sample_tasks(200, 2, 2, random_state=0, split=split)
        rows = np.concatenate([Ss, Qs], axis=1).reshape(-1, 3)
        ids.update(rows[:, 0].astype(int).tolist())
    assert train_ids and val_ids
    assert train_ids.isdisjoint(val_ids)
    # roughly a quarter of each class goes to validation
    assert 0.15 * len(y) < len(val_ids) <= 0.25 * len(y) + 3
    # the split is seeded by the constructor's random_state
    t2 = ClassTasks(X, y, validation_fraction=0.25, random_state=0)
    a = t.sample_tasks(5, 2, 2, random_state=3, split="validation")[0]
    b = t2.sample_tasks(5, 2, 2, random_state=3, split="validation")[0]
    np.testing.assert_array_equal(a, b)


def test_class_tasks_standardize():
    X, y = _class_data()
    X = X * 10 + 5
    t = ClassTasks(X, y, standardize=True)
    S, _ = t.sample_task(4, 0, random_state=0)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    for row in S:
        assert np.isclose(Z, row).all(axis=1).any()
    np.testing.assert_allclose(t.mean_, X.mean(axis=0))
    np.testing.assert_allclose(t.scale_, X.std(axis=0))


def test_class_tasks_small_class_excluded_with_warning():
    X, y = _class_data(n_per_class=(10, 1, 10))
    t = ClassTasks(X, y)
    with pytest.warns(UserWarning, match="fewer than 2 rows"):
        classes = t.classes_
    np.testing.assert_array_equal(classes, [0, 2])
    Ss, _ = t.sample_tasks(50, 2, 0, random_state=0)
    assert not np.isin(Ss[..., 0].astype(int), np.flatnonzero(y == 1)).any()


def test_class_tasks_string_labels():
    X, y = _class_data(n_per_class=(5, 5))
    labels = np.where(y == 0, "cat", "dog")
    t = ClassTasks(X, labels)
    assert t.classes_.tolist() == ["cat", "dog"]
    assert t.sample_task(2, 2, random_state=0)[0].shape == (2, 3)


@pytest.mark.parametrize(
    "X, y, kwargs, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), [0, 0], {}, "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), [0, 0], {}, "NaN or inf"),
        (np.arange(4.0), [0, 0, 1, 1], {}, "2-D"),
        (np.zeros((4, 2)), [0, 0, 1], {}, "len"),
        (np.zeros((0, 2)), [], {}, "non-empty"),
        ([["a", "b"], ["c", "d"]], [0, 0], {}, "numeric"),
        (np.zeros((3, 2)), [0, 1, 2], {}, "at least one class"),
        (np.zeros((4, 2)), [0, 0, 1, 1], {"validation_fraction": 1.0}, "validation_fraction"),
        (np.zeros((4, 2)), [0, 0, 1, 1], {"validation_fraction": -0.1}, "validation_fraction"),
        (np.zeros((4, 2)), [0, 0, 1, 1], {"standardize": "yes"}, "standardize"),
    ],
)
def test_class_tasks_input_validation(X, y, kwargs, match):
    t = ClassTasks(X, y, **kwargs)  # nothing validated at construction
    with pytest.raises(ValueError, match=match):
        t.sample_task(1, 1, random_state=0)


def test_class_tasks_split_errors():
    X, y = _class_data(n_per_class=(6, 6))
    with pytest.raises(ValueError, match="validation_fraction > 0"):
        ClassTasks(X, y).sample_task(2, 2, split="validation")
    with pytest.raises(ValueError, match="split"):
        ClassTasks(X, y).sample_tasks(2, 2, 2, split="test")
    with pytest.raises(ValueError, match="n_support"):
        ClassTasks(X, y).sample_tasks(2, 0, 2)
    # validation part too small in every class
    with pytest.raises(ValueError, match="No class has at least 2 rows"):
        ClassTasks(X, y, validation_fraction=0.1).sample_task(1, 1, split="validation")


# --------------------------------------------------------------------------------------
# documentation
# --------------------------------------------------------------------------------------
def test_docstring_examples_run():
    result = doctest.testmod(tasks_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0
    for cls in (GaussianMixtureTasks, SphericalShellTasks, ClassTasks):
        doc = cls.__doc__
        assert "Parameters" in doc and "Examples" in doc and ">>>" in doc


@pytest.mark.parametrize("center", ["support", "origin"])
def test_rotate_tasks_moves_supports_and_targets_by_one_rotation(center):
    """Every task's support and targets get the same orthogonal map (issue 34): all the
    support-target distances are kept, while both sets move."""
    from scipy.spatial.distance import cdist

    from skflow.tasks import rotate_tasks

    rng = np.random.default_rng(0)
    S, Q = rng.normal(size=(5, 6, 3)) + 2.0, rng.normal(size=(5, 4, 3))
    S2, Q2 = rotate_tasks(S, Q, random_state=1, center=center)
    for b in range(5):
        np.testing.assert_allclose(cdist(S2[b], Q2[b]), cdist(S[b], Q[b]), rtol=1e-12)
        np.testing.assert_allclose(cdist(S2[b], S2[b]), cdist(S[b], S[b]), atol=1e-12)
        assert np.abs(Q2[b] - Q[b]).max() > 1e-3 and np.abs(S2[b] - S[b]).max() > 1e-3
    if center == "support":  # the support mean is the fixed point
        np.testing.assert_allclose(S2.mean(axis=1), S.mean(axis=1), atol=1e-12)


FAMILIES = [RingTasks, MoonsTasks, SpiralTasks]


# --------------------------------------------------------------------------------------------
# shared interface of the new families
# --------------------------------------------------------------------------------------------
@pytest.mark.exactness
@pytest.mark.parametrize("cls", [*FAMILIES, lambda d: MixedTasks([RingTasks(d), MoonsTasks(d)])])
@pytest.mark.parametrize("d", [2, 5])
def test_shapes_determinism_and_sample_task(cls, d):
    tasks = cls(d)
    assert tasks.n_features == d
    Ss, Qs = tasks.sample_tasks(7, 11, 3, random_state=0)
    assert Ss.shape == (7, 11, d) and Qs.shape == (7, 3, d)
    assert Ss.dtype == np.float64 and np.all(np.isfinite(Ss))
    Ss2, Qs2 = tasks.sample_tasks(7, 11, 3, random_state=0)
    np.testing.assert_array_equal(Ss, Ss2)
    np.testing.assert_array_equal(Qs, Qs2)
    assert not np.array_equal(Ss, tasks.sample_tasks(7, 11, 3, random_state=1)[0])
    S, Q = tasks.sample_task(11, 3, random_state=4)
    S1, Q1 = tasks.sample_tasks(1, 11, 3, random_state=4)
    np.testing.assert_array_equal(S, S1[0])
    np.testing.assert_array_equal(Q, Q1[0])


@pytest.mark.parametrize("cls", FAMILIES)
def test_embedded_tasks_lie_in_a_plane(cls):
    """In d = 6 with tiny noise a task spans 2 dimensions (its random plane) plus its shift."""
    tasks = cls(6, noise=1e-9)
    Ss, _ = tasks.sample_tasks(4, 200, 0, random_state=0)
    for S in Ss:
        sv = np.linalg.svd(S - S.mean(axis=0), compute_uv=False)
        assert sv[1] > 1e-2 * sv[0] and sv[2] < 1e-6 * sv[0]
    planes = [np.linalg.svd(S - S.mean(axis=0))[2][:2] for S in Ss]
    # the planes differ between tasks: some principal angle between two of them is not 0
    assert np.linalg.svd(planes[0] @ planes[1].T, compute_uv=False).min() < 0.99


def test_ring_points_lie_on_their_circles():
    tasks = RingTasks(2, n_rings=1, radius=(1.5, 1.5), box=0.0, noise=1e-9)
    Ss, _ = tasks.sample_tasks(3, 100, 0, random_state=0)
    for S in Ss:  # one ring per task: equidistant from its centre, the mean of the points
        centre = (S.max(axis=0) + S.min(axis=0)) / 2
        np.testing.assert_allclose(np.linalg.norm(S - centre, axis=1), 1.5, atol=0.05)


def test_moons_are_two_half_circles():
    tasks = MoonsTasks(2, scale=(1.0, 1.0), box=0.0, noise=1e-9)
    S, _ = tasks.sample_task(2000, 0, random_state=0)
    # undo the random rotation: the moons' points are at distance 1 from one of two centres
    # (+-(1/2, -1/4) before the rotation), 1.118 apart; the rotation keeps distances
    # centred on (1/2, 1/4): the shape's mean is 0 (exactly, in expectation)
    assert np.linalg.norm(S.mean(axis=0)) < 0.05
    d_origin = np.linalg.norm(S, axis=1)
    assert d_origin.max() < np.hypot(1.5, 0.75) + 1e-6
    pair = np.linalg.norm(S[:, None] - S[None], axis=-1).max()
    assert pair == pytest.approx(np.hypot(3.0, 0.5), abs=0.05)  # extreme tips of the two moons


def test_spiral_arm_radius_grows_with_angle():
    tasks = SpiralTasks(2, n_arms=1, turns=(1.0, 1.0), scale=(3.0, 3.0), box=0.0, noise=1e-9)
    S, _ = tasks.sample_task(500, 0, random_state=0)
    r = np.linalg.norm(S, axis=1)
    assert r.max() <= 3.0 + 1e-6 and r.min() < 0.3
    # one turn: the radius is 3 * s with s = turn fraction, so the angle unwraps to 2 pi r / 3
    theta = np.arctan2(S[:, 1], S[:, 0])
    order = np.argsort(r)
    unwrapped = np.unwrap(theta[order])
    slope = np.polyfit(r[order], unwrapped, 1)[0]
    assert abs(abs(slope) - 2 * np.pi / 3) < 0.05


def test_mixed_tasks_follow_the_weights():
    a = GaussianMixtureTasks(3, box=0.01, scale=0.01)  # points near the origin
    b = SphericalShellTasks(3, n_shells=1, max_radius=50.0, radial_noise=0.0)  # far away
    mixed = MixedTasks([a, b], weights=[3, 1])
    Ss, _ = mixed.sample_tasks(4000, 2, 0, random_state=0)
    far = np.linalg.norm(Ss[:, 0], axis=1) > 0.4
    assert abs(far.mean() - 0.25) < 0.03
    only_a = MixedTasks([a, b], weights=[1, 0]).sample_tasks(50, 2, 0, random_state=0)[0]
    assert np.linalg.norm(only_a, axis=-1).max() < 0.4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"families": []}, "non-empty"),
        ({"families": [RingTasks(2), RingTasks(3)]}, "same n_features"),
        ({"families": [RingTasks(2)], "weights": [-1.0]}, "non-negative"),
        ({"families": [RingTasks(2), MoonsTasks(2)], "weights": [0, 0]}, "all be zero"),
        ({"families": [RingTasks(2)], "weights": [1, 1]}, "1 non-negative"),
    ],
)
def test_mixed_tasks_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MixedTasks(**kwargs).sample_tasks(2, 3, 1, random_state=0)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RingTasks(1), "n_features"),
        (lambda: RingTasks(2, radius=(2.0, 1.0)), "low <= high"),
        (lambda: MoonsTasks(2, noise=0.0), "noise"),
        (lambda: SpiralTasks(2, n_arms=0), "n_arms"),
        (lambda: SpiralTasks(2, box=-1.0), "box"),
    ],
)
def test_family_parameter_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make().sample_tasks(2, 3, 1, random_state=0)


# --------------------------------------------------------------------------------------------
# exact population velocity of Gaussian mixtures
# --------------------------------------------------------------------------------------------
def _mixture_sample(d, n, seed, **kwargs):
    tasks = GaussianMixtureTasks(d, **kwargs)
    S, _, params = tasks.sample_tasks(1, n, 0, random_state=seed, return_params=True)
    return tasks, S, params


@pytest.mark.exactness
def test_return_params_does_not_change_the_draws():
    tasks = GaussianMixtureTasks(3)
    S, Q = tasks.sample_tasks(4, 5, 6, random_state=0)
    S2, Q2, params = tasks.sample_tasks(4, 5, 6, random_state=0, return_params=True)
    np.testing.assert_array_equal(S, S2)
    np.testing.assert_array_equal(Q, Q2)
    np.testing.assert_allclose(params.weights.sum(axis=1), 1.0)
    R = params.rotations
    np.testing.assert_allclose(
        R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12
    )


@pytest.mark.parametrize("t", [0.2, 0.6, 0.9])
@pytest.mark.parametrize("anisotropic", [True, False])
def test_posterior_mean_is_the_conditional_expectation(t, anisotropic):
    """Monte Carlo over the joint law of (x_1, x_t): the residual x_1 - E[x_1 | x_t] has mean
    zero against every function of x_t (the defining property of E[. | x_t])."""
    sigma_min, n = 0.01, 200_000
    tasks, X1, params = _mixture_sample(2, n, 0, anisotropic=anisotropic, n_components=3, box=2.0)
    x0 = np.random.default_rng(1).standard_normal(X1.shape)
    xt = OTPath(sigma_min).sample_conditional(x0, X1, t)
    resid = X1 - tasks.posterior_mean(xt, t, params, sigma_min=sigma_min)
    tests = [np.ones(xt.shape[:2]), xt[..., 0], xt[..., 1], np.tanh(xt[..., 0] * xt[..., 1])]
    for h in tests:
        prod = resid[0] * h[0][:, None]  # (n, d)
        z = prod.mean(axis=0) / (prod.std(axis=0) / np.sqrt(n))
        assert np.all(np.abs(z) < 4.5), z
    # the velocity is the same statement: u_cond - u_exact is orthogonal to functions of x_t
    u = tasks.velocity(xt, t, params, sigma_min=sigma_min)
    gap = OTPath(sigma_min).conditional_velocity(x0, X1) - u
    z = gap[0].mean(axis=0) / (gap[0].std(axis=0) / np.sqrt(n))
    assert np.all(np.abs(z) < 4.5)


@pytest.mark.parametrize("t", [0.0, 0.3, 0.7])
def test_velocity_matches_the_nw_field_of_a_large_sample(t):
    sigma_min = 0.01
    tasks, S, params = _mixture_sample(2, 200_000, 3, n_components=2, box=2.0)
    x = tasks.sample_tasks(1, 1, 30, random_state=9)[1]  # query points (another task's)
    x0 = np.random.default_rng(2).standard_normal(x.shape)
    x = OTPath(sigma_min).sample_conditional(x0, S[:, :30], t)
    exact = tasks.velocity(x, t, params, sigma_min=sigma_min)[0]
    nw = nw_velocity(x[0], S[0], t, sigma_min=sigma_min)
    scale = np.abs(exact).max()
    np.testing.assert_allclose(nw, exact, atol=0.03 * scale)


def test_velocity_per_point_times_and_limits():
    tasks, _, params = _mixture_sample(3, 10, 0)
    x = np.random.default_rng(0).normal(size=(1, 5, 3))
    t = np.array([[0.0, 0.25, 0.5, 0.75, 1.0]])
    u = tasks.velocity(x, t, params)
    for j in range(5):
        np.testing.assert_allclose(u[:, j], tasks.velocity(x[:, j : j + 1], t[0, j], params)[:, 0])
    # t = 0: x_t = x_0 is independent of x_1, so E[x_1 | x_t] is the mixture mean
    mean = np.einsum("bk,bkd->bd", params.weights, params.means)
    np.testing.assert_allclose(u[0, 0], mean[0] - 0.99 * x[0, 0], atol=1e-12)


# --------------------------------------------------------------------------------------------
# no leakage: fit(X) splits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_rows, m", [(2, 1), (30, 10), (30, 50), (5000, 50)])
def test_single_dataset_tasks_never_leak(n_rows, m):
    X = np.arange(float(n_rows))[:, None] * np.ones((1, 2))
    Ss, Qs = SingleDatasetTasks(X).sample_tasks(16, m, 40, random_state=0)
    k = min(m, n_rows - 1)
    assert Ss.shape == (16, k, 2) and Qs.shape == (16, 40, 2)
    for S, Q in zip(Ss, Qs, strict=True):
        assert len(np.unique(S[:, 0])) == k
        assert not np.isin(Q[:, 0], S[:, 0]).any()


def test_single_dataset_tasks_validation():
    with pytest.raises(ValueError, match="at least 2 rows"):
        SingleDatasetTasks(np.zeros((1, 2))).sample_tasks(1, 1, 1)
    with pytest.raises(ValueError, match="NaN"):
        SingleDatasetTasks(np.array([[0.0], [np.nan]])).sample_tasks(1, 1, 1)


def test_fit_xy_keeps_its_targets_and_never_leaks():
    """LearnedFlowSampler.fit(X, y) trains on FewShotClassTasks draws: a small class keeps its
    target count (targets drawn with replacement from its non-support rows), so no warning;
    ClassTasks, used directly, shrinks the targets with a warning and never leaks."""
    from skflow import NetworkOptions, SolverOptions, TrainingOptions
    from skflow.samplers.learned import LearnedFlowSampler

    X = np.column_stack([np.arange(60.0), np.zeros(60)])
    y = np.repeat([0, 1], [20, 40])
    lf = LearnedFlowSampler(
        NetworkOptions(d_model=8, n_heads=2, n_layers=1),
        training=TrainingOptions(max_iter=1, batch_tasks=2, support_size=8, n_targets=30),
        solver=SolverOptions(n_steps=2),
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        lf.fit(X, y)
    with pytest.warns(UserWarning, match=r"class 0 has 20 rows .*8 \+ 30.*n_query=12"):
        Ss, Qs = ClassTasks(X, y).sample_tasks(40, 8, 30, random_state=0)
    for S, Q in zip(Ss, Qs, strict=True):
        assert not np.isin(Q[:, 0], S[:, 0]).any()


def test_few_shot_class_tasks_never_use_support_rows_as_targets():
    """FewShotClassTasks (the tasks of ``fit(X, y)``): targets drawn with replacement among
    the class's non-support rows only (issue 34), and every non-support row can be drawn."""
    from skflow.tasks import FewShotClassTasks

    X = np.column_stack([np.arange(60.0), np.zeros(60)])  # row id in the first column
    y = np.repeat([0, 1, 2], [8, 12, 40])
    Ss, Qs = FewShotClassTasks(X, y).sample_tasks(200, 5, 30, random_state=0)
    seen = set()
    for S, Q in zip(Ss, Qs, strict=True):
        assert not np.isin(Q[:, 0], S[:, 0]).any()
        assert (
            len(np.unique(y[S[:, 0].astype(int)]))
            == 1
            == len(np.unique(y[np.r_[S[:, 0], Q[:, 0]].astype(int)]))
        )  # one class per task
        seen.update(Q[:, 0].astype(int).tolist())
    assert seen == set(range(60))  # each row is a non-support row of some task


@pytest.mark.exactness
@pytest.mark.parametrize("name", ["rotate", "recentre"])
def test_transformed_tasks_are_the_transform_of_the_source_tasks(name):
    """RotatedTasks / RecentredTasks draw the source's tasks, then map them, from one stream."""
    from skflow.tasks import RecentredTasks, RotatedTasks, recentre_tasks, rotate_tasks

    wrapper, transform = {
        "rotate": (RotatedTasks, rotate_tasks),
        "recentre": (RecentredTasks, recentre_tasks),
    }[name]
    source = GaussianMixtureTasks(3)
    rng = np.random.default_rng(0)
    S, Q = source.sample_tasks(6, 5, 4, random_state=rng)
    want_S, want_Q = transform(S, Q, rng)
    got_S, got_Q = wrapper(source).sample_tasks(6, 5, 4, random_state=np.random.default_rng(0))
    np.testing.assert_array_equal(got_S, want_S)
    np.testing.assert_array_equal(got_Q, want_Q)
    assert not np.allclose(got_S, S)  # the tasks did move
    assert wrapper(source).n_features == 3
