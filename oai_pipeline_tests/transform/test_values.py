"""The value helpers the imports share: dates, names, identifiers, licenses, languages, HTML."""

from __future__ import annotations

import pytest

from oai_pipeline.doi import normalize_doi
from oai_pipeline.transform import dates, normalize
from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.normalize import (
    file_link,
    normalize_orcid,
    normalize_ror,
    person_or_org,
    unescape_html_once,
)
from oai_pipeline.transform.rdm_record import error_location


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2014", "2014"),
        ("2014-02", "2014-02"),
        (" 2024-02-29 ", "2024-02-29"),
        ("2023-10-12T14:26:07Z", "2023-10-12"),
        ("2023-10-12T14:26:07.5+02:00", "2023-10-12"),
        ("2010/2020", "2010/2020"),
        ("2024-01-01/2024-12-31", "2024-01-01/2024-12-31"),
        ("2010/2010-05", "2010/2010-05"),
    ],
)
def test_edtf_safe_dates(text: str, expected: str) -> None:
    assert normalize_date(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "spring 2020",
        "2023-02-29",
        "2023-00",
        "20231",
        "2020/2019",
        "12/05/2020",
        "2020-",
        "2020-2019",
        "2020/13",
        "Foo 2020",
        "31 June 2020",
        "2019-01-01/..",
    ],
)
def test_dates_that_are_not_edtf_safe(text: str) -> None:
    with pytest.raises(ValueError):
        normalize_date(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0000", "placeholder for no date"),
        ("9999", "placeholder for no date"),
        ("9999-12-31", "placeholder for no date"),
        ("0000-2020", "placeholder for no date"),
        ("2020-01-01T25:99:99Z", "has no time of day 25:99:99"),
        ("2020-01-01T12:60Z", "has no time of day 12:60:00"),
        ("2020-01-01T10:00:00+25:00", "has no UTC offset 25:00"),
    ],
)
def test_placeholder_years_and_impossible_times_are_no_dates(text: str, message: str) -> None:
    """`0000`/`9999` were kept as publication dates (the year 0, the year 9999), and a
    timestamp's time of day was not read at all: `T25:99:99Z` dated the record that day."""
    with pytest.raises(ValueError, match=message):
        normalize_date(text)
    assert normalize_date("2020-01-01T23:59:60Z") == "2020-01-01"  # a leap second is a time
    assert normalize_date("2020-01-01T10:00:00-12:00") == "2020-01-01"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2020/05/01", "2020-05-01"),
        ("2020/5/1", "2020-05-01"),
        ("2020/05", "2020-05"),
        ("May 2020", "2020-05"),
        ("1 May 2020", "2020-05-01"),
        ("May 1, 2020", "2020-05-01"),
        ("Sept. 3, 2021", "2021-09-03"),
        ("3 dec 2021", "2021-12-03"),
        ("2019-2020", "2019/2020"),
        ("2019 – 2020", "2019/2020"),
        ("2020/05/01/2021", None),
    ],
)
def test_dates_in_other_unambiguous_forms(text: str, expected: str | None) -> None:
    """F8: year-first slashes, month names and a year range (an EDTF interval, which the
    target's date fields accept) are read; the rest is still refused."""
    if expected is None:
        with pytest.raises(ValueError):
            normalize_date(text)
    else:
        assert normalize_date(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.05.2020", "2020-05-12"),  # dots are always day first
        ("1.5.2020", "2020-05-01"),
        ("01. 05. 2020", "2020-05-01"),
        ("05.2020", "2020-05"),
        ("12. Mai 2020", "2020-05-12"),
        ("März 2020", "2020-03"),
        ("1. Dezember 2019", "2019-12-01"),
        ("1 juin 2020", "2020-06-01"),
        ("20200512", "2020-05-12"),  # ISO 8601's basic form
        ("2020-5-1", "2020-05-01"),
        ("2020.05.12", "2020-05-12"),  # year first with dots (Hungarian, Chinese, Korean)
        ("2020. 5. 12.", "2020-05-12"),
        ("2020.13.01", None),
        ("1998.", "1998"),  # ISBD's closing period
        ("12.05.2020/14.05.2020", "2020-05-12/2020-05-14"),
        ("12.5.20", None),  # no century
        ("31.02.2020", None),
        ("12.13.2020", None),  # dots are never month first
        ("Mai 20", None),
    ],
)
def test_german_and_european_dates(text: str, expected: str | None) -> None:
    """German and European repositories write day-first dates with dots and month names in
    their language; before, each failed the record with invalid_date."""
    if expected is None:
        with pytest.raises(ValueError):
            normalize_date(text)
    else:
        assert normalize_date(text) == expected


