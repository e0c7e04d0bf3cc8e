"""Run names with what tells the runs apart first: the Runs list, Compare's column heads and a comparison's
file name.

A run's name is its spec in words ("tiny ctx256 b4 fp32 fwd_bwd torch"), so the runs of a session share
most of their words, and a name cut to a column's width (80 columns) lost the very word that told it from
the others: a queue of fp32, bf16 and fp16 runs read "tiny ctx256 b4 .." three times. Here the words
that the spec fields differing among the listed runs put into the name come first, and of those first the
words that tell a run from the runs most like it: three fp32 ctx256 runs listed beside one bf16 ctx512 run
are told apart by their mode and profiler, which then lead ("train torch ctx256 fp32"), not by "ctx256
fp32", which the three share. `cut` fits a name to a width and never cuts the number that tells two runs of
one name apart ("#2").
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

SEP = " · "
_TWIN = re.compile(r" (#\d+)$")     # "x #2": the console's number for a second run of one name
_TAG = re.compile(r"(?:^| )(#\d+)(?= |$)")   # that number, where differs_first put it

# A field the name does not show, written as the name would ("ctx256", "b4", "bf16"), else key=value.
_BARE = ("size", "precision", "mode", "attention")
_PREFIX = {"ctx": "ctx", "batch": "b"}


def differs_first(runs: Sequence[RunRecord]) -> list[str]:
    """Each run's name with the words of the fields that differ among `runs` first: "bf16 torch · tiny
    ctx256 b4 fwd_bwd". Of those, the words that tell the run from the runs nearest it (those that differ
    from it in the fewest fields) come first, in the name's order among equals. Runs of one name that differ in a field the name does not show are told
    apart by it ("steps=9"); a name that is not its spec's words (an imported profile's) is left as it is."""
    specs = [r.spec.to_dict() for r in runs]
    differing = [k for k in (specs[0] if specs else {}) if len({json.dumps(s[k]) for s in specs}) > 1]
    values = [{k: json.dumps(s[k]) for k in differing} for s in specs]
    hidden = _hidden_differences(runs)
    out = []
    for i, (r, extra) in enumerate(zip(runs, hidden)):
        base, twin = _split_twin(r.name)
        words = base.split()
        shown = _field_words(r.spec, i, differing, values, specs)
        apart = sorted((w for w in words if w in shown), key=lambda w: (shown[w], words.index(w))) + extra + twin
        rest = [w for w in words if w not in shown]
        out.append(SEP.join(" ".join(p) for p in (apart, rest) if p))
    return out


def cut(head: str, width: int) -> str:
    """`head` in `width` characters, cut at its end ("..."), but for its "#2", which is kept whole at the end:
    two runs of one name differ in nothing else the name shows."""
    if len(head) <= width:
        return head
    m = _TAG.search(head)
    tag = f" {m.group(1)}" if m else ""
    rest = head[:m.start()] + head[m.end():] if m else head
    room = max(0, width - len(tag))
    return (rest[:max(0, room - 3)] + "...")[:room] + tag


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


def _field_words(spec: RunSpec, i: int, differing: list[str], values: list[dict[str, str]],
                 specs: list[dict[str, Any]]) -> dict[str, int]:
    """The words of run `i`'s name that its values of the `differing` fields put there: those that go when
    the field takes another run's value ("fp32" for precision, "torch" for profile, "compile"); each with
    the distance (fields that differ) to the nearest run it tells run `i` apart from."""
    label = set(spec.label().split())
    own = values[i]
    distance = [sum(own[k] != v[k] for k in differing) for v in values]
    words: dict[str, int] = {}
    for k in differing:
        nearest: dict[str, int] = {}   # each other value of k: the distance to the nearest run that has it
        for j, v in enumerate(values):
            if v[k] != own[k]:
                nearest[v[k]] = min(nearest.get(v[k], distance[j]), distance[j])
        for value, d in nearest.items():
            other = specs[next(j for j, v in enumerate(values) if v[k] == value)][k]
            for w in label - set(spec.with_(**{k: other}).label().split()):
                words[w] = min(words.get(w, d), d)
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
