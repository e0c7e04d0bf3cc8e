"""Which profiler, if any, was in the process whose steps were timed: read by that process about itself.

A profiler changes the process it runs in, not only the steps it captures: `nsys profile` sets CUDA's and
NVTX's injection variables and preloads its libraries into the whole process, Nsight Compute does the same with
its own, and the torch profiler, once started, runs inside the process until it stops. So a record says, of
the process that timed its headline steps and of the process that made its profile, what that process found in
its own environment and memory map (`/proc/self/maps`) right after those steps, and what that names:

- `profiler`: "nsys", "ncu", "torch", "injected" (a CUDA or NVTX injection of another tool), or None;
- `signs`: each variable and mapped library that named it, in words;
- `variables`: the process's variables that profilers set (their names and values as they were);
- `libraries`: the mapped shared libraries that belong to a profiler (file names);
- `source`: where the libraries were read ("/proc/self/maps", or why they could not be).

A run's headline is then checked by construction, whatever the host: its own provenance must name no
profiler (core.record keeps it as `provenance`), and the capture's (`profile.overhead.provenance`) must name
the one asked for. libcupti is listed where it is mapped but names no profiler by itself: a CUDA build of torch
may load it without profiling anything.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfconsole.core.record import RunRecord

MAPS = Path("/proc/self/maps")

# Variables a profiler sets in the process it runs; their values are kept, the rest of the environment is not.
_VARIABLES = re.compile(r"^(CUDA_INJECTION(32|64)_PATH|NVTX_INJECTION(32|64)_PATH|LD_PRELOAD|NSYS_.*|QUADD_.*|"
                        r"NV_COMPUTE_PROFILER.*|NV_NSIGHT.*|NSIGHT_.*|CUPTI_.*|KINETO_.*)$")
# Shared libraries of profilers, by file name.
_LIBRARIES = re.compile(r"^lib(ToolsInjection\w*|nvtx3?interop\w*|cupti|nvperf_\w+|TreeLauncher\w*|"
                        r"InterceptorInjection\w*|cuda-injection|nvToolsExt|kineto)\b[\w.+-]*\.so[\w.]*$", re.I)
# Which tool a library, an injection path or a variable's name belongs to. nsys 2025.3 (seen on an H100, from
# the Nsight Compute install) sets CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH and LD_PRELOAD to its
# libToolsInjection*, and NSYS_* and QUADD_* variables; ncu 2025.3 maps libTreeLauncher*,
# libInterceptorInjectionTarget and libcuda-injection and sets NV_NSIGHT_INJECTION_* and NV_COMPUTE_PROFILER_*.
# A plain CUDA process of torch maps libcupti too, so libcupti names nothing (docs/results/nsys_headline_h100.md).
_NSYS = re.compile(r"ToolsInjection|nsight-systems|/nsys/|^NSYS_|^QUADD_", re.I)
_NCU = re.compile(r"TreeLauncher|InterceptorInjection|cuda-injection|^NV_NSIGHT_INJECTION|^NV_COMPUTE_PROFILER", re.I)
_INJECTION = ("CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH")


@dataclass(frozen=True)
class Provenance:
    pid: int
    profiler: str | None
    signs: list[str] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    libraries: list[str] = field(default_factory=list)
    source: str = str(MAPS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mapped_libraries(maps: Path = MAPS) -> tuple[list[str], str]:
    """The profilers' shared libraries mapped into this process (file names, sorted), and where they were read."""
    try:
        text = maps.read_text()
    except OSError as exc:  # no /proc (macOS), or a sandbox that hides it
        return [], f"unreadable: {maps}: {exc.strerror or exc}"
    names = {Path(line.split(None, 5)[5]).name for line in text.splitlines() if len(line.split(None, 5)) == 6}
    return sorted(n for n in names if _LIBRARIES.match(n)), str(maps)


def judge(variables: dict[str, str], libraries: list[str], torch_profiler: bool) -> tuple[str | None, list[str]]:
    """The profiler these name, and each sign of it in words. Order: a tool injected into the whole process
    before the torch profiler, which a process may also run under such a tool."""
    signs: list[str] = []
    tools: list[str] = []
    for name in _INJECTION:
        if variables.get(name):
            tool = "nsys" if _NSYS.search(variables[name]) else "ncu" if _NCU.search(variables[name]) else "injected"
            tools.append(tool)
            signs.append(f"{name}={variables[name]}")
    for lib in libraries:
        tool = "nsys" if _NSYS.search(lib) else "ncu" if _NCU.search(lib) else None
        if tool:
            tools.append(tool)
            signs.append(f"{lib} mapped")
    preload = variables.get("LD_PRELOAD", "")
    for tool, pattern in (("nsys", _NSYS), ("ncu", _NCU)):
        if pattern.search(preload):
            tools.append(tool)
            signs.append(f"LD_PRELOAD={preload}")
        named = [k for k in variables if pattern.search(k)]
        if named:
            tools.append(tool)
            signs.append(f"{tool}'s variables set: {', '.join(named)}")
    if torch_profiler:
        tools.append("torch")
        signs.append("torch.profiler running")
    order = ("nsys", "ncu", "injected", "torch")
    return (min(tools, key=order.index) if tools else None), list(dict.fromkeys(signs))


def _torch_profiler_running() -> bool:
    import sys

    torch = sys.modules.get("torch")  # a process without torch runs no torch profiler
    if torch is None:
        return False
    return bool(torch.autograd.profiler._is_profiler_enabled)


def read(environ: dict[str, str] | None = None, maps: Path = MAPS) -> Provenance:
    """This process, now: its profilers' variables and libraries, the torch profiler's state, and what they name."""
    env = os.environ if environ is None else environ
    variables = {k: v for k, v in sorted(env.items()) if _VARIABLES.match(k)}
    libraries, source = mapped_libraries(maps)
    profiler, signs = judge(variables, libraries, _torch_profiler_running())
    return Provenance(os.getpid(), profiler, signs, variables, libraries, source)


# Profilers that are in the whole process they run: a process of theirs cannot time a headline.
WHOLE_PROCESS = ("nsys", "ncu", "injected")


def headline_problems(record: RunRecord) -> list[str]:
    """Why a record does not prove that its headline steps ran without a profiler and its profile under the one
    it names: [] where it does. Nothing here compares times, so no host's spread between processes can move it."""
    found: list[str] = []
    if not record.provenance:
        found.append("no process of the headline said what it ran under (no provenance)")
    for p in record.provenance:
        if p.get("profiler"):
            found.append(f"the headline's process {p.get('pid')} ran under {p['profiler']}: {'; '.join(p['signs'])}")
    if record.spec.profile == "none":
        return found
    profile = record.profile
    capture = (profile.overhead or {}).get("provenance") if profile else None
    if profile is None or capture is None:
        return [*found, "the profile does not say what its process ran under"]
    if capture.get("profiler") != profile.profiler:
        found.append(f"the {profile.profiler} profile's process names {capture.get('profiler')!r} as its profiler")
    if capture.get("profiler") in WHOLE_PROCESS and capture.get("pid") in {p.get("pid") for p in record.provenance}:
        found.append(f"the headline's steps came from the {capture['profiler']} process {capture['pid']}")
    return found