def test_a_rejected_date_names_the_accepted_forms() -> None:
    with pytest.raises(ValueError) as error:
        normalize_date("Summer 2019")
    assert "'Summer 2019'" in str(error.value)
    assert dates.ACCEPTED_FORMS in str(error.value)
    assert "May 2020" in dates.ACCEPTED_FORMS and "YYYY/MM/DD" in dates.ACCEPTED_FORMS


def test_identifier_normalisation() -> None:
    assert normalize_orcid(" https://orcid.org/0000-0002-1825-009x ") == "0000-0002-1825-009X"
    assert normalize_orcid("000000021825009X") == "0000-0002-1825-009X"
    assert normalize_ror("https://ror.org/04WXNSJ81/") == "04wxnsj81"
    assert normalize_doi("https://doi.org/10.5281/ZENODO.123") == "10.5281/zenodo.123"
    assert normalize_doi("doi:10.1000/x") == "10.1000/x"
    assert normalize_doi("http://dx.doi.org/10.1000/x") == "10.1000/x"
    assert normalize_doi("oai:zenodo.org:1") is None


@pytest.mark.parametrize(
    "text",
    [
        "10.1234/ABC",
        "doi:10.1234/ABC",
        "DOI: 10.1234/ABC",
        "info:doi/10.1234/ABC",
        "https://doi.org/10.1234/ABC",
        "http://dx.doi.org/10.1234/ABC",
        "https://www.doi.org/10.1234/ABC",
        "info:eu-repo/semantics/altIdentifier/doi/10.1234/ABC",
    ],
)
def test_every_doi_form_is_normalised(text: str) -> None:
    """F4: one reader for every way the feeds write a DOI, lower-cased."""
    assert normalize_doi(text) == "10.1234/abc"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://doi.org/10.1234%2Fabc", "10.1234/abc"),
        ("http://dx.doi.org/10.1234%2FABC", "10.1234/abc"),
        # SICI DOIs hold `<`, `>` and `;`, which a URL escapes
        (
            "https://doi.org/10.1002/(SICI)1097-4571(199806)49:8%3C693::AID-ASI4%3E3.0.CO;2-0",
            "10.1002/(sici)1097-4571(199806)49:8<693::aid-asi4>3.0.co;2-0",
        ),
        ("https://doi.org/10.1234/a%25b", "10.1234/a%b"),  # a DOI's own `%`
        ("10.1234/a%2Fb", "10.1234/a%2fb"),  # not a URL: taken as it is
    ],
)
def test_a_percent_encoded_doi_url_is_decoded(text: str, expected: str) -> None:
    """A doi.org URL is percent-encoded; before, `https://doi.org/10.1234%2Fabc` was no DOI
    (its record got no pid) and a SICI DOI kept its escapes."""
    assert normalize_doi(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "10.1234/ABC.",  # the end of a citation's sentence
        "10.1234/ABC,",
        "10.1234/ABC;",
        "https://doi.org/10.1234/ABC.",
        "(10.1234/ABC)",
        "[doi:10.1234/ABC]",
        "<https://doi.org/10.1234/ABC>",
        "(https://doi.org/10.1234/ABC).",
        "DOI 10.1234/ABC",
        "doi: https://doi.org/10.1234/ABC",
        "DOI: http://dx.doi.org/10.1234/ABC",
        "10.1234/ABC)",  # a `)` that closes no `(` of the DOI
    ],
)
def test_a_doi_copied_from_a_citation_is_the_doi_without_its_marks(text: str) -> None:
    """Before, `10.1234/abc.` was the pid `10.1234/abc.` (a user's deposit of `10.1234/abc` was
    then duplicated, not taken over) and `(10.1234/abc)`, `DOI 10.1234/abc` were no DOI."""
    assert normalize_doi(text) == "10.1234/abc"


