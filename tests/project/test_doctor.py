"""Set-up checks and the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from statekit import doctor
from statekit.__main__ import build_parser, main
from statekit.doctor import Check, parse_java_version, run_checks


def test_every_check_passes_on_this_machine():
    checks = run_checks()
    assert [c.name for c in checks] == [
        "java", "java module jdk.incubator.vector", "pyspark", "apache kafka jars",
        "tansu broker (the alternative without Java)", "loopback port"]
    failed = [c.line() for c in checks if not c.ok]
    assert failed == []
    assert "Java 17" in checks[0].detail or "Java 2" in checks[0].detail


@pytest.mark.parametrize("text, version", [
    ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
    ('java version "1.8.0_392"\nJava(TM) SE Runtime Environment', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ('openjdk version "11.0.2" 2019-01-15', 11),
    ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "17.0.1-internal"', 17),
    ("bash: java: command not found", None),
    ("", None),
])
def test_java_version_parser(text, version):
    assert parse_java_version(text) == version


def test_old_java_fails_with_a_fix(monkeypatch):
    class Done:
        stdout, stderr, returncode = "", 'java version "1.8.0_392"', 0

    monkeypatch.setattr(doctor, "java_executable", lambda: "/opt/java8/bin/java")
    monkeypatch.setattr(doctor, "_run", lambda cmd, timeout=30: Done())
    check = doctor.check_java()
    assert not check.ok
    assert "Java 8" in check.detail and "/opt/java8/bin/java" in check.detail
    assert check.line().startswith("FAIL java: ")
    assert "— fix: apt-get install openjdk-17-jre-headless" in check.line()


def test_missing_vector_module_fails_with_the_apt_fix(monkeypatch):
    class Done:
        stdout, stderr, returncode = "java.base@17.0.2\njava.sql@17.0.2\n", "", 0

    monkeypatch.setattr(doctor, "java_executable", lambda: "/pip/jre/bin/java")
    monkeypatch.setattr(doctor, "_run", lambda cmd, timeout=30: Done())
    check = doctor.check_vector_module()
    assert not check.ok and "openjdk-17-jre-headless" in check.fix


def test_no_java_at_all(monkeypatch):
    monkeypatch.setattr(doctor, "java_executable", lambda: None)
    assert not doctor.check_java().ok
    assert not doctor.check_vector_module().ok


def test_a_crashing_check_is_reported_not_raised(monkeypatch):
    def check_boom() -> Check:
        raise RuntimeError("kaput")

    monkeypatch.setattr(doctor, "CHECKS", [check_boom])
    [check] = run_checks()
    assert not check.ok and check.name == "boom" and "kaput" in check.detail


def test_line_format():
    assert Check("x", True, "fine").line() == "OK   x: fine"
    assert Check("x", False, "broken", "do y").line() == "FAIL x: broken — fix: do y"


def test_doctor_command_prints_one_line_per_check_and_exits_0():
    out = subprocess.run([sys.executable, "-m", "statekit", "doctor"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 6
    assert all(line.startswith("OK   ") for line in lines)


def test_doctor_exit_code_is_1_when_a_check_fails(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "CHECKS", [lambda: Check("thing", False, "gone", "get it")])
    assert main(["doctor"]) == 1
    assert capsys.readouterr().out == "FAIL thing: gone — fix: get it\n"


def test_demo_options():
    args = build_parser().parse_args(["demo"])
    assert (args.out, args.bootstrap_servers, args.master) == ("statekit-out", None, None)
    args = build_parser().parse_args(
        ["demo", "--out", "o", "--bootstrap-servers", "h:9092", "--master", "local[4]"])
    assert (args.out, args.bootstrap_servers, args.master) == ("o", "h:9092", "local[4]")


@pytest.mark.parametrize("argv", [[], ["frobnicate"]])
def test_unknown_or_missing_command_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "doctor" in capsys.readouterr().err
