"""The client of the reference Kafka Streams application's interactive queries (HTTP, JSON).

Ask any instance (``via``): it routes a key query as Kafka Streams says
(``queryMetadataForKey``: the active host, else a standby), and gathers a range from every
instance. Each answer names the key's partition, the instance that served it
(``served_by``), its role there (``active`` or ``stale``: a standby's copy) and the rows.

Example:
    >>> client = KafkaStreamsClient(["http://127.0.0.1:7001", "http://127.0.0.1:7002"])
    >>> client.url(1)
    'http://127.0.0.1:7002'
    >>> client.url(2)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad instance: 2; accepted: 0..1 (one of 2 instances)
    >>> key_text(("p1", "g2")), key_text("p1")
    ('["p1","g2"]', 'p1')
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from statekit.errors import BadArgument, InstanceDown, KafkaStreamsAppError
from statekit.validate import is_whole_number


def key_text(key: object) -> str:
    """The application's text of a group key: the value itself for one key column, a JSON
    array of them for several (a tuple or list), written as the app writes it (Jackson's
    ``ArrayNode.toString()``: no spaces, non-ASCII as is)."""
    if isinstance(key, (tuple, list)):
        return json.dumps([str(k) for k in key], separators=(",", ":"), ensure_ascii=False)
    return str(key)


class KafkaStreamsClient:
    """Interactive queries against the instances at ``urls`` (``http://127.0.0.1:port``).

    A query the application answers "retriable" (a store that moves in a rebalance, an
    instance the metadata still names that does not answer: Kafka Streams' advice is to ask
    again) is asked again for up to ``rebalance_wait`` seconds."""

    def __init__(self, urls: Sequence[str], timeout: float = 15.0,
                 rebalance_wait: float = 60.0):
        self.urls = list(urls)
        self.timeout = timeout
        self.rebalance_wait = rebalance_wait

    def url(self, via: int) -> str:
        """The address of instance ``via``."""
        if not is_whole_number(via) or not 0 <= via < len(self.urls):
            raise BadArgument("instance", via, f"0..{len(self.urls) - 1} (one of "
                                               f"{len(self.urls)} instances)")
        return self.urls[via]

    def get(self, key: object, *, via: int = 0, from_ms: int | None = None,
            to_ms: int | None = None) -> dict:
        """``key``'s rows (windows starting in [from_ms, to_ms] for windowed stores), routed
        by instance ``via``: the answer with ``rows``, ``partition``, ``served_by``,
        ``role``, ``active`` and ``standbys``."""
        params = {"key": key_text(key)}
        if from_ms is not None:
            params["from"] = str(int(from_ms))
        if to_ms is not None:
            params["to"] = str(int(to_ms))
        return self.call("/key", params, via=via)

    def range(self, from_key: object = None, to_key: object = None, *, via: int = 0,
              from_ms: int | None = None, to_ms: int | None = None) -> list[dict]:
        """Every row with a key in [from_key, to_key] (None: open), gathered by ``via`` from
        every instance's active partitions."""
        params = {}
        for name, value in (("from", from_key), ("to", to_key)):
            if value is not None:
                params[name] = key_text(value)
        for name, value in (("time_from", from_ms), ("time_to", to_ms)):
            if value is not None:
                params[name] = str(int(value))
        return self.call("/range", params, via=via)["rows"]

    def metadata(self, via: int = 0) -> list[dict]:
        """Each instance and its partitions (``topic-partition``), active and standby."""
        return self.call("/metadata", via=via)["instances"]

    def progress(self, via: int = 0) -> dict:
        """Instance ``via``'s state and its metrics summed by name."""
        return self.call("/progress", via=via)

    def restores(self, via: int = 0) -> list[dict]:
        """Every restore of a store from its changelog instance ``via`` ran: ``store``,
        ``topic``, ``partition``, ``start_offset``, ``end_offset``, ``records``, ``ms``
        (onRestoreStart to onRestoreEnd, or to now while ``state`` is ``restoring``)."""
        return self.call("/restores", via=via)["restores"]

    def call(self, path: str, params: dict[str, str] | None = None, *, via: int = 0) -> Any:
        """GET ``path`` of instance ``via``: its JSON answer. InstanceDown when it does not
        answer, KafkaStreamsAppError quoting the reason when it answers with an error (asked
        again while the error is retriable, up to ``rebalance_wait`` seconds)."""
        url = self.url(via) + path + ("?" + urllib.parse.urlencode(params) if params else "")
        deadline = time.monotonic() + self.rebalance_wait
        while True:
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as response:  # noqa: S310
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                try:
                    answer = json.loads(exc.read())
                except ValueError:
                    answer = {}
                reason = answer.get("error", exc.reason)
                if exc.code == 400:
                    raise BadArgument(f"query {path}", params, str(reason)) from None
                if answer.get("retriable") and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                waited = (f" (still so after {self.rebalance_wait:g} s of asking again)"
                          if answer.get("retriable") else "")
                raise KafkaStreamsAppError(f"instance {via} ({self.url(via)}) could not answer "
                                           f"{path} {params or ''}: {reason}{waited}") from None
            except (urllib.error.URLError, OSError) as exc:
                raise InstanceDown(f"instance {via} ({self.url(via)}) did not answer {path}: "
                                   f"{getattr(exc, 'reason', exc)}") from None
