import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(0)
