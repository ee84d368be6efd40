"""A failed query's error in a few lines: Spark's message without its wrapping (plan dump,
``[STREAM_FAILED]`` preamble, Python tracebacks, Java frames), with its causes.
"""

from __future__ import annotations

import re

#: statekit's Kafka source's message when the broker stops answering mid-batch
BROKER_STALL = re.compile(r"timed out reading .* from '(?P<servers>[^']+)'")

_PLAN_DUMP = re.compile(r"\n=== Streaming Query ===.*", re.DOTALL)
_STREAM_FAILED = re.compile(r"^\[STREAM_FAILED\] Query \[id = [^\]]*\] terminated with "
                            r"exception: ")
_PYTHON_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Loss|Unreachable|Found))"
                           r": (.+)$", re.MULTILINE)
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+")


def spark_message(text: str) -> str:
    """One of Spark's failure messages without its wrapping: the plan and offsets Spark appends
    to a failed streaming query's message, the ``[STREAM_FAILED]`` preamble, a Python worker's
    traceback (its last error line is kept), ``SQLSTATE`` codes, Java stack traces.

    Example:
        >>> spark_message("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with "
        ...               "exception: [PYTHON_EXCEPTION] An exception was thrown from the Python "
        ...               "worker: Traceback (most recent call last):\\n  File 'x.py', line 1"
        ...               "\\nstatekit.errors.StatekitError: timed out SQLSTATE: 38000\\n"
        ...               "=== Streaming Query ===\\nLogical Plan: ...")
        'timed out'
    """
    text = _PLAN_DUMP.sub("", text)
    text = text.split("\n\nJVM stacktrace:")[0]
    text = _STREAM_FAILED.sub("", text.strip())
    if "Traceback (most recent call last)" in text:
        errors = _PYTHON_ERROR.findall(text.split("Traceback (most recent call last)", 1)[1])
        if errors:
            text = errors[-1][1]
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("at ")]
    return _SQLSTATE.sub("", "\n".join(lines)).strip()


def failure_text(exc: BaseException, depth: int = 6) -> str:
    """A query's exception with the chain of causes Spark wrapped it in, innermost last, each
    without Spark's wrapping (``spark_message``: no plan dump, no traceback).

    Spark often wraps the real failure (a Python traceback, a refused connection) in a
    generic one ("driver worker exited unexpectedly"); the causes say what happened.
    """
    text = spark_message(str(exc))
    seen = {text}
    cause = getattr(exc, "_cause", None) or exc.__cause__
    while cause is not None and depth > 0:
        message = spark_message(str(cause))
        if message and not any(message in known or known in message for known in seen):
            text += f"\ncaused by: {message}"
            seen.add(message)
        cause, depth = getattr(cause, "_cause", None) or cause.__cause__, depth - 1
    return text
