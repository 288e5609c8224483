"""A rekey undone by a second one (A→B, then B→A: the operator rekeyed to the wrong namespace)
leaves the windows harvested before both with current identifiers again.

Before, a downstream step of such a window (automation, a re-execution from failure, a
materialisation from the UI) was refused after the undo: its Parquet held identifiers under
A, the old prefix of the first rekey, although the second had brought the state store and the
target back to A. Now a partition is stale only if the rekeys since its run, applied in turn,
change one of its identifiers.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from oai_pipeline.errors import PipelineError
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.pipeline.frames import RAW_OAI_XML
from oai_pipeline.pipeline.partitions import refuse_partitions_of_old_identifiers
from oai_pipeline.pipeline.scope import HarvestScope, Window
from oai_pipeline.state.store import StateStore
from oai_pipeline.storage import PartitionStore

A = "oai:old.example.org:"
B = "oai:wrong.example.org:"
C = "oai:repo.example.org:"
WINDOW = "2024-01-03"


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[StateStore, PartitionStore, int]]:
    """Harvester h's window harvested under A: its harvest records and its raw_oai_xml
    partition (of the harvest run yielded)."""
    identifiers = [f"{A}123456789/{n}" for n in range(3)]
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as state:
        run_id = state.create_run(
            "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
        )
        state.upsert_harvested(
            "h",
            [HarvestedRecord(i, "2024-01-03", False, [], b"<record/>") for i in identifiers],
        )
        storage = PartitionStore(str(tmp_path / "storage"))
        storage.write_part(RAW_OAI_XML, "h", WINDOW, 0, pl.DataFrame({"identifier": identifiers}))
        yield state, storage, run_id


def refuse(state: StateStore, storage: PartitionStore, run_id: int) -> None:
    start = datetime(2024, 1, 3, tzinfo=UTC)
    scope = HarvestScope("h", (Window(WINDOW, start, start.replace(day=4)),))
    refuse_partitions_of_old_identifiers(state, storage, RAW_OAI_XML, [(run_id, scope)])


def test_a_window_harvested_before_a_rekey_and_its_undoing_is_current_again(
    stores: tuple[StateStore, PartitionStore, int],
) -> None:
    state, storage, run_id = stores
    state.rekey("h", A, B)
    state.rekey("h", B, A)

    refuse(state, storage, run_id)  # nothing stale: the step goes on

    state.rekey("h", A, C)  # rekeyed on: stale again, named by the rekey that made it so
    with pytest.raises(PipelineError) as refused:
        refuse(state, storage, run_id)
    assert f"{RAW_OAI_XML} of h {WINDOW} was made before" in str(refused.value)
    assert f"rekeyed from {A!r} to {C!r}" in str(refused.value)
