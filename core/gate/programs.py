"""The two programs a gate compares: two specs (`--vary FIELD=A,B`), one spec with the user's model at two git
revisions (`--rev BASE --rev HEAD`), or one spec under two Python environments (`--python PATH` twice).

A revision is checked out with `git worktree add --detach` into a temporary folder of its own, so the user's
working tree is never touched, and the model path (`--model PATH.py:FACTORY`) is found at the same place
inside each checkout. `Worktrees` removes them again (and prunes git's note of them), whatever happened.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfconsole.core.settings import RunSpec


class ProgramError(ValueError):
    """A program that cannot be set up: a revision git does not know, a model file absent at a revision."""


@dataclass(frozen=True)
class Program:
    label: str
    spec: RunSpec
    python: str | None = None      # the interpreter the worker runs under; None: this one
    revision: str | None = None    # the commit its model file was checked out at

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "python": self.python, "revision": self.revision}


def from_specs(specs: list[RunSpec], field: str) -> list[Program]:
    """`--vary FIELD=A,B`: each spec labelled by its value of the field."""
    return [Program(f"{field}={getattr(s, field)}", s) for s in specs]


def from_pythons(spec: RunSpec, pythons: list[str]) -> list[Program]:
    """`--python PATH` twice: the same spec, the worker started with each interpreter (which must import perfconsole)."""
    out = []
    for path in pythons:
        found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
        if not found:
            raise ProgramError(f"--python: {path}: not an executable interpreter")
        out.append(Program(f"python {path}", spec, python=str(Path(found).absolute())))
    return out


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ProgramError(f"git {' '.join(args)}: {said}")
    return done.stdout.strip()


class Worktrees:
    """The revisions' checkouts, each in its own folder under one temporary directory; a context manager."""

    def __init__(self, model: str, revisions: list[str]) -> None:
        path, sep, factory = model.rpartition(":")
        if not sep or not path.endswith(".py"):
            raise ProgramError(f"--rev: give --model PATH.py:FACTORY, the model file inside the git repository, not {model!r}")
        self.file = Path(path).expanduser().absolute()
        self.factory = factory
        self.revisions = revisions
        try:
            self.root = Path(git(self.file.parent if self.file.parent.is_dir() else Path.cwd(), "rev-parse", "--show-toplevel"))
        except (ProgramError, OSError) as exc:
            raise ProgramError(f"--rev: {path} is not inside a git repository ({exc})") from None
        try:
            self.relative = self.file.resolve().relative_to(self.root.resolve())
        except ValueError:
            raise ProgramError(f"--rev: {path} is not inside the git repository {self.root}") from None
        self.commits = [self._commit(rev) for rev in revisions]
        self.folder: Path | None = None
        self.trees: list[Path] = []

    def _commit(self, rev: str) -> str:
        if not rev or rev.startswith("-"):  # git would read it as an option
            raise ProgramError(f"--rev {rev!r}: not a revision name")
        try:
            return git(self.root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        except ProgramError:
            raise ProgramError(f"--rev {rev}: not a commit of {self.root}") from None

    def __enter__(self) -> Worktrees:
        self.folder = Path(tempfile.mkdtemp(prefix="perfconsole-gate-"))
        try:
            for i, commit in enumerate(self.commits):
                tree = self.folder / f"rev-{i + 1}"
                git(self.root, "worktree", "add", "--detach", "--quiet", str(tree), commit)
                self.trees.append(tree)
                if not (tree / self.relative).is_file():
                    raise ProgramError(f"--rev {self.revisions[i]}: no {self.relative} at {commit[:10]}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for tree in self.trees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=self.root, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=self.root, capture_output=True)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.trees = []

    def programs(self, spec: RunSpec) -> list[Program]:
        """The spec with its model file taken from each checkout."""
        return [Program(f"{rev} ({commit[:10]})", spec.with_(model=f"{tree / self.relative}:{self.factory}"),
                        revision=commit)
                for rev, commit, tree in zip(self.revisions, self.commits, self.trees)]
