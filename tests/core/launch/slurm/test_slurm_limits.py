"""A job's time limit against its partition's: Slurm's time formats, and the partition limits read from
`scontrol show partition` and `sinfo`, on their real output (fixtures/: the local cluster of
scripts/local_slurm.sh, and the same Slurm 22.05 with five partitions, *_five*)."""
from __future__ import annotations

from pathlib import Path

import pytest

from perfconsole.core.launch.slurm_limits import (DEFAULT_TIME, Partition, minutes, parse_scontrol, parse_sinfo,
                                                  read_partitions, settle_time, time_line)
from perfconsole.core.launch.slurm_options import SlurmOptionError, SlurmOptions

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


FIVE = parse_scontrol(fixture("scontrol_partitions_five.txt"))


@pytest.mark.parametrize("text, want", [("30", 30), ("30:00", 30), ("30:30", 31), ("0:30:59", 31), ("00:30:00", 30),
                                        ("2:00:00", 120), ("1-00:00:00", 1440), ("2-0", 2880), ("1-2:3", 1563),
                                        ("1-2:3:4", 1564), ("UNLIMITED", None), ("infinite", None), ("0", None)])
def test_slurm_time_formats_in_minutes_as_slurm_counts_them(text, want):
    assert minutes(text) == want


@pytest.mark.parametrize("text", ["soon", "", "1:2:3:4", "1h", "-5", "1-"])
def test_text_in_none_of_slurms_time_formats_is_a_value_error(text):
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        minutes(text)


def test_the_local_clusters_one_partition():
    assert parse_scontrol(fixture("scontrol_partitions_local.txt")) == {
        "debug": Partition("debug", default=True, default_time=None, max_time="00:30:00")}
    assert parse_sinfo(fixture("sinfo_partitions_local.txt")) == {
        "debug": Partition("debug", default=True, default_time=None, max_time="30:00")}


def test_five_partitions_from_scontrol_one_line_each_or_multi_line():
    assert FIVE == {
        "debug": Partition("debug", True, None, "00:30:00"),
        "gpu": Partition("gpu", False, "02:00:00", "2-00:00:00"),
        "long": Partition("long", False, "1-00:00:00", None),
        "short": Partition("short", False, "00:10:00", "00:15:00"),
        "quick": Partition("quick", False, "00:06:00", "00:46:00"),   # given as 00:05:30 and 45:30: rounded up
    }
    assert parse_scontrol(fixture("scontrol_partitions_five_multiline.txt")) == FIVE


def test_sinfo_gives_the_same_limits_in_its_own_spelling():
    got = parse_sinfo(fixture("sinfo_partitions_five.txt"))
    assert got["long"] == Partition("long", False, "1-00:00:00", None)   # "infinite"
    assert got["debug"].default_time is None                             # "n/a"

    def limits(p: Partition) -> tuple:
        return (p.default, p.default_time and minutes(p.default_time), p.max_time and minutes(p.max_time))

    assert {n: limits(p) for n, p in got.items()} == {n: limits(p) for n, p in FIVE.items()}


@pytest.mark.parametrize("partition, time, source", [
    (None, "00:30:00", "partition debug's MaxTime"),          # the default partition; 60 is over its MaxTime
    ("gpu", "02:00:00", "partition gpu's DefaultTime"),       # its own default, over perfconsole's 60
    ("short", "00:10:00", "partition short's DefaultTime"),
    ("long", "1-00:00:00", "partition long's DefaultTime"),
    ("short,gpu", "00:10:00", "partition short,gpu's DefaultTime"),   # the lowest, so it fits either
    ("no-such", DEFAULT_TIME, "perfconsole's default"),       # unknown here: sbatch --test-only names it
])
def test_no_time_given_takes_the_partitions_default_or_its_max_time_when_lower(partition, time, source):
    opts = settle_time(SlurmOptions(partition=partition), partitions=FIVE)
    assert (opts.time, opts.time_from) == (time, source)
    assert opts.sbatch_flags()[0] == f"--time={time}"


def test_no_default_and_a_max_time_over_perfconsoles_leaves_perfconsoles_default():
    parts = {"a": Partition("a", True, None, "2-00:00:00"), "b": Partition("b", False, None, None)}
    for name in ("a", "b"):
        opts = settle_time(SlurmOptions(partition=name), partitions=parts)
        assert (opts.time, opts.time_from) == (DEFAULT_TIME, "perfconsole's default")
    assert settle_time(SlurmOptions(), partitions={}).time == DEFAULT_TIME   # no scontrol, no sinfo
    assert time_line(settle_time(SlurmOptions(), partitions={})) == \
        "slurm: time limit 60 min per job, perfconsole's default (--slurm-time sets another)"


@pytest.mark.parametrize("partition, time", [(None, "90"), (None, "30:30"), (None, "0"), ("short", "16"),
                                             ("short,gpu", "1:00:00")])
def test_a_given_time_over_the_max_time_is_refused_naming_the_limit(partition, time):
    with pytest.raises(SlurmOptionError) as info:
        settle_time(SlurmOptions(partition=partition, time=time), partitions=FIVE)
    name = partition or "debug"
    limit = FIVE[name].max_time if name in FIVE else "00:15:00"
    assert str(info.value) == (f"--slurm-time {time} is over partition {name}'s MaxTime of {limit}: "
                               "ask for that or less, or another partition")


def test_a_given_time_within_the_limit_or_not_a_time_at_all_is_kept_for_slurm_to_judge():
    for partition, time in ((None, "30"), (None, "0:30:00"), ("long", "30-00:00:00"), (None, "soon"),
                            ("no-such", "90")):
        opts = settle_time(SlurmOptions(partition=partition, time=time), "the slurm config's time", FIVE)
        assert (opts.time, opts.time_from) == (time, "the slurm config's time")


def test_the_config_files_time_and_a_pass_through_time_are_named_as_such():
    with pytest.raises(SlurmOptionError, match="^the slurm config's time 45 is over partition debug's"):
        settle_time(SlurmOptions(time="45"), "the slurm config's time", FIVE)
    with pytest.raises(SlurmOptionError, match="^--slurm-option time=2:00:00 is over partition short's"):
        settle_time(SlurmOptions(partition="short", options={"time": "2:00:00"}), partitions=FIVE)
    # The pass-through's partition is the one sbatch gets, so its limits are the ones that count.
    assert settle_time(SlurmOptions(partition="debug", options={"partition": "gpu"}), partitions=FIVE).time == "02:00:00"


def test_without_scontrol_or_sinfo_nothing_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert read_partitions() == {}


@pytest.mark.slurm
def test_the_local_cluster_answers_as_its_fixture_says(slurm_cluster):
    assert read_partitions() == parse_scontrol(fixture("scontrol_partitions_local.txt"))
