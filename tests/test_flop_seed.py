"""The suite's shared FLOP counts (tests/flop_seed.py): a test's folder gets the session's, the built-in
model's new counts join them, a factory's and a formula's do not."""
from __future__ import annotations

import json

import flop_seed


def _key(model: str, ctx: int) -> str:
    return json.dumps([1, "2.13.0+cpu", model, "tiny", [64, 256, 2, 4], [], ctx, 4, 10000, 1411392, None])


COUNTED = {"forward_flops": 1.0, "backward_flops": 2.0, "flops_source": "counted", "counted_on": "meta"}


def test_counts_travel_from_test_to_test_through_the_session(tmp_path):
    session, first, second = (tmp_path / n for n in ("session", "first", "second"))
    for d in (session, first, second):
        d.mkdir()
    flop_seed.seed(session, first)
    assert not (first / "flops.json").exists()                     # nothing counted yet: nothing given
    made = {_key("builtin", 256): COUNTED, _key("factory", 256): COUNTED,
            _key("builtin", 128): {**COUNTED, "flops_source": "formula"}}
    (first / "flops.json").write_text(json.dumps(made))
    flop_seed.keep(session, first)
    flop_seed.seed(session, second)
    assert json.loads((second / "flops.json").read_text()) == {_key("builtin", 256): COUNTED}


def test_a_broken_count_file_is_left_out(tmp_path):
    (tmp_path / "flops.json").write_text("[1, 2")
    flop_seed.keep(tmp_path, tmp_path)
    assert (tmp_path / "flops.json").read_text() == "[1, 2"
