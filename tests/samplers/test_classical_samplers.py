"""Classical few-shot arms (skflow.samplers.classical): estimates, Bayes limit, selection."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.covariance import LedoitWolf
from sklearn.exceptions import FitFailedWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import skflow
from skflow.exceptions import MemorizationWarning
from skflow.samplers import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from skflow.tasks import HierarchicalTasks

T3 = np.array([[4.0, 1.0, 0.5], [1.0, 2.0, -0.3], [0.5, -0.3, 1.0]])
W3 = np.array([[1.0, 0.4, 0.0], [0.4, 0.5, 0.1], [0.0, 0.1, 0.2]])
MU3 = np.array([1.0, -2.0, 0.5])
FAMILY = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3)

ARMS = [
    LedoitWolfSampler(random_state=0),
    PooledGaussianSampler(random_state=0),
    EmpiricalBayesGaussianSampler(random_state=0),
    BICGaussianMixtureSampler(random_state=0),
]


@parametrize_with_checks(
    [
        *ARMS,
        BestClassicalSampler([PooledGaussianSampler()], support_size=2, random_state=0),
        BestClassicalSampler(
            [PooledGaussianSampler(), PooledGaussianSampler(random_state=1)],
            support_size=(2, 5),
            random_state=0,
        ),
    ],
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_top_level_exports():
    for name in ("LedoitWolfSampler", "EmpiricalBayesGaussianSampler", "BestClassicalSampler"):
        assert name in skflow.__all__ and hasattr(skflow, name)


def test_pooled_covariance_is_the_within_class_scatter():
    X, y = FAMILY.make_classes(6, 5, random_state=0)
    s = PooledGaussianSampler().fit(X, y)
    resid = np.concatenate([X[y == c] - X[y == c].mean(0) for c in range(6)])
    np.testing.assert_allclose(s.within_covariance_, resid.T @ resid / (30 - 6), rtol=1e-12)


def test_empirical_bayes_with_true_hyperparameters_is_the_bayes_predictive():
    X, y = FAMILY.make_classes(5, 10, random_state=0)
    eb = EmpiricalBayesGaussianSampler().fit(X, y)
    eb.prior_mean_, eb.prior_covariance_, eb.within_covariance_ = MU3, T3, W3
    for m in (1, 5, 20):
        S, _ = FAMILY.sample_task(m, 0, random_state=m)
        mean, cov = eb.predictive_moments(S)
        ref_mean, ref_cov = FAMILY.predictive_moments(S)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-12)


def test_empirical_bayes_estimates_converge_to_the_family():
    # 3 rows per class: the class means' spread holds W / 3 beside T, which fit removes
    X, y = FAMILY.make_classes(20000, 3, random_state=1)
    eb = EmpiricalBayesGaussianSampler().fit(X, y)
    np.testing.assert_allclose(eb.prior_mean_, MU3, atol=0.1)
    np.testing.assert_allclose(eb.prior_covariance_, T3, atol=0.15)
    np.testing.assert_allclose(eb.within_covariance_, W3, atol=0.02)


def test_empirical_bayes_prior_covariance_is_psd_with_few_classes():
    X, y = HierarchicalTasks(5, prior_cov=0.01).make_classes(3, 4, random_state=0)
    eb = EmpiricalBayesGaussianSampler(random_state=0).fit(X, y)
    assert np.linalg.eigvalsh(eb.prior_covariance_).min() > -1e-10
    assert np.all(np.isfinite(eb.sample(10, support=X[:2])))
    with pytest.raises(ValueError, match="at least 2 classes"):
        EmpiricalBayesGaussianSampler().fit(X[:4])


def test_ledoit_wolf_moments_and_sample_moments():
    S, _ = FAMILY.sample_task(8, 0, random_state=0)
    s = LedoitWolfSampler(random_state=0).fit(S)
    X = s.sample(40000)
    np.testing.assert_allclose(X.mean(0), S.mean(0), atol=0.03)
    np.testing.assert_allclose(np.cov(X.T), LedoitWolf().fit(S).covariance_, atol=0.05)
    # one row has no scale (issue 63): copies of it, with a warning naming the fix
    with pytest.warns(MemorizationWarning, match="no spread"):
        np.testing.assert_array_equal(s.sample(3, support=S[:1]), np.repeat(S[:1], 3, axis=0))


def test_gmm_bic_uses_richer_models_only_where_m_allows():
    rng = np.random.default_rng(0)
    d = 4
    s = BICGaussianMixtureSampler(random_state=0).fit(rng.normal(size=(10, d)))
    two = np.concatenate([rng.normal(size=(40, d)), 10 + rng.normal(size=(40, d))])
    gm = s.select(two)
    assert gm.n_components == 2
    small = s.select(two[::16][:3])  # 3 rows (12 numbers): no full covariance (14), k = 1
    assert small.covariance_type != "full" and small.n_components == 1


def test_batched_sample_equals_loop_of_draws_and_dtype():
    X, y = FAMILY.make_classes(8, 6, random_state=0)
    S, _ = FAMILY.sample_tasks(3, 5, 0, random_state=1)
    for arm in ARMS:
        s = arm.fit(X, y)
        batch = s.sample(7, support=S, random_state=3)
        assert batch.shape == (3, 7, 3)
        np.testing.assert_array_equal(batch, s.sample(7, support=S, random_state=3))
        assert s.sample(2, support=S[0].astype(np.float32)).dtype == np.float32
        again = pickle.loads(pickle.dumps(s)).sample(7, support=S, random_state=3)
        np.testing.assert_array_equal(batch, again)


def test_labelled_fit_has_no_default_support_and_scores_few_shot():
    X, y = FAMILY.make_classes(8, 10, random_state=0)
    s = PooledGaussianSampler(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="no default support"):
        s.sample(3)
    assert np.isfinite(s.score(X, y))
    with pytest.raises(ValueError, match="features"):
        s.sample(3, support=np.zeros((4, 2)))


def test_best_classical_picks_by_training_classes_and_refits():
    """Classes share a strongly anisotropic covariance: pooling beats the support's own."""
    tasks = HierarchicalTasks(4, prior_cov=9.0, within_cov=[1.0, 1.0, 0.01, 0.01])
    X, y = tasks.make_classes(12, 25, random_state=0)
    best = BestClassicalSampler(
        [LedoitWolfSampler(), PooledGaussianSampler()], support_size=3, random_state=0
    ).fit(X, y)
    assert best.best_index_ == 1 and best.validation_mmd2_.shape == (2,)
    assert best.validation_mmd2_[1] < best.validation_mmd2_[0]
    np.testing.assert_allclose(
        best.best_estimator_.within_covariance_,
        PooledGaussianSampler().fit(X, y).within_covariance_,
    )
    assert best.sample(4, support=X[:3], random_state=0).shape == (4, 4)


