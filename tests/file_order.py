"""The order the suite's files run in under `--dist loadfile` (the README's command): the longest first, by the
seconds each took in a run of that command (tests/file_seconds.json); a file not listed starts after them, in the
collection's order. tests/conftest.py applies it where whole files are handed out, and turns xdist's own order (by
number of tests) off."""
from __future__ import annotations

import json
from pathlib import Path

WHOLE_FILES = ("loadfile", "loadscope")
SECONDS: dict[str, int] = json.loads((Path(__file__).parent / "file_seconds.json").read_text(encoding="utf-8"))["seconds"]


def whole_files(config) -> bool:
    """Does this run hand out whole files? An xdist worker's own `--dist` reads `no` (xdist resets it there): the
    controller says it in each worker's input (`configure_node`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return bool(workerinput.get("whole_files"))
    return getattr(config.option, "dist", "no") in WHOLE_FILES


def configure_node(node) -> None:
    """For xdist's controller, before it starts a worker."""
    node.workerinput["whole_files"] = node.config.getvalue("dist") in WHOLE_FILES


def file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items) -> None:
    items.sort(key=lambda item: -SECONDS.get(file_of(item), 0))
