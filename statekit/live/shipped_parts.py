"""An attached query's parts shipped to changelog topics of their own, and what the
topics give back: their records, a replay of a part from its topic alone, serving by key.

``ShippedParts`` is the part of ``AttachedQuery`` that does this (a mixin: it uses the
handle's ``changelogs``, ``checkpoint``, ``spark``, ``query``, ``last_batch`` and its part
lookups ``_find``, ``_part_list``, ``_own_names``, ``plan_names``, ``state``).
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings

import pandas as pd

from statekit.changelog.shared_rounds import SharedRounds
from statekit.changelog.sources import PartChanges
from statekit.changelog.writer import ChangelogWriter
from statekit.errors import (
    NotShippedYet,
    StatekitError,
    UnsupportedRead,
)
from statekit.inspect.lists import join_side_stores
from statekit.inspect.operators import Part
from statekit.inspect.part_names import part_id
from statekit.inspect.part_views import StateView
from statekit.live.changelogs import app_name, ledger_folder, part_topic
from statekit.live.locate import (
    describe_query,
)
from statekit.live.own_names import PLAN_WAIT
from statekit.live.shipping_claims import claim_shipping, unclaim_shipping
from statekit.model.connection import Kafka, connect
from statekit.model.store_schema import PartShape
from statekit.spark_state.times import iso_times
from statekit.validate import (
    batch_id,
    batch_span,
    optional_batch_id,
    timeout_seconds,
)

#: How far below the query an attached query's shipping threads run (``bench.attach``: about
#: half the overhead on the query's batches of shipping at the same priority).
SHIP_NICE = 15


class ShippedParts:
    """Shipping an attached query's parts to changelog topics, and reading them back."""

    def ship_changelogs(self, kafka: Kafka, app: str | None = None,
                        ledger_dir: str | os.PathLike | None = None,
                        nice: int = SHIP_NICE) -> dict[str, str]:
        """Ship every part to a changelog topic of its own, in the background, after each
        committed batch (``statekit.live.changelogs``; what a record holds for each kind of
        part: ``statekit.changelog.sources``), every part's changes of a round read in one
        Spark job (``statekit.changelog.shared_rounds``); returns part → topic. Needs a
        committed batch (the parts are known from it). The shipping thread runs ``nice``
        steps below the query (``changelog.background.lower_priority``)."""
        self._require_state()
        claim_shipping(self.query, self)
        self._await_plan(PLAN_WAIT)
        conn = connect(kafka)
        app = app_name(self.name, self.id) if app is None else app
        folder = ledger_folder(self.id, ledger_dir)
        try:
            parts = self._part_list()
            writers = {}
            for part in parts:
                if part_id(part) in self.changelogs:
                    continue
                try:  # PartChanges owns which parts can be shipped
                    source = PartChanges(self._part_view(part), app, folder,
                                         self._join_side_stores(parts, part))
                except UnsupportedRead:
                    continue
                topic = part_topic(app, part.operator_id, part.name)
                writers[part_id(part)] = ChangelogWriter(source, conn, topic, nice=nice)
            if writers:  # one Spark job a round reads the changes of every part
                SharedRounds(list(writers.values()), nice=nice).start()
                self.changelogs.update(writers)
        finally:
            if not self.changelogs:
                unclaim_shipping(self)
        return self.changelog_topics()

    def _await_plan(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the query's plan (a query started again on its
        checkpoint has none until it runs a batch), so that the changelogs ship under the
        query's names; without it they ship under Spark's, and a warning says so."""
        deadline = time.monotonic() + timeout
        while True:
            self.plan_names()  # kept once read
            if self._plan_names is not None:
                return
            if not self.is_active or time.monotonic() > deadline:
                warnings.warn(
                    f"{describe_query(self.query)} has run no batch since it started, so its "
                    f"plan does not tell the names of its columns yet: its parts' changelogs "
                    f"ship under Spark's names (field0 for a join key, an aggregate's buffer "
                    f"fields). Attach once it has run a batch to ship them under yours",
                    stacklevel=3)
                return
            time.sleep(0.2)

    def _part_view(self, part: Part) -> StateView:
        return StateView(self.checkpoint, part, self.spark, None, self._own_names(part))

    def _join_side_stores(self, parts: list[Part], part: Part) -> list[StateView]:
        """For a join side, the views of its two stores (their change feeds say which join
        keys a batch touched: ``statekit.inspect.lists``); else none."""
        if part.what != "join side":
            return []
        stores = join_side_stores(part.name)
        return [self._part_view(p) for p in parts if p.operator_id == part.operator_id
                and p.what == "store" and p.store in stores]

    def changelog_topics(self) -> dict[str, str]:
        """Part → its changelog topic, for the parts shipped."""
        return {part: writer.topic for part, writer in self.changelogs.items()}

    def _shipped(self, part: str | None) -> tuple[str, ChangelogWriter]:
        """The part's full name (found once) and the writer shipping it."""
        full = part_id(self._find(part))
        return full, self._writer_of(full)

    def _writer(self, part: str | None) -> ChangelogWriter:
        return self._shipped(part)[1]

    def _writer_of(self, full: str) -> ChangelogWriter:
        if full not in self.changelogs:
            shipped = ", ".join(self.changelogs) or "none: attach with kafka= to ship them"
            raise StatekitError(f"part {full!r} has no changelog here; parts shipped: {shipped}")
        writer = self.changelogs[full]
        writer.raise_if_failed()
        return writer

    def serve(self, part: str | None = None, *, instances: int = 2, standbys: int | None = None,
              workdir: str | os.PathLike | None = None, timeout: float = 120.0):
        """Serve one shipped part by key: ``instances`` serving processes (``standbys`` each)
        that tail its changelog, routed as Spark places the part's keys
        (``statekit.serve.part_keys``). Returns the started ``ServingCluster``; its
        ``client()`` answers ``get(key)`` (every key column; times as ISO text, ms or
        datetimes), ``range``, ``all`` and ``top_k``. Stop it with ``stop()`` (or a
        ``with`` block).

        Example:
            >>> with live.serve("0/default") as cluster:                   # doctest: +SKIP
            ...     cluster.client().get({"player": "p07", "minute": "2026-01-05T10:00Z"})
        """
        from statekit.serve.cluster import serve

        writer = self._writer(part)
        return serve(writer.kafka, writer.topic, instances=instances, standbys=standbys,
                     workdir=workdir, timeout=timeout)

    def part_shape(self, part: str | None = None) -> PartShape:
        """What the part's changelog holds (for ``restore_stores`` and standbys)."""
        return self._writer(part).source.shape

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None):
        """The part's changelog records shipped so far (a ``Changelog``), its time columns
        as timestamps, as in the part's snapshots; its ``last_batch`` is the last batch
        shipped (a batch that changed nothing in the part leaves no record). ``progress``:
        a bar while it reads (None: only for a long read)."""

        part, writer = self._shipped(part)
        return self._read_shipped(part, writer, from_batch, to_batch, progress)

    def _read_shipped(self, part: str, writer: ChangelogWriter, from_batch: int | None,
                      to_batch: int | None, progress: bool | None):
        from statekit.changelog.reader import read_changelog

        from_batch = optional_batch_id(from_batch, "from_batch")
        if from_batch is not None:
            from_batch, to_batch = batch_span(from_batch, to_batch)
        to_batch = optional_batch_id(to_batch, "to_batch")
        shipped = writer.shipped_batch
        if to_batch is not None and to_batch > shipped:
            raise StatekitError(f"batch {to_batch} of part {part!r} is not in its changelog "
                                f"yet: it is shipped through batch {shipped}; "
                                f"wait_shipped({to_batch}) waits for it")
        # a batch that changed nothing in the part leaves no record, yet is shipped: read
        # the whole topic and cut it here, where the shipped batch is known
        log = read_changelog(writer.kafka, writer.topic, progress=progress)
        records = log.records
        if from_batch is not None or to_batch is not None:
            low = -1 if from_batch is None else from_batch
            high = shipped if to_batch is None else to_batch
            records = records[records["batch"].between(low, high)]
        # JSON keeps times as ISO text: back to the part's own timestamps
        schema = self.state(part).schema()
        records = records.copy()
        for column in schema.loc[schema["type"].str.startswith("timestamp"), "column"]:
            if column in records.columns and records[column].dtype == object:
                records[column] = iso_times(records[column])
        return dataclasses.replace(log.with_records(records),
                                   last_batch=max(log.last_batch, shipped))

    def replay(self, part: str | None = None, batch: int | None = None, timeout: float = 120.0
               ) -> pd.DataFrame:
        """The part's state rebuilt from its changelog topic alone, through ``batch`` (the
        last shipped when None), in the rows of its snapshot: a join side's or a list
        state's lists spread back to one row per element. What a restore from the topic
        would hold.

        Right after ``attach(kafka=)`` nothing is shipped yet: it then waits (up to
        ``timeout`` seconds) for the batch last committed when called, and raises
        ``NotShippedYet`` (naming the part, its topic and the batches) if that passes.

        Example:
            >>> same_rows(live.replay("1/right"), live.snapshot("1/right", last))  # doctest: +SKIP
            True
        """
        from statekit.inspect.lists import list_rows

        part, writer = self._shipped(part)
        timeout = timeout_seconds(timeout)
        if batch is None and writer.shipped_batch < 0 and self.last_batch >= 0:
            try:
                writer.wait_shipped(self.last_batch, timeout)
            except TimeoutError as exc:
                raise NotShippedYet(
                    f"nothing of part {part!r} was shipped to its changelog topic "
                    f"{writer.topic!r} in {timeout:g} s: {exc}. replay() needs a shipped "
                    f"batch: give it a longer timeout=, or call wait_shipped() first"
                ) from None
        shape = writer.source.shape
        table = self._read_shipped(part, writer, None, batch, False).materialize()
        if table.empty:  # a topic with no record yet knows none of the part's columns
            table = pd.DataFrame(columns=[*shape.key_columns, *shape.value_columns,
                                          "partition"])
        if shape.lists:
            return list_rows(table, shape.key_columns, shape.list_columns)
        return table

    def wait_shipped(self, batch: int | None = None, timeout: float = 120.0) -> int:
        """Block until every part's changelog holds ``batch`` (the last committed when
        None); returns that batch."""
        batch = self.last_batch if batch is None else batch_id(batch)
        timeout = timeout_seconds(timeout)
        deadline = time.monotonic() + timeout
        for writer in self.changelogs.values():
            writer.wait_shipped(batch, max(0.1, deadline - time.monotonic()))
        return batch

    def changelog_lag(self) -> pd.DataFrame:
        """Per shipped part: ``part``, ``topic``, ``committed`` (the query's last batch),
        ``shipped`` (the changelog's), ``batches_behind``."""
        committed = self.last_batch
        rows = [(part, w.topic, committed, w.shipped_batch, committed - w.shipped_batch)
                for part, w in self.changelogs.items()]
        return pd.DataFrame(rows, columns=["part", "topic", "committed", "shipped",
                                           "batches_behind"])
