"""Feature names of in-context supports: a DataFrame support is matched by column name, not by
position, like scikit-learn matches ``X`` against ``feature_names_in_``."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions, TrainingOptions
from skflow.pipeline import make_sampling_pipeline

COLUMNS = ["a", "b", "c"]


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.normal(size=(30, 3)) * [1.0, 5.0, 0.2], columns=COLUMNS)


def _samplers():
    return [
        NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4)),
        LearnedFlowSampler(
            training=TrainingOptions(max_iter=0), solver=SolverOptions(n_steps=2), random_state=0
        ),
        make_sampling_pipeline(
            PCA(2), NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4))
        ),
    ]


@pytest.mark.parametrize("sampler", _samplers(), ids=["nw", "learned", "pipeline"])
def test_reordered_or_renamed_support_columns_are_refused(frame, sampler):
    sampler.fit(frame)
    for bad in (frame[["c", "a", "b"]], frame.rename(columns={"a": "z"})):
        with pytest.raises(ValueError, match="column names must be the feature names"):
            sampler.sample(3, support=bad)
        with pytest.raises(ValueError, match="column names must be the feature names"):
            sampler.sample_trajectories(2, support=bad)


# the comparison call passes a bare array, which the pipeline's PCA (fitted on names) warns about
@pytest.mark.exactness
@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
@pytest.mark.parametrize("sampler", _samplers(), ids=["nw", "learned", "pipeline"])
def test_support_with_the_fitted_names_samples_without_warnings(frame, sampler):
    sampler.fit(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "X does not have valid feature names"
        named = sampler.sample(4, support=frame, random_state=1)
    # the frame is the same data as its array: the same samples
    plain = sampler.sample(4, support=frame.to_numpy(), random_state=1)
    np.testing.assert_array_equal(named, plain)


def test_frame_support_on_a_pipeline_fitted_without_names_does_not_warn(frame):
    pipe = make_sampling_pipeline(
        PCA(2), NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4))
    )
    pipe.fit(frame.to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "X has feature names, but PCA was fitted without"
        assert pipe.sample(3, support=frame).shape == (3, 3)
