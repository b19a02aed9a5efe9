import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

torch.set_num_threads(1)


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(0)


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("monotone.py", "name")`` imports a benchmark script as a module."""
    def load(filename: str, module_name: str):
        if str(BENCHMARKS) not in sys.path:
            sys.path.insert(0, str(BENCHMARKS))  # the scripts import their shared helpers
        spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / filename)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load
