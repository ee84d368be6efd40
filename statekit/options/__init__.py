"""Every option class a user passes, in one place: how a query reads and runs, how a dataset is
replayed, how a restore reads, how serving listens and is secured.

One module per family: ``query`` (``SourceOptions``, ``RunOptions``: ``start_query``,
``start_processor``), ``replay`` (``ReplayOptions``: ``replay``), ``restore``
(``RestoreOptions``: ``restore_stores``), ``serve`` (``ServeOptions`` and the
``GlobalTable`` descriptions it carries: ``serve``, ``ServingCluster``) and ``security``
(``ServingSecurity``: the serving token and TLS files); ``base`` is their machinery
(``Options``: ``to_dict`` / ``from_dict``; ``route`` and ``settle``: keyword arguments sent
to the object they belong to). Each is a frozen dataclass checked when built, so a bad value
fails at once, named with what it accepts. Descriptions only (no I/O but
``ServingSecurity``'s check of the files it names): they import only the rules
(``statekit.errors``, ``statekit.validate``, ...) and the Kafka connection
(``statekit.model.connection``). The option classes are also at the top of the package
(``statekit.RunOptions``); names resolve on first use.

Example:
    >>> from statekit.options import RestoreOptions, RunOptions
    >>> RunOptions(name="board", trigger="1 second").trigger_kwargs()
    {'processingTime': '1000 milliseconds'}
    >>> RestoreOptions.from_dict({"partitions": [0, 1]}).partitions
    (0, 1)
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "SourceOptions": "statekit.options.query",
    "RunOptions": "statekit.options.query",
    "ReplayOptions": "statekit.options.replay",
    "RestoreOptions": "statekit.options.restore",
    "ServeOptions": "statekit.options.serve",
    "GlobalTable": "statekit.options.serve",
    "ServingSecurity": "statekit.options.security",
    "Options": "statekit.options.base",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
