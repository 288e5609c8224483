"""The column layout of each stage's Parquet partition: the contract between the stages."""

from __future__ import annotations

import polars as pl

from oai_pipeline.errors import RecordError

RAW_OAI_XML = "raw_oai_xml"
TRANSFORMED_RECORDS = "transformed_records"
SYNC_DECISIONS = "sync_decisions"
WRITTEN_RECORDS = "written_records"
# The four assets, in the order the stages make them.
STAGE_ASSETS = (RAW_OAI_XML, TRANSFORMED_RECORDS, SYNC_DECISIONS, WRITTEN_RECORDS)

ERROR_COLUMNS = {
    "error_type": pl.String,
    "error_message": pl.String,
    "error_location": pl.String,
}

RAW_SCHEMA = pl.Schema(
    {
        "identifier": pl.String,
        "datestamp": pl.String,
        "deleted": pl.Boolean,
        "set_specs": pl.List(pl.String),
        "xml": pl.Binary,
        **ERROR_COLUMNS,
    }
)

TRANSFORMED_SCHEMA = pl.Schema(
    {
        "identifier": pl.String,
        "datestamp": pl.String,
        "deleted": pl.Boolean,
        "data": pl.String,  # the record data as JSON
        "pid": pl.String,
        "communities": pl.List(pl.String),
        **ERROR_COLUMNS,
    }
)

DECISIONS_SCHEMA = pl.Schema(
    {
        "identifier": pl.String,
        "writer": pl.Int32,  # index into the harvester's writers
        "datestamp": pl.String,
        "deleted": pl.Boolean,
        "pid": pl.String,
        "local_id": pl.String,
        "local_state": pl.String,
        "action": pl.String,
        "reason": pl.String,
    }
)

WRITTEN_SCHEMA = pl.Schema(
    {
        "identifier": pl.String,
        "writer": pl.Int32,
        "planned_action": pl.String,
        "action": pl.String,
        "local_id": pl.String,
        "revision": pl.Int64,
        **ERROR_COLUMNS,
    }
)


SCHEMAS = {
    RAW_OAI_XML: RAW_SCHEMA,
    TRANSFORMED_RECORDS: TRANSFORMED_SCHEMA,
    SYNC_DECISIONS: DECISIONS_SCHEMA,
    WRITTEN_RECORDS: WRITTEN_SCHEMA,
}


def error_columns(error: RecordError | None) -> dict[str, str | None]:
    if error is None:
        return {"error_type": None, "error_message": None, "error_location": None}
    return {
        "error_type": error.type,
        "error_message": error.message,
        "error_location": error.location,
    }


def error_from_row(row: dict) -> RecordError | None:
    if row.get("error_type") is None:
        return None
    return RecordError(
        type=row["error_type"], message=row["error_message"] or "", location=row["error_location"]
    )


def frame(rows: list[dict], schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else schema.to_frame()