@pytest.mark.parametrize(
    "text", ["10.\u0661\u0662\u0663\u0664/abc", "10.\uff11\uff12\uff13\uff14/abc"]
)
def test_a_doi_prefix_in_other_digits_than_asciis_is_no_doi(text: str) -> None:
    """`10.١٢٣٤/abc` (Arabic-Indic digits) and `10.１２３４/abc` (full-width) passed the DOI
    pattern's `\\d`: stored as the record's pid, no resolver knows them."""
    assert normalize_doi(text) is None
    assert normalize_doi(f"https://doi.org/{text}") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.1002/(SICI)1097-4636(199812)43:4", "10.1002/(sici)1097-4636(199812)43:4"),
        ("10.1000/a(b)", "10.1000/a(b)"),  # its own parentheses are kept
        ("10.1000/a.b", "10.1000/a.b"),
        ("10.1234", None),
        ("10.1234/.", None),
        ("doi 10", None),
    ],
)
def test_a_dois_own_characters_are_kept(text: str, expected: str | None) -> None:
    assert normalize_doi(text) == expected


@pytest.mark.parametrize(
    "value",
    [
        "0000-0002-1825-0098",  # Josiah Carberry's iD (…-0097) with its last digit mistyped
        "https://orcid.org/0000-0002-1825-0079",  # two digits swapped
        "0000000218250096",
        "0000-0002-1825-009X",
        "1234-1234-1234-1234",  # a placeholder
    ],
)
def test_an_orcid_with_a_wrong_check_digit_is_no_identifier(value: str) -> None:
    """Before, a mistyped ORCID was the creator's identifier: another researcher's iD, or
    one that exists for no one. It is dropped as a malformed one is, the person kept."""
    assert normalize.name_identifier("orcid", value) is None


@pytest.mark.parametrize(
    "value",
    ["0000-0002-1825-0097", "https://orcid.org/0000-0001-5109-3700", "0000-0002-1694-233x"],
)
def test_an_orcid_with_its_check_digit_is_kept(value: str) -> None:
    assert normalize.name_identifier("orcid", value) is not None


def test_one_line_values_collapse_whitespace() -> None:
    """F5: line breaks and indentation inside a title or a name are layout."""
    assert normalize.text_or_none("  A long title\n      over lines\t end  ") == (
        "A long title over lines end"
    )
    assert normalize.text_or_none("Flexibility  services") == "Flexibility services"
    assert normalize.text_or_none("no\xa0break") == "no\xa0break"  # not layout
    assert normalize.text_or_none(" \n ") is None
    assert normalize.block_text_or_none(" a\n  b ") == "a\n  b"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Smith\x92s data, 1990\x962000", "Smith’s data, 1990–2000"),
        ("\x93Quoted\x94 \x80 5", "“Quoted” € 5"),
        ("Wait\x85 and see", "Wait… and see"),
        ("caf\xe9 \x81\x8d\x8f\x90\x9d!", "café !"),  # undefined in Windows-1252: dropped
        ("Łódź \xa0 \u2013", "Łódź \xa0 \u2013"),  # beyond the C1 range: as they are
    ],
)
def test_c1_controls_are_windows_1252_read_as_latin_1(text: str, expected: str) -> None:
    """A DSpace or EPrints fed from a Windows form stores `’` as U+0092: before, the target
    kept the control character, invisible in a browser, that split `Smith’s` from a search
    for it."""
    assert normalize.clean_unicode(text) == expected
    assert normalize.block_text_or_none(f" {text} ") == expected.strip()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A &amp; B", "A & B"),
        ("Caf&eacute; culture", "Café culture"),
        ("1990&#8211;2000, &#x2018;quoted&#x2019;", "1990–2000, ‘quoted’"),
        ("&#150; and &#146;", "– and ’"),  # HTML reads these as Windows-1252
        ("Lo&#776;we", "Löwe"),  # composed (NFC) once read
        ("p &lt; 0.05 &nbsp;", "p < 0.05"),
        # a `&` that starts no reference HTML has stays: names HTML lacks, no `;`
        ("R&D, a=1&b=2, &ampx; &copy &notanentity;", "R&D, a=1&b=2, &ampx; &copy &notanentity;"),
        ("&#1;x", "x"),
    ],
)
def test_html_references_left_in_a_one_line_value_are_read(text: str, expected: str) -> None:
    """A source that escaped its text as HTML once more than XML needs (`Caf&amp;eacute;`):
    before, the target's title read `Caf&eacute;`."""
    assert normalize.text_or_none(text) == expected


