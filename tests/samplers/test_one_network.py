"""A fitted :class:`~skflow.LearnedFlowSampler` is one network: the fit's time budget, and
what a sampler stored by a former version with a second network becomes."""

import pickle

import numpy as np
import pytest

from skflow import LearnedFlowSampler, NetworkOptions, TrainingOptions
from skflow.samplers import _meta_training
from skflow.samplers._fitted import fitted_config, restore
from skflow.samplers.learned import _with_budget
from skflow.tasks import HierarchicalTasks


def tiny_fit(**training):
    """The parameters of a tiny network's short training (``training``: more fields of its
    TrainingOptions)."""
    training = TrainingOptions(batch_tasks=2, n_targets=4, **training)
    return dict(network=NetworkOptions(d_model=8, n_layers=1), training=training, random_state=0)


def test_max_time_is_the_budget_of_the_whole_fit(monkeypatch):
    """The training loop gets what the preparation (tasks, network, predictive frame) left of
    ``max_time``; without ``max_time`` no clock is read into the run."""
    params = _meta_training.TrainingParams.of(
        LearnedFlowSampler(training=TrainingOptions(max_time=10.0))
    )
    assert _with_budget(params, 4.0).max_time == 6.0 and params.max_time == 10.0
    assert _with_budget(params, 12.0).max_time == 0.0
    assert _with_budget(_meta_training.TrainingParams(max_time=None), 3.0).max_time is None
    budgets, train = [], _meta_training.TrainingRun.train

    def spy(run):
        budgets.append(run.params.max_time)
        return train(run)

    monkeypatch.setattr(_meta_training.TrainingRun, "train", spy)
    fam = HierarchicalTasks(2, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(12, 20, random_state=0)
    LearnedFlowSampler(**tiny_fit(max_iter=2, max_time=10.0)).fit(X, y)
    LearnedFlowSampler(**tiny_fit(max_iter=2)).fit(X, y)
    assert len(budgets) == 2 and 0.0 < budgets[0] < 10.0 and budgets[1] is None


@pytest.mark.exactness
def test_a_former_two_network_state_loads_with_its_main_network_and_a_warning():
    """A pickle of a former version could hold a second, support-frame sampler for some
    support sizes; it loads with the main network serving every size, and says so."""
    fam = HierarchicalTasks(2, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(12, 20, random_state=0)
    est = LearnedFlowSampler(**tiny_fit(max_iter=2)).fit(X, y)
    config, state = fitted_config(est)
    config["fitted"]["support_frame_sampler_"] = est  # as a former version stored it
    config["fitted"]["frame_by_size_"] = {"sizes": [2, 20], "frames": ["predictive", "support"]}
    with pytest.warns(UserWarning, match="second network"):
        back = restore(LearnedFlowSampler(**tiny_fit(max_iter=2)), config, state)
    assert not hasattr(back, "support_frame_sampler_") and not hasattr(back, "frame_by_size_")
    S = X[y == 1][:8]
    np.testing.assert_array_equal(
        back.sample(4, support=S, random_state=0), est.sample(4, support=S, random_state=0)
    )
    again = pickle.loads(pickle.dumps(est))  # today's pickles: no warning, same samples
    np.testing.assert_array_equal(
        again.sample(4, support=S, random_state=0), est.sample(4, support=S, random_state=0)
    )
