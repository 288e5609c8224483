"""A second writer for the crash sweep: the embedded writer into a target database of its own.

Registered as the plug-in `mirror-service` (`install_mirror`), it writes where its home's
environment says (`MIRROR_DB_URL_ENV`), not where an option says: a home copied for a crash
point then writes its own mirror, not the template's (a URL in the harvester's options, which
live in the copied state store, would still name the template's).
"""

from __future__ import annotations

import os
from pathlib import Path

from oai_pipeline.targets.embedded.repository import EmbeddedRepository
from oai_pipeline.targets.embedded.writer import EmbeddedWriter
from oai_pipeline_tests.resume.crash_sweep import MIRROR, MIRROR_DB_URL_ENV


class MirrorWriter(EmbeddedWriter):
    @property
    def repository(self) -> EmbeddedRepository:
        if self._repository is None:
            self._repository = EmbeddedRepository(os.environ[MIRROR_DB_URL_ENV])
        return self._repository


def install_mirror(site: Path) -> Path:
    """The plug-in's entry point, installed in `site` (a child process's PYTHONPATH)."""
    from oai_pipeline_tests.support import install_plugin

    module = "crash_sweep_mirror"
    return install_plugin(
        site,
        module,
        "from oai_pipeline_tests.resume.mirror_writer import MirrorWriter  # noqa: F401\n",
        {"oai_pipeline.writers": {MIRROR: f"{module}:MirrorWriter"}},
    )