def test_malformed_name_identifiers_are_dropped() -> None:
    """F3: a malformed ORCID or ROR is no identifier (None), so the person stays."""
    assert normalize.name_identifier("ORCID", "0000-0002-1825-009") is None
    assert normalize.name_identifier("ROR", "https://ror.org/nope") is None
    assert normalize.name_identifier("ORCID", "https://orcid.org/0000-0002-1825-0097") == {
        "scheme": "orcid",
        "identifier": "0000-0002-1825-0097",
    }


def test_person_names() -> None:
    assert person_or_org("Doe, Jane", kind=None) == {
        "type": "personal",
        "name": "Doe, Jane",
        "given_name": "Jane",
        "family_name": "Doe",
        "identifiers": [],
    }
    given_parts = person_or_org("Ignored, Name", kind="personal", given="Jane", family="Doe")
    assert (given_parts["name"], given_parts["given_name"]) == ("Doe, Jane", "Jane")
    orcid = [{"scheme": "orcid", "identifier": "0000-0002-1825-0097"}]
    assert person_or_org("Josiah Carberry", kind=None, identifiers=orcid)["type"] == "personal"
    assert person_or_org("CERN", kind=None)["type"] == "organizational"


@pytest.mark.parametrize(
    ("written", "name", "given"),
    [
        ("Doe, 12345", "Doe", None),  # a number after the name: no given name
        ("Doe, 2019-01", "Doe", None),
        ("12345, Jane", "Jane", None),  # a number before it: the one name left
        ("Doe, J. 2nd", "Doe, J. 2nd", "J. 2nd"),  # letters too: a given name
    ],
)
def test_a_part_of_a_split_name_of_digits_only_names_nobody(
    written: str, name: str, given: str | None
) -> None:
    """`Doe, 12345` (a dc:creator, a DataCite creatorName without parts, a MARC 100 $a) made
    `12345` the given name, where a givenName `12345` names nobody."""
    person = person_or_org(written, kind="personal")
    assert (person["name"], person["given_name"]) == (name, given)


