"""statekit._lazy: package exports and third-party modules imported on first use."""

from __future__ import annotations

import subprocess
import sys
import threading
import types

import pytest

from statekit._lazy import LazyModule, lazy_exports


def _fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def test_a_lazy_module_is_imported_at_its_first_attribute_and_not_before():
    out = _fresh("import sys; from statekit._lazy import LazyModule; "
                 "m = LazyModule('decimal'); before = 'decimal' in sys.modules; "
                 "print(before, repr(m), m.Decimal('1.5') * 2, 'decimal' in sys.modules, "
                 "repr(m))")
    assert out == ("False <lazy module 'decimal' (not imported yet)> 3.0 True "
                   "<lazy module 'decimal' (imported)>")


def test_its_attributes_are_the_modules_own_and_kept_on_it():
    import json

    lazy = LazyModule("json")
    assert lazy.dumps is json.dumps and lazy.JSONDecodeError is json.JSONDecodeError
    assert "dumps" in vars(lazy)   # the next lookup is a plain attribute


def test_a_submodule_can_be_lazy_too():
    import xml.etree.ElementTree as real

    assert LazyModule("xml.etree.ElementTree").fromstring("<a/>").tag == real.fromstring(
        "<a/>").tag


def test_a_missing_module_or_attribute_is_named_at_first_use():
    missing = LazyModule("statekit_no_such_module")   # creating it imports nothing
    with pytest.raises(ModuleNotFoundError, match="statekit_no_such_module"):
        _ = missing.anything
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = LazyModule("json").no_such_name


def test_threads_that_use_it_first_at_once_all_get_the_module():
    lazy, got, errors = LazyModule("fractions"), [], []

    def use() -> None:
        try:
            got.append(lazy.Fraction(1, 3) * 3)
        except Exception as exc:   # pragma: no cover - the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors and got == [1] * 8


def test_lazy_exports_refuse_a_name_that_is_also_a_module_and_resolve_the_rest(monkeypatch):
    with pytest.raises(ValueError, match="exports 'topics', also the name of its module"):
        lazy_exports("statekit.kafka", {"topics": "statekit.kafka.topics"})
    package = types.ModuleType("statekit_lazy_test")   # a package of its own: nothing shared
    monkeypatch.setitem(sys.modules, "statekit_lazy_test", package)
    getattr_, dir_ = lazy_exports("statekit_lazy_test", {"dumps": "json"})
    import json

    assert "dumps" in dir_() and "dumps" not in vars(package)
    assert getattr_("dumps") is json.dumps and package.dumps is json.dumps   # kept
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        getattr_("nothing")
