"""Small OAI-PMH helpers for the endpoint tests: plain httpx + lxml, no project client."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from lxml import etree

OAI = "http://www.openarchives.org/OAI/2.0/"
NS = {"oai": OAI}


@dataclass
class Header:
    identifier: str
    datestamp: str
    deleted: bool
    set_specs: list[str]
    has_metadata: bool


@dataclass
class Sweep:
    """Everything a list sweep returned, page by page."""

    headers: list[Header] = field(default_factory=list)
    tokens: list[etree._Element] = field(default_factory=list)  # resumptionToken elements
    pages: int = 0

    @property
    def identifiers(self) -> set[str]:
        return {header.identifier for header in self.headers}


def get(base_url: str, **params: str) -> tuple[httpx.Response, etree._Element]:
    """One request; the response and its parsed (strict) root."""
    response = httpx.get(base_url, params=params, timeout=10)
    return response, etree.fromstring(response.content)


def error_codes(root: etree._Element) -> list[str]:
    return [error.get("code") for error in root.iterfind("oai:error", NS)]


def headers_of(root: etree._Element) -> list[Header]:
    found = []
    for header in root.iterfind(".//oai:header", NS):
        record = header.getparent()
        found.append(
            Header(
                identifier=header.findtext("oai:identifier", namespaces=NS),
                datestamp=header.findtext("oai:datestamp", namespaces=NS),
                deleted=header.get("status") == "deleted",
                set_specs=[s.text for s in header.iterfind("oai:setSpec", NS)],
                has_metadata=record.find("oai:metadata", NS) is not None,
            )
        )
    return found


def sweep(base_url: str, verb: str = "ListRecords", **params: str) -> Sweep:
    """Follow resumption tokens to the end; raises on any OAI error but noRecordsMatch."""
    result = Sweep()
    query = {"verb": verb, **params}
    with httpx.Client(timeout=10) as client:
        for _ in range(10_000):
            response = client.get(base_url, params=query)
            root = etree.fromstring(response.content)
            codes = error_codes(root)
            if codes == ["noRecordsMatch"]:
                return result
            assert not codes, (codes, response.text)
            result.pages += 1
            result.headers += headers_of(root)
            token = root.find(f"oai:{verb}/oai:resumptionToken", NS)
            if token is None:
                return result
            result.tokens.append(token)
            if not token.text:
                return result
            query = {"verb": verb, "resumptionToken": token.text}
    raise AssertionError("the list never ended")
