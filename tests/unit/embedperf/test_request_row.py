"""The request row is one definition: the typed record's fields are the Parquet columns, in order and type,
and a record's values are what the recorder appends and a worker forwards."""

from __future__ import annotations

from dataclasses import fields

import pyarrow as pa

from embedperf.schema import REQUEST_COLUMNS, REQUEST_SCHEMA, RequestRow


def test_the_record_is_the_schema() -> None:
    assert tuple(f.name for f in fields(RequestRow)) == REQUEST_COLUMNS == tuple(REQUEST_SCHEMA.names)
    assert [f.metadata["arrow"] for f in fields(RequestRow)] == list(REQUEST_SCHEMA.types)
    assert REQUEST_SCHEMA.field("ok").type == pa.bool_() and REQUEST_SCHEMA.field("stage_index").type == pa.int32()


def test_values_follow_the_columns_and_every_field_starts_empty() -> None:
    assert RequestRow().values() == [None] * len(REQUEST_COLUMNS)
    given = {"worker": "w1", "stage_index": 2, "ok": True, "latency_ms": 5.5, "side": "candidate", "documents": 3}
    values = RequestRow(**given).values()  # type: ignore[arg-type]
    assert values == [given.get(column) for column in REQUEST_COLUMNS]
    table = pa.Table.from_pylist([dict(zip(REQUEST_COLUMNS, values, strict=True))], schema=REQUEST_SCHEMA)
    assert table.to_pylist()[0]["side"] == "candidate"
