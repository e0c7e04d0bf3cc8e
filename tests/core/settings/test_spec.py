import pytest

from perfconsole.core.settings import RunSpec, SpecError


def test_defaults_are_valid():
    assert RunSpec().validate() == RunSpec()


@pytest.mark.parametrize("changes, field, allowed", [
    ({"size": "huge"}, "size", "tiny, small, medium, large, xl, 2.7B, custom"),
    ({"precision": "fp8"}, "precision", "fp32, bf16, fp16"),
    ({"mode": "eval"}, "mode", "fwd, fwd_bwd, train"),
    ({"attention": "flash"}, "attention", "naive, sdpa"),
    ({"device": "tpu"}, "device", "cuda, cpu"),
    ({"profile": "nvprof"}, "profile", "none, nsys, torch, ncu"),
])
def test_bad_choice_names_field_and_allowed_values(changes, field, allowed):
    with pytest.raises(SpecError) as e:
        RunSpec(**changes).validate()
    assert e.value.field == field
    assert str(e.value).startswith(f"{field}: must be one of {allowed}")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("field, value", [("ctx", 0), ("batch", -1), ("steps", 0), ("warmup", -1),
                                          ("ctx", 2.5), ("steps", True), ("ctx", "512")])
def test_bad_numbers(field, value):
    with pytest.raises(SpecError) as e:
        RunSpec(**{field: value}).validate()
    assert e.value.field == field


def test_zero_warmup_is_allowed_except_where_the_first_call_compiles():
    RunSpec(warmup=0).validate()
    RunSpec(warmup=1, compile=True).validate()
    with pytest.raises(SpecError) as e:   # measured, `--compile --warmup 0` made step 1 of 3 take 10,459 ms
        RunSpec(warmup=0, compile=True).validate()
    assert e.value.field == "warmup" and "compile needs at least 1 warm-up step" in str(e.value)


def test_custom_needs_all_dims_and_divisible_heads():
    with pytest.raises(SpecError) as e:
        RunSpec(size="custom", d_model=64, d_ff=256, n_layers=2).validate()
    assert e.value.field == "size" and str(e.value).endswith("missing --n-heads")
    with pytest.raises(SpecError) as e:  # every missing one is named, as the flags that give it
        RunSpec(size="custom", d_model=64).validate()
    assert str(e.value) == "size: custom needs --d-model --d-ff --n-layers --n-heads; missing --d-ff --n-layers --n-heads"
    with pytest.raises(SpecError) as e:
        RunSpec(size="custom", d_model=64, d_ff=256, n_layers=2, n_heads=3).validate()
    assert "divide" in str(e.value)
    spec = RunSpec(size="custom", d_model=64, d_ff=256, n_layers=2, n_heads=4).validate()
    assert spec.dims() == (64, 256, 2, 4)


def test_dims_only_with_custom():
    with pytest.raises(SpecError) as e:
        RunSpec(size="small", d_model=64).validate()
    assert e.value.field == "d_model"


def test_cuda_only_features_refused_on_cpu():
    with pytest.raises(SpecError) as e:
        RunSpec(device="cpu", memory=True).validate()
    assert e.value.field == "memory"
    with pytest.raises(SpecError) as e:
        RunSpec(device="cpu", profile="nsys").validate()
    assert e.value.field == "profile"


def test_round_trip_and_unknown_fields():
    spec = RunSpec(size="tiny", ctx=32, precision="bf16", compile=True)
    assert RunSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(SpecError) as e:
        RunSpec.from_dict({**spec.to_dict(), "colour": "red"})
    assert e.value.field == "colour"


@pytest.mark.parametrize("changes, field, allowed", [
    ({"optimizer": "sgd"}, "optimizer", "fused, foreach, forloop"),
    ({"compile": True, "compile_mode": "fast"}, "compile_mode", "default, reduce-overhead, max-autotune"),
    ({"kernels": "apex"}, "kernels", "torch, liger"),
])
def test_ladder_knobs_name_field_and_allowed_values(changes, field, allowed):
    with pytest.raises(SpecError) as e:
        RunSpec(**changes).validate()
    assert e.value.field == field and str(e.value).startswith(f"{field}: must be one of {allowed}")


