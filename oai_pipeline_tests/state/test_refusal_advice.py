"""The advice a PostgreSQL refusal (42501) gets names the role and the schema the URL says,
as PostgreSQL would take them, and no made-up role for a database none of ours named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from oai_pipeline.errors import (
    database_role,
    database_schema,
    refused_write_line,
    refused_write_text,
)


def _denied(message: str) -> Exception:
    """A psycopg2 error as SQLAlchemy's `orig`: SQLSTATE 42501 and its primary message."""
    error = Exception(message)
    error.pgcode = "42501"  # type: ignore[attr-defined]
    error.diag = SimpleNamespace(message_primary=message)  # type: ignore[attr-defined]
    return error


def test_a_percent_encoded_user_is_named_as_postgresql_logs_it_in() -> None:
    """`jo%40lab` logs in as `jo@lab`: the GRANT named the encoded text, no such role."""
    assert database_role("postgresql+psycopg2://jo%40lab:pw@db/state") == "jo@lab"
    line = refused_write_text(
        _denied("permission denied for table harvest_records"),
        "it",
        database_role("postgresql+psycopg2://jo%40lab:pw@db/state"),
    )
    assert line is not None and 'TO "jo@lab"`' in line and "%40" not in line


@pytest.mark.parametrize(
    ("url", "schema"),
    [
        ("postgresql+psycopg2://u@db/state", "public"),
        ("postgresql+psycopg2://u@db/state?options=-csearch_path%3Dharvest", "harvest"),
        ("postgresql+psycopg2://u@db/state?options=-c%20search_path%3Dh2%2Cpublic", "h2"),
        ("postgresql+psycopg2://u@db/state?options=-csearch_path%3D%22%24user%22", "public"),
    ],
)
def test_the_schema_is_the_first_of_the_search_path_the_url_sets(url: str, schema: str) -> None:
    assert database_schema(url) == schema


def test_the_table_grants_name_the_schema_of_the_tables() -> None:
    """Tables in a schema the URL's search path names: `IN SCHEMA public` granted nothing."""
    line = refused_write_text(
        _denied("permission denied for table harvest_records"), "it", "harvester", "harvest"
    )
    assert line is not None
    assert "ON ALL TABLES IN SCHEMA harvest TO harvester`" in line
    assert "ON ALL SEQUENCES IN SCHEMA harvest TO harvester`" in line


def test_a_refusal_from_a_database_none_of_ours_named_does_not_make_up_a_role() -> None:
    """Dagster's own storage refusing: the advice granted to `"the command's role"`."""
    error = SimpleNamespace(orig=_denied("permission denied for table runs"))
    line = refused_write_line(error)  # type: ignore[arg-type]
    assert line is not None
    assert "the database refuses its role this:" in line
    assert "TO <its role>`" in line and "command's role" not in line
