"""The transform's fast paths give what the plain code they replace gave (speed32): lxml's tag
matchers, `int` per digit, uncached readers. Output identity over whole corpora is checked by
benchmarks/transform_identity.py; these pin the edge cases."""

from __future__ import annotations

import random

import pytest
from lxml import etree

from oai_pipeline import doi
from oai_pipeline.transform import dates, normalize, vocabularies
from oai_pipeline.transform.datacite import children_by_tag, nested
from oai_pipeline.transform.oai_import import _metadata_root
from oai_pipeline.transform.text_cache import MAX_CACHED_LENGTH
from oai_pipeline.xml_safety import parse_untrusted


def _check_digit_as_before(orcid: str) -> bool:
    digits = orcid.replace("-", "")
    total = 0
    for digit in digits[:-1]:
        total = (total + int(digit)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def test_orcid_check_digit_as_before() -> None:
    rng = random.Random(32)
    values = ["0000-0002-1825-0097", "0000-0002-1694-233X", "0000-0002-1825-0098"]
    for _ in range(2000):
        raw = "".join(rng.choice("0123456789") for _ in range(15)) + rng.choice("0123456789X")
        values.append("-".join(raw[i : i + 4] for i in range(0, 16, 4)))
    # other decimal digits, which `\d` finds: `int` reads them, so the check did too
    values.append("٠٠٠٠-٠٠٠٢-١٨٢٥-٠٠٩7")
    values.append("０００００００２１８２５００９7")
    for value in values:
        assert normalize.has_orcid_check_digit(value) == _check_digit_as_before(value), value
    for broken in ("0000-000X-1825-0097", "²000-0002-1825-0097"):
        with pytest.raises(ValueError):
            _check_digit_as_before(broken)
        with pytest.raises(ValueError):
            normalize.has_orcid_check_digit(broken)


def test_ror_readers_cache_short_values_only() -> None:
    long_url = "https://ror.org/" + "0" * 300
    assert normalize.normalize_ror(" https://ror.org/04WXNSJ81/ ") == "04wxnsj81"
    assert normalize.is_ror("https://ror.org/04wxnsj81")
    assert not normalize.is_ror("")
    assert not normalize.is_ror(None)
    before = normalize.normalize_ror.cache_info().currsize, normalize.is_ror.cache_info().currsize
    assert normalize.normalize_ror(long_url) == "0" * 300
    assert not normalize.is_ror(long_url)
    after = normalize.normalize_ror.cache_info().currsize, normalize.is_ror.cache_info().currsize
    assert after == before


def test_read_date_caches_short_texts_only() -> None:
    assert dates.read_date("[1885?]") == dates.ReadDate("1885", "[1885?]", exact=True)
    assert dates.read_date("Spring 1985") == dates.ReadDate("1985", "Spring 1985", exact=False)
    assert dates.read_date("2021-13-45") is None
    size = dates.read_date.cache_info().currsize
    padded = " " * 1000 + "2020-02-29"
    assert dates.read_date(padded) == dates.ReadDate("2020-02-29", None, exact=True)
    assert dates.read_date.cache_info().currsize == size


@pytest.mark.parametrize(
    "value",
    ["10.1234/abc", "doi:10.1234/ABC", "DOI 10.1234/abc.", "dOi: https://doi.org/10.1/x",
     "doı:10.1234/abc", "(doi:10.1234/abc)", "[10.1234/abc].", "d", "", " "],
)  # fmt: skip
def test_doi_label_only_read_where_one_can_be(value: str) -> None:
    text = value.strip().rstrip(doi._CLOSING_PUNCTUATION)  # the function as it was
    while len(text) > 1 and doi._ENCLOSING.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    assert doi._without_citation_marks(value) == doi._LABEL.sub("", text)


NS = "{urn:k}"
DOCUMENT = b"""<r xmlns="urn:k"><!-- c --><a><!-- c --><?pi x?><b>1</b><x:b xmlns:x="urn:o">no</x:b>
<b>2</b></a><a/><a><b>3</b></a></r>"""


def test_nested_finds_what_iterchildren_found() -> None:
    root = etree.fromstring(DOCUMENT)
    children = children_by_tag(root)
    expected = [e for a in children[f"{NS}a"] for e in a.iterchildren(f"{NS}b")]
    assert nested(children, f"{NS}a", f"{NS}b") == expected
    assert [e.text for e in expected] == ["1", "2", "3"]
    assert nested(children, f"{NS}missing", f"{NS}b") == []


OAI = "http://www.openarchives.org/OAI/2.0/"


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ('<header status="deleted"/><metadata><x/></metadata>', None),
        ("<!-- c --><header/><header status='deleted'/><metadata><x/></metadata>", None),
        ("<header/><metadata><!-- c --><?p?><x/></metadata>", "x"),
        ("<header/><metadata/><metadata><y/></metadata>", "y"),
        ("<header/>", None),
    ],
)
def test_metadata_root(body: str, found: str | None) -> None:
    root = parse_untrusted(f'<record xmlns="{OAI}">{body}</record>'.encode())
    element = _metadata_root(root)
    assert (etree.QName(element).localname if element is not None else None) == found


@pytest.mark.parametrize(
    ("read", "short"),
    [
        (dates.normalize_date, "2020-02-29"),
        (vocabularies.vocabulary_key, "Journal Article"),
        (vocabularies.identifier_scheme, "bibcode"),
        (vocabularies.license_id_from_url, "https://creativecommons.org/licenses/by/4.0/"),
        (vocabularies.language_id, "en-US"),
        (vocabularies.i18n_key, "de-CH"),
        (normalize.normalize_ror, "https://ror.org/04wxnsj81"),
        (dates.read_date, "Spring 1985"),
    ],
    ids=lambda value: getattr(value, "__name__", "short"),
)
def test_every_cached_reader_of_a_text_keeps_short_texts_only(read, short: str) -> None:
    """A feed's 10 MB values, thousands of them, were kept by caches of any text."""
    read.cache_clear()
    long = " " * MAX_CACHED_LENGTH + short  # read as the short one is, but not kept
    read(long)
    assert read.cache_info().currsize == 0
    read(short)
    assert read.cache_info().currsize == 1
