import numpy as np
import pytest

from kernelpath.datasets import shared_data_dir


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def _shared():
    return shared_data_dir()


requires_shared = pytest.mark.skipif(_shared() is None, reason="../shared/data is absent")
