"""Fixtures shared by the sampler tests."""

import numpy as np
import pytest

from skflow.tasks import HierarchicalTasks


@pytest.fixture(scope="module")
def classes():
    """20 classes of a rotated anisotropic 3-D hierarchical family."""
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    fam = HierarchicalTasks(
        3, prior_cov=(q * [4.0, 1.0, 0.5]) @ q.T, within_cov=np.diag([0.5, 0.2, 0.1])
    )
    return fam.make_classes(20, 30, random_state=0)
