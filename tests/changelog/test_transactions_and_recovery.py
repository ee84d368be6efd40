"""What exactly-once shipping leaves in a topic (commit markers), and what recovery reads."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.changelog.recovery_reads import SOURCES, recovery_reads
from statekit.changelog.transaction_marks import transaction_marks
from statekit.errors import BadArgument


def test_offsets_without_records_are_the_transactions_markers():
    # partition 0: transaction {0,1} marker 2, transaction {3} marker 4; partition 1: {0} marker 1
    records = pd.DataFrame({"partition": [0, 0, 0, 1], "offset": [0, 1, 3, 0],
                            "batch": [0, 0, 1, 1]})
    marks = transaction_marks(records, ends={0: 5, 1: 2}).set_index("partition")
    assert marks.loc[0, "transactions"] == 2 and marks.loc[0, "without_record"] == 2
    assert marks.loc[1, "transactions"] == 1 and marks.loc[1, "records"] == 1
    # without the ends, the last transaction's marker is not seen
    assert transaction_marks(records).set_index("partition").loc[0, "transactions"] == 1


def test_transaction_marks_names_a_frame_without_offsets():
    with pytest.raises(BadArgument, match="read_changelog"):
        transaction_marks(pd.DataFrame({"partition": [0]}))


def test_recovery_reads_three_ways():
    reads = recovery_reads(changelog_records=900, compacted_records=80, input_records=5000)
    assert list(reads["source"]) == list(SOURCES)
    assert reads["records"].tolist() == [900, 80, 5000]
    for bad in (-1, 2.5, True, "90"):
        with pytest.raises(BadArgument, match="whole number of records"):
            recovery_reads(changelog_records=bad, compacted_records=1, input_records=1)
