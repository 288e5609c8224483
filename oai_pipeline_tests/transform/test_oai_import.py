"""The oai-import transformer: options, the import registry, envelopes, batches."""

from __future__ import annotations

from typing import Any

import pytest
from lxml import etree
from pydantic import ValidationError

from oai_pipeline import json_codec
from oai_pipeline.errors import ConfigurationError
from oai_pipeline.harvesters.plugins import validate_spec
from oai_pipeline.transform import imports, oai_import
from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.datacite import import_oai_datacite, import_resource
from oai_pipeline.transform.dublin_core import import_dc
from oai_pipeline.transform.oai_import import OAIImportTransformer

from .records import (
    DATACITE_SAMPLES,
    OAI,
    SAMPLES,
    ZENODO_PAGES,
    datacite_item,
    page_items,
    transform,
    transform_one,
    wrap_metadata,
)

VIDEO = (SAMPLES / "datacite-example-video-v4.xml").read_text()


def test_options_accept_only_the_rdm_model() -> None:
    assert OAIImportTransformer.Options().model == "rdm"
    with pytest.raises(ValidationError):
        OAIImportTransformer.Options(model="marc21")
    with pytest.raises(ValidationError):
        OAIImportTransformer.Options(sets={"a": "b"})
    # as a harvester spec: a one-line configuration error, no traceback
    validate_spec("transformers", 'oai-import{model: "rdm", set_communities: {"a": "b"}}')
    with pytest.raises(ConfigurationError, match="model"):
        validate_spec("transformers", 'oai-import{model: "marc21"}')


def test_builtin_imports_are_found_by_root_element() -> None:
    def root(xml: str) -> etree._Element:
        return etree.fromstring(xml)

    kernel4 = root('<resource xmlns="http://datacite.org/schema/kernel-4"/>')
    kernel3 = root('<resource xmlns="http://datacite.org/schema/kernel-3"/>')
    envelope = root('<oai_datacite xmlns="http://schema.datacite.org/oai/oai-1.1/"/>')
    dc = root('<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/"/>')
    assert imports.find_import(kernel4) is import_resource
    assert imports.find_import(kernel3) is import_resource
    assert imports.find_import(envelope) is import_oai_datacite
    assert imports.find_import(dc) is import_dc
    assert imports.find_import(root('<dc xmlns="urn:other"/>')) is None
    assert imports.find_import(root("<resource/>")) is None


def test_a_registered_import_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(imports, "_IMPORTS", dict(imports._IMPORTS))

    def minimal(element: etree._Element) -> dict[str, Any]:
        return {
            "metadata": {
                "resource_type": {"id": "other"},
                "title": element.get("title"),
                "creators": [{"person_or_org": {"type": "organizational", "name": "Us"}}],
                "publication_date": "2020",
            }
        }

    imports.register_import("urn:test:minimal", "thing", minimal)
    item = transform_one(
        TransformItem(
            "oai:x:1",
            "2024-01-01",
            [],
            wrap_metadata('<thing xmlns="urn:test:minimal" title="T"/>'),
        )
    )
    assert item.error is None
    assert item.data["metadata"]["title"] == "T"
    assert item.pid is None


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_oai_datacite_envelope_gives_the_same_record_as_the_bare_resource(version: str) -> None:
    """Both envelope versions (1.0 is the older one some DataCite-fed servers still send)."""
    resource = VIDEO.split("?>", 1)[1]
    envelope = (
        f'<oai_datacite xmlns="http://schema.datacite.org/oai/oai-{version}/">'
        "<schemaVersion>4</schemaVersion><datacentreSymbol>X.Y</datacentreSymbol>"
        f"<payload>{resource}</payload></oai_datacite>"
    )
    wrapped = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(envelope)))
    bare = transform_one(datacite_item("datacite-example-video-v4.xml"))
    assert wrapped.error is None
    assert wrapped.data == bare.data
    assert wrapped.pid == "10.5072/1153992"


def test_kernel3_resource() -> None:
    resource = VIDEO.replace("kernel-4", "kernel-3")
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource)))
    assert item.error is None
    assert item.data["metadata"]["creators"][0]["person_or_org"]["family_name"] == "Lynn"
    assert item.data["metadata"]["resource_type"] == {"id": "video"}


