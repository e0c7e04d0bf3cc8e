"""`perfconsole timeline SOURCE --svg FILE` and `perfconsole export RUN --format svg`: the SVG holds, line for line,
the text `timeline` prints for the same arguments (read back from the SVG's own text elements and their x
positions), and each drawn cell carries its category's colour as rich's SVG theme gives it. On the real H200 torch
trace, the real nsys SQLite export, and a profiled CPU run made here; bad paths and runs without a trace are refused
in one line, exit 2."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
from rich.style import Style
from rich.terminal_theme import SVG_EXPORT_THEME

from perfconsole.core.cli.main import main
from perfconsole.core.timeline.load import load_timeline
from perfconsole.core.timeline.render import STYLES, render

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TRACE = FIXTURES / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz"
CAPTURE = FIXTURES / "nsys_sqlite" / "dlprof_relu_nsys_profile.sqlite"
SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots"
SVG = "{http://www.w3.org/2000/svg}"


def svg_screen(text: str) -> tuple[list[str], dict[int, dict[int, str]]]:
    """The terminal text an SVG of rich's shows, as lines (each text element placed at the column its x gives), and
    each non-blank cell's fill colour by line and column."""
    root = ET.fromstring(text)   # raises where the document is not well-formed XML
    css = "".join(s.text or "" for s in root.iter(SVG + "style"))
    fills = dict(re.findall(r"\.([\w-]+) \{ fill: (#[0-9a-f]{6})", css))
    chars: dict[int, dict[int, str]] = defaultdict(dict)
    colours: dict[int, dict[int, str]] = defaultdict(dict)
    for t in root.iter(SVG + "text"):
        line = re.search(r"-line-(\d+)\)$", t.get("clip-path", ""))
        if line is None:          # the window's title, not the terminal's text
            continue
        body = t.text or ""
        cell = float(t.get("textLength")) / len(body)
        col = round(float(t.get("x")) / cell)
        for i, ch in enumerate(body):
            chars[int(line.group(1))][col + i] = " " if ch == "\xa0" else ch
            colours[int(line.group(1))][col + i] = fills[t.get("class")]
    lines = ["".join(chars[y].get(x, " ") for x in range(max(chars[y], default=-1) + 1))
             for y in range(max(chars) + 1)]
    return [line.rstrip() for line in lines], colours


def hex_of(category: str) -> str:
    return Style.parse(STYLES[category]).color.get_truecolor(SVG_EXPORT_THEME).hex


def printed(capsys, argv: list[str]) -> list[str]:
    assert main(argv) == 0
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("source, args, step", [
    pytest.param(TRACE, ["--step", "2", "--width", "80"], 2, id="torch-step2"),
    pytest.param(TRACE, ["--step", "1", "--width", "64", "--ascii", "--launches"], 1, id="torch-ascii-launches"),
    pytest.param(CAPTURE, ["--width", "70", "--depth", "2"], None, id="nsys-sqlite"),
])
def test_the_svg_holds_the_printed_drawing_with_each_cell_in_its_categorys_colour(tmp_path, capsys, source, args,
                                                                                  step):
    text = printed(capsys, ["timeline", str(source), *args])
    out = tmp_path / "timeline.svg"
    assert main(["timeline", str(source), *args, "--svg", str(out)]) == 0
    io = capsys.readouterr()
    assert io.out == "" and io.err == f"wrote {out}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timeline.svg"]   # no temporary file left beside it
    lines, colours = svg_screen(out.read_text())
    assert lines == text
    assert any(line.startswith("gpu0 s7 ") for line in lines)                     # the kernel lane
    assert any(line.startswith("gpu0 busy ") and "% of the window" in line for line in lines)
    # the frame `timeline` drew: each drawn cell of each row in its category's colour
    tl = load_timeline([source])
    t0, t1 = (tl.step(step).start, tl.step(step).end) if step else tl.span()
    width = int(args[args.index("--width") + 1])
    frame = render(tl, t0, t1, width, None, "--ascii" in args, "--launches" in args,
                   int(args[args.index("--depth") + 1]) if "--depth" in args else 4)
    label = max([len(r.label) for r in frame.rows] + [len(frame.unit) + 4]) + 1
    present = set()
    for i, row in enumerate(frame.rows):
        assert lines[2 + i].startswith(row.label)
        for j, cat in enumerate(row.cats):
            if cat and row.text[j] != " ":
                assert colours[2 + i][label + j] == hex_of(cat), (row.label, j, cat)
                present.add(cat)
    kernel_cats = present - {"range", "launch"}
    assert kernel_cats and "range" in present
    used = {c for line in colours.values() for c in line.values()}
    assert {hex_of(c) for c in present} <= used
    if "--launches" in args:
        assert "launch" in present


def test_bad_svg_paths_are_refused_in_one_line_before_the_trace_is_read(tmp_path, capsys):
    kept = tmp_path / "kept.svg"
    kept.write_text("keep me\n")
    cases = [(tmp_path, "is a directory"), (tmp_path / "missing" / "t.svg", "no such directory"),
             (Path("/proc") / "perfconsole-timeline.svg", "cannot create a file in /proc"),
             (kept, "exists; give --force")]
    for path, words in cases:
        assert main(["timeline", str(TRACE), "--svg", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err and err.startswith("perfconsole: error: "), err
    assert not (tmp_path / "missing").exists() and kept.read_text() == "keep me\n"
    # the path is checked first: a bad one is refused even for a source that is no trace
    assert main(["timeline", str(tmp_path / "no-such-trace.json"), "--svg", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["timeline", str(TRACE), "--svg", str(kept), "--force", "--width", "40"]) == 0
    assert svg_screen(kept.read_text())[0][0] == str(TRACE)


def test_export_svg_of_runs_without_a_trace_and_of_other_snapshots_is_refused_in_one_line(tmp_path, capsys):
    for snapshot, words in [
        ("tiny-cpu-train-fp32.json", "format svg draws the run's timeline: tiny ctx32 b2 fp32 train: no profile "
                                     "(run it with --profile torch for a timeline)"),
        ("tiny-cpu-train-torch-profile.json", "its torch profile lists no trace file"),
        ("tiny-cpu-sweep.json", "format: sweep snapshots export as md, csv, json, not 'svg'"),
    ]:
        out = tmp_path / "x.svg"
        assert main(["export", str(SNAPSHOTS / snapshot), "--format", "svg", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
        assert not out.exists()


@pytest.mark.e2e
def test_export_svg_of_a_profiled_cpu_run_is_its_timeline(tmp_path, capsys):
    from helpers import pc

    snap = tmp_path / "cpu.json"
    run = pc("run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "1", "--warmup", "1",
             "--steps", "2", "--profile", "torch", "--save", str(snap))
    assert run.returncode == 0, run.stderr
    text = printed(capsys, ["timeline", str(snap), "--width", "120"])
    out = tmp_path / "cpu.svg"
    assert main(["export", str(snap), "--format", "svg", "-o", str(out)]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
    lines, colours = svg_screen(out.read_text())
    assert lines == text and lines[0] == str(snap)
    assert any(line.startswith("cpu t") for line in lines) and any(line.startswith("cpu busy ") for line in lines)
    # the CPU ops' cells are coloured by their categories: more than the labels' one colour
    assert len({c for line in colours.values() for c in line.values()}) > 2
    # to standard output without -o
    assert main(["export", str(snap), "--format", "svg"]) == 0
    assert svg_screen(capsys.readouterr().out)[0] == text
