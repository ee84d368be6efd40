"""Sample datasets: the game-event generator, its committed file, the parser, flights."""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest

from statekit.datasets import (
    GAME_EVENTS_FILE,
    LATE_LINES,
    MALFORMED_LINES,
    REASONS,
    Dataset,
    flights,
    game_events,
    generate_game_events,
    parse_game_events,
)
from statekit.errors import BadArgument


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return generate_game_events()


def test_committed_file_is_the_generators_output(lines):
    assert GAME_EVENTS_FILE.read_text(encoding="utf-8") == "\n".join(lines) + "\n"


def test_generator_is_deterministic_and_seeded():
    assert generate_game_events(n=300) == generate_game_events(n=300)
    assert generate_game_events(n=300, seed=1) != generate_game_events(n=300, seed=2)


def test_good_events_have_the_documented_shape(lines):
    first = json.loads(lines[0])
    assert list(first) == ["player", "game", "score", "ts"]
    assert first["ts"] == "2026-01-05T10:00:00.000Z"
    good, bad = parse_game_events(lines)
    assert len(good) == 4994 and len(bad) == 6
    assert sorted(good.player.unique()) == [f"p{i:02d}" for i in range(40)]
    assert sorted(good.game.unique()) == [f"g{i}" for i in range(1, 7)]
    assert good.score.between(0, 100).all()
    assert good.event_time.min() == pd.Timestamp("2026-01-05T10:00:00Z")
    span = good.event_time.max() - good.event_time.min()
    assert pd.Timedelta("1h50min") < span < pd.Timedelta("2h10min")
    assert all(line.count('"ts": "2026-01-05T') == 1 for line in lines
               if line.startswith('{"player"') and line.endswith('Z"}'))


def test_malformed_lines_are_at_the_documented_positions(lines):
    _, bad = parse_game_events(lines)
    assert bad.line_no.tolist() == sorted(MALFORMED_LINES) == [251, 1001, 1751, 2501, 3251, 4001]
    assert bad.value.tolist() == [lines[n - 1] for n in bad.line_no]
    assert bad.reason.tolist() == [
        "not a JSON object", "not a JSON object", "player is missing or null",
        "score is not a bigint: lots", "ts is missing or null", "ts is not a timestamp: yesterday"]
    readme = (GAME_EVENTS_FILE.parent / "README.md").read_text()
    for n in MALFORMED_LINES:
        assert f"| {n} | `{lines[n - 1]}`" in readme


def test_out_of_order_jitter_is_small_and_late_events_are_45_minutes_behind(lines):
    ms = game_events().records.timestamp
    behind = (ms.cummax() - ms) / 60_000  # minutes behind the latest earlier event time
    late = [n - 1 for n in LATE_LINES]
    assert LATE_LINES == [4501, 4551, 4601, 4651, 4701, 4751, 4801, 4851]
    assert behind.iloc[late].between(44.5, 46).all()
    assert behind.drop(index=late).max() <= 1.5  # ordinary jitter: at most 90 s
    # a 10-minute watermark drops exactly the late events
    dropped = ms < ms.cummax().shift(fill_value=0) - 10 * 60_000
    assert dropped[dropped].index.tolist() == late


def test_parser_rule_on_edge_cases():
    ts = '"ts": "2026-01-05T10:00:00.000Z"'
    not_json, bad_score, bad_ts, no_player, no_ts = REASONS
    cases = {
        f'{{"player": "p1", "game": "g1", "score": 5, {ts}}}': None,
        f'{{"player": "p1", "game": "g1", "score": 5, {ts}, "extra": [1]}}': None,
        '{"player": "p1", "game": "g1", "score": 5, "ts": "2026-01-05T11:00:00+01:00"}': None,
        '{"player": "p1", "game": "g1", "score": 5, "ts": "2026-01-05T10:00:00"}': None,
        # the null rule: only the group key and the event time are required
        f'{{"player": "p1", "score": 5, {ts}}}': None,
        f'{{"player": "p1", "game": "g1", {ts}}}': None,
        f'{{"player": "p1", "game": null, "score": null, {ts}}}': None,
        f'{{"player": 7, "game": "g1", "score": 5, {ts}}}': None,  # read as the text "7"
        "[1, 2]": not_json,
        '"just a string"': not_json,
        "": not_json,
        f'{{"player": null, "game": "g1", "score": 5, {ts}}}': no_player,
        f'{{"game": "g1", "score": 5, {ts}}}': no_player,
        f'{{"player": "p1", "game": "g1", "score": "5", {ts}}}': f"{bad_score}: 5",
        f'{{"player": "p1", "game": "g1", "score": 5.5, {ts}}}': f"{bad_score}: 5.5",
        f'{{"player": "p1", "game": "g1", "score": 5.0, {ts}}}': f"{bad_score}: 5.0",
        f'{{"player": "p1", "game": "g1", "score": true, {ts}}}': f"{bad_score}: true",
        f'{{"player": "p1", "game": "g1", "score": 99999999999999999999, {ts}}}':
            f"{bad_score}: 99999999999999999999",
        f'{{"player": null, "game": "g1", "score": "x", {ts}}}': f"{bad_score}: x",  # type first
        '{"player": "p1", "game": "g1", "score": 5}': no_ts,
        '{"player": "p1", "game": "g1", "score": 5, "ts": null}': no_ts,
        '{"player": "p1", "game": "g1", "score": 5, "ts": 1767607200000}':
            f"{bad_ts}: 1767607200000",
        '{"player": "p1", "game": "g1", "score": 5, "ts": "2026-13-45T99:00:00Z"}':
            f"{bad_ts}: 2026-13-45T99:00:00Z",
    }
    good, bad = parse_game_events(list(cases))
    expected_bad = [i + 1 for i, reason in enumerate(cases.values()) if reason]
    assert bad.line_no.tolist() == expected_bad
    assert bad.reason.tolist() == [r for r in cases.values() if r]
    assert len(good) == 8
    assert good.dtypes.astype(str).to_dict() == {
        "player": "object", "game": "object", "score": "Int64",
        "event_time": "datetime64[ns, UTC]"}
    assert good.event_time.tolist() == [pd.Timestamp("2026-01-05T10:00:00Z")] * 8
    assert good.player.tolist()[-1] == "7"
    assert good.game.isna().sum() == 2 and good.score.isna().sum() == 2


