"""Own models end to end on the CPU, through the CLI: the worked example with its per-layer ranges, a model
that prints to stdout, a model with wrong logits (one line, exit 2), and old snapshots still loading."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from perfconsole.core import store
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.run import markdown
from helpers import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "student_model.py"
FAST = ["--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "0", "--steps", "2"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", "run", *args, *FAST],
                          capture_output=True, text=True, timeout=1500)  # minutes each on a loaded machine


@pytest.mark.slow
def test_the_worked_example_runs_with_counted_flops_and_layer_ranges():
    out = cli("--model", f"{EXAMPLE}:build", "--model-arg", "d_model=32", "--mode", "train", "--profile", "torch",
              "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    r = RunRecord.from_dict(json.loads(out.stdout)["data"])
    assert r.status == "ok" and r.model["architecture"] == "StudentGPT"
    assert r.model["file"] == str(EXAMPLE) and len(r.model["file_sha256"]) == 64
    assert r.summary.flops_source == "counted"
    assert r.summary.flops_per_step == r.model["forward_flops"] + r.model["backward_flops"]
    ranges = {str(row.get("range") or row.get("name")).lstrip(":") for row in r.profile.tables["nvtx_sum"]}
    assert {"blocks.0", "blocks.1.mlp", "forward", "backward"} <= ranges
    assert "student_model.py:build (factory, StudentGPT" in markdown(r)


@pytest.mark.slow
def test_a_model_that_prints_leaves_the_event_stream_whole(tmp_path):
    path = tmp_path / "loud.py"
    path.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(EXAMPLE.parent)!r})
        from student_model import build as student

        print("building!")

        class Loud(student.__globals__["StudentGPT"]):
            def forward(self, ids):
                print("forward", ids.shape)
                return super().forward(ids)

        def build(ctx, vocab_size):
            print("hello from build")
            return Loud(vocab_size, ctx, 32, 1, 4)
        """))
    out = cli("--model", f"{path}:build", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["data"]["status"] == "ok"


@pytest.mark.slow
def test_wrong_logits_are_one_line_and_exit_2(tmp_path):
    path = tmp_path / "flat.py"
    path.write_text("import torch\n\ndef build(ctx, vocab_size):\n    return torch.nn.Embedding(vocab_size, 8)\n")
    out = cli("--model", f"{path}:build")
    assert out.returncode == 2, out.stderr[-2000:]
    assert "logits of shape (2, 16, 8), not (batch, ctx, vocab) = (2, 16, 10000)" in out.stderr


@pytest.mark.slow
def test_a_forward_that_raises_in_the_first_step_is_a_model_error(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(textwrap.dedent("""\
        import torch

        class Broken(torch.nn.Module):
            def __init__(self, vocab_size):
                super().__init__()
                self.emb = torch.nn.Embedding(vocab_size, 8)

            def forward(self, ids):
                raise ValueError("wrong mask shape")

        def build(ctx, vocab_size):
            return Broken(vocab_size)
        """))
    out = cli("--model", f"{path}:build", "--json")
    assert out.returncode == 2, out.stderr[-2000:]
    said = " ".join(out.stderr.split())                # the console wraps long lines on stderr
    assert "broken.py:build's first step raised ValueError: wrong mask shape (broken.py:9 in forward)" in said
    assert "Traceback" not in out.stderr
    record = json.loads(out.stdout)["data"]          # the record is kept, its error said as bad input
    assert record["status"] == "error" and record["error"]["kind"] == "spec"


def _command(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", name, *args], capture_output=True,
                          text=True, timeout=1500)


@pytest.mark.slow
def test_compare_varies_the_model():
    pytest.importorskip("transformers")
    out = _command("compare", "--size", "tiny", "--vary", "model=builtin,hf:llama", "--json", *FAST)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = [RunRecord.from_dict(r) for r in json.loads(out.stdout)["data"]["runs"]]
    assert [(r.status, r.spec.model, r.spec.size) for r in runs] == [("ok", "builtin", "tiny"), ("ok", "hf:llama", "tiny")]
    assert runs[1].model["architecture"] == "LlamaForCausalLM" and runs[0].model["architecture"] == "TransformerLM"


@pytest.mark.slow
def test_a_sweep_takes_the_model_and_its_sizes():
    pytest.importorskip("transformers")
    out = _command("sweep", "--model", "hf:llama", "--sizes", "tiny", "--ctx", "16", "--mode", "fwd", "--batch", "2",
                   "--warmup", "0", "--steps", "2", "--device", "cpu", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    cells = json.loads(out.stdout)["data"]["runs"]
    assert [(c["status"], c["spec"]["model"], c["model"]["architecture"]) for c in cells] == [
        ("ok", "hf:llama", "LlamaForCausalLM")]
    refused = _command("sweep", "--model", "hf:llama", "--sizes", "tiny,small", "--device", "cpu")
    assert refused.returncode == 2 and "hf:llama has tiny, 1B" in refused.stderr


def test_missing_file_and_unknown_size_are_refused_before_any_process():
    for args, said in ((["--model", "nowhere.py:build"], "model: no file nowhere.py"),
                       (["--model", "hf:gpt2", "--size", "8B"], "size: hf:gpt2 has tiny, 124M")):
        out = cli(*args)
        assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["run", "sweep", "ladder"])
def test_an_hf_model_on_the_cpu_is_refused_for_what_is_wrong_not_for_a_size_never_given(command):
    def said(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", command, *args, "--device", "cpu"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and out.stdout == "", out.stderr
        return out.stderr.strip()

    assert said("--model", "hf:nonesuch").startswith("perfconsole: error: model: transformers has no architecture "
                                                     "'nonesuch'")
    assert said("--model", "hf:mistral") == ("perfconsole: error: size: hf:mistral has no tiny shape, the cpu "
                                             "default; name one with --size: default | custom "
                                             "(default: its config's own shape)")


def test_old_snapshots_load_as_builtin_with_formula_flops():
    for path in sorted((ROOT / "snapshots").glob("tiny-cpu-train-*.json")):
        r = store.load(path)
        assert r.spec.model == "builtin" and r.model is None
        assert r.spec.label().startswith("tiny ")
        assert "- model: tiny (d_model 64" in markdown(r)