def test_best_classical_default_candidates_include_the_plugin():
    X, y = FAMILY.make_classes(6, 12, random_state=0)
    best = BestClassicalSampler(support_size=4, n_splits=3, n_repeats=1, n_generated=20)
    best.set_params(random_state=0).fit(X, y)
    assert best.validation_mmd2_.shape == (11,)
    assert np.all(np.isfinite(best.validation_mmd2_))
    # seven distinct plug-ins: fit(X, y) must not replace each one's sigma_min by its own choice
    assert len(np.unique(best.validation_mmd2_[4:])) == 7


@pytest.mark.parametrize(
    "estimator",
    [
        BICGaussianMixtureSampler(covariance_types=("round",)),
        BICGaussianMixtureSampler(max_components=0),
        BestClassicalSampler(candidates=[object()]),
        BestClassicalSampler(n_splits=1),
        BestClassicalSampler(support_size=[]),
        BestClassicalSampler(support_size=[4, 0]),
        BestClassicalSampler(support_size=2.5),
        BestClassicalSampler(support_size=[True, 3]),
    ],
)
def test_bad_parameters_raise(estimator):
    X, y = FAMILY.make_classes(4, 6, random_state=0)
    with pytest.raises(ValueError):
        estimator.fit(X, y)


def _moment_prior(means, counts, W, between):
    """T of the documented method of moments: whitened by W, noise removed, clipped at 0."""
    vals, vecs = np.linalg.eigh(W)
    root = vecs * np.sqrt(vals)
    inv = np.linalg.inv(root)
    lam, U = np.linalg.eigh(inv @ between @ inv.T)
    lam = np.clip(lam - np.mean(1.0 / counts), 0.0, None)
    return (root @ U) * lam @ (root @ U).T


