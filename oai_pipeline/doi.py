"""DOIs as this project compares them: bare (no resolver URL, `doi:` or `info:doi/`) and in
lower case, since DOIs are case-insensitive. Shared by the imports, which read DOIs from
sources, and the target, which must find a user's deposit however its DOI was typed."""

from __future__ import annotations

import re
from urllib.parse import unquote

# Every form a DOI is written in by the feeds: a resolver URL (doi.org, dx.doi.org,
# www.doi.org), `doi:`, the `info:doi/` URI and OpenAIRE's eu-repo altIdentifier.
_RESOLVER = re.compile(
    r"^(?:(?:https?://)?(?:dx\.|www\.)?doi\.org/|doi:\s*|info:doi/"
    r"|info:eu-repo/semantics/altIdentifier/doi/)",
    re.I,
)
# The form a DOI has (what the target accepts; rdm_record validates with it).
# ASCII digits (`[0-9]`, not `\d`, which also matches `١٢٣٤` and `１２３４`): no registration
# agency gives a prefix in other digits, and the target could not resolve one.
DOI = re.compile(r"^10\.[0-9]{4,9}/\S+$")
# The longest DOI a record may carry (rdm_record validates it): what the embedded target's
# DOI column keeps. Real DOIs are far shorter; a longer value is the record's error, not a
# write PostgreSQL refuses (or, past the state store's pid column, a failed transform stage).
MAX_DOI_LENGTH = 512


def bare_doi(value: str) -> str:
    """`value` without a resolver prefix, stripped and in lower case (not checked). A doi.org
    URL is percent-decoded (`https://doi.org/10.1234%2Fabc`, as DSpace and link resolvers
    write it): in a URL `%` is an escape, a DOI's own `%` is written `%25`. A bare DOI is
    taken as it is."""
    text = value.strip()
    if text.startswith("10."):  # bare already, as nearly every DOI a harvest sees
        return text.lower()
    match = _RESOLVER.match(text)
    if match is None:
        return text.lower()
    bare = text[match.end() :].strip()
    if "%" in bare and "doi.org/" in match.group(0).lower():
        bare = unquote(bare)
    return bare.lower()


# What a DOI copied out of a citation carries around it: enclosing brackets (`(10.1234/abc)`),
# a label (`DOI 10.1234/abc`, `doi: https://doi.org/10.1234/abc`) and the sentence's closing
# punctuation (`10.1234/abc.`).
_ENCLOSING = {"(": ")", "[": "]", "<": ">", "{": "}"}
_LABEL = re.compile(r"^doi\s*:?\s*(?=10\.|https?://|(?:dx\.|www\.)?doi\.org/)", re.I)
_CLOSING_PUNCTUATION = ".,;:"


def _without_citation_marks(value: str) -> str:
    """`value` without enclosing brackets and a `DOI` label before a DOI or its URL."""
    text = value.strip().rstrip(_CLOSING_PUNCTUATION)
    while len(text) > 1 and _ENCLOSING.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    # Only a text that begins with `d` or `D` can have a label: most DOIs skip the expression.
    return _LABEL.sub("", text) if text[:1] in ("d", "D") else text


def _without_closing_punctuation(doi: str) -> str:
    """`doi` without a sentence's closing punctuation, nor a `)` that closes no `(` of its own
    (SICI DOIs hold balanced parentheses: `10.1002/(SICI)1097-4571(199806)49:8<693::…>`).
    A registered DOI ends so only by mistake: the registration agencies advise against it."""
    while True:
        stripped = doi.rstrip(_CLOSING_PUNCTUATION)
        if stripped.endswith(")") and stripped.count(")") > stripped.count("("):
            stripped = stripped[:-1]
        if stripped == doi:
            return doi
        doi = stripped


def normalize_doi(value: str) -> str | None:
    """The bare, lower-cased DOI of `value` (bare, `doi:`, `DOI `, `info:doi/`, a doi.org URL or
    an eu-repo altIdentifier, also in brackets or followed by a sentence's punctuation), or
    None when it is no DOI. The one DOI reader of every import: a source's `10.1234/abc.` is
    the DOI `10.1234/abc`, so that a deposit of it is taken over, not duplicated."""
    bare = _without_closing_punctuation(bare_doi(_without_citation_marks(value)))
    return bare if DOI.match(bare) else None


def normal_doi(value: str | None) -> str | None:
    """The form a target stores and compares a pid in: a user's `https://doi.org/10.1234/ABC`
    is the harvested `10.1234/abc` (None for no value)."""
    if value is None:
        return None
    return bare_doi(value) or None
