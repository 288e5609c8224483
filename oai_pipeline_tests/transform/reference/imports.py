"""The import registry: which function turns a metadata root element into record data.

Keyed by the root element's (namespace, local name), as the OAI-PMH metadata prefix alone
does not say what a source really sends. A user package adds a format with `register_import`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lxml import etree

from oai_pipeline_tests.transform.reference import datacite, dublin_core

ImportFunction = Callable[[etree._Element], dict[str, Any]]
"""Builds RDMRecord-shaped data from a metadata root; raises TransformFailure for one record."""

_IMPORTS: dict[tuple[str, str], ImportFunction] = {}


def register_import(namespace: str, root: str, function: ImportFunction) -> None:
    """Register (or replace) the import of metadata whose root is `{namespace}root`."""
    _IMPORTS[(namespace, root)] = function


def find_import(element: etree._Element) -> ImportFunction | None:
    """The import for this metadata root element, or None when no import knows it."""
    name = etree.QName(element)
    return _IMPORTS.get((name.namespace or "", name.localname))


register_import(datacite.KERNEL_4, "resource", datacite.import_resource)
register_import(datacite.KERNEL_3, "resource", datacite.import_resource)
register_import(datacite.OAI_DATACITE, "oai_datacite", datacite.import_oai_datacite)
register_import(dublin_core.OAI_DC, "dc", dublin_core.import_dc)