def test_ladder_knobs_need_what_they_build_on_and_show_in_the_label():
    with pytest.raises(SpecError, match="compile_mode: reduce-overhead needs compile"):
        RunSpec(compile_mode="reduce-overhead").validate()
    with pytest.raises(SpecError, match="fp8: must be true or false"):
        RunSpec(fp8="yes").validate()
    with pytest.raises(SpecError, match="peak_gbps: must be a positive number"):
        RunSpec(peak_gbps=0).validate()
    assert RunSpec().label() == "small ctx256 b4 fp32 fwd_bwd"  # the defaults are today's program, unnamed
    spec = RunSpec(compile=True, compile_mode="reduce-overhead", optimizer="forloop", kernels="liger", fp8=True,
                   precision="bf16")
    assert spec.validate().label() == "small ctx256 b4 bf16 fwd_bwd compile adamw-forloop reduce-overhead liger fp8"
@pytest.mark.parametrize("changes, field, text", [
    ({"nproc": 2}, "parallel", "must be ddp or fsdp with nproc 2"),
    ({"parallel": "ddp"}, "parallel", "must be none with one process"),
    ({"nproc": 0}, "nproc", "must be from 1 to 64"),
    ({"nproc": 2, "parallel": "zero"}, "parallel", "must be one of none, ddp, fsdp"),
    ({"nproc": 2, "parallel": "fsdp", "bucket_mb": 50.0}, "bucket_mb", "needs parallel ddp"),
    ({"nproc": 2, "parallel": "ddp", "bucket_mb": -1.0}, "bucket_mb", "positive number"),
    ({"nproc": 2, "parallel": "ddp", "comm_hook": "fp8"}, "comm_hook", "must be one of none, bf16"),
    ({"nproc": 2, "parallel": "fsdp", "grad_as_bucket_view": True}, "grad_as_bucket_view", "needs parallel ddp"),
    ({"nproc": 2, "parallel": "ddp", "mode": "fwd"}, "mode", "needs gradients"),
    ({"nproc": 2, "parallel": "ddp", "reshard": False}, "reshard", "needs parallel fsdp"),
    ({"nproc": 2, "parallel": "fsdp", "reshard": "no"}, "reshard", "must be true or false"),
    ({"nproc": 2, "parallel": "ddp", "precision": "bf16", "fsdp_bf16": True}, "fsdp_bf16", "needs parallel fsdp"),
    ({"nproc": 2, "parallel": "fsdp", "fsdp_bf16": True}, "fsdp_bf16", "needs precision bf16, not 'fp32'"),
    ({"nproc": 2, "parallel": "fsdp", "precision": "bf16", "weights": "bf16", "fsdp_bf16": True}, "fsdp_bf16",
     "bf16 already"),
    ({"nproc": 2, "parallel": "fsdp", "precision": "bf16", "fsdp_bf16": 1}, "fsdp_bf16", "must be true or false"),
    ({"nproc": 2, "parallel": "ddp", "optimize_ddp": "no_optimization"}, "optimize_ddp", "without compile"),
    ({"nproc": 2, "parallel": "fsdp", "compile": True, "optimize_ddp": "no_optimization"}, "optimize_ddp",
     "needs parallel ddp and compile, not parallel 'fsdp'"),
    ({"nproc": 2, "parallel": "ddp", "compile": True, "optimize_ddp": "fused"}, "optimize_ddp",
     "must be one of ddp_optimizer, no_optimization, python_reducer"),
    ({"nproc": 2, "parallel": "ddp", "optimize_ddp": "python_reducer"}, "optimize_ddp", "without compile"),
    ({"nproc": 2, "parallel": "ddp", "compile": True, "optimize_ddp": "python_reducer", "comm_hook": "bf16"},
     "optimize_ddp", "needs comm_hook none, not 'bf16'"),
    ({"nproc": 2, "parallel": "ddp", "compile": True, "optimize_ddp": "python_reducer",
      "compile_mode": "reduce-overhead"}, "optimize_ddp", "use compile_mode default"),
    ({"nproc": 2, "parallel": "fsdp", "mode": "train", "zero": True}, "zero", "needs parallel ddp, not 'fsdp'"),
    ({"nproc": 2, "parallel": "ddp", "mode": "fwd_bwd", "zero": True}, "zero", "needs mode train, not 'fwd_bwd'"),
    ({"zero": True}, "zero", "needs parallel ddp, not 'none'"),
    ({"nproc": 2, "parallel": "fsdp", "mode": "train", "zero2": True}, "zero2", "needs parallel ddp, not 'fsdp'"),
    ({"nproc": 2, "parallel": "ddp", "mode": "fwd_bwd", "zero2": True, "grad_as_bucket_view": True}, "zero2",
     "needs mode train, not 'fwd_bwd'"),
    ({"nproc": 2, "parallel": "ddp", "mode": "train", "zero2": True}, "zero2", "needs grad_as_bucket_view"),
    ({"nproc": 2, "parallel": "ddp", "mode": "train", "zero2": True, "grad_as_bucket_view": True, "comm_hook": "bf16"},
     "zero2", "needs comm_hook none, not 'bf16'"),
    ({"nproc": 2, "parallel": "ddp", "mode": "train", "zero2": True, "grad_as_bucket_view": True, "compile": True,
      "optimize_ddp": "python_reducer"}, "zero2", "compiled autograd"),
    ({"nproc": 2, "parallel": "ddp", "mode": "train", "zero2": True, "grad_as_bucket_view": True, "zero": True},
     "zero2", "cannot run beside zero"),
    ({"nproc": 2, "parallel": "ddp", "mode": "train", "zero2": True, "grad_as_bucket_view": True,
      "precision": "fp16"}, "zero2", "needs precision fp32 or bf16, not 'fp16'"),
    ({"scaling": True}, "scaling", "nproc 2 or more"),
    ({"nproc": 2, "parallel": "ddp", "repeat": 3}, "repeat", "use repeat 1"),
])
def test_data_parallel_fields(changes, field, text):
    with pytest.raises(SpecError) as e:
        RunSpec(**changes).validate()
    assert e.value.field == field and text in str(e.value) and "\n" not in str(e.value)


