"""The one progress listener's bookkeeping (``statekit.spark.progress_listener``). Pure logic:
a stand-in for a session's ``streams`` records what is added, removed and stopped."""

from __future__ import annotations

from statekit.spark import progress_listener as pl


class _Query:
    def __init__(self):
        self.stopped = False

    def stop(self):
        self.stopped = True


class _Streams:
    def __init__(self):
        self.listeners, self.active = [], [_Query()]

    def addListener(self, listener):  # noqa: N802 - PySpark's name
        self.listeners.append(listener)

    def removeListener(self, listener):  # noqa: N802 - PySpark's name
        self.listeners.remove(listener)


class _Session:
    def __init__(self):
        self.streams = _Streams()


def test_the_listener_leaves_with_its_last_follower():
    spark = _Session()
    first, second = pl.follow(spark, "q1", print), pl.follow(spark, "q1", print)
    pl.follow(spark, "q2", print)
    assert len(spark.streams.listeners) == 1 and pl.followed(spark) == {"q1", "q2"}
    first.stop()
    assert pl.followed(spark) == {"q1", "q2"}
    second.stop()
    pl.unfollow(spark, "q2")
    assert spark.streams.listeners == [] and not pl.listening(spark)
    pl.follow(spark, "q3", print)
    assert len(spark.streams.listeners) == 1 and pl.listening(spark)


def test_at_exit_only_a_session_with_statekit_queries_has_them_stopped():
    attached_only, own = _Session(), _Session()
    pl.follow(attached_only, "theirs", print)
    pl.follow(own, "ours", print, owned=True)
    for spark in (attached_only, own):
        pl._unhook(spark, pl._SESSIONS[id(spark)])
        assert spark.streams.listeners == []
    assert not attached_only.streams.active[0].stopped  # a person's query runs on
    assert own.streams.active[0].stopped
