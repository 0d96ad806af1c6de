"""The metrics' messages say what is wrong and name the fix (issue 63).

Every public metric refuses a SciPy sparse input with a ``TypeError`` that names it and the
fix (``.toarray()``): they share :func:`skflow.metrics._inputs.refuse_sparse`. Constant rows
in :func:`~skflow.metrics.nw_weight_correlation` are NaN with a
:class:`scipy.stats.ConstantInputWarning` (as ``scipy.stats.pearsonr``), rows a mask leaves
fewer than 2 entries are NaN silently (the caller's choice).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import sparse
from scipy.stats import ConstantInputWarning

from skflow import metrics


@pytest.fixture(scope="module")
def samples():
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, 3)), rng.normal(size=(30, 3)), rng.normal(size=(30, 3))


def _calls(G, S, R):
    """Every public metric of samples, called with the given arrays."""
    return {
        "mmd2": lambda: metrics.mmd2(G, R),
        "mmd2_test": lambda: metrics.mmd2_test(G, R, n_permutations=9, random_state=0),
        "multiscale_mmd2": lambda: metrics.multiscale_mmd2(G, R),
        "energy_distance": lambda: metrics.energy_distance(G, R),
        "classifier_two_sample_test": lambda: metrics.classifier_two_sample_test(G, R),
        "precision_recall": lambda: metrics.precision_recall(G, R),
        "distance_to_closest_record": lambda: metrics.distance_to_closest_record(G, S),
        "memorization_ratio": lambda: metrics.memorization_ratio(G, S, R),
        "metric_panel": lambda: metrics.metric_panel(G, S, R, random_state=0),
    }


NAMES = sorted(_calls(None, None, None))
#: The samples each metric takes, by position in (generated, support, reference).
USES = {name: (0, 2) for name in NAMES}
USES.update(distance_to_closest_record=(0, 1), memorization_ratio=(0, 1, 2), metric_panel=(0, 1, 2))
CASES = [(name, position) for name in NAMES for position in USES[name]]


@pytest.mark.parametrize(("name", "position"), CASES)
def test_every_metric_refuses_a_sparse_sample_naming_the_fix(samples, name, position):
    arrays = list(samples)
    arrays[position] = sparse.csr_matrix(arrays[position])
    with pytest.raises(TypeError, match=r"is a SciPy sparse matrix \(csr_matrix\).*toarray\(\)"):
        _calls(*arrays)[name]()


@pytest.mark.parametrize("name", NAMES)
def test_the_dense_samples_of_the_same_call_work(samples, name):
    _calls(*samples)[name]()  # the refusal above is about sparsity, not these samples


def test_sparse_weights_and_attention_are_refused(samples):
    W = sparse.csr_matrix(np.full((3, 4), 0.25))
    with pytest.raises(TypeError, match=r"weights is a SciPy sparse matrix.*toarray"):
        metrics.effective_sample_size(W)
    with pytest.raises(TypeError, match=r"attention is a SciPy sparse matrix.*toarray"):
        metrics.nw_weight_correlation(W, W.toarray())
    with pytest.raises(TypeError, match=r"nw_weights is a SciPy sparse matrix.*toarray"):
        metrics.nw_weight_correlation(W.toarray(), W)


def test_constant_rows_warn_naming_why_and_are_nan():
    att = np.array([[0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    nw = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.1, 0.1, 0.7], [0.1, 0.2, 0.3, 0.4]])
    for method in ("spearman", "pearson"):
        with pytest.warns(ConstantInputWarning, match=r"1 of 3 rows .* constant.*no correlation"):
            res = metrics.nw_weight_correlation(att, nw, method=method)
        assert np.isnan(res.per_row[0]) and np.isfinite(res.per_row[1:]).all()


def test_rows_without_constant_entries_do_not_warn():
    att = np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = metrics.nw_weight_correlation(att, att[::-1])
    assert np.isfinite(res.per_row).all()


def test_rows_a_mask_leaves_one_entry_are_nan_without_a_warning():
    att = np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    mask = np.array([[True, True, True, True], [True, False, False, False]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = metrics.nw_weight_correlation(att, att, mask=mask)
    assert res.per_row[0] == pytest.approx(1.0) and np.isnan(res.per_row[1])
    # a row the mask keeps whole but that is constant there still warns
    flat = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    with pytest.warns(ConstantInputWarning, match="1 of 2 rows"):
        metrics.nw_weight_correlation(flat, att, mask=np.ones_like(mask))
