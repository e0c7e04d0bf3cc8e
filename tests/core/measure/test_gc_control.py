"""core/measure/gc_control.py in the test session itself: tests/conftest.py spaces the collector's passes before
the test modules import torch and freezes what they imported once they are collected, as the console, the warm
process and a worker do with their own imports."""
import gc

from perfconsole.core.measure import gc_control


def test_the_session_runs_with_its_imports_frozen_and_young_passes_spaced():
    assert gc.get_threshold() == gc_control.THRESHOLDS
    assert gc.get_freeze_count() > 100_000  # torch's objects among them (some 160,000 for torch alone)