def test_a_valid_job_and_old_snapshots_without_the_fields():
    job = RunSpec(nproc=2, parallel="ddp", bucket_mb=50, grad_as_bucket_view=True, comm_hook="bf16",
                  scaling=True).validate()
    # Two jobs that differ only in their data-parallel settings have different names in Runs and Compare.
    assert job.label() == "small ctx256 b4 fp32 fwd_bwd ddpx2 bucket50 bucket-view bf16-hook"
    fsdp = RunSpec(nproc=2, parallel="fsdp", precision="bf16", reshard=False, fsdp_bf16=True).validate()
    assert fsdp.label() == "small ctx256 b4 bf16 fwd_bwd fsdpx2 no-reshard fsdp-bf16"
    whole = RunSpec(nproc=2, parallel="ddp", compile=True, optimize_ddp="no_optimization").validate()
    assert whole.label() == "small ctx256 b4 fp32 fwd_bwd compile ddpx2 no-ddp-optimizer"
    old = {k: v for k, v in RunSpec().to_dict().items()
           if k not in ("nproc", "parallel", "bucket_mb", "grad_as_bucket_view", "comm_hook", "scaling", "reshard",
                        "fsdp_bf16", "optimize_ddp")}
    assert RunSpec.from_dict(old).nproc == 1


def test_two_custom_shapes_never_share_a_name():
    a = RunSpec(size="custom", d_model=64, d_ff=256, n_layers=2, n_heads=4, device="cpu")
    b = a.with_(d_ff=512)
    assert a.label() == "custom d64 ff256 l2 h4 ctx256 b4 fp32 fwd_bwd"
    assert a.label() != b.label() and RunSpec(size="custom").model_label() == "custom"