def test_empirical_bayes_shrinkage_of_the_class_means_covariance():
    """Default: Ledoit-Wolf estimate of Cov(class means) (unbiased scale); None: np.cov."""
    from sklearn.covariance import LedoitWolf

    fam = HierarchicalTasks(6, prior_cov=np.diag([4.0, 2.0, 1.0, 0.5, 0.2, 0.1]), within_cov=0.3)
    X, y = fam.make_classes(12, 8, random_state=0)
    means = np.stack([X[y == c].mean(0) for c in range(12)])
    resid = np.concatenate([X[y == c] - means[c] for c in range(12)])
    W, counts = resid.T @ resid / (96 - 12), np.full(12, 8)
    lw = LedoitWolf().fit(means).covariance_ * 12 / 11
    shrunk = EmpiricalBayesGaussianSampler().fit(X, y).prior_covariance_
    plain = EmpiricalBayesGaussianSampler(shrinkage=None).fit(X, y).prior_covariance_
    np.testing.assert_allclose(shrunk, _moment_prior(means, counts, W, lw), atol=1e-10)
    np.testing.assert_allclose(plain, _moment_prior(means, counts, W, np.cov(means.T)), atol=1e-10)
    assert not np.allclose(shrunk, plain)


@pytest.mark.parametrize(
    "arm", [LedoitWolfSampler, PooledGaussianSampler, EmpiricalBayesGaussianSampler]
)
def test_predictive_moments_batch_matches_one_support(classes, arm):
    X, y = classes
    est = arm().fit(X, y)
    batch = np.stack([X[y == 0][:6], X[y == 1][:6]])
    means, covs = est.predictive_moments(batch)
    for b in range(2):
        mean, cov = est.predictive_moments(batch[b])
        np.testing.assert_allclose(means[b], mean)
        np.testing.assert_allclose(covs[b], cov)


def test_predictive_moments_refused_without_a_single_gaussian(classes):
    X, y = classes
    with pytest.raises(TypeError, match="no single Gaussian"):
        BICGaussianMixtureSampler().fit(X, y).predictive_moments(X[:5])
    plugin = skflow.NWFlowSampler(sigma_min=0.1, sigma_min_search=None)
    best = BestClassicalSampler([plugin], support_size=5, n_splits=2, n_repeats=1, random_state=0)
    with pytest.raises(TypeError, match="chosen for supports of 5 rows"):
        best.fit(X, y).predictive_moments(X[:5])


def test_best_classical_moments_are_the_chosen_gaussians(classes):
    X, y = classes
    best = BestClassicalSampler(
        skflow.samplers.classical.gaussian_candidates(), support_size=5, random_state=0
    ).fit(X, y)
    mean, cov = best.predictive_moments(X[:5])
    want = best.best_estimator_.predictive_moments(X[:5])
    np.testing.assert_allclose(mean, want[0])
    np.testing.assert_allclose(cov, want[1])


def _own_covariance_classes(n_classes=12, n_rows=80, seed=0):
    """Classes whose anisotropic covariances are perturbations of a shared one: pooling is
    right for a tiny support (whose own covariance is noise), the support's own for a large
    one (it sees its class's deviation from the pool)."""
    rng = np.random.default_rng(seed)
    shared, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    X, y = [], []
    for c in range(n_classes):
        q, _ = np.linalg.qr(shared + 0.25 * rng.standard_normal((3, 3)))
        root = q * np.array([3.0, 0.3, 0.03])
        X.append(5.0 * rng.standard_normal(3) + rng.standard_normal((n_rows, 3)) @ root.T)
        y.append(np.full(n_rows, c))
    return np.concatenate(X), np.concatenate(y)


