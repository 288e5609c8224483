"""The value helpers the imports share: dates, names, identifiers, licenses, languages, HTML."""

from __future__ import annotations

import pytest

from oai_pipeline.transform import vocabularies as vocab
from oai_pipeline.transform.dates import normalize_date
from oai_pipeline.transform.normalize import (
    file_link,
    normalize_doi,
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
    ["", "spring 2020", "2023-02-29", "2023-00", "20231", "2020/2019", "12/05/2020", "2020-"],
)
def test_dates_that_are_not_edtf_safe(text: str) -> None:
    with pytest.raises(ValueError):
        normalize_date(text)


def test_identifier_normalisation() -> None:
    assert normalize_orcid(" https://orcid.org/0000-0002-1825-009x ") == "0000-0002-1825-009X"
    assert normalize_orcid("000000021825009X") == "0000-0002-1825-009X"
    assert normalize_ror("https://ror.org/04WXNSJ81/") == "04wxnsj81"
    assert normalize_doi("https://doi.org/10.5281/ZENODO.123") == "10.5281/zenodo.123"
    assert normalize_doi("doi:10.1000/x") == "10.1000/x"
    assert normalize_doi("http://dx.doi.org/10.1000/x") == "10.1000/x"
    assert normalize_doi("oai:zenodo.org:1") is None


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


def test_licenses() -> None:
    assert vocab.license_id_from_identifier("CC0 1.0") == "cc0-1.0"
    assert vocab.license_id_from_identifier("CC-BY-4.0") == "cc-by-4.0"
    urls = {
        "https://creativecommons.org/licenses/by/4.0/legalcode": "cc-by-4.0",
        "http://creativecommons.org/licenses/by-nc-sa/3.0/": "cc-by-nc-sa-3.0",
        "https://creativecommons.org/publicdomain/zero/1.0/": "cc0-1.0",
        "http://www.apache.org/licenses/LICENSE-2.0": "apache-2.0",
        "https://www.gnu.org/licenses/gpl-3.0.html": "gpl-3.0",
        "https://opensource.org/licenses/MIT": "mit",
        "https://spdx.org/licenses/BSD-3-Clause.html": "bsd-3-clause",
        "https://example.org/terms": None,
    }
    for url, expected in urls.items():
        assert vocab.license_id_from_url(url) == expected, url


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


def test_error_location_path() -> None:
    assert error_location(("metadata", "creators", 0, "person_or_org", "name")) == (
        "metadata.creators[0].person_or_org.name"
    )
