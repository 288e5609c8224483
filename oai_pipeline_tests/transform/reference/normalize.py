"""Value clean-up shared by the imports: identifiers, person names, double-escaped HTML."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import unquote, urlparse

_ORCID_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?orcid\.org/", re.I)
_ROR_PREFIX = re.compile(r"^(?:https?://)?(?:www\.)?ror\.org/", re.I)
_DOI_PREFIX = re.compile(r"^(?:(?:https?://)?(?:dx\.)?doi\.org/|doi:\s*)", re.I)
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
# A well-formed character reference only: a bare `&` in text or URLs is left alone.
_ENTITY = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_FILE_NAME = re.compile(r"\.([A-Za-z0-9]{1,5})$")
# Extensions of web pages, not of files the source hosts for download.
_PAGE_EXTENSIONS = {"html", "htm", "xhtml", "php", "asp", "aspx", "jsp", "cgi"}


def text_or_none(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def normalize_orcid(value: str) -> str:
    """`https://orcid.org/0000-0002-1825-009x` -> `0000-0002-1825-009X`."""
    bare = _ORCID_PREFIX.sub("", value.strip()).strip("/").upper()
    if re.fullmatch(r"\d{15}[\dX]", bare):
        bare = "-".join(bare[i : i + 4] for i in range(0, 16, 4))
    return bare


def normalize_ror(value: str) -> str:
    """`https://ror.org/04wxnsj81` -> `04wxnsj81`."""
    return _ROR_PREFIX.sub("", value.strip()).strip("/").lower()


def is_ror(value: str | None) -> bool:
    return bool(value) and bool(re.fullmatch(r"0[a-z0-9]{6}\d{2}", normalize_ror(value or "")))


def normalize_doi(value: str) -> str | None:
    """The bare, lower-cased DOI of `value` (a DOI, `doi:` or a doi.org URL), or None."""
    bare = _DOI_PREFIX.sub("", value.strip()).strip()
    return bare.lower() if _DOI.match(bare) else None


def name_identifier(scheme: str, value: str) -> dict[str, str]:
    """A person/org identifier with the scheme's canonical spelling of the value."""
    scheme = scheme.strip().lower()
    if scheme == "orcid":
        return {"scheme": "orcid", "identifier": normalize_orcid(value)}
    if scheme == "ror":
        return {"scheme": "ror", "identifier": normalize_ror(value)}
    if scheme == "isni":
        return {"scheme": "isni", "identifier": re.sub(r"\s+", "", value)}
    return {"scheme": scheme, "identifier": value.strip()}


def person_or_org(
    name: str | None,
    *,
    kind: str | None,
    given: str | None = None,
    family: str | None = None,
    identifiers: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A person or an organisation; a person's name is split from `Family, Given` when the
    source gives no given/family parts. Without a stated kind, a name with a comma, given/family
    parts or an ORCID is a person; anything else is an organisation."""
    identifiers = identifiers or []
    name, given, family = text_or_none(name), text_or_none(given), text_or_none(family)
    if kind is None:
        personal = bool(
            given
            or family
            or (name and "," in name)
            or any(i["scheme"] == "orcid" for i in identifiers)
        )
        kind = "personal" if personal else "organizational"
    result: dict[str, Any] = {"type": kind, "identifiers": identifiers}
    if kind == "personal":
        if family is None and name is not None:
            if "," in name:
                family_part, _, given_part = name.partition(",")
                family, given = text_or_none(family_part), given or text_or_none(given_part)
            else:
                family = name
        result.update(given_name=given, family_name=family)
        if family is not None:
            result["name"] = f"{family}, {given}" if given else family
    else:
        result["name"] = name
    return result


def unescape_html_once(text: str) -> str:
    """Undo one level of escaping: Zenodo sends `&amp;lt;p&amp;gt;` in dc:description, which the
    XML parser turns into `&lt;p&gt;`; this makes it `<p>`. Bare `&` are left as they are."""
    return _ENTITY.sub(lambda match: html.unescape(match.group(0)), text)


def file_link(url: str) -> dict[str, str] | None:
    """A link to a file at the source (its URL path ends in a file name), or None."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in {"http", "https"}:
        return None
    name = unquote(parsed.path.rstrip("/").rsplit("/", 1)[-1])
    extension = _FILE_NAME.search(name)
    if extension is None or extension.group(1).lower() in _PAGE_EXTENSIONS:
        return None
    return {"url": url.strip(), "key": name}
