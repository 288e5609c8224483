"""The import registry: which function turns a metadata root element into record data.

Keyed by the root element's (namespace, local name), as the OAI-PMH metadata prefix alone
does not say what a source really sends. A user package adds a format with `register_import`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lxml import etree

from oai_pipeline.transform import arxiv, datacite, dublin_core, marc, openaire

ImportFunction = Callable[[etree._Element], dict[str, Any]]
"""Builds RDMRecord-shaped data from a metadata root; raises TransformFailure for one record."""

_IMPORTS: dict[tuple[str, str], ImportFunction] = {}
_NAMES: dict[tuple[str, str], str] = {}


def register_import(
    namespace: str, root: str, function: ImportFunction, name: str | None = None
) -> None:
    """Register (or replace) the import of metadata whose root is `{namespace}root`; `name`
    (e.g. the usual metadata prefix) is how error messages list the format."""
    _IMPORTS[(namespace, root)] = function
    if name is not None:
        _NAMES[(namespace, root)] = name
    else:
        _NAMES.pop((namespace, root), None)


def supported_formats() -> list[str]:
    """The formats there is an import for, as an operator names them (for error messages)."""
    names = (_NAMES.get(key) or f"{{{key[0]}}}{key[1]}" for key in _IMPORTS)
    return list(dict.fromkeys(names))


def find_import(element: etree._Element) -> ImportFunction | None:
    """The import for this metadata root element, or None when no import knows it."""
    tag = element.tag  # `{namespace}local` or `local`: split as etree.QName would, but cheaper
    if tag[:1] == "{":
        namespace, _, local = tag[1:].partition("}")
        return _IMPORTS.get((namespace, local))
    return _IMPORTS.get(("", tag))


# In the order an unknown-root error lists them: the format every source offers first.
_DATACITE = "datacite (a DataCite kernel-2/3/4 resource)"
register_import(dublin_core.OAI_DC, "dc", dublin_core.import_dc, "oai_dc")
register_import(datacite.OAI_DATACITE, "oai_datacite", datacite.import_oai_datacite, "oai_datacite")
register_import(
    datacite.OAI_DATACITE_1_0, "oai_datacite", datacite.import_oai_datacite, "oai_datacite"
)
register_import(datacite.KERNEL_4, "resource", datacite.import_resource, _DATACITE)
register_import(datacite.KERNEL_3, "resource", datacite.import_resource, _DATACITE)
register_import(datacite.KERNEL_2_2, "resource", datacite.import_resource, _DATACITE)
register_import(datacite.KERNEL_2_1, "resource", datacite.import_resource, _DATACITE)
register_import(openaire.OAIRE, "resource", openaire.import_openaire, "oai_openaire")
register_import(marc.MARC, "record", marc.import_marc, "marcxml")
register_import(arxiv.ARXIV, "arXiv", arxiv.import_arxiv, "arXiv")
register_import(arxiv.ARXIV_RAW, "arXivRaw", arxiv.import_arxiv_raw, "arXivRaw")