def test_best_classical_chooses_per_support_size():
    X, y = _own_covariance_classes()
    arms = [LedoitWolfSampler(), PooledGaussianSampler()]
    best = BestClassicalSampler(arms, support_size=[60, 3], n_splits=3, random_state=0).fit(X, y)
    assert best.support_sizes_.tolist() == [3, 60]
    assert best.validation_mmd2_.shape == (2, 2)
    assert best.best_index_.tolist() == [1, 0]  # pooled for 3 rows, the support's own for 60
    assert isinstance(best.best_estimators_[0], PooledGaussianSampler)
    assert not hasattr(best, "best_estimator_")
    # a support is generated by the choice for the nearest size on a log scale: 13 rows are
    # nearer 3 than 60 (linearly they are not), 14 nearer 60
    assert best.chosen_estimator(13) is best.best_estimators_[0]
    assert best.chosen_estimator(14) is best.best_estimators_[1]
    for m in (3, 14, 60):
        S = X[y == 0][:m]
        seed = np.random.RandomState(7).randint(2**31 - 1)
        want = best.chosen_estimator(m).sample(4, support=S, random_state=seed)
        np.testing.assert_array_equal(best.sample(4, support=S, random_state=7), want)
        np.testing.assert_allclose(
            best.predictive_moments(S)[1], best.chosen_estimator(m).predictive_moments(S)[1]
        )


