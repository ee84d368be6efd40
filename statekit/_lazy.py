"""Package attributes and modules imported on first use, so importing a package stays cheap.

A package lists its public names and the module each comes from; importing the
package imports none of them. ``statekit.changelog.compaction`` then loads
without the changelog writer's pyspark, and Spark's Python workers, which import
``statekit.spark.kafka_source``, pay for nothing else.

``LazyModule`` does the same for a third-party module: ``pd = LazyModule("pandas")``
imports pandas when ``pd.DataFrame`` is first looked up; this module holds the shared
ones (``from statekit._lazy import pd``). The modules a restore
worker process runs (the stores, the changelog record codec, the restore itself)
hold pandas, numpy and pyarrow this way; the worker writes raw bytes and never
needs them, and starts in a fifth of the time.

A public name must not be the name of one of the package's own modules: once that
module is imported, Python binds the package attribute to the module, and the
name would silently become the module. ``lazy_exports`` refuses such a map.

Example:
    >>> import statekit.kafka
    >>> getattr_, dir_ = lazy_exports("statekit.kafka", {"replay": "statekit.kafka.dataset_replay"})
    >>> "replay" in dir_()
    True
    >>> lazy_exports("statekit.kafka", {"topics": "statekit.kafka.topics"})
    Traceback (most recent call last):
    ...
    ValueError: statekit.kafka exports 'topics', also the name of its module statekit.kafka.topics
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING


def lazy_exports(package: str, names: Mapping[str, str], submodules: Iterable[str] = ()
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps a public name to its module.

    ``submodules`` are subpackages or modules reachable as attributes
    (``statekit.charts``) without an explicit import.
    """
    modules = tuple(submodules)
    for name in names:
        if any(module == f"{package}.{name}" for module in names.values()):
            raise ValueError(f"{package} exports {name!r}, also the name of its module "
                             f"{package}.{name}")

    def __getattr__(name: str) -> object:
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif name in modules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names) | set(modules))

    return __getattr__, __dir__


class LazyModule:
    """The module ``name``, imported the first time one of its attributes is looked up.

    Each attribute is then kept on this object, so later lookups cost what a module's do.
    Not registered in ``sys.modules``: another ``import pandas`` imports the real one.
    Use it for a module only some functions need, never for names used at import time;
    import the module itself under ``if TYPE_CHECKING:`` so type checkers still see it::

        if TYPE_CHECKING:
            import pandas as pd
        else:
            pd = LazyModule("pandas")

    Example:
        >>> json = LazyModule("json")
        >>> json.dumps([1])
        '[1]'
        >>> json
        <lazy module 'json' (imported)>
    """

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_lock", threading.Lock())

    def _module(self) -> ModuleType:
        with self._lock:   # import_module is thread-safe; this keeps the first use to one
            return importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> object:
        value = getattr(self._module(), attr)
        object.__setattr__(self, attr, value)
        return value

    def __repr__(self) -> str:
        state = "imported" if self._name in sys.modules else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


# The third-party modules statekit's lighter modules use this way, one shared instance each:
# ``from statekit._lazy import pd``. Type checkers see the modules themselves.
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pa_json
else:
    np = LazyModule("numpy")
    pd = LazyModule("pandas")
    pa = LazyModule("pyarrow")
    pc = LazyModule("pyarrow.compute")
    pa_json = LazyModule("pyarrow.json")
