"""Golden outputs of the transform: every record the tests know, as the transform stage stores it.

`python -m oai_pipeline_tests.transform.golden` (re)records `golden/outputs.json.gz` from the
current code; `test_golden.py` checks that the code still produces the same bytes. The file was
recorded before the transform was optimised, so it pins the behaviour of the original
implementation: the JSON `data` exactly as the stage writes it, `pid`, `communities` and the
error's type, message and location — for real samples, generated records and broken records.
It was re-recorded once for the audit fixes (F2–F8, F12: dropped optional values, sanitised
descriptions, collapsed whitespace, error messages); each changed output was reviewed.
It was re-recorded again for the arXiv import: the 47 records of the recorded arXiv responses
became records, and the unknown-root messages list the arXiv formats; nothing else changed.
It was re-recorded for the second audit's transform fixes (resource types, relation types,
licences and schemes InvenioRDM has, de-duplicated identifiers and names, dates, geometry);
merged with the arXiv recording, every output equals the one of the branch that changed it.
It was re-recorded for the public-records audit (kernel-2.x DataCite): only the unknown-root
messages changed, which now list kernel-2/3/4. And for kernel-4.7 values of DataCite's full
example: related resource types Poster and Presentation (were `other`), relationType Other
(was the relation `other`, now `references`). And for the OpenAIRE v4 and MARCXML imports: only
the unknown-root messages changed, which now list oai_openaire and marcxml. And for the
journal of a DataCite relatedItem `IsPublishedIn`: the affiliation and relatedItem examples
gained its citation as a series-information description; nothing else changed. And for
DataCite dates of a type the target lacks: the full example's Coverage date names its type.
And for German/European date forms (`12.05.2020`): only the invalid_date messages changed,
which list the new forms. And for year-first dates with dots (`2020.05.12`): only the
invalid_date messages changed (20 of each set), which list the form. And for the journal in a
dc:source/dc:relation: only Zenodo's record 8333281 (`Cell Reports, 42(10), (2023-10-12)`)
changed, in both sets: it gained that citation as a series-information description.
And for typed ISBNs and ISSNs checked (revision 15): the placeholder ISBN of DataCite's
complicated example and ISSN of its full and relatedItem examples, no others, are gone.
Each recording from now on raises OUTPUT_REVISION (oai_pipeline/transform/base.py; test_golden.py).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from lxml import etree

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.oai_import import OAIImportTransformer
from oai_pipeline_tests.transform.records import wrap_metadata

LOCAL_SAMPLES = Path(__file__).parent / "samples"
OAI_SAMPLES = Path(__file__).parent.parent / "oai" / "samples"
GOLDEN = Path(__file__).parent / "golden" / "outputs.json.gz"
OAI = "http://www.openarchives.org/OAI/2.0/"
GENERATED = 300

# Options of the runs: the defaults, and communities from sets with the DataCite DOI provider.
OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "communities": {
        "set_communities": {
            "dataset": "data",
            "software": "code",
            "user-physics": "physics",
            "user-biology": "bio",
            "cs": "computing",
            "user-zenodo": "zen",
        },
        "doi_provider": "datacite",
    },
}


def sample_files() -> list[Path]:
    """Every file of /work/shared/samples, from the byte-identical copies in the tests (so the
    golden test runs anywhere): the DataCite examples, then the recorded OAI responses."""
    return sorted(LOCAL_SAMPLES.glob("datacite-example-*.xml")) + sorted(OAI_SAMPLES.glob("*.xml"))


def _item(identifier: str, xml: bytes, set_specs: list[str] | None = None) -> TransformItem:
    return TransformItem(identifier, "2024-01-01", list(set_specs or []), xml)


def _file_items(path: Path) -> list[TransformItem]:
    """A file as the transformer may receive it: the whole file as one record, and every
    OAI <record> in it (deleted ones too: their header decides), serialized as stored."""
    data = path.read_bytes()
    items = [_item(f"file:{path.name}", data)]
    if path.name.startswith("datacite-"):
        items.append(
            _item(f"wrapped:{path.name}", wrap_metadata(data, identifier=f"oai:test:{path.name}"))
        )
        return items
    try:
        root = etree.fromstring(data)
    except etree.XMLSyntaxError:
        return items
    for index, record in enumerate(root.iter(f"{{{OAI}}}record")):
        header = record.find(f"{{{OAI}}}header")
        specs = [] if header is None else [s.text or "" for s in header.iter(f"{{{OAI}}}setSpec")]
        xml = etree.tostring(record, encoding="UTF-8", xml_declaration=False, with_tail=False)
        items.append(_item(f"record:{path.name}:{index}", xml, specs))
    return items


def _broken(resource: bytes, index: int) -> list[tuple[str, bytes]]:
    """Mutations of a generated resource that must fail (or pass) exactly as before."""
    text = resource.decode()
    cases: list[tuple[str, str]] = [
        ("truncated", text[: len(text) // 2]),
        ("bad-year", re.sub(r"<publicationYear>[^<]*", "<publicationYear>20x4", text)),
        ("no-creators", re.sub(r"<creators>.*?</creators>", "", text, flags=re.S)),
        ("no-titles", re.sub(r"<titles>.*?</titles>", "", text, flags=re.S)),
        ("no-type", re.sub(r"<resourceType[^>]*>[^<]*</resourceType>", "", text)),
        ("bad-doi", re.sub(r"(identifierType=\"DOI\">)[^<]*", r"\g<1>not-a-doi", text)),
        ("bad-date", re.sub(r"(<date [^>]*>)[^<]*", r"\g<1>2021-13-45", text, count=1)),
        (
            "bad-issued-and-year",
            re.sub(
                r"<publicationYear>[^<]*",
                "<publicationYear>20x4",
                re.sub(r'(<date dateType="Issued">)[^<]*', r"\g<1>2021-13-45", text),
            ),
        ),
        (
            "bad-orcid",
            text.replace(
                "<creatorName",
                '<nameIdentifier nameIdentifierScheme="ORCID">123</nameIdentifier><creatorName',
                1,
            ),
        ),
        ("entity", '<!DOCTYPE r [<!ENTITY x "y">]>' + text),
        ("kernel-3", text.replace("kernel-4", "kernel-3")),
        ("unknown-ns", text.replace("http://datacite.org/schema/kernel-4", "urn:other")),
        ("empty-name", re.sub(r"<creatorName([^>]*)>[^<]*", r"<creatorName\1>", text, count=1)),
        ("bad-geo", text.replace("<pointLatitude>", "<pointLatitude>x", 1)),
    ]
    return [(f"broken:{name}:{index}", body.encode()) for name, body in cases]


def golden_items() -> list[TransformItem]:
    """Every record of the golden set, in a fixed order."""
    items: list[TransformItem] = []
    for path in sample_files():
        items.extend(_file_items(path))
    for record in generate_datacite_records(GENERATED, seed=7):
        if record.deleted:
            items.append(
                _item(
                    record.identifier,
                    wrap_metadata(
                        b"",
                        identifier=record.identifier,
                        set_specs=tuple(record.set_specs),
                        deleted=True,
                    ),
                )
            )
            continue
        for prefix in ("oai_datacite", "datacite"):
            xml = wrap_metadata(
                record.metadata[prefix],
                identifier=record.identifier,
                set_specs=tuple(record.set_specs),
            )
            items.append(_item(f"{prefix}:{record.identifier}", xml, record.set_specs))
    for index, record in enumerate(generate_datacite_records(20, seed=11, deleted_fraction=0)):
        for identifier, metadata in _broken(record.metadata["datacite"], index):
            items.append(
                _item(
                    identifier,
                    wrap_metadata(
                        metadata, identifier=identifier, set_specs=tuple(record.set_specs)
                    ),
                )
            )
    return items


def outputs(options: dict[str, Any], items: list[TransformItem]) -> list[dict[str, Any]]:
    """Transform `items` in batches as the stage does and describe each result."""
    transformer = OAIImportTransformer(OAIImportTransformer.Options(**options))
    for start in range(0, len(items), 97):
        transformer.transform(items[start : start + 97])
    return [
        {
            "identifier": item.identifier,
            "data": None if item.data is None else json.dumps(item.data),
            "pid": item.pid,
            "communities": item.communities,
            "error": None
            if item.error is None
            else [item.error.type, item.error.message, item.error.location],
        }
        for item in items
    ]


def current() -> dict[str, list[dict[str, Any]]]:
    return {name: outputs(options, golden_items()) for name, options in OPTION_SETS.items()}


def load() -> dict[str, list[dict[str, Any]]]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def main() -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    text = json.dumps(current(), indent=0, sort_keys=True)
    GOLDEN.write_bytes(gzip.compress(text.encode(), mtime=0))
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
