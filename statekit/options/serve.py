"""What every serving instance of a cluster shares: ``ServeOptions``, and the ``GlobalTable``
descriptions it carries.

Where the instances listen (``host``; beyond loopback only with ``allow_remote``), how
they are secured (``ServingSecurity``: token, TLS files; ``statekit.options.security``),
and the global tables each holds whole. ``serve`` and ``ServingCluster``
(``statekit.serve.cluster``) take one, or its fields as keyword arguments; each instance
process receives it as JSON inside its ``InstanceJob`` (``statekit.serve.process``).

Example:
    >>> options = ServeOptions(global_tables=[GlobalTable("players", "players", ("player",))])
    >>> ServeOptions.from_dict(options.to_dict()) == options
    True
    >>> ServeOptions(allow_remote="yes")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad allow_remote: 'yes'; accepted: True or False
    >>> GlobalTable("players", "player-profiles", ("team", "player"), plain_keys=True)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad key_columns of plain keys: ('team', 'player'); \
accepted: exactly one column
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from statekit.errors import BadArgument
from statekit.options.base import Options, codec
from statekit.options.security import ServingSecurity, check_security
from statekit.validate import flag, kafka_name


@dataclass(frozen=True)
class GlobalTable(Options):
    """A topic every serving instance holds whole, in a global store: its name, topic and keys.

    ``name``: the store's name on every instance (``statekit.serve.global_store``);
    ``topic``: the topic it holds; ``key_columns``: the columns its record keys write, in
    order; ``plain_keys``: keys are plain text, the value of the one key column (``p07``),
    not JSON objects.

    Example:
        >>> GlobalTable("players", "player-profiles", "player", plain_keys=True).key_columns
        ('player',)
    """

    name: str
    topic: str
    key_columns: tuple[str, ...]
    plain_keys: bool = False

    def __post_init__(self):
        kafka_name(self.name, "global table name")
        kafka_name(self.topic, "topic of a global table")
        columns = self.key_columns
        if isinstance(columns, str):
            columns = (columns,)
        if not isinstance(columns, Sequence) or not columns or not all(
                isinstance(c, str) and c for c in columns):
            raise BadArgument("key_columns", self.key_columns, "a list of column names")
        object.__setattr__(self, "key_columns", tuple(columns))
        object.__setattr__(self, "plain_keys", flag(self.plain_keys, "plain_keys"))
        if self.plain_keys and len(self.key_columns) != 1:
            raise BadArgument("key_columns of plain keys", self.key_columns,
                              "exactly one column")


def _tables_to_dicts(tables: Sequence[GlobalTable]) -> list[dict]:
    return [table.to_dict() for table in tables]


def _tables_from_dicts(data: Sequence) -> tuple[GlobalTable, ...]:
    return tuple(GlobalTable.from_dict(t) for t in data)


@dataclass(frozen=True, repr=False)
class ServeOptions(Options):
    """How a cluster's instances serve: ``host`` (loopback by default; another address
    needs ``allow_remote=True``), ``security`` (None: a token generated beyond loopback),
    ``global_tables`` (``GlobalTable(name, topic, key_columns, plain_keys)``: held whole by
    every instance)."""

    host: str = "127.0.0.1"
    allow_remote: bool = False
    security: ServingSecurity | None = field(
        default=None, metadata=codec(ServingSecurity.to_dict, ServingSecurity.from_dict))
    global_tables: tuple[GlobalTable, ...] = field(
        default=(), metadata=codec(_tables_to_dicts, _tables_from_dicts))

    def __post_init__(self):
        if not isinstance(self.host, str):
            raise BadArgument("host", self.host, "an address such as 127.0.0.1")
        object.__setattr__(self, "allow_remote", flag(self.allow_remote, "allow_remote"))
        check_security(self.security)
        tables = self.global_tables
        if isinstance(tables, GlobalTable) or not isinstance(tables, Sequence) or not all(
                isinstance(t, GlobalTable) for t in tables):
            raise BadArgument("global_tables", tables, "a list of GlobalTable")
        object.__setattr__(self, "global_tables", tuple(tables))

    def __repr__(self) -> str:  # the security's own repr hides its token
        return (f"ServeOptions(host={self.host!r}, allow_remote={self.allow_remote}, "
                f"security={self.security!r}, global_tables={list(self.global_tables)!r})")
