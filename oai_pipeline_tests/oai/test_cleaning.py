"""Cleaning before the one strict parse: illegal characters and wrong encodings."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from lxml import etree

from oai_pipeline.oai.cleaning import clean_page


def test_clean_utf8_page_is_returned_as_is() -> None:
    page = '<?xml version="1.0" encoding="UTF-8"?><a>café &#233; &amp;</a>'.encode()
    assert clean_page(page) is page


def test_literal_illegal_characters_are_dropped() -> None:
    cleaned = clean_page("<a>x\x00\x01\x08\x0b\x0c\x1f\ufffe\uffffy\tz\n</a>".encode())
    assert cleaned == b"<a>xy\tz\n</a>"


def test_illegal_numeric_references_are_dropped_legal_ones_kept() -> None:
    page = b"<a>&#1;&#x1;&#X1f;&#xFFFE;&#xffff;&#xD800;&#55296;&#0;&#233;&#x1F600;&#10;</a>"
    cleaned = clean_page(page)
    assert cleaned == b"<a>&#233;&#x1F600;&#10;</a>"
    assert etree.fromstring(cleaned).text == "é\U0001f600\n"


def test_utf8_encoded_surrogates_are_dropped() -> None:
    assert clean_page(b"<a>a\xed\xa0\x80b</a>") == b"<a>ab</a>"


def test_declared_utf8_but_latin1_bytes() -> None:
    page = '<?xml version="1.0" encoding="utf-8"?><a>Zürich – €</a>'.encode("cp1252")
    assert etree.fromstring(clean_page(page)).text == "Zürich – €"


def test_mixed_page_keeps_its_utf8_and_repairs_the_latin1_part() -> None:
    page = "<a><b>Zürich</b>".encode() + "<b>Genève</b></a>".encode("latin-1")
    root = etree.fromstring(clean_page(page))
    assert [b.text for b in root] == ["Zürich", "Genève"]


def test_declared_latin1_but_utf8_bytes() -> None:
    page = "<?xml version='1.0' encoding='ISO-8859-1'?><a>Zürich</a>".encode()
    cleaned = clean_page(page)
    assert cleaned.startswith(b"<?xml version='1.0' encoding='UTF-8'?>")
    assert etree.fromstring(cleaned).text == "Zürich"


def test_real_latin1_page_is_converted_to_utf8() -> None:
    page = '<?xml version="1.0" encoding="ISO-8859-1"?><a>Zürich</a>'.encode("latin-1")
    assert etree.fromstring(clean_page(page)).text == "Zürich"


def test_utf16_with_bom_and_utf8_bom() -> None:
    page = '<?xml version="1.0" encoding="UTF-16"?><a>Zürich</a>'.encode("utf-16")
    assert etree.fromstring(clean_page(page)).text == "Zürich"
    assert etree.fromstring(clean_page(b"\xef\xbb\xbf<a>\xc3\xa9</a>")).text == "é"


WIDE_TEXT = "Zürich – Łódź ✓ \U0001d11e"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize(
    "start",
    ['<?xml version="1.0" encoding="{declared}"?>\n', "", "\r\n  "],
    ids=["declared", "undeclared", "whitespace-first"],
)
def test_utf16_and_utf32_without_a_byte_order_mark(encoding: str, start: str) -> None:
    """Before, such a page was read as UTF-8: its NUL bytes dropped as illegal characters,
    every character beyond Latin-1 garbled (`–` became a space), and no error said so."""
    declared = encoding[:6].upper()
    page = (start.format(declared=declared) + f"<a>{WIDE_TEXT}</a>").encode(encoding)
    cleaned = clean_page(page)
    assert etree.fromstring(cleaned).text == WIDE_TEXT
    assert cleaned.startswith(
        b'<?xml version="1.0" encoding="UTF-8"?>' if start[:1] == "<" else b""
    )


def test_nul_bytes_in_a_utf8_page_are_not_taken_for_utf16() -> None:
    """A stray NUL or two (a C string's end) are illegal characters, dropped: the rest is
    UTF-8 as before."""
    page = "<a>\x00Zürich\x00 – </a>".encode()
    assert etree.fromstring(clean_page(page)).text == "Zürich – "


@pytest.mark.parametrize("declared", ["ISO-8859-15", "windows-1250", "ISO-8859-2", "KOI8-R"])
def test_utf8_bytes_under_any_single_byte_declaration_are_utf8(declared: str) -> None:
    page = f'<?xml version="1.0" encoding="{declared}"?><a>Zürich café – Łódź</a>'.encode()
    cleaned = clean_page(page)
    assert cleaned.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    assert etree.fromstring(cleaned).text == "Zürich café – Łódź"


@pytest.mark.parametrize(
    ("declared", "text"), [("ISO-8859-2", "Łódź, Brno"), ("windows-1250", "Žluťoučký kůň")]
)
def test_a_real_single_byte_page_is_read_in_its_declared_charset(declared: str, text: str) -> None:
    page = f'<?xml version="1.0" encoding="{declared}"?><a>{text}</a>'.encode(declared)
    assert etree.fromstring(clean_page(page)).text == text


@pytest.mark.parametrize("declared", ["UTF-16", "utf-32"])
@pytest.mark.parametrize("text", ["Zürich", "Zürichs", "Genève, Zürich"])
def test_a_wide_declaration_on_single_byte_text_is_wrong(declared: str, text: str) -> None:
    page = f'<?xml version="1.0" encoding="{declared}"?><a>{text}</a>'.encode()
    cleaned = clean_page(page)
    assert cleaned.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    assert etree.fromstring(cleaned).text == text


def test_an_unknown_declared_encoding_is_replaced() -> None:
    cleaned = clean_page(b'<?xml version="1.0" encoding="x-made-up"?><a>plain</a>')
    assert etree.fromstring(cleaned).text == "plain"


def _peak_bytes(action: Callable[[], object]) -> int:
    """The most memory Python objects took at once while ``action`` ran."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_clean_page_is_checked_without_a_copy_of_it() -> None:
    """The usual page (UTF-8, nothing illegal) was decoded whole to be checked: up to three
    times its size held beside it, for a page that is then parsed as it came."""
    record = "<record><dc:title>Títle &#233; Заглавие 題名 &amp; more</dc:title></record>"
    page = ('<?xml version="1.0" encoding="UTF-8"?><ListRecords>' + record * 150_000).encode()
    page += b"</ListRecords>"
    assert len(page) > 12_000_000
    assert _peak_bytes(lambda: clean_page(page)) < len(page) / 4
    assert clean_page(page) is page
    # a page that needs repairs still gets them
    broken = page.replace("Títle".encode(), "T&#1;ítle".encode(), 1)
    assert b"&#1;" not in clean_page(broken) and "Títle".encode() in clean_page(broken)
