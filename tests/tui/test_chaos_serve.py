"""`perfconsole serve` never leaves a console or a worker behind: browser tabs (headless Chromium) closed
at random moments and the server stopped at a random moment by SIGTERM, SIGINT or SIGHUP
(scripts/chaos_serve.py draws and runs the trials; the page's address is the one the server prints).
The server keeps one warm process for all its tabs (core.launch.warm): it must be up, and then gone with the rest.

PERFCONSOLE_CHAOS_SEED fixes the seed (else one is drawn and named in any failure), and
PERFCONSOLE_CHAOS_SERVE_TRIALS the number of trials (4). Skips where chromium or playwright is missing.
"""
from __future__ import annotations

import importlib.util
import os
import random
import shutil
import sys

import pytest
from helpers import ROOT

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

try:
    import playwright.sync_api  # noqa: F401
except ImportError:  # pragma: no cover - the dev extra brings it
    playwright = None


def _harness():
    spec = importlib.util.spec_from_file_location("chaos_serve", ROOT / "scripts" / "chaos_serve.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos_serve"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.skipif(playwright is None, reason="playwright is not installed (pip install -e '.[dev]')")
def test_closing_tabs_and_stopping_the_server_at_random_moments_leaves_nothing():
    chaos = _harness()
    seed = int(os.environ.get("PERFCONSOLE_CHAOS_SEED") or random.randrange(1 << 30))
    trials = int(os.environ.get("PERFCONSOLE_CHAOS_SERVE_TRIALS", "4"))
    outcomes = chaos.run(seed, list(range(trials)), report=lambda _line: None)
    failed = [o for o in outcomes if o.problems]
    assert not failed, f"seed {seed}: {len(failed)} of {trials} serve trials failed\n" + "\n".join(
        f"{o.trial}: {'; '.join(o.problems)}\n  replay: {o.trial.replay()}" for o in failed)
    # The server's warm process, the one every tab's runs fork from, was up when it was stopped, and went too.
    for o in outcomes:
        assert o.warm_at_stop == 1, f"{o.trial}: {o.warm_at_stop} warm processes"
