"""spark_session(jit=...): the driver JVM a session starts runs C1 alone by default, the JVM's
own tiers with jit="full"; a mode it does not know is refused before any JVM starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from statekit.errors import BadArgument
from statekit.spark.session import (
    JIT_OPTIONS,
    QUICK_CODE_CACHE,
    DriverStart,
    driver_java_options,
    java_options,
    spark_session,
)


@pytest.mark.parametrize("bad", ["fast", "Quick", "c1", "", None, 1, ["quick"]],
                         ids=["fast", "Quick", "c1", "empty", "None", "one", "a-list"])
def test_a_jit_mode_it_does_not_know_is_named_with_the_two_it_takes(bad):
    with pytest.raises(BadArgument) as caught:
        spark_session(jit=bad)
    assert caught.value.value == bad
    assert repr(bad) in str(caught.value)
    assert '"quick"' in str(caught.value) and '"full"' in str(caught.value)


@pytest.mark.parametrize("keyword", ["jitt", "archive", "warm_up"])
def test_a_keyword_that_is_no_start_field_is_named_with_the_ones_it_takes(keyword):
    with pytest.raises(BadArgument) as caught:
        spark_session(**{keyword: True})
    assert caught.value.value == keyword
    assert all(name in str(caught.value) for name in DriverStart.field_names())


SWITCHES = ["cached_worker_imports", "class_archive", "early_workers", "s3a"]


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("bad", ["no", "False", 0, 1, None, [True]],
                         ids=["no", "False-text", "zero", "one", "None", "a-list"])
def test_a_switch_given_anything_but_true_or_false_is_refused_before_any_jvm_starts(name, bad):
    """``early_workers="no"`` would be truthy: it is refused with its name, not taken as yes."""
    with pytest.raises(BadArgument) as caught:
        spark_session(**{name: bad})
    assert caught.value.value == bad
    assert str(caught.value) == f"bad {name}: {bad!r}; accepted: True or False"


@pytest.mark.parametrize("name", SWITCHES)
def test_a_switch_given_as_a_numpy_bool_is_a_plain_bool(name):
    import numpy as np

    for value in (True, False):
        start = DriverStart(**{name: np.bool_(value)})
        assert getattr(start, name) is value
        assert DriverStart.from_dict(start.to_dict()) == start


def test_start_options_given_both_ways_are_refused():
    with pytest.raises(BadArgument, match="each setting once"):
        spark_session(start=DriverStart(jit="full"), jit="quick")
    with pytest.raises(BadArgument, match="a DriverStart"):
        spark_session(start={"jit": "full"})


def test_the_driver_options_of_each_mode():
    quick = driver_java_options(class_archive=False)
    full = driver_java_options(class_archive=False, jit="full")
    assert quick == (f"{java_options()} -XX:TieredStopAtLevel=1 "
                     f"-XX:ReservedCodeCacheSize={QUICK_CODE_CACHE}")
    assert full == java_options()                  # the JVM's default tiers: no option at all
    assert "TieredStopAtLevel" not in full
    assert set(JIT_OPTIONS) == {"quick", "full"}


def _final_flags(options: str) -> dict[str, str]:
    """What a JVM started with ``options`` sets each of its flags to (``PrintFlagsFinal``)."""
    out = subprocess.run(["java", *options.split(), "-XX:+PrintFlagsFinal", "-version"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    flags = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "=":
            flags[parts[1]] = parts[3]
    return flags


def test_the_quick_mode_keeps_the_code_cache_of_the_jvms_own_tiers():
    """C1 alone reserves a 48 MB code cache, which a session of Spark queries fills within
    a minute, and a full cache turns the compiler off for good: the quick mode asks for the
    size the JVM gives its own tiers, and compiles with C1 only."""
    tiered, quick = _final_flags(JIT_OPTIONS["full"]), _final_flags(JIT_OPTIONS["quick"])
    alone = _final_flags("-XX:TieredStopAtLevel=1")
    assert int(alone["ReservedCodeCacheSize"]) < int(tiered["ReservedCodeCacheSize"])
    assert int(quick["ReservedCodeCacheSize"]) >= int(tiered["ReservedCodeCacheSize"])
    assert quick["ReservedCodeCacheSize"] == str(240 * 2**20)
    assert quick["TieredStopAtLevel"] == "1" and tiered["TieredStopAtLevel"] == "4"


_CHILD = """
import statekit as sk
from pyspark import SparkContext
spark = sk.spark_session('local[1]', app_name='statekit-test-jit'{kwargs})
pid = SparkContext._gateway.proc.pid
args = open(f'/proc/{{pid}}/cmdline').read().split(chr(0))
print('C1ONLY', '-XX:TieredStopAtLevel=1' in args, 'MINE', '-Dmine=1' in args,
      'ROWS', spark.range(7).count())
"""


@pytest.mark.slow
@pytest.mark.parametrize("kwargs, c1_only, mine", [
    ("", True, False), (", jit='quick'", True, False), (", jit='full'", False, False),
    # conf's own driver options are the person's: statekit adds neither JIT nor archive
    (", conf={'spark.driver.extraJavaOptions': '-Dmine=1'}", False, True),
], ids=["default", "quick", "full", "conf-own-options"])
def test_the_jvm_a_session_starts_runs_the_mode_asked_for(kwargs, c1_only, mine):
    """In a fresh process (its own JVM): the option is on the JVM's own command line, and the
    JVM runs a job either way."""
    out = subprocess.run([sys.executable, "-c", _CHILD.format(kwargs=kwargs)],
                         capture_output=True, text=True, timeout=600)
    assert f"C1ONLY {c1_only} MINE {mine} ROWS 7" in out.stdout, out.stderr[-3000:]
