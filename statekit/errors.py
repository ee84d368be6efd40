"""Every error statekit raises, in one place: each names the bad value and what would be
accepted, or what was found and what to do. All are ``StatekitError``s and importable from
the top (``statekit.BadArgument``, ``statekit.ProcessorError``, ...).

Example:
    >>> err = BadArgument("window kind", "weekly", ["tumbling", "hopping", "session"])
    >>> str(err)
    "bad window kind: 'weekly'; accepted: tumbling, hopping, session"
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from os import PathLike


class StatekitError(Exception):
    """Base class of every error statekit raises on purpose."""


class BadArgument(StatekitError, ValueError):
    """An argument outside what statekit accepts. ``message``: the whole message when it was
    already worded elsewhere (a serving instance's answer, relayed as it said it)."""

    def __init__(self, what: str, value: object, accepted: Iterable[str] | str, *,
                 message: str | None = None):
        self.what, self.value = what, value
        self.accepted = accepted if isinstance(accepted, str) else ", ".join(map(str, accepted))
        super().__init__(message or f"bad {what}: {value!r}; accepted: {self.accepted}")


class BrokerUnreachable(StatekitError, ConnectionError):
    """No Kafka broker answered at the given address."""

    def __init__(self, bootstrap_servers: str, detail: str = ""):
        self.bootstrap_servers = bootstrap_servers
        msg = f"no Kafka broker answered at {bootstrap_servers!r}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class TopicNotFound(StatekitError, LookupError):
    """A topic that the broker does not have."""

    def __init__(self, topic: str, bootstrap_servers: str, existing: Iterable[str] = ()):
        self.topic = topic
        names = sorted(t for t in existing if not t.startswith("__"))
        shown = ", ".join(names[:20]) or "(none)"
        super().__init__(
            f"topic {topic!r} does not exist on {bootstrap_servers!r}; existing topics: {shown}"
        )


class DataLoss(StatekitError):
    """Offsets a query needs are no longer on the broker (like Spark's failOnDataLoss)."""


class BatchNotRetained(StatekitError, LookupError):
    """A batch id that the checkpoint does not (or no longer) hold."""

    def __init__(self, batch: int, available: tuple[int, int] | None, checkpoint: str):
        self.batch, self.available = batch, available
        if batch < 0 and available is None:  # the latest batch asked for, and there is none
            super().__init__(
                f"no batch is committed yet in checkpoint {checkpoint!r}: the query has not "
                f"finished its first batch (a handle's wait_for_batches(1) waits for it) or "
                f"it failed before it (wait_for_batches then raises what failed)")
            return
        span = f"{available[0]}..{available[1]}" if available else "none committed yet"
        super().__init__(
            f"batch {batch} is not retained in checkpoint {checkpoint!r}; committed batches: {span}"
        )


class CheckpointError(StatekitError):
    """A checkpoint directory or file that is missing or corrupt; the path is named."""


class CorruptFile(CheckpointError):
    """A damaged file of a checkpoint: its ``path``, what is wrong with it (``problem``) and
    what to do about it (``remedy``); ``what`` says which file it is (``commit log file``).

    Example:
        >>> str(CorruptFile("/ck/commits/3", "commit log file", "it is empty",
        ...                 "restore it from a copy of the checkpoint"))
        "the commit log file '/ck/commits/3' is corrupt: it is empty. To fix it: restore it \
from a copy of the checkpoint"
    """

    def __init__(self, path: str, what: str, problem: str, remedy: str):
        self.path, self.what, self.problem, self.remedy = str(path), what, problem, remedy
        super().__init__(f"the {what} {self.path!r} is corrupt: {problem}. To fix it: {remedy}")


class IncompatibleRestart(CheckpointError):
    """A query Spark would fail to restart on its checkpoint, found before it started: ``check``
    (a ``statekit.query.restart_check.RestartCheck``) names each change, what Spark would say
    and what to do."""

    def __init__(self, check):
        self.check = check
        reasons = "; ".join(f"{r.what} changed from ({r.stored}) to ({r.new}): Spark would "
                            f"fail with {r.spark}. To fix it: {r.remedy}"
                            for r in check.refused.itertuples())
        super().__init__(f"this query cannot restart on the checkpoint {check.checkpoint!r}: "
                         f"{reasons}")


class CheckpointNotShared(CheckpointError):
    """The executors wrote the state files of a checkpoint where this process cannot see them
    (each machine's own disk instead of one file system they all mount)."""


class ChangelogError(StatekitError):
    """A changelog topic that is not, or no longer, what statekit wrote: the topic is named."""


class NotShippedYet(ChangelogError, TimeoutError):
    """A changelog that did not hold the batch waited for within the time given: the part,
    its topic and the batches shipped and committed are named."""


class AlreadyAttached(StatekitError):
    """A query that another live handle of this process already ships changelogs for;
    ``handle`` is that handle (use it, or detach it first)."""

    def __init__(self, message: str, handle: object):
        super().__init__(message)
        self.handle = handle


class ChangelogFenced(ChangelogError):
    """Another changelog writer took the topic over; ``other`` says who (a
    ``statekit.changelog.meta.WriterInfo``), or is None when it did not say."""

    def __init__(self, message: str, other: object = None):
        super().__init__(message)
        self.other = other


class DiskFull(StatekitError, OSError):
    """No space left on the device of ``folder``: ``needed`` bytes (when known) could not be
    written there; ``free`` is what the device had left when statekit looked. An ``OSError``
    with ``errno`` ENOSPC, so handlers of the raw error still catch it.

    ``DiskFull.for_file`` is the error of one file that could not be written (the old file
    is kept): ``statekit.atomic.write_atomic`` raises it for every file statekit writes.

    Example:
        >>> str(DiskFull.for_file("/ck/_statekit/ledger.json", needed=310, free=0))
        "no space left to write '/ck/_statekit/ledger.json': it needs 310 bytes and the \
file system of '/ck/_statekit' has 0 bytes free; the file is unchanged: free space there \
(or give the job a folder on a larger disk) and run it again"
    """

    def __init__(self, folder: str, needed: int | None = None, detail: str = "",
                 free: int | None = None, *, message: str | None = None):
        self.folder, self.needed, self.free = folder, needed, free
        self.path: str | None = None
        need = f"; about {needed:,} bytes are needed" if needed else ""
        left = f" ({free:,} bytes free)" if free is not None else ""
        super().__init__(message or f"no space left on the device of {folder!r}{left}{need}"
                         + (f": {detail}" if detail else ""))
        self.errno = errno.ENOSPC  # as OSError handlers expect

    @classmethod
    def for_file(cls, path: str, needed: int, free: int | None) -> DiskFull:
        """The error of file ``path`` that could not be written (``needed`` bytes)."""
        import os

        folder = os.path.dirname(path)
        has = "an unknown number of" if free is None else f"{free:,}"
        error = cls(folder, needed, free=free, message=(
            f"no space left to write {path!r}: it needs {needed:,} bytes and the file system "
            f"of {folder!r} has {has} bytes free; the file is unchanged: free space there "
            f"(or give the job a folder on a larger disk) and run it again"))
        error.path = path
        return error


class WorkersLackStatekit(StatekitError):
    """A Spark session's Python workers run an interpreter that cannot import statekit
    (``statekit.spark.workers``)."""


# --- reading state ----------------------------------------------------------------------
class UnsupportedRead(StatekitError, NotImplementedError):
    """A read that Spark's State Data Source cannot do: what, why, and what works instead."""

    def __init__(self, what: str, why: str, instead: str):
        self.what, self.why, self.instead = what, why, instead
        super().__init__(f"cannot read {what}: {why}; instead: {instead}")



# --- local stores -----------------------------------------------------------------------
class StoreMismatch(StatekitError):
    """A store directory that belongs to another store, or to a newer statekit."""

    def __init__(self, path: str | PathLike, what: str, found: object, expected: object,
                 remedy: str, message: str | None = None):
        self.path, self.what, self.found, self.expected = str(path), what, found, expected
        text = message or (f"store directory {self.path!r} belongs to another store: "
                           f"its {what} is {found!r}, not {expected!r}")
        super().__init__(f"{text}; {remedy}")


class StoreCorrupt(StatekitError):
    """A store file (metadata or checkpoint) that cannot be read; the path is named."""

    def __init__(self, path: str | PathLike, detail: str, remedy: str):
        self.path = str(path)
        super().__init__(f"store file {self.path!r} is unreadable ({detail}); {remedy}")


class StoreLocked(StatekitError):
    """A RocksDB store directory that another open store (in this or another process) holds."""

    def __init__(self, path: str | PathLike, detail: str = ""):
        self.path = str(path)
        super().__init__(
            f"store directory {self.path!r} is open elsewhere (RocksDB holds its LOCK file)"
            + (f": {detail}" if detail else "")
            + "; close the other store first, or open another directory")


class StoreClosed(BadArgument):
    """Using a store, or one of its iterators, after the store was closed."""

    def __init__(self, store: str):
        super().__init__("use of a closed store", store,
                         "an open store (open it again with statekit.stores.open_store)")



# --- processors -------------------------------------------------------------------------
class ProcessorError(StatekitError):
    """A processor did something its declarations do not allow: rows that do not fit the
    declared output, a store key or value of the wrong shape, a window or session behind
    its store's retention. The message names the value and what is accepted."""



# --- serving ----------------------------------------------------------------------------
class InstanceDown(StatekitError, ConnectionError):
    """An instance did not answer (connection refused, timed out)."""


class NoLiveInstance(StatekitError):
    """Every instance that could own a partition is gone."""


class TokenRefused(StatekitError):
    """An instance refused the call's token (none was sent, or not its own)."""


class PartitionNotHeld(StatekitError, LookupError):
    """This instance does not hold the partition: ask its owner."""

    def __init__(self, instance: str, partition: int, owners: Sequence[str]):
        self.instance, self.partition, self.owners = instance, partition, list(owners)
        super().__init__(f"instance {instance!r} does not hold partition {partition}; its "
                         f"owners: {', '.join(owners) or 'none'}")


class PositionNotReached(StatekitError):
    """The store has not reached the batch the query asked for (within its timeout)."""

    def __init__(self, partition: int, wanted: int, current: int, instance: str = ""):
        self.partition, self.wanted, self.current = partition, wanted, current
        self.instance = instance  # the instance that answered (a forwarded wait asks it again)
        at = f" on instance {instance!r}" if instance else ""
        super().__init__(f"not yet: partition {partition}{at} reflects batch {current}, the "
                         f"query asked for at least batch {wanted}; retry later or wait longer")


class ResultTooLarge(StatekitError):
    """A row-shaped answer would hold more rows than its ``limit``: never cut silently
    (``most``: the largest limit serving takes, ``statekit.serve.results.MAX_LIMIT``)."""

    def __init__(self, kind: str, limit: int, most: int):
        self.kind, self.limit = kind, limit
        super().__init__(f"the answer to {kind} has more than {limit:,} rows; ask with a "
                         f"larger limit (at most {most:,}), a narrower query "
                         f"(fetch_range, range), or read the whole state columnar with "
                         f"table() / to_pandas() (no limit)")


class PartitionUnavailable(StatekitError):
    """No live instance can answer for a partition now (owner and standbys gone, or restoring)."""

    def __init__(self, partition: int, detail: str, retry_after: float = 1.0):
        self.partition, self.retry_after = partition, retry_after
        super().__init__(f"partition {partition} is unavailable: {detail}; retry in about "
                         f"{retry_after:.0f} s")



# --- machines and engines ---------------------------------------------------------------
class KafkaJarsMissing(StatekitError):
    """Apache Kafka's jars are not on this machine, or not whole; the message says how to get
    them."""


class KafkaStreamsAppError(StatekitError):
    """statekit's reference Kafka Streams application is not built on this machine (the
    message says how to build it), or an instance of it did not start or stopped: the message
    quotes its own one-line reason, never a Java stack trace."""


class KafkaStreamsStateError(StatekitError):
    """A Kafka Streams state directory statekit will not read: another application's, a
    store format or serde it does not know, or one a running application holds; the message
    names the path or value, what was found and what is accepted."""


class S3AJarsMissing(StatekitError):
    """Hadoop's S3A connector (hadoop-aws and the AWS SDK's jars) is not on this machine, or
    not whole, or not in the running Spark JVM; the message says how to get it there."""


class ObjectStoreError(CheckpointError):
    """An ``s3a://`` location cannot be reached: credentials missing or refused, a bucket or
    path that does not exist, an endpoint that does not answer; the message names the
    location and the settings to check."""


class NotOnConnect(StatekitError, NotImplementedError):
    """A statekit call that Spark Connect does not allow; the message says which and why."""

    def __init__(self, call: str, why: str | None = None):
        self.call = call
        reason = why or "Spark Connect does not offer it"
        super().__init__(f"{call} does not work through Spark Connect: {reason}")


class ClusterStartError(StatekitError, RuntimeError):
    """The standalone master or a worker did not come up; the message quotes its log."""



# --- restore ----------------------------------------------------------------------------
class RestoreWorkerLost(StatekitError):
    """A restore worker process ended without finishing (killed, or out of memory): its
    partitions' stores keep what their last checkpoint says; restore again to go on."""



# --- the workshop -----------------------------------------------------------------------
class NotSolved(StatekitError, AssertionError):
    """A solution that a check does not accept (raised by ``Verdict.require``)."""


class HandoutFailed(StatekitError):
    """Some notebooks raised while running, or showed output they did not mean to (a
    traceback, stderr); the others' handouts were written."""

