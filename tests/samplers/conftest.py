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


def _two_cluster_classes(seed, n_rows, centre, spread, noise, n_classes=12):
    """``n_classes`` classes of ``n_rows`` 2-D rows, each two clusters at +-``spread`` along
    a direction of its own about a class mean drawn with scale ``centre``: the data where a
    Gaussian predictive fills the gap between the clusters and a support's own kernel
    estimate does not. Returns ``X, y``."""
    rng = np.random.default_rng(seed)
    k, n = n_classes, n_rows
    centres, sides = centre * rng.normal(size=(k, 1, 2)), rng.normal(size=(k, 1, 2))
    sign = np.where(rng.random((k, n, 1)) < 0.5, -1.0, 1.0)
    X = (centres + spread * sign * sides + noise * rng.normal(size=(k, n, 2))).reshape(-1, 2)
    return X, np.repeat(np.arange(k), n)


@pytest.fixture(scope="module")
def far_cluster_classes():
    """Far-apart tight clusters: the support's own frame validates better at every size."""
    return _two_cluster_classes(0, 30, centre=2.0, spread=4.0, noise=0.05)


@pytest.fixture(scope="module")
def two_cluster_classes():
    """12 classes, each two clusters along a direction of its own, means close together:
    a fit that chooses the predictive frame at 2 rows and the support's from 20 on."""
    return _two_cluster_classes(3, 40, centre=0.5, spread=3.0, noise=0.3)