def test_licenses() -> None:
    assert vocab.license_id_from_identifier("CC0 1.0") == "cc0-1.0"
    assert vocab.license_id_from_identifier("CC-BY-4.0") == "cc-by-4.0"
    assert vocab.license_id_from_identifier("GPL-3.0") == "gpl-3.0-only"
    assert vocab.license_id_from_identifier("GPL-3.0-or-later") == "gpl-3.0-or-later"
    urls = {
        "https://creativecommons.org/licenses/by/4.0/legalcode": "cc-by-4.0",
        "http://creativecommons.org/licenses/by-nc-sa/3.0/": "cc-by-nc-sa-3.0",
        "https://creativecommons.org/publicdomain/zero/1.0/": "cc0-1.0",
        "http://www.apache.org/licenses/LICENSE-2.0": "apache-2.0",
        # the ids InvenioRDM's licenses.csv has (before: gpl-3.0, cc-by-3.0 for the US port)
        "https://www.gnu.org/licenses/gpl-3.0.html": "gpl-3.0-only",
        "https://www.gnu.org/licenses/old-licenses/lgpl-2.1.html": "lgpl-2.1-only",
        "https://www.gnu.org/licenses/agpl.html": "agpl-3.0-or-later",
        "https://spdx.org/licenses/GPL-2.0+.html": "gpl-2.0-or-later",
        "http://creativecommons.org/licenses/by/3.0/us/": "cc-by-3.0-us",
        "https://creativecommons.org/licenses/by-sa/3.0/de/legalcode": "cc-by-sa-3.0",
        "https://creativecommons.org/licenses/by/4.0/deed.de": "cc-by-4.0",
        "https://opensource.org/licenses/MIT": "mit",
        "https://spdx.org/licenses/BSD-3-Clause.html": "bsd-3-clause",
        "https://example.org/terms": None,
    }
    for url, expected in urls.items():
        assert vocab.license_id_from_url(url) == expected, url


def test_licenses_named_in_text() -> None:
    """Repositories that give no license URL name the license (dc:rights `CC BY 4.0`, OPUS's
    long German name); only a name with its version names a license the target holds."""
    names = {
        "CC BY 4.0": "cc-by-4.0",
        "CC-BY-NC-SA-4.0": "cc-by-nc-sa-4.0",
        "Licensed under CC BY-SA 2.0": "cc-by-sa-2.0",
        "Attribution 4.0 International (CC BY 4.0)": "cc-by-4.0",
        "Creative Commons Attribution 4.0 International": "cc-by-4.0",
        "Creative Commons Attribution-NonCommercial-NoDerivs 3.0 Unported": "cc-by-nc-nd-3.0",
        "Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International License": (
            "cc-by-nc-sa-4.0"
        ),
        "Creative Commons - CC BY - Namensnennung 4.0 International": "cc-by-4.0",
        "CC0 1.0 Universal": "cc0-1.0",
        "CC0": "cc0-1.0",
        "CC BY": None,  # no version
        "CC BY-ND-SA 4.0": None,  # no such license
        "All rights reserved": None,
        "Open Access": None,
    }
    for name, expected in names.items():
        assert vocab.license_id_from_name(name) == expected, name


def test_languages_and_vocabularies() -> None:
    assert vocab.language_id("en-US") == "eng"
    assert vocab.language_id("eng") == "eng"
    assert vocab.language_id("ger") == "deu"
    assert vocab.language_id("xx") is None
    assert vocab.datacite_resource_type("JournalArticle") == "publication-article"
    assert vocab.datacite_resource_type("Unheard-of") == "other"
    assert vocab.datacite_resource_type(None) == "other"
    assert vocab.dc_resource_type(["info:eu-repo/semantics/article"]) == "publication-article"
    assert vocab.dc_resource_type(["Dataset"]) == "dataset"
    assert vocab.title_type("TranslatedTitle") == "translated-title"
    assert vocab.date_type("Issued") == "issued"
    assert vocab.date_type("Whenever") == "other"


def test_html_is_unescaped_exactly_once() -> None:
    assert unescape_html_once("&lt;p&gt;a &amp;amp; b&lt;/p&gt;") == "<p>a &amp; b</p>"
    # a bare ampersand (not a reference) stays as it is
    assert unescape_html_once("?a=1&copy=2") == "?a=1&copy=2"


def test_file_links() -> None:
    assert file_link("https://zenodo.org/records/1/files/data%20set.csv") == {
        "url": "https://zenodo.org/records/1/files/data%20set.csv",
        "key": "data set.csv",
    }
    assert file_link("https://example.org/index.html") is None
    assert file_link("https://example.org/records/1") is None
    assert file_link("ftp://example.org/a.csv") is None


