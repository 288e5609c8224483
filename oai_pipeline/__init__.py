"""oai-pipeline: harvest OAI-PMH repositories into a target repository and keep it in sync."""

__version__ = "0.3.1"
