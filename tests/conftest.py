"""Shared test set-up: GPU tests skip cleanly where there is no CUDA; files go to tmp dirs."""
from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory, monkeypatch):
    """Never write into the user's real data directory."""
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path_factory.mktemp("data")))
