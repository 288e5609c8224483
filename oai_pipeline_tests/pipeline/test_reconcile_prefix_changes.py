"""A reconcile's refusal to delete records harvested in another metadata prefix names the
prefixes they were harvested in, with how many of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_pipeline.errors import PipelineError
from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.pipeline.reconcile import _refuse_another_format
from oai_pipeline.state.store import StateStore


def _harvested(store: StateStore, *numbers: int) -> None:
    store.upsert_harvested(
        "h", [HarvestedRecord(f"oai:x:{n}", "2024-01-01", False, xml=b"<r/>") for n in numbers]
    )


DUBLIN_CORE = Harvester.from_stored(
    {"id": "h", "base_url": "https://example.org/oai", "metadata_prefix": "oai_dc"}
)


def _harvested_in_two_prefixes(store: StateStore) -> None:
    """Records 1 and 2 harvested as oai_dc, then the prefix oai_datacite and record 3 in it."""
    store.save_harvester(DUBLIN_CORE)
    _harvested(store, 1, 2)
    store.save_harvester(DUBLIN_CORE.model_copy(update={"metadata_prefix": "oai_datacite"}))
    _harvested(store, 3)


def test_after_two_prefix_changes_the_refusal_names_each_format_with_its_count(
    tmp_path: Path,
) -> None:
    """oai_dc -> oai_datacite -> datacite: the records still harvested as oai_dc are held
    back too, and the line said all three were `harvested as 'oai_datacite'`."""
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        _harvested_in_two_prefixes(store)
        datacite = DUBLIN_CORE.model_copy(update={"metadata_prefix": "datacite"})
        store.save_harvester(datacite)

        with pytest.raises(PipelineError) as refused:
            _refuse_another_format(store, datacite, {"oai:x:1", "oai:x:2", "oai:x:3"})

    assert str(refused.value) == (
        "reconcile of h deletes nothing: 3 of the 3 records it would delete (e.g. oai:x:1) "
        "were harvested as 'oai_datacite' (1) and 'oai_dc' (2), before the harvester's "
        "metadata prefix became 'datacite': the source may just not offer them as "
        "'datacite'; to delete them all the same, run reconcile again with --force"
    )


def test_records_harvested_in_the_prefix_the_harvester_has_again_are_not_held_back(
    tmp_path: Path,
) -> None:
    """oai_dc -> oai_datacite -> oai_dc: the records harvested as oai_dc before both changes
    are the prefix's again; one vanished from its list is deleted, not held back as
    `harvested as 'oai_dc', before the metadata prefix became 'oai_dc'`. Those harvested
    as oai_datacite meanwhile are still held back."""
    with StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        _harvested_in_two_prefixes(store)
        store.save_harvester(DUBLIN_CORE)

        _refuse_another_format(store, DUBLIN_CORE, {"oai:x:1", "oai:x:2"})  # deleted: no refusal
        with pytest.raises(PipelineError) as refused:
            _refuse_another_format(store, DUBLIN_CORE, {"oai:x:1", "oai:x:3"})

    assert str(refused.value).startswith(
        "reconcile of h deletes nothing: 1 of the 2 records it would delete (e.g. oai:x:3) "
        "were harvested as 'oai_datacite', before the harvester's metadata prefix became "
        "'oai_dc'"
    )
