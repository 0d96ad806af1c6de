"""The one answer for labelled rows (skflow.samplers.few_shot) and the row validation of the
selection it shares with BestClassicalSampler (skflow.samplers.classical)."""

import pickle
import warnings
from unittest import mock

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import skflow
from skflow.samplers import (
    BestClassicalSampler,
    FewShotSampler,
    LearnedFlowSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from skflow.samplers.classical import validation_folds
from skflow.samplers.options import TrainingOptions
from skflow.tasks import HierarchicalTasks


def _classes(n_classes=6, n_rows=12, d=2, seed=0):
    return HierarchicalTasks(d).make_classes(n_classes, n_rows, random_state=seed)


@parametrize_with_checks([FewShotSampler(budget_s=0, support_size=2, n_splits=2, random_state=0)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_exported_at_top_level():
    assert skflow.FewShotSampler is FewShotSampler and "FewShotSampler" in skflow.__all__


@pytest.mark.parametrize("n_rows", [6, 7, 11])
def test_row_folds_partition_every_class(n_rows):
    """Each row is held out by exactly one fold; every class is split as evenly as it can be,
    so that every fold scores on rows of every class."""
    y = np.repeat([3, 5, 9], n_rows)
    folds = validation_folds(y, 2, "rows", np.random.RandomState(0))
    held = np.array([h for h, _ in folds])
    np.testing.assert_array_equal(held.sum(axis=0), np.ones(len(y)))
    for h, classes in folds:
        counts = [int(np.sum(h & (y == c))) for c in (3, 5, 9)]
        assert max(counts) - min(counts) <= 1 and abs(counts[0] - n_rows / 2) <= 0.5
        np.testing.assert_array_equal(classes, [3, 5, 9])


def test_class_folds_hold_whole_classes():
    y = np.repeat(np.arange(5), 4)
    for held, classes in validation_folds(y, 2, "classes", np.random.RandomState(0)):
        np.testing.assert_array_equal(held, np.isin(y, classes))


def test_row_folds_refuse_classes_too_small_to_validate():
    with pytest.raises(ValueError, match=r"validation='rows' needs some class with at least 9"):
        validation_folds(np.repeat([0, 1], 5), 3, "rows", np.random.RandomState(0))


class _Spy(LedoitWolfSampler):
    """LedoitWolf that records, per support it generates from, whether a row of it was in its
    fit and whether the support's class was."""

    records: list = []
    label_of: dict = {}

    def fit(self, X, y=None):
        super().fit(X, y)
        self.seen_rows_ = {tuple(r) for r in np.asarray(X)}
        self.seen_classes_ = set(np.asarray(y).tolist())
        return self

    def sample(self, n_samples=1, support=None, random_state=None):
        if support is not None and self.label_of:
            rows = [tuple(r) for r in np.asarray(support)]
            seen_row = any(r in self.seen_rows_ for r in rows)
            self.records.append((seen_row, self.label_of[rows[0]] in self.seen_classes_))
        return super().sample(n_samples, support=support, random_state=random_state)


@pytest.mark.parametrize("validation", ["classes", "rows"])
def test_selection_scores_on_held_rows_of_the_right_classes(validation):
    """``"rows"``: supports are rows the candidate was not fitted on, of classes it was fitted
    on (new rows of known classes); ``"classes"``: of classes it was not fitted on."""
    X, y = _classes(n_classes=6, n_rows=12)
    _Spy.records.clear()
    _Spy.label_of = {tuple(r): c for r, c in zip(X, y, strict=True)}
    try:
        BestClassicalSampler(
            [_Spy(), PooledGaussianSampler()], support_size=3, n_splits=2, n_repeats=1,
            n_generated=10, validation=validation, random_state=0,
        ).fit(X, y)  # fmt: skip
    finally:
        label_of, _Spy.label_of = _Spy.label_of, {}
    assert len(_Spy.records) >= 6 and label_of
    seen_rows, seen_classes = np.array(_Spy.records).T
    assert not seen_rows.any()
    assert seen_classes.all() if validation == "rows" else not seen_classes.any()


def test_row_validation_prefers_what_serves_known_classes():
    """Classes whose rows have class-specific shapes: with supports of known classes the
    choice may use the training classes; both validations choose a non-copier."""
    X, y = _classes(n_classes=6, n_rows=20)
    kw = dict(support_size=5, n_splits=2, n_repeats=1, random_state=0)
    for validation in ("classes", "rows"):
        best = BestClassicalSampler(validation=validation, **kw).fit(X, y)
        assert best.validation_memorization_[best.best_index_] >= 0.5


def _fit_counting_learned(estimator, X, y):
    calls = []
    original = LearnedFlowSampler.fit

    def record(self, *args, **kwargs):
        calls.append(self.training.max_time)
        return original(self, *args, **kwargs)

    with mock.patch.object(LearnedFlowSampler, "fit", autospec=True, side_effect=record):
        estimator.fit(X, y)
    return calls


def test_learned_candidate_shares_the_budget():
    """One learned fit per fold, the folds sharing half of ``budget_s``, and one more where
    it is chosen, within the other half: the training stays within the stated budget."""
    X, y = _classes(n_classes=6, n_rows=10)
    few = FewShotSampler(budget_s=0.8, support_size=3, n_splits=2, n_repeats=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calls = _fit_counting_learned(few, X, y)
    chosen_learned = "LearnedFlowSampler" in few.chosen_.values()
    assert len(calls) == 2 + chosen_learned
    np.testing.assert_allclose(calls, [0.2, 0.2, 0.4][: len(calls)], rtol=0, atol=1e-12)
    assert few.learned_max_time_ == pytest.approx({"fold": 0.2, "refit": 0.4})
    assert few.validation_mmd2_.shape == (12,)  # eleven default candidates and the network
    assert few.selection_reasons_[-1].split(":")[0] in ("chosen", "not chosen")
    assert few.training_cpu_seconds_ > 0 and few.fit_seconds_ > 0


def test_refit_of_the_learned_choice_gets_the_refit_share():
    """Where the network is chosen, the model of use is trained within half the budget (the
    folds' share is the other half), and it is the estimator that serves the support."""
    X, y = _classes(n_classes=6, n_rows=10)
    few = FewShotSampler(budget_s=0.8, support_size=3, n_splits=2, n_repeats=1, random_state=0)
    learned = LearnedFlowSampler(training=TrainingOptions(max_time=0.2, max_iter=3))
    refit = few._refit(learned, X, y)
    assert refit is not learned and refit.training.max_time == pytest.approx(0.4)
    assert refit.training.max_iter == 3 and learned.training.max_time == 0.2


def test_zero_budget_leaves_the_network_out():
    X, y = _classes(n_classes=6, n_rows=10)
    few = FewShotSampler(budget_s=0, support_size=[3, 5], n_splits=2, n_repeats=1, random_state=0)
    calls = _fit_counting_learned(few, X, y)
    assert calls == [] and few.learned_max_time_ is None
    assert few.validation_mmd2_.shape == (2, 11)
    assert sorted(few.chosen_) == [3, 5]
    for k, m in enumerate(few.support_sizes_):
        assert few.chosen_[int(m)] == type(few.best_estimators_[k]).__name__
        assert few.validation_memorization_[k, few.best_index_[k]] >= 0.5


def test_new_rows_uses_row_folds():
    """``new="rows"`` is the row validation (supports of classes it was fitted on)."""
    X, y = _classes(n_classes=4, n_rows=12)
    few = FewShotSampler("rows", budget_s=0, support_size=3, n_splits=2, random_state=0)
    assert few.validation == "rows"
    with mock.patch("skflow.samplers.classical.validation_folds", wraps=validation_folds) as folds:
        few.fit(X, y)
    assert folds.call_args.args[2] == "rows"
    assert FewShotSampler().validation == "classes"


def test_same_seed_same_samples_and_pickle():
    X, y = _classes(n_classes=6, n_rows=10)
    kw = dict(budget_s=0, support_size=3, n_splits=2, n_repeats=1, random_state=0)
    a, b = FewShotSampler(**kw).fit(X, y), clone(FewShotSampler(**kw)).fit(X, y)
    S = X[:3] + 5.0
    # same kernels on the same arrays: bit-identical
    np.testing.assert_array_equal(
        a.sample(8, support=S, random_state=1), b.sample(8, support=S, random_state=1)
    )
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(
        a.sample(8, support=S, random_state=2), c.sample(8, support=S, random_state=2)
    )


def test_failed_fit_leaves_the_estimator_as_it_was():
    X, y = _classes(n_classes=6, n_rows=10)
    few = FewShotSampler(budget_s=0, support_size=3, n_splits=2, n_repeats=1, random_state=0)
    boom = mock.patch.object(BestClassicalSampler, "_fold_scores", side_effect=KeyboardInterrupt)
    with boom, pytest.raises(KeyboardInterrupt):
        few.fit(X, y)
    with pytest.raises(NotFittedError):
        few.sample(2, support=X[:3])
    few.fit(X, y)
    before = few.sample(5, support=X[:3], random_state=0)
    with boom, pytest.raises(KeyboardInterrupt):
        few.fit(X[:40], y[:40])
    np.testing.assert_array_equal(few.sample(5, support=X[:3], random_state=0), before)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"new": "tasks"}, "new"),
        ({"budget_s": -1.0}, "budget_s"),
        ({"n_splits": 1}, "n_splits"),
        ({"support_size": 0}, "support_size"),
    ],
)
def test_invalid_parameters_are_named(params, match):
    X, y = _classes(n_classes=4, n_rows=6)
    with pytest.raises(ValueError, match=match):
        FewShotSampler(**params).fit(X, y)


def test_each_chosen_candidate_is_refitted_through_the_refit_hook():
    """The selection refits its choices by ``_refit`` (what gives the network of
    ``FewShotSampler`` its refit share), once per distinct choice."""
    seen = []

    class Recording(BestClassicalSampler):
        def _refit(self, cand, X, y):
            seen.append(type(cand).__name__)
            return super()._refit(cand, X, y)

    X, y = _classes(n_classes=6, n_rows=10)
    candidates = [LedoitWolfSampler(), PooledGaussianSampler()]
    best = Recording(candidates, support_size=[3, 5], n_splits=2, n_repeats=1, random_state=0)
    best.fit(X, y)
    chosen = [type(e).__name__ for e in best.best_estimators_]
    assert sorted(seen) == sorted(set(chosen)) and len(seen) == len(set(chosen))
