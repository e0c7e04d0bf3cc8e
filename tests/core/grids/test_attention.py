"""The attention grid on the CPU: one child per cell, an OOM in the backward keeps the forward, exports."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from perfconsole.core import store
from perfconsole.core.reports import export
from perfconsole.core.grids.attention import AttentionCell, AttentionRecord, AttentionRunner, AttentionSpec
from perfconsole.core.settings import SpecError


def test_compile_adds_a_compiled_naive_variant_next_to_naive():
    spec = AttentionSpec((32, 16), (256, 64), batch=2, compile=True, device="cpu")
    assert spec.variants() == [("naive", False), ("naive", True), ("sdpa", False)]
    cells = spec.cells()
    assert len(cells) == 12
    assert [(c.variant, c.d, c.seq) for c in cells[:2]] == [("naive", 16, 64), ("naive", 16, 256)]


@pytest.mark.parametrize("kw, field", [
    (dict(impls=("flash",)), "impl"), (dict(seqs=()), "seqs"), (dict(iters=1), "iters"),
    (dict(compile=True, impls=("sdpa",)), "compile"), (dict(precisions=("fp8",)), "precision"),
])
def test_bad_specs_name_the_field(kw, field):
    d = dict(ds=(16,), seqs=(64,), device="cpu")
    d.update(kw)
    with pytest.raises(SpecError) as err:
        AttentionSpec(**d).validate()
    assert err.value.field == field


@pytest.mark.e2e
def test_grid_on_cpu_with_an_oom_in_the_backward(tmp_path):
    spec = AttentionSpec((8,), (16, 32), batch=2, warmup=1, iters=3, device="cpu").validate()
    rec = AttentionRecord.new(spec)
    save = tmp_path / "a.json"
    # index 1 is the backward measurement: the worker's real OOM path, in one cell only
    env = lambda c: {"PERFCONSOLE_FAULT": "oom:1"} if (c.impl, c.seq) == ("naive", 32) else None  # noqa: E731
    AttentionRunner(rec, cell_env=env, save_to=save, start_ahead=2).run()  # held cells, batches of 2
    status = {(c.cell.impl, c.cell.seq): c.status for c in rec.cells}
    assert status == {("naive", 16): "ok", ("naive", 32): "oom", ("sdpa", 16): "ok", ("sdpa", 32): "ok"}
    oom = next(c for c in rec.cells if c.status == "oom")
    assert oom.forward_ms is not None and oom.forward_ms.n == 3 and oom.backward_ms is None
    assert all(c.backward_ms.n == 3 for c in rec.cells if c.status == "ok")
    assert all(c.memory_before_backward_mib is None for c in rec.cells)  # no CUDA on this machine

    again = store.load(save)
    doc = json.loads(export.export(again, "json"))
    cells = {(c["impl"], c["seq"]): c for c in doc["cells"]}
    assert cells[("naive", 32)]["status"] == "oom" and cells[("naive", 32)]["backward_ms"] is None
    assert cells[("naive", 32)]["forward_ms"] > 0
    assert cells[("sdpa", 16)]["backward_ms"] > 0
    md = export.export(again, "md")
    assert "| 8 | 32 |" in md and "**OOM** |" in md
    assert "naive fp32 runs out of memory: d 8 from seq 32 (1 of them in the backward, after the forward fit)" in md
    assert "sdpa against naive: speedup" in md
    csv = export.export(again, "csv").splitlines()
    assert csv[0].startswith("d,seq,batch,impl,compile,variant") and len(csv) == 5


def test_cli_json_is_the_snapshot_and_exports_cells_with_times_and_status():
    p = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "attention", "--d", "8", "--seq", "16",
                        "--batch", "2", "--impl", "sdpa", "--warmup", "1", "--iters", "2", "--device", "cpu",
                        "--json"], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    grid = store.loads(p.stdout)  # --json prints the grid's snapshot
    assert grid.kind == "attention" and grid.status == "ok"
    (cell,) = json.loads(export.export(grid, "json"))["cells"]
    assert cell["status"] == "ok" and cell["forward_ms"] > 0 and cell["backward_ms"] > 0
    assert "[1/1] sdpa d8 seq16 b2 fp32" in p.stderr


def test_cli_rejects_a_bad_list_in_one_line():
    p = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "attention", "--d", "8,x", "--device", "cpu"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip() == "perfconsole: error: d: 'x' is not a valid value"


@pytest.mark.e2e
def test_worker_reports_a_bad_cell_as_a_spec_error():
    cell = json.dumps({**AttentionCell(8, 16, device="cpu").to_dict(), "impl": "flash"})
    # stdin stays open: the worker takes its EOF for the launcher's death
    p = subprocess.Popen([sys.executable, "-m", "perfconsole.core.grids.attention_worker", "--cell", cell],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = [json.loads(x) for x in p.stdout.read().splitlines()]
    assert p.wait(timeout=60) == 2
    p.stdin.close()
    assert lines[0]["type"] == "error" and lines[0]["kind"] == "spec" and "impl" in lines[0]["message"]
    assert lines[-1] == {"v": 1, "type": "finished", "status": "error"}


@pytest.mark.gpu
def test_cuda_cell_reads_memory_before_backward():
    spec = AttentionSpec((64,), (1024,), batch=4, impls=("naive", "sdpa"), warmup=2, iters=5, device="cuda").validate()
    rec = AttentionRecord.new(spec)
    AttentionRunner(rec).run()
    naive, sdpa = rec.cells
    assert naive.status == sdpa.status == "ok"
    # naive keeps the 4 x 1024 x 1024 fp32 probabilities (16 MiB) for the backward; SDPA does not
    assert naive.memory_before_backward_mib > sdpa.memory_before_backward_mib + 12
    assert naive.peak_allocated_mib >= naive.memory_before_backward_mib


def test_sdpa_cells_reach_the_fused_kernels():
    """The flash kernel takes only 4-D input; a 3-D call would silently run the math fallback (seen on
    an H200 as equal memory before backward for naive and sdpa). Forcing flash proves the fused path."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from perfconsole.core.grids.attention_worker import _attention_fn
    from perfconsole.model.transformer import naive_attention

    q, k, v = (torch.randn(2, 64, 16, requires_grad=True) for _ in range(3))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = _attention_fn("sdpa")(q, k, v)
        out.sum().backward()
    assert out.shape == (2, 64, 16)
    torch.testing.assert_close(out, naive_attention(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["naive", "sdpa"])
def test_cuda_cell_times_agree_with_torch_benchmark(impl):
    """The cell's CUDA-event times against torch.utils.benchmark in this process (synchronised
    wall-clock over many runs): forward, and forward + backward, within 10%."""
    import torch
    from torch.utils import benchmark

    from perfconsole.core.grids.attention_worker import _attention_fn

    spec = AttentionSpec((64,), (4096,), batch=8, impls=(impl,), warmup=5, iters=50, device="cuda").validate()
    rec = AttentionRecord.new(spec)
    AttentionRunner(rec, start_ahead=1).run()
    (cell,) = rec.cells
    assert cell.status == "ok"

    torch.backends.cuda.matmul.allow_tf32 = False
    q, k, v = (torch.randn(8, 4096, 64, device="cuda", requires_grad=True) for _ in range(3))
    grad = torch.randn(8, 4096, 64, device="cuda")
    fn = _attention_fn(impl)
    env = {"fn": fn, "q": q, "k": k, "v": v, "grad": grad}
    fwd = benchmark.Timer("fn(q, k, v)", globals=env).blocked_autorange(min_run_time=1.0).median * 1e3
    both = benchmark.Timer("fn(q, k, v).backward(grad)", globals=env).blocked_autorange(min_run_time=1.0).median * 1e3
    assert cell.forward_ms.mean == pytest.approx(fwd, rel=0.10)
    assert cell.forward_ms.mean + cell.backward_ms.mean == pytest.approx(both, rel=0.10)
