"""Run names with what tells the runs apart first: the Runs list, Compare's column heads and a comparison's
file name.

A run's name is its spec in words ("tiny ctx256 b4 fp32 fwd_bwd torch"), so the runs of a session share
most of their words, and a name cut to a column's width (80 columns) lost the very word that told it from
the others: a queue of fp32, bf16 and fp16 runs read "tiny ctx256 b4 .." three times. Here the words
that the spec fields differing among the listed runs put into the name come first.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from perfconsole.core.record import RunRecord
from perfconsole.core.spec import RunSpec

SEP = " · "
_TWIN = re.compile(r" (#\d+)$")     # "x #2": the console's number for a second run of one name

# A field the name does not show, written as the name would ("ctx256", "b4", "bf16"), else key=value.
_BARE = ("size", "precision", "mode", "attention")
_PREFIX = {"ctx": "ctx", "batch": "b"}


def differs_first(runs: Sequence[RunRecord]) -> list[str]:
    """Each run's name with the words of the fields that differ among `runs` first: "bf16 torch · tiny
    ctx256 b4 fwd_bwd". Runs of one name that differ in a field the name does not show are told apart by
    it ("steps=9"); a name that is not its spec's words (an imported profile's) is left as it is."""
    specs = [r.spec.to_dict() for r in runs]
    differing = [k for k in (specs[0] if specs else {}) if len({json.dumps(s[k]) for s in specs}) > 1]
    hidden = _hidden_differences(runs)
    out = []
    for r, own, extra in zip(runs, specs, hidden):
        base, twin = _split_twin(r.name)
        words = base.split()
        shown = _field_words(r.spec, own, differing, specs)
        apart = [w for w in words if w in shown] + extra + twin
        rest = [w for w in words if w not in shown]
        out.append(SEP.join(" ".join(p) for p in (apart, rest) if p))
    return out


def short_title(runs: Sequence[RunRecord]) -> str:
    """The runs in one line, what tells them apart first and the words they share once:
    "fp32 vs bf16 · tiny ctx256 b4 fwd_bwd torch" (a comparison's file name is cut from it)."""
    heads = [h.split(SEP, 1) for h in differs_first(runs)]
    if all(len(h) == 2 for h in heads) and len({h[1] for h in heads}) == 1:
        return " vs ".join(h[0] for h in heads) + SEP + heads[0][1]
    return " vs ".join(" ".join(h) for h in heads)


def _split_twin(name: str) -> tuple[str, list[str]]:
    m = _TWIN.search(name)
    return (name[:m.start()], [m.group(1)]) if m else (name, [])


def _field_words(spec: RunSpec, own: dict[str, Any], differing: list[str], specs: list[dict[str, Any]]) -> set[str]:
    """The words of `spec`'s name that its values of the `differing` fields put there: those that go when
    the field takes another run's value ("fp32" for precision, "torch" for profile, "compile")."""
    label = set(spec.label().split())
    words: set[str] = set()
    for k in differing:
        others = {json.dumps(s[k]): s[k] for s in specs}
        others.pop(json.dumps(own[k]))
        for value in others.values():
            words |= label - set(spec.with_(**{k: value}).label().split())
    return words


def _hidden_differences(runs: Sequence[RunRecord]) -> list[list[str]]:
    """Per run, the fields in which it differs from the runs of its name, as words ("steps=9"): a name
    shows the fields that change what runs, not the warm-up or the seed."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(runs):
        groups[_split_twin(r.name)[0]].append(i)
    out: list[list[str]] = [[] for _ in runs]
    for members in groups.values():
        if len(members) < 2:
            continue
        specs = [runs[i].spec.to_dict() for i in members]
        keys = [k for k in specs[0] if len({json.dumps(s[k]) for s in specs}) > 1]
        for i, s in zip(members, specs):
            out[i] = [w for k in keys if (w := _word(k, s[k]))]
    return out


def _word(key: str, value: object) -> str:
    if value is None or value is False:
        return f"no {key}" if value is False else ""
    if value is True:
        return key
    if key in _BARE:
        return str(value)
    return f"{_PREFIX[key]}{value}" if key in _PREFIX else f"{key}={value}"