def test_best_classical_one_size_in_a_list_is_the_int_choice():
    X, y = _own_covariance_classes(n_classes=6, n_rows=20)
    arms = [LedoitWolfSampler(), PooledGaussianSampler()]
    one = BestClassicalSampler(arms, support_size=4, n_splits=3, random_state=0).fit(X, y)
    listed = BestClassicalSampler(arms, support_size=[4], n_splits=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(listed.validation_mmd2_, one.validation_mmd2_[None])
    assert listed.best_index_.tolist() == [one.best_index_]


def test_best_classical_cross_fits_a_learned_candidate():
    """A learned sampler is one more candidate: cloned, trained per fold on the other folds'
    classes, scored like the others, refitted on every class where it is chosen."""
    X, y = FAMILY.make_classes(6, 20, random_state=0)
    net = skflow.LearnedFlowSampler(
        skflow.NetworkOptions(d_model=16, n_heads=2, n_layers=1),
        training=skflow.TrainingOptions(max_iter=3, batch_tasks=4),
        random_state=0,
    )
    params = dict(support_size=[3, 10], n_splits=3, n_repeats=1, n_generated=20, random_state=0)
    best = BestClassicalSampler([net, PooledGaussianSampler()], **params).fit(X, y)
    assert not hasattr(net, "model_")  # the candidate given is cloned, never fitted
    assert best.validation_mmd2_.shape == (2, 2)
    assert np.all(np.isfinite(best.validation_mmd2_))
    again = BestClassicalSampler([net, PooledGaussianSampler()], **params).fit(X, y)
    np.testing.assert_array_equal(again.validation_mmd2_, best.validation_mmd2_)
    alone = BestClassicalSampler([net], **params).fit(X, y)  # chosen: refitted on all
    for m in (3, 10):
        chosen = alone.chosen_estimator(m)
        assert isinstance(chosen, skflow.LearnedFlowSampler) and chosen is not net
        assert chosen.n_iter_ == 3 and chosen.n_features_in_ == 3
        assert alone.sample(5, support=X[y == 0][:m], random_state=0).shape == (5, 3)


def test_best_classical_on_two_classes_skips_the_arm_that_needs_more():
    """Binary data: each fold leaves one training class, on which empirical Bayes cannot
    estimate a law of class means. It is named in a warning and never chosen; the others are
    scored as usual."""
    X, y = FAMILY.make_classes(2, 30, random_state=0)
    with pytest.warns(FitFailedWarning, match="EmpiricalBayesGaussianSampler.*2 of 2"):
        best = BestClassicalSampler(support_size=[3, 10], random_state=0).fit(X, y)
    names = [type(c).__name__ for c in skflow.samplers.classical.default_candidates()]
    failed = np.isinf(best.validation_mmd2_).all(axis=0)
    assert [n for n, f in zip(names, failed, strict=True) if f] == ["EmpiricalBayesGaussianSampler"]
    assert np.isfinite(best.validation_mmd2_[:, ~failed]).all()
    assert not any(isinstance(e, EmpiricalBayesGaussianSampler) for e in best.best_estimators_)
    assert best.sample(4, support=X[:3], random_state=0).shape == (4, 3)
    with pytest.warns(FitFailedWarning), pytest.raises(ValueError, match="no candidate"):
        BestClassicalSampler([EmpiricalBayesGaussianSampler()], random_state=0).fit(X, y)


def _two_blob_classes(n_classes=12, n_rows=40, seed=0):
    """Classes of two tight blobs: a plug-in with a tiny bandwidth wins median-bandwidth
    MMD² by copying its support (the median kernel sees the two blobs, not the copies)."""
    rng = np.random.default_rng(seed)
    centres = 6 * rng.normal(size=(n_classes, 2, 2))
    pick = rng.integers(0, 2, size=(n_classes, n_rows))
    rows = np.take_along_axis(centres, pick[..., None].repeat(2, -1), 1)
    X = (rows + 0.3 * rng.normal(size=(n_classes, n_rows, 2))).reshape(-1, 2)
    return X, np.repeat(np.arange(n_classes), n_rows)


def _copier_and_smoother():
    return [
        skflow.NWFlowSampler(sigma_min=0.01, sigma_min_search=None),  # copies its support
        LedoitWolfSampler(),
        skflow.NWFlowSampler(sigma_min=0.3, sigma_min_search=None),
    ]


def test_best_classical_never_chooses_a_copier():
    """The copier wins on median-bandwidth MMD² (the old rule picks it); the copy-aware
    default refuses it for its validation memorisation ratio and says why."""
    X, y = _two_blob_classes()
    kw = dict(support_size=20, n_splits=3, random_state=0)
    old = BestClassicalSampler(_copier_and_smoother(), criterion="mmd2", **kw).fit(X, y)
    assert old.best_index_ == 0 and old.validation_memorization_[0] < 0.5
    best = BestClassicalSampler(_copier_and_smoother(), **kw).fit(X, y)
    assert best.best_index_ != 0
    assert best.validation_memorization_[best.best_index_] >= 0.5
    assert "memorisation" in best.selection_reasons_[0]
    assert best.selection_reasons_[best.best_index_].startswith("chosen")


def test_best_classical_scores_on_held_out_classes_only():
    """Every support a candidate generates from during the selection comes from classes it
    was not fitted on (scoring on the training classes would reward memorising them)."""
    X, y = _two_blob_classes(n_classes=6, n_rows=12)
    _HeldOutSpy.overlaps.clear()
    BestClassicalSampler(
        [_HeldOutSpy(), LedoitWolfSampler()],
        support_size=4,
        n_splits=3,
        n_repeats=1,
        n_generated=10,
        random_state=0,
    ).fit(X, y)
    assert len(_HeldOutSpy.overlaps) > 0
    assert not any(_HeldOutSpy.overlaps)


class _HeldOutSpy(LedoitWolfSampler):
    """LedoitWolf that records, per support it samples from, whether any row was in its fit."""

    overlaps: list = []

    def fit(self, X, y=None):
        super().fit(X, y)
        self.seen_rows_ = {tuple(r) for r in np.asarray(X)}
        return self

    def sample(self, n_samples=1, support=None, random_state=None):
        if support is not None:
            self.overlaps.append(any(tuple(r) in self.seen_rows_ for r in np.asarray(support)))
        return super().sample(n_samples, support=support, random_state=random_state)
