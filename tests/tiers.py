"""The two tiers of the suite (docs/development.md): what makes a test end-to-end, and the guard that holds
an unmarked test to it. tests/conftest.py calls these from its hooks.

A test that starts a worker, the perfconsole CLI, torchrun or a torch.distributed rank, tmux, a browser, a
Slurm job or a pytest run of its own is end-to-end, marked `e2e`; `pytest -m "not e2e"` runs the rest, the
fast tier. A test is e2e when its file says so (`pytestmark = pytest.mark.e2e`), its decorator does, it is
marked `gpu` or `slurm`, or its code reaches (directly, through its fixtures, or through a function of its
own module) a name that starts one of those processes: the helpers below, or an argv word `e2e_process`
knows. A test marked none of these ways that starts one fails, whatever -m says (`refuse`)."""
from __future__ import annotations

import inspect
import os
import shlex
import sys
import types

import pytest

E2E_PROGRAMS = {"tmux": "tmux", "chromium": "a browser", "chromium-browser": "a browser",
                "sbatch": "a Slurm job", "srun": "a Slurm job", "salloc": "a Slurm job",
                "torchrun": "torchrun", "perfconsole": "the perfconsole CLI"}
E2E_MODULES = {"perfconsole.core.measure.worker": "a worker", "torch.distributed.run": "torchrun",
               "perfconsole.tui.main": "the perfconsole CLI", "perfconsole.core.cli.main": "the perfconsole CLI",
               "perfconsole.core.launch.warm_server": "a warm process", "perfconsole.core.launch.slurm_task": "a Slurm task",
               "perfconsole.core.launch.warm_rank": "a torchrun rank",
               "pytest": "a pytest run"}
# The test helpers that start such a process, by module and name (tests/helpers.py, tests/tui/serve_helpers.py).
E2E_HELPERS = {("helpers", "pc"), ("serve_helpers", "serve"), ("serve_helpers", "launch_chromium"),
               ("playwright.sync_api._context_manager", "sync_playwright"),
               ("playwright.sync_api", "sync_playwright")}


def e2e_process(argv) -> str | None:
    """What `argv` starts that only an e2e test may (a phrase for the message), or None."""
    if isinstance(argv, (str, bytes)):
        argv = shlex.split(os.fsdecode(argv))
    args = [os.fsdecode(a) if isinstance(a, bytes) else os.fspath(a) if isinstance(a, os.PathLike) else str(a)
            for a in argv]
    if not args:
        return None
    program = os.path.basename(args[0])
    if program in ("sh", "bash") and len(args) > 2 and args[1] == "-c":
        return e2e_process(args[2])
    if program in E2E_PROGRAMS:
        return E2E_PROGRAMS[program]
    for i, arg in enumerate(args):   # a wrapper's argv too (nsys, env, timeout): `-m MODULE` anywhere
        if "playwright" in arg and "driver" in arg:
            return "a browser (playwright's driver)"
        if arg == "-m" and i + 1 < len(args):
            module = args[i + 1]
            if module in E2E_MODULES:
                return E2E_MODULES[module]
            if module == "perfconsole" or module.startswith("perfconsole."):
                return f"a perfconsole process ({module})"
        if "init_process_group" in arg:   # `python -c CODE`: a rank of a data-parallel job without torchrun
            return "a torch.distributed rank"
        if "multiprocessing.forkserver" in arg or "multiprocessing.spawn" in arg:
            return "a multiprocessing process (forkserver or spawn)"
    return None


def _home(obj) -> str | None:
    """The module an object was defined in, the tests' own by their last name (`tests.helpers` is `helpers`)."""
    module = getattr(obj, "__module__", None)
    return module.rsplit(".", 1)[-1] if isinstance(module, str) and module.startswith("tests.") else module


def reaches_e2e(code, namespace: dict, module: str, seen: set) -> bool:
    """Whether `code` (or code it defines, or a function of `module` it names) starts an e2e process."""
    if code in seen:
        return False
    seen.add(code)
    import helpers

    for const in code.co_consts:
        if isinstance(const, types.CodeType) and reaches_e2e(const, namespace, module, seen):
            return True
        # An argv's words, but not "perfconsole" alone: a folder or a package has that name too.
        if isinstance(const, str) and const != "perfconsole" and (const in E2E_PROGRAMS or const in E2E_MODULES):
            return True
    for name in code.co_names:
        obj = namespace.get(name)
        if obj is None:
            continue
        if (isinstance(obj, list) and obj == helpers.PC) or (_home(obj), getattr(obj, "__name__", None)) in E2E_HELPERS:
            return True
        if isinstance(obj, types.FunctionType) and obj.__module__ == module and \
                reaches_e2e(obj.__code__, obj.__globals__, module, seen):
            return True
    return False


def is_e2e(item) -> bool:
    if any(item.get_closest_marker(m) for m in ("e2e", "gpu", "slurm")):
        return True
    functions = [getattr(item, "function", None)]
    for name in getattr(item, "fixturenames", ()):
        defs = item._fixtureinfo.name2fixturedefs.get(name) or ()
        functions += [d.func for d in defs]
    seen: set = set()
    for fn in functions:
        fn = inspect.unwrap(fn) if fn is not None else None
        if isinstance(fn, types.FunctionType) and fn.__module__ != "conftest" and \
                reaches_e2e(fn.__code__, fn.__globals__, fn.__module__, seen):
            return True
    return False


running: list = [None]      # the test being run in this process, while it runs (fixtures included)
started: dict = {}          # test nodeid -> what it started that only an e2e test may


def refuse(argv) -> None:
    item = running[0]
    what = e2e_process(argv)
    if item is None or what is None or item.get_closest_marker("e2e"):
        return
    message = (f"{item.nodeid} starts {what} ({' '.join(map(str, argv))[:160]}) but is not marked e2e: "
               "mark it `@pytest.mark.e2e` (or its file `pytestmark = pytest.mark.e2e`), so that the fast tier, "
               "`pytest -m \"not e2e\"`, starts no process of that kind (tests/tiers.py, docs/development.md)")
    started.setdefault(item.nodeid, message)
    pytest.fail(message, pytrace=False)


def install_guard() -> None:
    """Wrap the doors a process goes out of here: subprocess.Popen (asyncio's subprocesses use it too) and
    multiprocessing's spawn and forkserver; a worker asked of a warm process is wrapped once that module is
    imported (`guard_warm`). A bare os.fork is not seen."""
    import multiprocessing.util
    import subprocess

    execute_child = subprocess.Popen._execute_child
    spawnv_passfds = multiprocessing.util.spawnv_passfds

    def guarded_execute_child(self, args, *rest, **kw):
        refuse(args)
        return execute_child(self, args, *rest, **kw)

    def guarded_spawnv_passfds(path, args, passfds):
        refuse(args)
        return spawnv_passfds(path, args, passfds)

    subprocess.Popen._execute_child = guarded_execute_child  # type: ignore[method-assign]
    multiprocessing.util.spawnv_passfds = guarded_spawnv_passfds


def guard_warm() -> None:
    """A worker forked by a warm process (core.launch.warm.spawn) starts without a Popen here."""
    warm = sys.modules.get("perfconsole.core.launch.warm")
    spawn = getattr(warm, "spawn", None)
    if spawn is None or getattr(spawn, "guarded", False):
        return

    def guarded_spawn(argv, *rest, **kw):
        refuse(argv)
        return spawn(argv, *rest, **kw)

    guarded_spawn.guarded = True  # type: ignore[attr-defined]
    warm.spawn = guarded_spawn  # type: ignore[union-attr]
