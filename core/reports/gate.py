"""A gate's outputs for a CI job: a Markdown summary (for `$GITHUB_STEP_SUMMARY`), JUnit XML with one testcase
per metric (a regression is a failure, an inconclusive metric is skipped, unmeasured ones too), and the rows
of the terminal table. Each says the verdict beside its interval and how the interval was made."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from perfconsole.core.gate.record import GateRecord
from perfconsole.core.gate.verdict import MetricVerdict
from perfconsole.core.reports.compare import Comparison


@dataclass
class GateComparison(Comparison):
    """A gate's two runs as a comparison, A the baseline, with the gate beside them: the console's Compare pane
    shows its verdict and intervals above the runs' tables. Saved from there, it is a plain comparison."""
    gate: GateRecord | None = None


def comparison(g: GateRecord) -> GateComparison:
    return GateComparison(list(g.runs), name=f"gate: {g.name}", gate=g)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f} {unit}".strip() if abs(value) < 1000 else f"{value:,.0f} {unit}".strip()


def verdict_detail(v: MetricVerdict) -> str:
    """What a metric's verdict rests on, in one line."""
    if v.verdict == "unmeasured":
        return v.note or "not measured"
    band = f"within ±{v.threshold.text(v.unit)}"
    text = f"B vs A {v.change_text()} over {v.n} samples; same {band}"
    if v.note:
        text += f"; {v.note}"
    if v.verdict == "inconclusive":
        text += (f"; about {v.more_needed} more samples would decide it" if v.more_needed
                 else "; no estimate of the samples that would decide it (its estimate sits on an edge)")
    return text


def rows(g: GateRecord) -> list[list[str]]:
    """metric, A, B, B vs A [interval], verdict: one row per metric."""
    return [[v.metric, _fmt(v.a, v.unit), _fmt(v.b, v.unit), v.change_text(), v.verdict] for v in g.verdicts]


def headline(g: GateRecord) -> str:
    a, b = (p["label"] for p in g.programs)
    return f"gate: {g.verdict.upper()} (A {a}, B {b})"


def verdict_lines(g: GateRecord) -> list[tuple[str, str]]:
    """(verdict, line): each metric's verdict with its interval and what it rests on."""
    return [(v.verdict, f"{v.metric}: {v.verdict} - {verdict_detail(v)}") for v in g.verdicts]


def footer(g: GateRecord) -> list[str]:
    unit = "processes" if g.mode == "processes" else "paired processes"
    return [f"mode: {g.mode}; {g.rounds} {unit} a program; {g.wall_s:.1f} s; budget {g.budget}; stopped: {g.stopped}",
            f"intervals: {g.interval_method}"]


def markdown(g: GateRecord) -> str:
    lines = [f"## perfconsole gate: **{g.verdict}**", "",
             f"A: `{g.programs[0]['label']}`  ", f"B: `{g.programs[1]['label']}`", "",
             "| metric | A | B | B vs A [95% interval] | threshold | verdict |", "|---|---:|---:|---|---|---|"]
    for v, row in zip(g.verdicts, rows(g)):
        lines.append(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} | ±{v.threshold.text(v.unit)} | **{row[4]}** |")
    lines.append("")
    lines += [f"- {v.metric}: {verdict_detail(v)}" for v in g.verdicts]
    lines += ["", *(f"{line}  " for line in footer(g))]
    return "\n".join(lines).rstrip() + "\n"


def junit(g: GateRecord) -> str:
    """JUnit XML: one testsuite `perfconsole gate`, one testcase per metric."""
    failures = sum(v.verdict == "regression" for v in g.verdicts)
    skipped = sum(v.verdict in ("inconclusive", "unmeasured") for v in g.verdicts)
    suite = ET.Element("testsuite", name="perfconsole gate", tests=str(len(g.verdicts)), failures=str(failures),
                       errors="1" if g.verdict == "failed" else "0", skipped=str(skipped), time=f"{g.wall_s:.2f}")
    props = ET.SubElement(suite, "properties")
    for name, value in (("A", g.programs[0]["label"]), ("B", g.programs[1]["label"]), ("mode", g.mode),
                        ("verdict", g.verdict), ("interval", g.interval_method)):
        ET.SubElement(props, "property", name=name, value=value)
    for v in g.verdicts:
        case = ET.SubElement(suite, "testcase", classname="perfconsole.gate", name=v.metric, time="0")
        detail = verdict_detail(v)
        if v.verdict == "regression":
            ET.SubElement(case, "failure", message=f"{v.metric} regressed: {v.change_text()}", type="regression").text = detail
        elif v.verdict in ("inconclusive", "unmeasured"):
            ET.SubElement(case, "skipped", message=f"{v.verdict}: {detail}")
        else:
            ET.SubElement(case, "system-out").text = f"{v.verdict}: {detail}"
    if g.verdict == "failed":
        case = ET.SubElement(suite, "testcase", classname="perfconsole.gate", name="processes", time="0")
        ET.SubElement(case, "error", message=f"a process {g.stopped}", type=g.stopped)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