def test_record_without_metadata_is_left_alone() -> None:
    xml = (
        f'<record xmlns="{OAI}"><header><identifier>oai:x:1</identifier>'
        "<datestamp>2024-01-01</datestamp></header></record>"
    ).encode()
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], xml))
    assert (item.data, item.error, item.pid) == (None, None, None)


def test_deleted_header_is_left_alone() -> None:
    xml = wrap_metadata(VIDEO, deleted=True)
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], xml))
    assert (item.data, item.error, item.pid) == (None, None, None)


@pytest.mark.parametrize("status", ["Deleted", " deleted ", "DELETED"])
def test_a_deleted_header_written_otherwise_is_left_alone_as_the_harvest_reads_it(
    status: str,
) -> None:
    """The page reader takes `Deleted` (trimmed, any case) for deleted; the transformer
    wanted `deleted` exactly, and made what the harvest had deleted a record again."""
    xml = wrap_metadata(VIDEO, deleted=True).replace(
        b'status="deleted"', f'status="{status}"'.encode()
    )
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], xml))
    assert (item.data, item.error, item.pid) == (None, None, None)


def test_set_communities() -> None:
    items = [
        TransformItem("oai:x:1", "d", ["a", "b", "c"], wrap_metadata(VIDEO)),
        TransformItem("oai:x:2", "d", ["c"], wrap_metadata(VIDEO)),
    ]
    transform(items, set_communities={"a": "alpha", "b": "alpha", "c": "gamma"})
    first, second = items
    assert first.communities == ["alpha", "gamma"]
    assert first.data["parent"] == {"communities": {"ids": ["alpha", "gamma"]}}
    assert second.communities == ["gamma"]
    unmapped = transform_one(TransformItem("oai:x:3", "d", ["z"], wrap_metadata(VIDEO)))
    assert unmapped.communities == []
    assert "parent" not in unmapped.data


def test_whole_partition_parses_each_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sanity on a partition-sized batch (no timing): every record transforms, one parse each."""
    parses = 0
    real_parse = oai_import.parse_untrusted

    def counting_parse(data: bytes) -> etree._Element:
        nonlocal parses
        parses += 1
        return real_parse(data)

    monkeypatch.setattr(oai_import, "parse_untrusted", counting_parse)
    templates = [datacite_item(name) for name in DATACITE_SAMPLES]
    for page in ZENODO_PAGES:
        templates += [item for item in page_items(page) if item.xml is not None]
    items = [
        TransformItem(f"oai:x:{n}", "d", [], template.xml)
        for n in range(100)
        for template in templates
    ]
    transform(items)
    assert parses == len(items) == 100 * len(templates)
    assert all(item.error is None and item.data is not None for item in items)
    assert {item.pid for item in items} == {item.pid for item in transform(templates)}


@pytest.mark.parametrize("name", DATACITE_SAMPLES)
def test_the_data_is_handed_on_as_the_json_text_of_what_a_plugin_reads(name: str) -> None:
    """oai-import gives its data as the JSON text pydantic makes (not decoded unless read):
    the text is the one encoding the data makes, and an edit of the data (a plug-in later in
    the chain) replaces it."""
    item = transform_one(datacite_item(name))
    text = item.data_json()
    assert text is not None
    assert text == json_codec.dumps(item.data)
    item.data["metadata"]["title"] = "Edited by a plug-in"
    assert json_codec.loads(item.data_json() or "")["metadata"]["title"] == "Edited by a plug-in"
    item.data = None
    assert item.data_json() is None


# arXiv's Dublin Core for 1101.4388 (the record of ../shared/samples' arXiv page): the
# journal article's DOI sits in dc:identifier beside the abstract page and the citation.
ARXIV_DC = """<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/"
    xmlns:dc="http://purl.org/dc/elements/1.1/">
  <dc:title>Reproducing Kernel Banach Spaces with the l1 Norm</dc:title>
  <dc:creator>Song, Guohui</dc:creator>
  <dc:creator>Zhang, Haizhang</dc:creator>
  <dc:subject>Statistics - Machine Learning</dc:subject>
  <dc:date>2011-01-23</dc:date>
  <dc:date>2012-03-28</dc:date>
  <dc:type>text</dc:type>
  <dc:identifier>http://arxiv.org/abs/1101.4388</dc:identifier>
  <dc:identifier>Appl. Comput. Harmon. Anal., 34:96-116, 2013</dc:identifier>
  <dc:identifier>doi:10.1016/j.acha.2012.03.009</dc:identifier>
  <dc:identifier>doi:10.48550/arXiv.1101.4388</dc:identifier>
