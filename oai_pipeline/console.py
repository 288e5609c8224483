"""The `oai-pipeline` console script. Loading the command line (click, pydantic; a command's
own module, with SQLAlchemy and the rest, is imported as it runs, under one_line_errors) takes
a moment; a Ctrl-C meanwhile stops it as one during a command does, not with a traceback of
the import that was running. This module imports only the standard library for that."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from importlib import import_module


def error_document(message: str, kind: str) -> str:
    """An error as `--json` prints it on stdout, the same for every command."""
    return json.dumps({"error": message, "type": kind}, sort_keys=True)


def json_flag_given(args: Sequence[str]) -> bool:
    """`--json` among the arguments, before any `--` (after it, it is a value)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def main() -> None:
    try:
        command_line = import_module("oai_pipeline.cli").main
    except KeyboardInterrupt:
        if json_flag_given(sys.argv[1:]):
            print(error_document("interrupted", "interrupted"))
        print("Error: interrupted", file=sys.stderr)
        raise SystemExit(130) from None  # as one_line_errors exits on Ctrl-C
    command_line()
