"""One declaration per setting: every RunSpec field reaches the CLI's flags, the launch form and the label
from its declaration in core.settings alone, with no second list to keep in step."""
from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from perfconsole.core.cli.main import build_parser
from perfconsole.core.cli.spec_args import add_spec_arguments, spec_from_args
from perfconsole.core.settings.declarations import SECTIONS, declared, flag_of, kind_for
from perfconsole.core.settings.kinds import Flag, Pairs
from perfconsole.core.settings import RunSpec, same_program
from perfconsole.tui.panes.launch import ORDER

# A value other than the default for each field, valid beside the others where it needs them.
OTHER = {"model": "hf:llama", "model_args": ("num_key_value_heads=2",), "size": "tiny", "vocab_size": 512, "seed": 3,
         "ctx": 64, "batch": 2, "precision": "bf16", "mode": "train", "warmup": 2, "steps": 3, "attention": "sdpa",
         "compile": True, "tf32": True, "step_sync": True, "profile": "torch", "memory": True, "peak_tflops": 100.0,
         "peak_gbps": 1000.0, "optimizer": "forloop", "compile_mode": "max-autotune", "kernels": "liger", "sdpa_kernel": "math", "sdpa_causal": True, "fp8": True,
         "weights": "bf16", "checkpoint": "blocks", "nproc": 2, "parallel": "ddp", "bucket_mb": 50.0, "grad_as_bucket_view": True,
         "comm_hook": "bf16", "reshard": False, "fsdp_bf16": True, "optimize_ddp": "no_optimization",
         "nccl_priority": True, "zero": True, "zero2": True, "scaling": True, "repeat": 2, "device": "cpu", "d_model": 64, "d_ff": 128, "n_layers": 2, "n_heads": 4}
NOT_ON_THE_FORM = {"vocab_size", "seed", "step_sync", "memory", "peak_tflops", "peak_gbps", "optimizer", "compile_mode",
                   "kernels", "sdpa_kernel", "sdpa_causal", "fp8", "weights",
                   "nccl_priority", "zero", "zero2"}   # the ladder's knobs and the overrides: flags only
NOT_IN_THE_LABEL = {"model", "model_args", "size", "d_model", "d_ff", "n_layers", "n_heads",  # the model's words
                    "vocab_size", "seed", "warmup", "steps", "memory", "peak_tflops", "peak_gbps", "parallel",
                    "scaling", "device"}


def test_every_field_is_declared_in_a_known_section():
    names = [f.name for f in fields(RunSpec)]
    assert [f.name for f, _ in declared(RunSpec)] == names
    assert {s.section for _, s in declared(RunSpec)} <= set(SECTIONS)
    assert set(OTHER) == set(names), "a new field needs a value here for the checks below"


def test_every_field_has_a_flag_that_sets_it():
    p = argparse.ArgumentParser()
    add_spec_arguments(p)
    for f, s in declared(RunSpec):
        flag = flag_of(f, s)
        assert flag is not None, f.name
        value = OTHER[f.name]
        if isinstance(kind_for(f), Flag):
            argv = [flag] if value != f.default else []
        elif isinstance(kind_for(f), Pairs):
            argv = [x for v in value for x in (flag, v)]
        else:
            argv = [flag, str(value)]
        got = spec_from_args(p.parse_args(argv), validate=False)
        assert getattr(got, f.name) == value, (f.name, argv)


def test_every_field_is_on_the_form_or_said_not_to_be():
    assert set(ORDER) | NOT_ON_THE_FORM == {f.name for f in fields(RunSpec)}
    assert not set(ORDER) & NOT_ON_THE_FORM


@pytest.mark.parametrize("name", sorted(set(OTHER) - NOT_IN_THE_LABEL))
def test_every_setting_that_changes_the_run_shows_in_its_label(name):
    base = RunSpec(device="cpu", size="tiny")
    changed = base.with_(**{name: OTHER[name]}, **({"nproc": 2} if name in ("bucket_mb", "grad_as_bucket_view",
                                                                            "comm_hook", "reshard", "fsdp_bf16",
                                                                            "optimize_ddp") else {}))
    assert changed.label() != base.label(), name


def test_a_model_field_shows_in_the_model_label_and_the_same_program_comes_from_the_declarations():
    assert RunSpec(model="hf:llama", size="1B").label().startswith("hf:llama 1B ")
    assert RunSpec(size="custom", d_model=64, d_ff=128, n_layers=2, n_heads=4).label().startswith(
        "custom d64 ff128 l2 h4 ")
    program = same_program()
    assert {"model", "model_args", "size", "ctx", "batch", "precision", "mode", "weights"} <= set(program)
    assert not {"steps", "warmup", "profile", "repeat", "nproc", "seed"} & set(program)


def test_a_command_with_other_defaults_says_them_in_its_help():
    text = build_parser()._subparsers._group_actions[0].choices["ladder"].format_help()
    assert "defaults that differ from `run`: ctx 512, precision bf16, warmup 3, mode train" in " ".join(text.split())
    assert "(run: ctx 256, precision fp32, warmup 5, mode fwd_bwd)" in " ".join(text.split())
