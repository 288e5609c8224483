"""Public records (samples/public: oai_dc, DataCite, oai_openaire, marcxml) harvested whole into the
embedded target: each written once, a bad neighbour an error of its own, and a second harvest
finds every record unchanged."""

from __future__ import annotations

import re

import pytest

from oai_pipeline.pipeline.options import RunOptions
from oai_pipeline.pipeline.runner import run_harvest
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline_tests.oai.fake_source import FakeRecord, FakeSource
from oai_pipeline_tests.support import EVERYTHING, harvest_fake_source

from .test_public_records import PUBLIC

SAMPLES = [
    "conicet-dspace-GetRecord-oai_dc.xml",
    "helda-dspace-oai_dc.xml",
    "datacite-oai-1.0-sample-kernel-2.1.xml",
    "bolognese-creators-in-one-creator.xml",
    "unimi-iris-oai_openaire.xml",
    "inspirehep-oai_openaire-thesis.xml",
    "inveniordm-marcxml-full-record.xml",
    "loc-marcxml-sound-recording.xml",
]


def _metadata(name: str) -> str:
    """The metadata element of a sample, as a source would put it inside <metadata>."""
    text = (PUBLIC / name).read_text(encoding="utf-8")
    if "<OAI-PMH" in text:
        text = text[text.index("<oai_dc:dc") : text.index("</oai_dc:dc>") + len("</oai_dc:dc>")]
    return re.sub(r"^<\?xml[^>]*\?>\s*(<!--.*?-->\s*)?", "", text.strip(), flags=re.S)


@pytest.fixture
def source(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    records = [
        FakeRecord(f"oai:public:{n}", f"2024-03-01T00:00:0{n}Z", raw_metadata=_metadata(name))
        for n, name in enumerate(SAMPLES)
    ]
    no_creator = '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
    no_creator += 'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>T</dc:title></oai_dc:dc>'
    records.append(FakeRecord("oai:public:bad", "2024-03-01T00:00:09Z", raw_metadata=no_creator))
    return harvest_fake_source(settings, monkeypatch, FakeSource(records, page_size=2))


def test_public_records_are_written_and_a_second_harvest_changes_nothing(
    source: FakeSource, settings: Settings
) -> None:
    with Services(settings) as services:
        first = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
        second = run_harvest(services, EVERYTHING, RunOptions(), progress=lambda _m: None)
    assert (first.harvested, first.created, first.errors) == (9, 8, 1)
    assert first.error_types == {"missing_field": 1}
    assert (second.created, second.updated, second.unchanged, second.errors) == (0, 0, 8, 1)
    repository = EmbeddedRepository(settings.target_db_url)
    try:
        records = {
            row["source_identifier"]: repository.show(row["id"])
            for row in repository.list(harvester="sample")
        }
    finally:
        repository.close()
    assert sorted(records) == [f"oai:public:{n}" for n in range(8)]
    conicet = records["oai:public:0"]["data"]["metadata"]
    assert {"identifier": "978-987-558-611-6", "scheme": "isbn"} | {
        "relation_type": {"id": "ispublishedin"}
    } in conicet["related_identifiers"]
    assert records["oai:public:2"]["doi"] == "10.5072/wdcc/ccsrnies_sres_b2"
    assert len(records["oai:public:3"]["data"]["metadata"]["creators"]) == 3
    # oai_openaire: the DOI of an alternateIdentifier is the record's, the COAR type mapped
    iris = records["oai:public:4"]
    assert iris["doi"] == "10.30557/mt00041"
    assert iris["data"]["metadata"]["resource_type"] == {"id": "publication-article"}
    inspire = records["oai:public:5"]["data"]["metadata"]
    assert inspire["resource_type"] == {"id": "publication-dissertation"}
    assert inspire["publication_date"] == "2020-01-01"
    # marcxml: InvenioRDM's DOI in 024, a catalogue record's performer as its creator
    assert records["oai:public:6"]["doi"] == "10.1234/12345-abcde"
    sound = records["oai:public:7"]["data"]["metadata"]
    assert (sound["resource_type"], sound["publication_date"]) == ({"id": "audio"}, "1957")
    assert sound["creators"][0]["person_or_org"]["name"] == "Charles, Ray"
