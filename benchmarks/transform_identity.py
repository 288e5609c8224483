"""Dump what the transform makes of a fixed corpus, to prove a speed-up changed no output byte.

    .venv/bin/python benchmarks/transform_identity.py --out /tmp/before.jsonl   # old code
    .venv/bin/python benchmarks/transform_identity.py --out /tmp/after.jsonl    # new code
    .venv/bin/python benchmarks/transform_identity.py --compare /tmp/before.jsonl

One JSON line per record: where it came from, its identifier, the data JSON text exactly as
the worker sends it, the pid, the communities and the error (type, message, location). The
corpus, the same at every run:
- N generated DataCite records (`--records`, 5,000 by default) as the harvest stores them, run
  through the worker's own function (`_transform_chunk`), as the transform benchmark does;
- every sample record: /work/shared/samples (its DataCite examples and the records of its
  OAI pages) and oai_pipeline_tests/transform/samples (with public/: MARC, Dublin Core,
  OpenAIRE, arXiv, DataCite kernel-2/3/4);
- the samples again with transformer options (set communities, own DOI prefixes, the target's
  DOI provider);
- bad input: each sample mutated by a seeded random generator (elements dropped, emptied,
  duplicated, moved out of their namespace, odd text and attributes), broken or truncated
  XML, declared entities, an over-long document, a too deep one, unknown roots.
`--compare FILE` makes the dump and compares it with FILE line by line (exit 1 and the first
differences if any). The old code's dump from a clone of it, with this script and venv:

    cd /tmp && PYTHONPATH=/path/to/old-clone /path/to/this-checkout/.venv/bin/python \
        /path/to/this-checkout/benchmarks/transform_identity.py --out /tmp/before.jsonl

(run by its path, from a folder without an `oai_pipeline`, so PYTHONPATH's tree is imported).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from oai_pipeline.harvesters.model import Harvester
from oai_pipeline.harvesters.plugins import RDM_MODEL
from oai_pipeline.pipeline import transform_workers
from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.oai_import import OAIImportTransformer
from oai_pipeline_tests.transform.records import OAI, SAMPLES, wrap_metadata
from oai_pipeline_tests.transform_benchmark import PREFIX, worker_rows

SHARED = Path("/work/shared/samples")
ODD = ["", " ", "0", "-1", "10.", "9999-99-99", "2024-13-45", ",", ", John", "1950-2000",
       "urn:isbn:", "0028-0836", "\u0301\u202e\u200b", "\U0001d518\U0001f600", "x" * 5000,
       "https://ror.org/02mhbdp94", "0000-0002-1825-0097", "10.1234/ABC", "https://doi.org/x",
       "Smith, John", "et al.", "2020-01-01/2021", "  spaced   out  "]  # fmt: skip


def _sample_files() -> list[Path]:
    found = [
        *sorted(SHARED.glob("datacite/*.xml")),
        *sorted(SHARED.glob("oai/*.xml")),
        *sorted(SAMPLES.glob("*.xml")),
        *sorted((SAMPLES / "public").glob("*.xml")),
    ]
    return found


def _records_of(path: Path) -> list[tuple[str, bytes]]:
    """(identifier, stored XML) of each record of a sample: the records of an OAI page as
    the harvester stores them, or a bare metadata document wrapped in a <record>."""
    try:
        root = etree.fromstring(path.read_bytes())
    except etree.XMLSyntaxError:
        return []
    if root.tag == f"{{{OAI}}}OAI-PMH":
        records = []
        for number, record in enumerate(root.iter(f"{{{OAI}}}record")):
            header = record.find(f"{{{OAI}}}header")
            identifier = header.findtext(f"{{{OAI}}}identifier") or f"{path.name}#{number}"
            records.append((identifier, etree.tostring(record)))
        return records
    return [(f"oai:sample:{path.name}", wrap_metadata(path.read_bytes(), identifier=path.name))]


def _mutations(xml: bytes, seed: int, count: int) -> Iterator[bytes]:
    """`count` mutants of a stored record, the same for the same seed."""
    rng = random.Random(seed)
    original = etree.fromstring(xml)
    for _ in range(count):
        root = copy.deepcopy(original)
        elements = list(root.iter(etree.Element))[1:]
        for _ in range(rng.randint(1, 4)):
            element = rng.choice(elements)
            parent = element.getparent()
            kind = rng.choice(["drop", "duplicate", "empty", "text", "attribute", "ns", "strip"])
            if kind == "drop" and parent is not None:
                parent.remove(element)
                elements = list(root.iter(etree.Element))[1:] or elements
            elif kind == "duplicate" and parent is not None:
                parent.append(copy.deepcopy(element))
            elif kind == "empty":
                element.text = None
                for child in list(element):
                    element.remove(child)
            elif kind == "text":
                element.text = rng.choice(ODD)
            elif kind == "attribute":
                names = list(element.attrib) or ["identifierType", "nameIdentifierScheme"]
                element.set(rng.choice(names), rng.choice(ODD))
            elif kind == "ns":
                local = etree.QName(element).localname
                element.tag = local if rng.random() < 0.5 else f"{{urn:other}}{local}"
            elif kind == "strip":
                element.text = f"\n   {element.text or ''}  \t "
        yield etree.tostring(root)


def _broken(xml: bytes) -> list[bytes]:
    deep = b"<a>" * 300 + b"</a>" * 300
    return [
        xml[: len(xml) // 2],
        xml.replace(b"<metadata>", b"<metadata><!-- nothing -->", 1)[: len(xml) // 3],
        b'<!DOCTYPE r [<!ENTITY e "x">]>' + xml,
        b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>',
        b"",
        b"not xml",
        deep,
        b"<unknown xmlns='urn:x'/>",
        wrap_metadata(b"<payload/>"),
        f'<record xmlns="{OAI}"><header/><metadata><!-- c --></metadata></record>'.encode(),
        wrap_metadata(
            b'<oai_datacite xmlns="http://schema.datacite.org/oai/oai-1.1/">'
            b"<payload><x/></payload></oai_datacite>"
        ),
        wrap_metadata(b"<r>" + b"y" * 11_000_000 + b"</r>"),
    ]


def _result(source: str, item: TransformItem) -> str:
    text = transform_workers.data_json(item)
    error = item.error.model_dump() if item.error is not None else None
    return json.dumps(
        [source, item.identifier, text, item.pid, item.communities, error], ensure_ascii=False
    )


def _run(
    transformer: OAIImportTransformer, source: str, rows: list[tuple[str, bytes]]
) -> list[str]:
    items = [
        TransformItem(identifier, "2024-01-01", ["a", "b:c"], xml, communities=["kept"])
        for identifier, xml in rows
    ]
    transform_workers.run_chain([transformer], items)
    return [_result(source, item) for item in items]


def dump(records: int, mutants: int) -> Iterator[str]:
    harvester = Harvester(
        id="identity",
        base_url="http://example.org/oai",
        metadata_prefix=PREFIX,
        transformers=[RDM_MODEL.transformer],
    )
    transform_workers._start_worker(harvester)
    rows = worker_rows(records)
    for start in range(0, len(rows), transform_workers.CHUNK):
        chunk = rows[start : start + transform_workers.CHUNK]
        for row, (text, pid, communities, error) in zip(
            chunk, transform_workers._transform_chunk(chunk), strict=True
        ):
            shown = error.model_dump() if error is not None else None
            yield json.dumps(["generated", row[0], text, pid, communities, shown])

    plain = OAIImportTransformer()
    options = OAIImportTransformer(
        OAIImportTransformer.Options(
            set_communities={"a": "comm-a", "b:c": "comm-b"},
            doi_provider="datacite",
            own_doi_prefixes=["10.5281", "10.48550"],
        )
    )
    for seed, path in enumerate(_sample_files()):
        records = _records_of(path)
        name = f"{path.parent.name}/{path.name}"
        yield from _run(plain, f"sample {name}", records)
        yield from _run(options, f"options {name}", records)
        for number, (identifier, xml) in enumerate(records[:3]):
            mutated = _mutations(xml, seed * 100 + number, mutants)
            yield from _run(plain, f"mutant {name}", [(identifier, m) for m in mutated])
            broken = [(identifier, b) for b in _broken(xml)] if number == 0 else []
            yield from _run(plain, f"broken {name}", broken)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--mutants", type=int, default=40, help="mutants of each sample record")
    parser.add_argument("--out", help="write the dump here")
    parser.add_argument("--compare", help="compare the dump with this earlier one")
    args = parser.parse_args(argv)
    lines = list(dump(args.records, args.mutants))
    if args.out:
        Path(args.out).write_text("".join(f"{line}\n" for line in lines))
        print(f"{len(lines)} records written to {args.out}")
    if args.compare:
        before = Path(args.compare).read_text().splitlines()
        differ = [n for n, (a, b) in enumerate(zip(before, lines, strict=False)) if a != b]
        if len(before) != len(lines):
            print(f"{len(before)} records before, {len(lines)} now")
        for number in differ[:5]:
            print(f"record {number} differs:\n- {before[number][:2000]}\n+ {lines[number][:2000]}")
        errors = sum(1 for line in lines if json.loads(line)[5] is not None)
        print(f"{len(lines)} records ({errors} with an error), {len(differ)} differ")
        return 1 if differ or len(before) != len(lines) else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