@pytest.mark.parametrize(
    "url",
    [
        "http://arxiv.org/abs/1101.4388",
        "https://arxiv.org/abs/2301.12345v2",
        "https://hdl.handle.net/10013/epic.10033",
        "https://example.org/record/v1.2",
        "https://example.org/people/j.doe",
    ],
)
def test_a_dot_does_not_make_a_file(url: str) -> None:
    """F6: landing pages, handles and versions are not files."""
    assert file_link(url) is None


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://example.org/files/paper.PDF", "paper.PDF"),
        ("https://example.org/files/data.tar.gz", "data.tar.gz"),
        ("https://example.org/files/analysis.R", "analysis.R"),
        ("https://example.org/files/notebook.ipynb", "notebook.ipynb"),
        ("https://example.org/files/cube.fits/", "cube.fits"),
    ],
)
def test_known_file_extensions_are_files(url: str, key: str) -> None:
    assert file_link(url) == {"url": url, "key": key}


def test_description_html_unescapes_only_double_escaped_text() -> None:
    """F7: Zenodo's double escaping is undone; correctly escaped HTML stays text."""
    double = (
        "&lt;p&gt;Effect (p &lt; 0.05) &amp;amp; more&lt;/p&gt;&lt;script&gt;x()&lt;/script&gt;"
    )
    assert normalize.description_html(double) == "<p>Effect (p &lt; 0.05) &amp; more</p>"
    single = "<p>Escaped &lt;b&gt; is text, p &lt; 0.05</p>"
    assert normalize.description_html(single) == single
    # escaped tags next to a real one: the text means them as text
    mixed = "<b>Use</b> the &lt;i&gt; tag"
    assert normalize.description_html(mixed) == mixed


def test_description_html_is_sanitised() -> None:
    """F7: script, style, event handlers and javascript: URLs are dropped; the rich-text
    tags stay."""
    dirty = (
        '<h2 onclick="x()">T</h2><p style="color:red">a <b>b</b> <i>c</i> <sub>2</sub></p>'
        '<script>alert(1)</script><style>p{}</style><a href="javascript:alert(1)">j</a>'
        '<a href="https://example.org/?a=1&amp;b=2" onmouseover="x()">l</a>'
        "<ul><li>one</li></ul><table><tr><td>1</td></tr></table><img src=x onerror=alert(1)>"
    )
    assert normalize.description_html(dirty) == (
        "<h2>T</h2><p>a <b>b</b> <i>c</i> <sub>2</sub></p><a>j</a>"
        '<a href="https://example.org/?a=1&amp;b=2">l</a>'
        "<ul><li>one</li></ul><table><tbody><tr><td>1</td></tr></tbody></table>"
    )


def test_plain_descriptions_skip_the_sanitiser() -> None:
    text = "Plain text,\nover two lines > nothing to do"
    assert normalize.description_html(text) is text
    assert normalize.description_html("R&D") == "R&amp;D"  # an ampersand is HTML-escaped


def test_a_less_than_sign_that_opens_no_tag_is_text() -> None:
    """arXiv abstracts in oai_dc: TeX mathematics is not markup for the sanitiser to drop."""
    assert normalize.description_html("$x<y$ and $z>w$") == "$x&lt;y$ and $z&gt;w$"
    assert normalize.description_html("for n < 3 & m > 2") == "for n &lt; 3 &amp; m &gt; 2"
    # a description with HTML in it is HTML: sanitised as before
    assert normalize.description_html("<p>x</p><script>alert(1)</script>") == "<p>x</p>"


def test_block_elements_do_not_glue_words() -> None:
    """F5: a block element the sanitiser drops leaves a space, a <br> stays a break."""
    unglued = normalize.description_html("<section>one</section><section>two</section>")
    assert unglued.split() == ["one", "two"]  # HTML renders a run of spaces as one
    assert normalize.description_html("First.", "Second.", "") == "First.<br>Second."
    assert normalize.description_html("a<br/>b") == "a<br>b"


