"""The predictive frame of a learned sampler is computed on the host and handed back where the
support lives: host arrays for host supports, tensors of the support's dtype for tensors."""

import numpy as np
import pytest
import torch

from skflow import LearnedFlowSampler, TrainingOptions


@pytest.fixture(scope="module")
def fitted(classes):
    X, y = classes
    training = TrainingOptions(max_iter=1, learning_rate=1e-12, warmup=1)
    return LearnedFlowSampler(normalize="predictive", training=training, random_state=0).fit(X, y)


def test_predictive_frame_follows_the_support(fitted, classes):
    X, y = classes
    S = np.stack([X[y == c][:4] for c in range(3)])
    host = fitted._predictive_frame(S)
    assert all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in host)
    for dtype, np_dtype in ((torch.float32, np.float32), (torch.float64, np.float64)):
        frame = fitted._predictive_frame(torch.as_tensor(S, dtype=dtype))
        # the host frame of the support as the tensor holds it (float32 rounded)
        for got, want in zip(frame, fitted._predictive_frame(S.astype(np_dtype)), strict=True):
            assert torch.is_tensor(got) and got.dtype == dtype
            assert torch.equal(got, torch.as_tensor(want).to(dtype))
