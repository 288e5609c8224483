"""Every import, fed mutated real records: the result is a record or the record's error.

The samples (transform/samples, with their provenance in samples/public/README.md) have their
elements dropped, duplicated, emptied, moved out of their namespace, their text and attributes
replaced by odd Unicode or huge values. A `transformer_failure` is an exception inside an
import that the transformer caught: a bug, reported here with the sample and the mutation."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from oai_pipeline.transform.base import TransformItem
from oai_pipeline.transform.failure import VALIDATION
from oai_pipeline.transform.oai_import import IMPORT_FAILURE, OAIImportTransformer
from oai_pipeline_tests.transform.records import OAI, SAMPLES, wrap_metadata


def _metadata_roots() -> list[tuple[str, etree._Element]]:
    """The metadata element of each sample (of its first two records, for OAI pages)."""
    roots = []
    for path in sorted([*SAMPLES.glob("*.xml"), *(SAMPLES / "public").glob("*.xml")]):
        root = etree.parse(str(path)).getroot()
        containers = list(root.iter(f"{{{OAI}}}metadata"))[:2] or [None]
        for container in containers:
            element = root if container is None else next(container.iterchildren(etree.Element))
            roots.append((Path(path).name, element))
    return roots


ROOTS = _metadata_roots()
# XML text: any character XML allows, with the odd ones (combining marks, bidi controls,
# zero-width spaces, astral planes) drawn often, sometimes a huge value.
ODD = ["\u0301", "\u202e", "\u200b", "\ufeff", "\U0001d518", "\U0001f600", "\u00a0", " "]
XML_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufffe\uffff").filter(
    lambda c: c in "\t\n\r" or ord(c) >= 0x20
)
TEXT = st.one_of(
    st.text(st.one_of(XML_CHARS, st.sampled_from(ODD)), max_size=30),
    st.sampled_from(["", "0", "-1", "10.", "9999-99-99", "2024-13-45", "x" * 100_000]),
    # values that made records the target refuses: a name of punctuation or dates only, one
    # with nothing before its comma, a URN without its number
    st.sampled_from([",", ", ,", ", John", "1950-2000", "urn:isbn:", "0028-0836"]),
)
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def _mutate(data: st.DataObject, root: etree._Element) -> etree._Element:
    root = copy.deepcopy(root)
    elements = list(root.iter(etree.Element))
    for _ in range(data.draw(st.integers(1, 5), label="mutations")):
        element = data.draw(st.sampled_from(elements), label="element")
        parent = element.getparent()
        kind = data.draw(
            st.sampled_from(["drop", "duplicate", "empty", "text", "attribute", "strip", "ns"])
        )
        if kind in ("drop", "duplicate", "ns") and parent is None:
            continue
        if kind == "drop":
            parent.remove(element)
        elif kind == "duplicate":
            element.addnext(copy.deepcopy(element))
        elif kind == "empty":
            element.clear()
        elif kind == "text":
            element.text = data.draw(TEXT, label="text")
        elif kind == "attribute":
            name = data.draw(st.sampled_from([*sorted(element.attrib), XML_LANG]), label="name")
            element.set(name, data.draw(TEXT, label="value"))
        elif kind == "strip":
            element.attrib.clear()
        else:
            element.tag = f"{{http://wrong.example/}}{etree.QName(element).localname}"
        elements = list(root.iter(etree.Element))
    return root


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_a_mutated_record_is_a_record_or_its_error(data: st.DataObject) -> None:
    name, root = data.draw(st.sampled_from(ROOTS), label="sample")
    mutated = _mutate(data, root)
    item = TransformItem(
        identifier=f"oai:test:{name}",
        datestamp="2024-01-01",
        set_specs=[],
        xml=wrap_metadata(etree.tostring(mutated)),
    )

    OAIImportTransformer().transform([item])  # raises nothing

    assert (item.data is None) != (item.error is None), (name, item.error)
    assert item.error is None or item.error.type != IMPORT_FAILURE, (name, item.error)
    # An import leaves out a value the target refuses, or names what is missing: a validation
    # error is the record's own identifier only (a DOI or arXiv id that is none, by design).
    assert (
        item.error is None
        or item.error.type != VALIDATION
        or (item.error.location or "").startswith("pids.doi")
    ), (name, item.error)