</oai_dc:dc>"""


def _arxiv_item() -> TransformItem:
    return TransformItem("oai:arXiv.org:1101.4388", "2015-01-17", [], wrap_metadata(ARXIV_DC))


def test_by_default_the_first_doi_of_dublin_core_is_the_records_own() -> None:
    item = transform_one(_arxiv_item())
    assert item.error is None, item.error
    assert item.pid == "10.1016/j.acha.2012.03.009"


def test_own_doi_prefixes_keep_other_works_dois_out_of_the_pid() -> None:
    item = transform_one(_arxiv_item(), own_doi_prefixes=["10.48550"])
    assert item.error is None, item.error
    # arXiv's own DOI is the record's; the journal article's is related, not taken over
    assert item.pid == "10.48550/arxiv.1101.4388"
    assert item.data["pids"]["doi"]["identifier"].lower() == "10.48550/arxiv.1101.4388"
    metadata = item.data["metadata"]
    # the preprint is a version of the journal article (InvenioRDM has no `other` relation)
    assert metadata["related_identifiers"][0] == {
        "identifier": "10.1016/j.acha.2012.03.009",
        "scheme": "doi",
        "relation_type": {"id": "isversionof"},
    }
    assert all(i.get("scheme") != "doi" for i in metadata.get("identifiers", []))

    # no DOI of an own prefix: the record has no DOI at all
    item = transform_one(_arxiv_item(), own_doi_prefixes=["10.5281"])
    assert item.error is None, item.error
    assert item.pid is None and "doi" not in item.data.get("pids", {})
    related = {r["identifier"] for r in item.data["metadata"]["related_identifiers"]}
    assert "10.1016/j.acha.2012.03.009" in related


def test_own_doi_prefixes_are_validated() -> None:
    validate_spec("transformers", 'oai-import{own_doi_prefixes: ["10.5281", "10.1000.10"]}')
    with pytest.raises(ConfigurationError, match="own_doi_prefixes"):
        validate_spec("transformers", 'oai-import{own_doi_prefixes: ["zenodo"]}')


def test_kernel3_resource_without_resource_type_is_other() -> None:
    """Kernel-3 makes resourceType optional (minOccurs=0): such a record is imported as
    `other`. Kernel-4 requires it, and its absence still fails the record."""
    start = VIDEO.index("<resourceType")
    end = VIDEO.index("</resourceType>") + len("</resourceType>")
    without = VIDEO[:start] + VIDEO[end:]
    kernel3 = without.replace("kernel-4", "kernel-3")
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(kernel3)))
    assert item.error is None, item.error
    assert item.data["metadata"]["resource_type"] == {"id": "other"}
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(without)))
    assert (item.error.type, item.error.location) == ("missing_field", "metadata.resource_type")


def test_kernel3_geolocations_are_read() -> None:
    """Kernel-3 writes a point as "lat long" and a box as "south west north east" text;
    GeoJSON is [long, lat]. Before, only the place was kept."""
    resource = VIDEO.replace("kernel-4", "kernel-3").replace(
        "<language>",
        "<geoLocations><geoLocation><geoLocationPlace>Atlantic Ocean</geoLocationPlace>"
        "<geoLocationPoint>31.233 -67.302</geoLocationPoint>"
        "<geoLocationBox>41.090 -71.032 42.893 -68.211</geoLocationBox>"
        "</geoLocation></geoLocations><language>",
    )
    item = transform_one(TransformItem("oai:x:1", "2024-01-01", [], wrap_metadata(resource)))
    assert item.error is None, item.error
    point, box = item.data["metadata"]["locations"]["features"]
    assert point == {
        "place": "Atlantic Ocean",
        "geometry": {"type": "Point", "coordinates": [-67.302, 31.233]},
    }
    assert box["geometry"]["coordinates"] == [
        [[-71.032, 41.09], [-68.211, 41.09], [-68.211, 42.893], [-71.032, 42.893], [-71.032, 41.09]]
    ]
