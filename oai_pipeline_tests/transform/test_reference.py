"""The optimised transform gives exactly what the original (kept in `reference/`) gives.

Besides the golden records, records are mutated at random in the ways that tell a tree walk
from an XPath apart: comments and processing instructions between and inside elements, markup
inside text, repeated and foreign-namespace elements, empty and blank values, elements removed.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from lxml import etree

from oai_pipeline.sample_endpoint.records import generate_datacite_records
from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.oai_import import OAIImportTransformer

from . import golden
from .reference.oai_import import OAIImportTransformer as ReferenceTransformer


def _result(item: TransformItem) -> tuple[Any, ...]:
    error = item.error
    return (
        None if item.data is None else json.dumps(item.data),
        item.pid,
        item.communities,
        None if error is None else (error.type, error.message, error.location),
    )


def _both(xmls: list[tuple[str, bytes, list[str]]], options: dict[str, Any]) -> None:
    """Transform the same records with both implementations; every result must be equal."""
    results = []
    for transformer_class in (OAIImportTransformer, ReferenceTransformer):
        transformer = transformer_class(transformer_class.Options(**options))
        items = [TransformItem(i, "2024-01-01", list(s), x) for i, x, s in xmls]
        for start in range(0, len(items), 50):
            transformer.transform(items[start : start + 50])
        results.append([_result(item) for item in items])
    fast, reference = results
    for (identifier, xml, _), mine, theirs in zip(xmls, fast, reference, strict=True):
        assert mine == theirs, (identifier, xml.decode(errors="replace"))


def _mutate(root: etree._Element, rng: random.Random) -> None:
    """One random change that an XPath and a tree walk could read differently."""
    elements = [e for e in root.iter() if isinstance(e.tag, str)]
    target = rng.choice(elements)
    kind = rng.randrange(12)
    if kind == 0:
        target.insert(rng.randrange(len(target) + 1), etree.Comment("c"))
    elif kind == 1:
        target.insert(rng.randrange(len(target) + 1), etree.ProcessingInstruction("p", "q"))
    elif kind == 2 and target is not root:
        target.addnext(copy.deepcopy(target))
    elif kind == 3 and target is not root:
        target.getparent().remove(target)
    elif kind == 4:
        child = etree.SubElement(target, f"{{{target.nsmap.get(None, 'urn:x')}}}i")
        child.text, child.tail = rng.choice(["b", "", " ", None]), rng.choice(["t", None, " "])
    elif kind == 5:
        target.text = rng.choice(["", "  ", " x ", None, "&lt;p&gt;y", "2021-02-30", "0"])
    elif kind == 6 and target is not root:
        target.tag = "{urn:foreign}" + etree.QName(target).localname
    elif kind == 7 and target.attrib:
        name = rng.choice(sorted(target.attrib))
        target.set(name, rng.choice(["", " ", "Other", "ROR", "doi", "personal", "Issued"]))
    elif kind == 8:
        comment = etree.Comment("c")
        comment.tail = rng.choice(["tail", " ", "1.5"])
        target.append(comment)
    elif kind == 9 and target is not root:
        twin = copy.deepcopy(target)
        twin.text = (twin.text or "") + " 2"
        target.getparent().append(twin)
    elif kind == 10:
        target.set("{http://www.w3.org/XML/1998/namespace}lang", rng.choice(["de", "en-GB", "x"]))
    elif kind == 11 and target.text:  # the text moves into a child: <t><i>text</i></t>
        child = etree.Element(f"{{{target.nsmap.get(None, 'urn:x')}}}i")
        child.text, target.text = target.text, None
        target.insert(0, child)


def _mutated_records(count: int, seed: int) -> list[tuple[str, bytes, list[str]]]:
    rng = random.Random(seed)
    records = generate_datacite_records(count, seed=seed, deleted_fraction=0)
    xmls = []
    for index, record in enumerate(records):
        prefix = rng.choice(["oai_datacite", "datacite"])
        xml = golden.wrap(record.metadata[prefix], record.identifier, record.set_specs)
        root = etree.fromstring(xml)
        for _ in range(rng.randrange(1, 6)):
            _mutate(root, rng)
        xmls.append((f"mutated:{index}", etree.tostring(root), record.set_specs))
    return xmls


@pytest.mark.parametrize("options", sorted(golden.OPTION_SETS))
def test_golden_records_equal_the_reference(options: str) -> None:
    items = golden.golden_items()
    _both([(i.identifier, i.xml or b"", i.set_specs) for i in items], golden.OPTION_SETS[options])


@pytest.mark.parametrize("seed", range(4))
def test_mutated_records_equal_the_reference(seed: int) -> None:
    _both(_mutated_records(400, seed), golden.OPTION_SETS["communities" if seed % 2 else "default"])


def test_mutated_dublin_core_equals_the_reference() -> None:
    rng = random.Random(5)
    xmls = []
    for path in [p for p in golden.sample_files() if "oai_dc" in p.name]:
        for item in [i for i in golden._file_items(path) if i.identifier.startswith("record:")]:
            for copy_index in range(60):
                root = etree.fromstring(item.xml or b"")
                for _ in range(rng.randrange(1, 5)):
                    _mutate(root, rng)
                xmls.append((f"{item.identifier}:{copy_index}", etree.tostring(root), []))
    assert xmls
    _both(xmls, {})
