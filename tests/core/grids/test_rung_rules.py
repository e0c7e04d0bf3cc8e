"""A ladder's rungs and validation read the same rules (core.settings.rules): for every rung of both sequences over
a set of valid specs, `Rung.ruled_out`, `unmet` and `RunSpec.validate` say the same of its cell."""
from __future__ import annotations

import pytest

from perfconsole.core.grids.ladder import LadderSpec
from perfconsole.core.grids.rungs import DP_RUNGS, RUNGS
from perfconsole.core.settings import SpecError
from perfconsole.core.settings.rules import broken, unmet
from tests.helpers import RULE_BASES


def refusal(spec) -> str | None:
    try:
        spec.validate()
    except SpecError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("base", RULE_BASES.values(), ids=RULE_BASES.keys())
@pytest.mark.parametrize("procs", [1, 2])
def test_ruled_out_unmet_and_validation_agree_on_every_rung(base, procs):
    parallel = "none" if procs == 1 else base.parallel if base.parallel != "none" else "ddp"
    one = {"optimize_ddp": "ddp_optimizer"} if procs == 1 else {}   # a DDP setting: no one-process base keeps it
    base = base.with_(mode="train", nproc=procs, parallel=parallel, **one)
    ladder = LadderSpec(base, tuple(r.name for r in (DP_RUNGS if procs > 1 else RUNGS) if not r.models
                                    or base.model_kind in r.models))
    climbed = ladder.climb()
    assert len(climbed) == len(ladder.names) and ladder.validate()
    for rung, below, cell in climbed:
        assert unmet(below) is None, (rung.name, unmet(below))   # what a rung climbs from keeps every rule
        why, first, said = rung.ruled_out(below), unmet(cell), refusal(cell)
        assert (why is None) == (first is None) == (said is None), (rung.name, why, first, said)
        if why is not None:
            assert first[1] == why and said in {f"{field}: {reason}" for field, reason in broken(cell)}, rung.name


def test_a_rung_ruled_out_by_a_rule_on_another_setting_says_that_rule():
    """The compile rung adds nothing that compile itself needs, yet breaks warm-up's rule: its own reason."""
    base = RULE_BASES["cpu tiny"].with_(warmup=0)
    compiled = next(r for r in RUNGS if r.name == "compile")
    assert compiled.ruled_out(base) == ("compile needs at least 1 warm-up step: the first call compiles, which "
                                        "takes seconds and is no step's time")
