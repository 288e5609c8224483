"""The records the sample endpoint serves: the shipped sample set, or generated DataCite ones.

The shipped sample set is derived from real records (copied byte for byte into `data/`):

- the 8 DataCite kernel-4 schema examples (`data/datacite/`), identifiers
  `oai:sample.oai-pipeline:<name>` (affiliation, complicated, dataset, full,
  fundingReference, multilingual, relateditem1, video), set specs `datacite:kernel-4`
  (so `set=datacite` selects them through the hierarchy) and their type (`software`,
  `text`, `dataset`, `audiovisual`); served as `oai_datacite` (enveloped) and `datacite`
  (bare). `relateditem1` is deleted.
- Zenodo's `oai:zenodo.org:10357859` (RDMO): its DataCite record as `oai_datacite` and
  `datacite`, its oai_dc record as `oai_dc`; sets `zenodo`, `software`, `user-rdmo`.
- the 6 Zenodo oai_dc records of the recorded ListRecords pages, as `oai_dc`, with Zenodo's
  identifiers, datestamps and sets plus `zenodo`. `oai:zenodo.org:8433364` is deleted (it
  was marked deleted by hand in the recording).

Counts per prefix (`load_sample_records()` is the truth; tests compute from it):

| prefix | records | live | deleted |
|---|---|---|---|
| oai_datacite | 9 | 8 | 1 |
| datacite | 9 | 8 | 1 |
| oai_dc | 7 | 6 | 1 |

15 distinct identifiers, 2 deleted. Datestamps lie between SAMPLE_FIRST_DAY (2023-10-03)
and SAMPLE_LAST_DAY (2023-10-12); two are exactly at 00:00:00Z and one at 23:59:59Z, for
window-boundary tests. With the default page size of 4, `oai_datacite` takes 3 pages.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib import resources

from lxml import etree

from oai_pipeline.oai.pages import is_deleted_status
from oai_pipeline.sample_endpoint.datacite_generator import generate_resource
from oai_pipeline.sample_endpoint.formats import DataCiteMetadata, oai_datacite_envelope
from oai_pipeline.xml_safety import parse_untrusted

OAI_NAMESPACE = "http://www.openarchives.org/OAI/2.0/"


@dataclass
class EndpointRecord:
    """One item of the endpoint: its header and its metadata in every format it has.

    A deleted record is listed (header only) for the prefixes in `metadata`, or for every
    prefix the endpoint serves when `metadata` is empty; its metadata is never served.
    """

    identifier: str
    datestamp: datetime  # aware, UTC
    deleted: bool = False
    set_specs: list[str] = field(default_factory=list)
    # prefix -> serialized metadata element (the child of <metadata>); a dict, or any
    # read-only mapping such as DataCiteMetadata
    metadata: Mapping[str, bytes] = field(default_factory=dict)

    def has_format(self, prefix: str) -> bool:
        """Whether a list or GetRecord for `prefix` includes this record."""
        return prefix in self.metadata or (self.deleted and not self.metadata)


def records_for_prefix(records: list[EndpointRecord], prefix: str) -> list[EndpointRecord]:
    """The records a ListRecords for `prefix` (no window, no set) returns, live and deleted."""
    return [record for record in records if record.has_format(prefix)]


SAMPLE_FIRST_DAY = date(2023, 10, 3)
SAMPLE_LAST_DAY = date(2023, 10, 12)

SAMPLE_SET_NAMES: dict[str, str] = {
    "datacite": "DataCite",
    "datacite:kernel-4": "DataCite kernel-4 schema examples",
    "zenodo": "Records harvested from Zenodo",
    "software": "Software",
    "dataset": "Datasets",
    "text": "Text",
    "audiovisual": "Audiovisual",
    "user-rdmo": "RDMO",
    "user-pyhep2023": "PyHEP 2023 Workshop",
    "openaire": "OpenAIRE",
    "openaire_data": "OpenAIRE data",
}

_DATA = resources.files("oai_pipeline.sample_endpoint") / "data"
_ZENODO_DATACITE = "zenodo/zenodo-GetRecord-datacite.xml"
_ZENODO_OAI_DC = "zenodo/zenodo-GetRecord-oai_dc.xml"
_ZENODO_PAGE1 = "zenodo/zenodo-ListRecords-oai_dc-page1.xml"
_ZENODO_PAGE2 = "zenodo/zenodo-ListRecords-oai_dc-resumed-with-deleted.xml"

# (name, datestamp, extra sets, deleted) of the DataCite schema examples.
_DATACITE_EXAMPLES = (
    ("affiliation", "2023-10-03T00:00:00Z", ["software"], False),
    ("complicated", "2023-10-03T23:59:59Z", ["text"], False),
    ("dataset", "2023-10-04T09:15:00Z", ["dataset"], False),
    ("full", "2023-10-05T12:00:00Z", ["dataset"], False),
    ("fundingReference", "2023-10-06T00:00:00Z", ["dataset"], False),
    ("multilingual", "2023-10-07T16:45:30Z", ["text"], False),
    ("relateditem1", "2023-10-08T08:00:00Z", ["text"], True),
    ("video", "2023-10-09T21:10:05Z", ["audiovisual"], False),
)
# (identifier, recorded file) of Zenodo's oai_dc records; header fields come from the file.
_ZENODO_OAI_DC_RECORDS = (
    ("oai:zenodo.org:8435696", _ZENODO_PAGE1),
    ("oai:zenodo.org:8435639", _ZENODO_PAGE1),
    ("oai:zenodo.org:8433301", _ZENODO_PAGE1),
    ("oai:zenodo.org:8433364", _ZENODO_PAGE2),
    ("oai:zenodo.org:8333281", _ZENODO_PAGE2),
    ("oai:zenodo.org:8321258", _ZENODO_PAGE2),
)
_RDMO_IDENTIFIER = "oai:zenodo.org:10357859"
_RDMO_DATESTAMP = "2023-10-11T17:26:46Z"  # Zenodo's time of day, moved into the sample days


def parse_datestamp(text: str) -> datetime:
    """`YYYY-MM-DDThh:mm:ssZ` or `YYYY-MM-DD` as an aware UTC datetime."""
    if len(text) == 10:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _serialize(element: etree._Element) -> bytes:
    """The element alone, without the namespace declarations it inherited but does not use."""
    element = copy.deepcopy(element)
    etree.cleanup_namespaces(element)
    return etree.tostring(element, encoding="UTF-8", xml_declaration=False, with_tail=False)


def _recorded_record(path: str, identifier: str) -> etree._Element:
    root = parse_untrusted((_DATA / path).read_bytes())
    query = "//oai:record[oai:header/oai:identifier = $identifier]"
    found = root.xpath(query, namespaces={"oai": OAI_NAMESPACE}, identifier=identifier)
    if not found:
        raise LookupError(f"{identifier} is not in {path}")
    return found[0]


def _recorded_metadata(record: etree._Element) -> bytes:
    metadata = record.find(f"{{{OAI_NAMESPACE}}}metadata")
    return _serialize(metadata[0])


def load_sample_records() -> list[EndpointRecord]:
    """The shipped sample set, freshly built (callers may mutate it)."""
    records = []
    for name, datestamp, sets, deleted in _DATACITE_EXAMPLES:
        resource = _serialize(
            parse_untrusted((_DATA / f"datacite/datacite-example-{name}-v4.xml").read_bytes())
        )
        records.append(
            EndpointRecord(
                identifier=f"oai:sample.oai-pipeline:{name}",
                datestamp=parse_datestamp(datestamp),
                deleted=deleted,
                set_specs=["datacite:kernel-4", *sets],
                metadata={"oai_datacite": oai_datacite_envelope(resource), "datacite": resource},
            )
        )
    rdmo_resource = _recorded_metadata(_recorded_record(_ZENODO_DATACITE, _RDMO_IDENTIFIER))
    rdmo_dc = _recorded_record(_ZENODO_OAI_DC, _RDMO_IDENTIFIER)
    records.append(
        EndpointRecord(
            identifier=_RDMO_IDENTIFIER,
            datestamp=parse_datestamp(_RDMO_DATESTAMP),
            set_specs=["zenodo", *_header_sets(rdmo_dc)],
            metadata={
                "oai_datacite": oai_datacite_envelope(
                    rdmo_resource, datacentre_symbol="CERN.ZENODO"
                ),
                "datacite": rdmo_resource,
                "oai_dc": _recorded_metadata(rdmo_dc),
            },
        )
    )
    for identifier, path in _ZENODO_OAI_DC_RECORDS:
        record = _recorded_record(path, identifier)
        header = record.find(f"{{{OAI_NAMESPACE}}}header")
        records.append(
            EndpointRecord(
                identifier=identifier,
                datestamp=parse_datestamp(header.findtext(f"{{{OAI_NAMESPACE}}}datestamp")),
                deleted=is_deleted_status(header.get("status")),
                set_specs=["zenodo", *_header_sets(record)],
                metadata={"oai_dc": _recorded_metadata(record)},
            )
        )
    return records


def _header_sets(record: etree._Element) -> list[str]:
    return [spec.text for spec in record.iterfind(f"{{{OAI_NAMESPACE}}}header/{{*}}setSpec")]


GENERATED_START = datetime(2024, 1, 1, tzinfo=UTC)
GENERATED_SET_NAMES: dict[str, str] = {
    "image": "Images",
    "journalarticle": "Journal articles",
    "preprint": "Preprints",
    "model": "Models",
    "workflow": "Workflows",
    "collection": "Collections",
    "user-climate": "Climate community",
    "user-hep": "High-energy physics community",
    "user-humanities": "Digital humanities community",
}


def generate_datacite_records(
    count: int,
    *,
    deleted_fraction: float = 0.02,
    seed: int = 0,
    start: datetime = GENERATED_START,
    span_days: int = 365,
    prefixes: tuple[str, ...] = ("oai_datacite", "datacite"),
) -> list[EndpointRecord]:
    """`count` made-up DataCite records (1-5 KB each), reproducible from `seed`.

    Datestamps are spread uniformly (to the second) over `span_days` from `start`;
    exactly `round(count * deleted_fraction)` records are deleted. Identifiers are
    `oai:generated.oai-pipeline:<n>`; set specs are the resource type (lower case) and,
    for about a third, a `user-…` community. `prefixes` chooses which of `oai_datacite`
    and `datacite` are served; with both, `metadata` is a `DataCiteMetadata` mapping that
    stores the resource once (about 4.5 KB of memory per record in all).
    """
    if count < 0:
        raise ValueError("count must not be negative")
    if not 0.0 <= deleted_fraction <= 1.0:
        raise ValueError("deleted_fraction must lie between 0 and 1")
    unknown = set(prefixes) - {"oai_datacite", "datacite"}
    if unknown or not prefixes:
        raise ValueError(f"prefixes must be oai_datacite and/or datacite, not {sorted(unknown)}")
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware (UTC)")
    rng = random.Random(seed)
    deleted = set(rng.sample(range(count), round(count * deleted_fraction)))
    span_seconds = max(span_days * 86400, 1)
    start = start.astimezone(UTC).replace(microsecond=0)
    communities = sorted(GENERATED_SET_NAMES)
    records = []
    for index in range(count):
        identifier = f"oai:generated.oai-pipeline:{index}"
        resource = generate_resource(rng, index=index, seed=seed, oai_identifier=identifier)
        metadata: Mapping[str, bytes]
        if len(set(prefixes)) == 2:
            metadata = DataCiteMetadata(resource.xml)
        elif "datacite" in prefixes:
            metadata = {"datacite": resource.xml}
        else:
            metadata = {"oai_datacite": oai_datacite_envelope(resource.xml)}
        sets = [resource.resource_type_general.lower()]
        if rng.random() < 0.33:
            sets.append(rng.choice(communities))
        records.append(
            EndpointRecord(
                identifier=identifier,
                datestamp=start + timedelta(seconds=rng.randrange(span_seconds)),
                deleted=index in deleted,
                set_specs=sets,
                metadata=metadata,
            )
        )
    return records


def default_set_names() -> dict[str, str]:
    """Names for the set specs of the sample and generated records (others show their spec)."""
    names = dict(SAMPLE_SET_NAMES)
    names.update(GENERATED_SET_NAMES)
    return names
