"""Progress reports as Spark's own JSON: a streaming query listener at two JVM calls a report.

PySpark's ``StreamingQueryListener`` turns each event into Python objects field by field,
a Py4J call per field and per map entry. For one report of a statekit query (a RocksDB
state operator with its custom metrics, a Kafka source) that is about 640 calls, 260–300 ms
of driver time on this 2-core machine, for every batch and every listener; a query at a
100 ms trigger outruns it, and under load reports were seen to arrive more than 10 s late.
Spark writes the same report as JSON in one call (``StreamingQueryProgress.json()``), with
the keys and values PySpark's objects give back as JSON (checked on a statekit report).

``ReportListener`` is a ``StreamingQueryListener`` whose subclasses get each report once,
parsed and as text (``on_report``). On a classic session the JVM's up-call reads the JSON
alone; on Spark Connect, where PySpark delivers events it has already parsed from JSON,
the same ``on_report`` is called from PySpark's event. Register it with
``spark.streams.addListener`` as any listener.

Example:
    >>> class Batches(ReportListener):
    ...     def __init__(self):
    ...         self.seen = []
    ...     def on_report(self, report, text):
    ...         self.seen.append(report["batchId"])
    >>> listener = Batches()
    >>> listener.on_report({"batchId": 3}, '{"batchId": 3}')
    >>> listener.seen
    [3]
"""

from __future__ import annotations

import json

from pyspark.sql.streaming import StreamingQueryListener

#: The JVM interface PySpark's own listeners implement (PySpark's ``JStreamingQueryListener``).
JVM_LISTENER = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
#: The JVM class that turns the interface into a listener on the session's listener bus.
JVM_WRAPPER = "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper"


class ReportListener(StreamingQueryListener):
    """A listener that hands on each progress report: override ``on_report``."""

    def on_report(self, report: dict, text: str) -> None:
        """One batch's progress report: ``report`` parsed, ``text`` Spark's JSON of it."""
        raise NotImplementedError(f"{type(self).__name__} must define on_report")

    # --- PySpark's events (Spark Connect; the classic JVM calls _JsonUpcalls instead) ---------
    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        text = event.progress.json
        self.on_report(json.loads(text), text)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    @property
    def _jlistener(self):
        """The JVM side on a classic session (PySpark's ``addListener`` and ``removeListener``
        take it from here): Spark's wrapper around up-calls that read a report's JSON alone."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            wrapper = SparkContext._jvm
            for part in JVM_WRAPPER.split("."):
                wrapper = getattr(wrapper, part)
            self._jlistenerobj = wrapper(_JsonUpcalls(self))
        return self._jlistenerobj


class _JsonUpcalls:
    """The JVM's listener interface, answered with two calls a report (``progress().json()``)."""

    def __init__(self, listener: ReportListener):
        self.listener = listener

    def onQueryStarted(self, jevent) -> None:
        pass

    def onQueryProgress(self, jevent) -> None:
        text = jevent.progress().json()
        self.listener.on_report(json.loads(text), text)

    def onQueryIdle(self, jevent) -> None:
        pass

    def onQueryTerminated(self, jevent) -> None:
        pass

    class Java:
        implements = [JVM_LISTENER]
