"""Console test helpers: an app with no GPU sampler by default, fixed records, waiting on conditions."""
from __future__ import annotations

import time
from collections.abc import Callable
import io
from pathlib import Path
from typing import Any

from rich.console import Console

from perfconsole.core import store
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.tui.app import PerfConsole
from helpers import ROOT, TINY

SNAPSHOTS = ROOT / "snapshots"
NSYS = ROOT / "tests" / "fixtures" / "nsys"
if not NSYS.is_dir():
    NSYS = Path("/work/shared/fixtures/nsys")



def no_gpu(_index: int):
    return None


def make_app(spec: RunSpec = TINY, **kw) -> PerfConsole:
    kw.setdefault("sampler", no_gpu)
    return PerfConsole(spec, **kw)


def shipped(name: str) -> Path:
    return SNAPSHOTS / name


def fixture_profile_record() -> RunRecord:
    """A record whose profile is real nsys output: the gpa kernel summary and gptqmodel NVTX ranges."""
    kern, _ = load_profile(NSYS / "gpa" / "demo_cuda_gpu_kern_sum.csv")
    nvtx, _ = load_profile(NSYS / "gptqmodel" / "llama32_1b_layers2_nvtx_sum.csv")
    base = store.load(shipped("tiny-cpu-train-fp32.json"))
    base.id, base.name = "fixture-nsys", "nsys fixture tables"
    base.profile = Profile("import", [], {**kern, **nvtx})
    return base


async def wait_for(pilot, cond: Callable[[], bool], timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {cond}")
        await pilot.pause(0.05)



def plain(renderable: Any) -> str:
    """What a Rich renderable (text, table, group) shows, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def screen_lines(app) -> list[str]:
    """The screen as the terminal shows it, one string a row."""
    return [strip.text for strip in app.screen._compositor.render_strips()]