def test_parser_of_nothing_gives_empty_typed_frames():
    good, bad = parse_game_events([])
    assert list(good.columns) == ["player", "game", "score", "event_time"]
    assert list(bad.columns) == ["line_no", "value", "reason"]
    assert len(good) == len(bad) == 0


def test_game_events_dataset(lines):
    ds = game_events()
    assert isinstance(ds, Dataset) and ds.name == "game_events" and len(ds) == 5000
    rec = ds.records
    assert list(rec.columns) == ["key", "value", "timestamp"]
    assert str(rec.timestamp.dtype) == "int64"
    assert rec.value.tolist() == lines
    assert rec.key.iloc[0] == json.loads(lines[0])["player"]
    # no player readable → no key: the truncated line, the non-JSON line, the one without player
    assert rec.index[rec.key.isna()].tolist() == [250, 1000, 1750]
    assert rec.key.iloc[2500] == "p08"  # malformed score, player still readable
    # unreadable time → the previous event's time; readable time is kept
    for n in (251, 1001, 3251, 4001):
        assert rec.timestamp.iloc[n - 1] == rec.timestamp.iloc[n - 2]
    assert rec.timestamp.iloc[2500] == pd.Timestamp("2026-01-05T10:58:43.919Z").value // 10**6


def test_the_events_a_query_counts_in_pandas(lines):
    """events(): the parsing rule's good events, typed: the malformed ones left out."""
    events = game_events().events()
    good, bad = parse_game_events(lines)
    assert len(events) == len(good) == 5000 - len(bad) == 4994
    assert events["score"].dtype == "Int64" and str(events["ts"].dtype) == "datetime64[ns]"
    assert events["player"].notna().all() and events["ts"].notna().all()
    assert sorted(events["score"].dropna()) == sorted(good["score"].dropna())
    flights_ = flights(limit=3).events()
    assert flights_["dep_delay"].tolist() == [2, 4, 2] and flights_["ts"].dt.tz is None


def test_written_files_hold_every_record_in_order_each_modified_after_the_one_before(tmp_path):
    """Spark's file source takes files oldest first (and files of one instant in any order):
    the files' modification times must follow their order for a stream to read the records
    in the order written."""
    ds = game_events()
    folder = ds.write_files(tmp_path / "in", files=6)
    paths = [folder / f"part-{i}.json" for i in range(6)]
    assert sorted(folder.iterdir()) == paths
    assert [line for p in paths for line in p.read_text().splitlines()] == \
        ds.records["value"].tolist()
    stamps = [p.stat().st_mtime for p in paths]
    assert all(later - earlier >= 1 for earlier, later in itertools.pairwise(stamps))
    ds.write_files(folder, files=2)  # written again: emptied first
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.json", "part-1.json"]


def test_game_events_falls_back_to_the_generator(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(generate_game_events(n=150)) + "\n")
    assert len(game_events(path)) == 150
    with pytest.raises(BadArgument, match="nope.jsonl"):
        game_events(tmp_path / "nope.jsonl")


def test_flights_dataset_sorted_keyed_and_utc():
    ds = flights(limit=1000)
    rec = ds.records
    assert len(ds) == 1000 and ds.name == "flights_by_carrier"
    assert rec.timestamp.is_monotonic_increasing
    first = json.loads(rec.value.iloc[0])
    assert first == {"carrier": "UA", "origin": "EWR", "dest": "IAH", "flight": 1545,
                     "dep_delay": 2, "arr_delay": 11, "distance": 1400,
                     "ts": "2013-01-01T05:15:00.000Z"}
    assert rec.key.iloc[0] == "UA"
    parsed = pd.to_datetime([json.loads(v)["ts"] for v in rec.value], utc=True)
    assert (parsed.asi8 // 10**6 == rec.timestamp.to_numpy()).all()
    assert flights(limit=5, key="origin").records.key.tolist()[:3] == ["EWR", "LGA", "JFK"]


def test_all_flights_with_nulls_for_cancelled():
    rec = flights().records
    assert len(rec) == 336_776
    assert rec.key.nunique() == 16
    assert rec.timestamp.is_monotonic_increasing
    assert rec.value.str.contains('"dep_delay":null').sum() == 8255
    assert json.loads(rec.value.iloc[-1])["ts"].startswith("2013-12-31T")


@pytest.mark.parametrize("kwargs, named", [
    ({"key": "dest"}, "'dest'"),
    ({"limit": 0}, "0"),
    ({"limit": -5}, "-5"),
    ({"limit": "10"}, "'10'"),
])
def test_flights_bad_arguments_are_named(kwargs, named):
    with pytest.raises(BadArgument, match=named) as info:
        flights(**kwargs)
    if "key" in kwargs:
        assert "carrier, origin" in str(info.value)


@pytest.mark.parametrize("kwargs, named", [
    ({"n": 5}, "5"),
    ({"n": 1000.5}, "1000.5"),
    ({"players": 0}, "0"),
    ({"games": 100}, "100"),
])
def test_generator_bad_arguments_are_named(kwargs, named):
    with pytest.raises(BadArgument, match=named):
        generate_game_events(**kwargs)
