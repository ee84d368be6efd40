"""Package attributes imported on first use (PEP 562), so importing a package stays cheap.

A package lists its public names and the module each comes from; importing the
package imports none of them. ``statekit.changelog.compaction`` then loads
without the changelog writer's pyspark, and Spark's Python workers, which import
``statekit.spark.kafka_source``, pay for nothing else.

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
from collections.abc import Callable, Iterable, Mapping


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
