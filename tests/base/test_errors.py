"""statekit's errors name the bad value and what is accepted (``statekit.errors``)."""

from __future__ import annotations

from statekit.errors import (
    BadArgument,
    BatchNotRetained,
    BrokerUnreachable,
    StatekitError,
    TopicNotFound,
)


def test_bad_argument_names_value_and_accepted():
    err = BadArgument("window kind", "weekly", ["tumbling", "hopping"])
    assert str(err) == "bad window kind: 'weekly'; accepted: tumbling, hopping"
    assert (err.what, err.value, err.accepted) == ("window kind", "weekly", "tumbling, hopping")
    assert isinstance(err, ValueError) and isinstance(err, StatekitError)
    assert str(BadArgument("rate", -1, "a positive number")) == \
        "bad rate: -1; accepted: a positive number"


def test_batch_not_retained_shows_the_range_or_none_committed():
    err = BatchNotRetained(9, (2, 7), "/tmp/ck")
    assert str(err) == ("batch 9 is not retained in checkpoint '/tmp/ck'; "
                        "committed batches: 2..7")
    assert isinstance(err, LookupError) and err.batch == 9 and err.available == (2, 7)
    assert str(BatchNotRetained(0, None, "/tmp/ck")).endswith(
        "committed batches: none committed yet")


def test_broker_unreachable_and_topic_not_found_name_the_address_and_topic():
    assert str(BrokerUnreachable("127.0.0.1:9")) == "no Kafka broker answered at '127.0.0.1:9'"
    assert str(BrokerUnreachable("h:1", "timed out")).endswith("'h:1': timed out")
    err = TopicNotFound("gamez", "h:1", ["games", "__consumer_offsets", "alpha"])
    assert str(err) == "topic 'gamez' does not exist on 'h:1'; existing topics: alpha, games"
    assert str(TopicNotFound("x", "h:1")).endswith("existing topics: (none)")
