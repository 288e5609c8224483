"""The strict parser is reused per thread; it must refuse the same documents every time."""

from __future__ import annotations

import threading

import pytest
from lxml import etree

from oai_pipeline import xml_safety
from oai_pipeline.xml_safety import parse_untrusted

GOOD = b'<r xmlns="urn:x"><a>1</a></r>'
LAUGHS = b'<!DOCTYPE r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><r>&b;</r>'
EXTERNAL = b'<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><r>&e;</r>'
REMOTE_DTD = b'<!DOCTYPE r SYSTEM "http://127.0.0.1:9/x.dtd"><r/>'


def _error(data: bytes, parse=parse_untrusted) -> str:
    try:
        parse(data)
    except (etree.XMLSyntaxError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return "parsed"


def test_refusals_do_not_depend_on_what_was_parsed_before() -> None:
    first = [_error(d) for d in (LAUGHS, EXTERNAL, b"<r><a></r>", REMOTE_DTD, GOOD)]
    again = [_error(d) for d in (GOOD, LAUGHS, GOOD, EXTERNAL, b"<r><a></r>", REMOTE_DTD, GOOD)]
    assert first[0] == again[1] and first[1] == again[3] and first[2] == again[4]
    assert first[0] != "parsed" and first[1] != "parsed" and first[2] != "parsed"
    assert first[3] == again[5] == "parsed"  # the DTD is neither fetched nor an error
    assert first[4] == again[0] == again[2] == again[6] == "parsed"
    assert parse_untrusted(GOOD)[0].text == "1"


def _fresh_parse(data: bytes) -> etree._Element:
    """What parse_untrusted did before the parser was reused: a new parser per document."""
    previous = xml_safety._LOCAL.__dict__.pop("parser", None)
    try:
        return parse_untrusted(data)
    finally:
        xml_safety._LOCAL.__dict__.pop("parser", None)
        if previous is not None:
            xml_safety._LOCAL.parser = previous


def test_the_same_outcome_as_a_fresh_parser_each_time() -> None:
    documents = [GOOD, LAUGHS, EXTERNAL, b"<r><a></r>", REMOTE_DTD, b"", b"<r>&x;</r>", GOOD]
    assert [_error(d) for d in documents] == [_error(d, _fresh_parse) for d in documents]


def test_the_document_size_is_still_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xml_safety, "MAX_DOCUMENT_BYTES", len(GOOD) - 1)
    with pytest.raises(ValueError, match="exceeds"):
        parse_untrusted(GOOD)


def test_each_thread_has_its_own_parser() -> None:
    parsers: list[etree.XMLParser] = []
    thread = threading.Thread(target=lambda: parsers.append(xml_safety._strict_parser()))
    thread.start()
    thread.join()
    assert parsers[0] is not xml_safety._strict_parser()
    assert xml_safety._strict_parser() is xml_safety._strict_parser()
