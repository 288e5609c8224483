"""A full disk or a read-only home: the operator gets one line naming the file and the cure,
the read-only commands still read, and nothing is left half-written."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from click.testing import CliRunner

from oai_pipeline.cli import main
from oai_pipeline.settings import load_settings
from oai_pipeline.state.store import StateStore


def test_status_before_anything_was_written_does_not_create_the_target(registered: str) -> None:
    """A first harvest that filled the disk while staging leaves no target file: status
    created it (and failed so on the full or read-only disk) to count no records."""
    settings = load_settings()
    with StateStore(settings.state_db_url) as state:
        run_id = state.create_run(
            registered,
            window_from=None,
            window_until=None,
            scale=None,
            max_records=0,
            options={},
            worker=f"{socket.gethostname()}:1:test",
        )
    target_file = Path(settings.target_db_url.removeprefix("sqlite:///"))
    assert not target_file.exists()

    result = CliRunner().invoke(main, ["status", "--batch-id", str(run_id), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"] == {"records": 0, "source_identifiers": 0}
    assert not target_file.exists()
