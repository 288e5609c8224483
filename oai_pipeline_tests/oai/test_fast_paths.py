"""The fast paths of page reading give exactly what the straightforward code gave.

The references below are the earlier implementations (sickle's Header for the header, one
character-class regex over the whole page for cleaning); every sample page, generated
DataCite pages and hand-made edge cases must come out the same.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from lxml import etree
from sickle.models import Header

from oai_pipeline.errors import RecordError
from oai_pipeline.oai import cleaning
from oai_pipeline.oai.cleaning import clean_page
from oai_pipeline.oai.pages import _NS, _harvested, _serialize, parse_response
from oai_pipeline.oai.types import HarvestedRecord
from oai_pipeline.sample_endpoint.provider import OAIProvider
from oai_pipeline.sample_endpoint.records import generate_datacite_records

SAMPLES = [
    *sorted((Path(__file__).parent / "samples").glob("*.xml")),
    *sorted(Path("/work/shared/samples/oai").glob("*.xml")),
]
OAI_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    "<responseDate>2024-01-01T00:00:00Z</responseDate>"
    '<request verb="ListRecords">http://x/oai</request><ListRecords>'
)
OAI_TAIL = "</ListRecords></OAI-PMH>"


def _reference_harvested(item: etree._Element, with_xml: bool) -> HarvestedRecord:
    """The record as the sickle-Header based reading made it, each header value read whole."""
    header_element = item if item.tag == _NS + "header" else item.find(_NS + "header")
    if header_element is None:
        return HarvestedRecord(
            "",
            "",
            False,
            xml=_serialize(item) if with_xml else None,
            error=RecordError(type="MissingHeader", message="record has no <header>"),
        )
    header = Header(header_element)
    # each value whole, its XPath string value: sickle's stopped at a comment inside
    identifier, datestamp = (
        header_element.xpath(f"string(oai:{name})", namespaces={"oai": _NS[1:-1]})
        for name in ("identifier", "datestamp")
    )
    set_specs = [spec.xpath("string()") for spec in header_element.findall(_NS + "setSpec")]
    record = HarvestedRecord(
        identifier=identifier.strip(),
        datestamp=datestamp.strip(),
        deleted=header.deleted,
        set_specs=[spec.strip() for spec in set_specs if spec.strip()],
        xml=_serialize(item) if with_xml else None,
    )
    if not record.identifier:
        record.error = RecordError(
            type="MissingIdentifier",
            message="record header has no identifier",
            location="header/identifier",
        )
    elif not record.datestamp:
        record.error = RecordError(
            type="MissingDatestamp",
            message="record header has no datestamp",
            location="header/datestamp",
        )
    elif with_xml and not record.deleted:
        metadata = item.find(_NS + "metadata")
        if metadata is None or not [c for c in metadata if isinstance(c.tag, str)]:
            record.error = RecordError(
                type="MissingMetadata",
                message="record is not deleted but has no metadata",
                location="metadata",
            )
    return record


def _reference_clean(data: bytes) -> bytes:
    """clean_page with the regex run over every page."""
    text, reencode = cleaning._decode(data)
    if cleaning._ILLEGAL_CHARS.search(text):
        text = cleaning._ILLEGAL_CHARS.sub("", text)
        reencode = True
    if "&#" in text:
        cleaned = cleaning._CHAR_REFERENCE.sub(cleaning._drop_illegal_reference, text)
        if cleaned != text:
            text, reencode = cleaned, True
    if not reencode:
        return data
    out = text.encode("utf-8")
    declared, match = cleaning._declared_encoding(out)
    if match is not None and declared not in cleaning._UTF8_NAMES:
        out = out[: match.start(3)] + b"UTF-8" + out[match.end(3) :]
    return out


def _generated_pages() -> list[bytes]:
    provider = OAIProvider(generate_datacite_records(120, prefixes=("oai_datacite",)), page_size=50)
    pages, params = [], {"verb": ["ListRecords"], "metadataPrefix": ["oai_datacite"]}
    while True:
        body = provider.handle(params).body
        pages.append(body)
        token = etree.fromstring(body).find(f".//{_NS}resumptionToken")
        if token is None or not token.text:
            return pages
        params = {"verb": ["ListRecords"], "resumptionToken": [token.text]}


EDGE_HEADERS = [
    "<identifier>oai:x:1</identifier><datestamp>2024-01-01</datestamp>",
    "<identifier> oai:x:1 </identifier><datestamp> 2024-01-01 </datestamp>"
    "<setSpec> a </setSpec><setSpec/><setSpec>  </setSpec><setSpec>b</setSpec>",
    "<identifier/><datestamp>2024-01-01</datestamp>",
    "<identifier>oai:x:1</identifier>",
    "<datestamp>2024-01-01</datestamp><identifier>oai:x:2</identifier>",
    "<identifier>first</identifier><identifier>second</identifier>"
    "<datestamp/><datestamp>2024-01-02</datestamp>",
    "<!-- c --><identifier>oai:x:3<!-- c -->tail</identifier><?pi x?>"
    "<datestamp>2024-01-01</datestamp><other>x</other>",
    '<identifier xmlns="urn:other">foreign</identifier><identifier>oai:x:4</identifier>'
    "<datestamp>2024-01-01</datestamp>",
]


def _edge_page() -> bytes:
    records = []
    for number, header in enumerate(EDGE_HEADERS):
        for status in ("", ' status="deleted"', ' status="other"'):
            for metadata in (
                "<metadata><a xmlns='urn:a'>x</a></metadata>",
                "<metadata/>",
                "<metadata><!-- withheld --></metadata>",
                "",
            ):
                records.append(f"<record><header{status}>{header}</header>{metadata}</record>")
        records.append(f"<record><metadata><a xmlns='urn:a'>{number}</a></metadata></record>")
    return (OAI_HEAD + "".join(records) + OAI_TAIL).encode()


PAGES = [path.read_bytes() for path in SAMPLES] + _generated_pages() + [_edge_page()]


@pytest.mark.parametrize("page", PAGES)
def test_records_read_as_sickle_header_read_them(page: bytes) -> None:
    data = clean_page(page)
    root = etree.fromstring(data)
    for verb, tag, with_xml in (
        ("ListRecords", "record", True),
        ("GetRecord", "record", True),
        ("ListIdentifiers", "header", False),
    ):
        container = root.find(_NS + verb)
        if container is None:
            continue
        items = list(container.iterchildren(_NS + tag))
        assert [_harvested(i, with_xml) for i in items] == [
            _reference_harvested(i, with_xml) for i in items
        ]
        parsed = parse_response(page, verb)  # type: ignore[arg-type]
        assert parsed.records == [
            _dated(_reference_harvested(i, with_xml), parsed.response_date) for i in items
        ]


def _dated(record: HarvestedRecord, response_date: str) -> HarvestedRecord:
    """What parse_response adds to the header's reading: a deletion without a datestamp is
    dated by the responseDate (see test_pages_deletions)."""
    if record.deleted and record.error is not None and record.error.type == "MissingDatestamp":
        record.datestamp, record.error, record.undated_deletion = response_date, None, True
    return record


def test_edge_page_covers_the_cases() -> None:
    records = parse_response(_edge_page(), "ListRecords").records
    errors = {r.error.type for r in records if r.error}
    assert errors == {"MissingHeader", "MissingIdentifier", "MissingDatestamp", "MissingMetadata"}
    assert any(r.set_specs == ["a", "b"] for r in records)
    assert any(r.identifier == "first" and r.datestamp == "" for r in records)


def _mutations(page: bytes, rng: random.Random) -> list[bytes]:
    """The page with illegal characters, references, odd encodings put in at random places."""
    inserts = [
        b"\x00",
        b"\x01",
        b"\x0b",
        b"\x1f",
        b"\t",
        "\ufffe".encode(),
        "\uffff".encode(),
        b"\xed\xa0\x80",
        b"\xe9",
        b"\xff",
        "é".encode(),
        "\U0001f600".encode(),
        b"&#1;",
        b"&#x1F;",
        b"&#233;",
        b"&#xFFFE;",
        b"&#xD800;",
        b"&amp;",
    ]
    out = [page]
    for insert in inserts:
        position = rng.randrange(len(page) // 2, len(page))
        out.append(page[:position] + insert + page[position:])
    if page.startswith(b"<?xml"):
        for encoding in (b"ISO-8859-1", b"windows-1252", b"utf-16", b"ascii"):
            end = page.index(b"?>")
            declaration = b'<?xml version="1.0" encoding="' + encoding + b'"'
            out.append(declaration + page[end:])
    out.append(b"\xef\xbb\xbf" + page)
    return out


def test_cleaning_fast_check_gives_what_the_regex_gave() -> None:
    rng = random.Random(7)
    for page in PAGES:
        for variant in _mutations(page, rng):
            assert clean_page(variant) == _reference_clean(variant)


def test_clean_pages_are_returned_as_they_came() -> None:
    for page in _generated_pages():
        assert clean_page(page) is page
