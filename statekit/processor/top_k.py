"""A store of your own shape, built on a named store: the k best entries of a key.

Kafka Streams lets a person write a store: implement ``StateStore`` (and a
``KeyValueBytesStoreSupplier`` or ``StoreBuilder``), add it to the topology, and
``context.getStateStore(name)`` hands it out; its changelog is the person's choice. Spark's
state is one provider class per query (``spark.sql.streaming.stateStore.providerClass``:
HDFS-backed or RocksDB, or a JVM class of your own implementing ``StateStoreProvider``),
serving every stateful operator of the query; a Python processor cannot add a store kind.
statekit's processor has three kinds (key-value, window, session, each a map state), and a
store of another shape is a class over one of them: ``TopK`` keeps a key's ``k`` best
entries in a key-value store keyed by rank, so it is stored, checkpointed and read back
(``snapshot``) like any store.

Example:
    >>> top_k_store("best", 3, "game string").layout(["player"]).key_columns
    ('player', 'rank')
"""

from __future__ import annotations

import pandas as pd

from statekit.errors import BadArgument
from statekit.processor.layout import StoreSpec, key_value_store
from statekit.processor.processor import Processor
from statekit.validate import whole_number


def top_k_store(name: str, k: int, payload: str) -> StoreSpec:
    """The key-value store under a ``TopK``: key ``rank int`` (1 is the best), value
    ``score bigint`` and the ``payload`` fields (DDL)."""
    whole_number(k, "k", minimum=1)
    return key_value_store(name, key="rank int", value=f"score bigint, {payload}")


class TopK:
    """The ``k`` best (score, payload) of the current grouping key, over a key-value store
    declared with ``top_k_store`` (ranks 1..k; a tie keeps the earlier entry)."""

    def __init__(self, store, k: int):
        self.store, self.k = store, whole_number(k, "k", minimum=1)
        if [f.name for f in store.spec.key] != ["rank"]:
            raise BadArgument(f"store of TopK {store.name!r}", store.spec.key,
                              "a store declared with top_k_store(name, k, payload)")

    def entries(self) -> list[dict]:
        """The entries, best first: dicts with ``score`` and the payload fields."""
        return [value for _, value in self.store.all()]

    def offer(self, score: int, **payload) -> bool:
        """Keep (score, payload) if it is among the k best; True when kept."""
        entries = self.entries()
        if len(entries) >= self.k and score <= entries[-1]["score"]:
            return False
        entries.append({"score": int(score), **payload})
        entries.sort(key=lambda e: -e["score"])  # stable: a tie keeps the earlier first
        for rank, entry in enumerate(entries[:self.k], start=1):
            self.store.put(rank, entry)
        return True


class TopScores(Processor):
    """Per player, the ``k`` best scores with their game and time, in the ``TopK`` store
    ``top``. Output: the scores a batch kept (player, score, game)."""

    output = "player string, score bigint, game string"

    def __init__(self, k: int = 3):
        self.k = whole_number(k, "k", minimum=1)

    def stores(self):
        return [top_k_store("top", self.k, "game string, ts timestamp")]

    def init(self, stores):
        self.top = TopK(stores["top"], self.k)

    def process(self, player, rows):
        kept = []
        for row in rows.sort_values("ts", kind="stable").itertuples(index=False):
            if pd.notna(row.score) and self.top.offer(int(row.score), game=row.game, ts=row.ts):
                kept.append((player, int(row.score), row.game))
        return pd.DataFrame(kept, columns=["player", "score", "game"])


def top_scores_reference(events: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """``TopScores``' store from all of ``events`` in pandas, as scores only (ties may keep
    another game): ``player``, ``rank``, ``score``."""
    best = (events.dropna(subset=["score"]).sort_values(["player", "score"],
                                                        ascending=[True, False])
            .groupby("player").head(k))
    return best.assign(rank=best.groupby("player").cumcount() + 1,
                       score=best["score"].astype("int64"))[["player", "rank", "score"]] \
        .reset_index(drop=True)