def test_error_location_path() -> None:
    assert error_location(("metadata", "creators", 0, "person_or_org", "name")) == (
        "metadata.creators[0].person_or_org.name"
    )


@pytest.mark.parametrize(
    ("general", "expected"),
    [
        ("ComputationalNotebook", "software-computationalnotebook"),
        ("Sound", "audio"),
        ("InteractiveResource", "lesson"),
        ("Journal", "publication-journal"),
        ("PeerReview", "publication-peerreview"),
        ("DataPaper", "publication-datapaper"),
        ("Standard", "publication-standard"),
        ("ConferenceProceeding", "publication-conferenceproceeding"),
        ("Dissertation", "publication-dissertation"),
    ],
)
def test_datacite_resource_types_are_ids_of_the_target(general: str, expected: str) -> None:
    """The ids of InvenioRDM's resource_types.yaml whose datacite_general is the value
    (before: `publication`/`other`, or `publication-thesis`, an id of old versions only)."""
    assert vocab.datacite_resource_type(general) == expected


def test_eu_repo_theses_are_the_targets_thesis_id() -> None:
    for term in ("bachelorThesis", "masterThesis", "doctoralThesis"):
        assert vocab.dc_resource_type([f"info:eu-repo/semantics/{term}"]) == (
            "publication-dissertation"
        )
    assert vocab.dc_resource_type(["info:eu-repo/semantics/conferenceProceedings"]) == (
        "publication-conferenceproceeding"
    )
    assert vocab.dc_resource_type(["Sound"]) == "audio"  # DCMI Type


def test_identifier_schemes_are_the_targets() -> None:
    """RDM_RECORDS_IDENTIFIERS_SCHEMES: DataCite's bibcode is `ads`; a type the target does
    not know is `other` (before, e.g. `localaccessionnumber`, which it rejects)."""
    assert vocab.identifier_scheme("bibcode") == "ads"
    assert vocab.identifier_scheme("arXiv") == "arxiv"
    assert vocab.identifier_scheme("Handle") == "handle"
    assert vocab.identifier_scheme("Local accession number") == "other"
    assert vocab.identifier_scheme("oai") == "other"
    assert vocab.identifier_scheme("RRID") == "other"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ca. 1900", "1900"),
        ("circa 1900", "1900"),
        ("c1900", "1900"),
        ("[1885?]", "1885"),
        ("1885?", "1885"),
        ("[1920]", "1920"),
        ("19--", "1900/1999"),
        ("189-", "1890/1899"),
        ("19uu", "1900/1999"),
        ("1950s", "1950/1959"),
        ("1900s", "1900/1909"),
    ],
)
def test_approximate_years_of_library_catalogues(text: str, expected: str) -> None:
    """The year, or the interval of years (EDTF, as InvenioRDM's publication_date takes it);
    before, each rejected the record."""
    assert normalize_date(text) == expected


@pytest.mark.parametrize("text", ["ca. 19", "1-", "19---", "c1900s", "[19]"])
def test_approximate_forms_need_a_year(text: str) -> None:
    with pytest.raises(ValueError):
        normalize_date(text)


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("u.a.", ""),  # German `und andere`, as DNB and GBV records end an author list
        ("[u.a.]", ""),
        ("Müller, Hans u. a.", "Müller, Hans"),
        ("Doe, J., [et al.]", "Doe, J."),
        ("ET AL.", ""),
        ("Smith, U. A.", "Smith, U. A."),  # initials, not `und andere`
        ("Dahl, Paula", "Dahl, Paula"),
    ],
)
def test_a_trailing_et_al_in_any_language_names_nobody(written: str, name: str) -> None:
    """`u.a.` stayed a name (`Müller, Hans u. a.`: the given name `Hans u. a.`)."""
    assert normalize.without_et_al(written) == name
