#!/usr/bin/env bash
# One entry point for a fresh clone: sets everything up (venv from the lock file), then
#   ./run.sh demo    a real harvest of the shipped endpoint into the embedded target
#   ./run.sh test    the test suite
#   ./run.sh dev     the Dagster UI and daemon (dagster dev) on this project, with the
#                    demo's sample endpoint beside it
#   ./run.sh bench   the benchmark (records/s and peak RSS, see README)
#   ./run.sh cli …   any oai-pipeline command
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

setup() {
  if [ ! -x .venv/bin/oai-pipeline ] || [ requirements.lock -nt .venv/.installed ] \
     || [ pyproject.toml -nt .venv/.installed ]; then
    echo "setting up .venv from requirements.lock …" >&2
    "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r requirements.lock
    .venv/bin/python -m pip install -q --no-deps -e .
    touch .venv/.installed
  fi
  # The project's own bytecode, written now: with PYTHONDONTWRITEBYTECODE set (the VMs here
  # set it) no process wrote it, so every one (each test worker, each CLI child a crash test
  # forks, each Dagster step) compiled the modules it imports from source again, a sixth
  # of the crash tests' time. Up to date, this takes a tenth of a second.
  .venv/bin/python -m compileall -q oai_pipeline oai_pipeline_tests >&2 || true
  export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
  mkdir -p "$DAGSTER_HOME"
  if [ -n "${DAGSTER_PG_HOST:-}" ]; then
    cp dagster-postgres.yaml "$DAGSTER_HOME/dagster.yaml"
  elif [ ! -f "$DAGSTER_HOME/dagster.yaml" ]; then
    cp dagster.yaml "$DAGSTER_HOME/dagster.yaml"
  fi
}

command=${1:-help}
shift || true
case "$command" in
  demo) setup; exec .venv/bin/oai-pipeline demo "$@" ;;
  test) setup; exec .venv/bin/python -m pytest -q "$@" ;;
  dev)
    setup
    # The shipped endpoint at the port the demo's harvester `sample` harvests
    # (OAI_PIPELINE_SAMPLE_PORT, default 8765), served beside the UI for as long as it runs,
    # so that harvester's schedules and new materialisations work there too. dagster dev
    # takes this shell's process (exec): Ctrl-C and SIGTERM reach it, and the endpoint stops
    # when it ends. Started in the background from a script (`./run.sh dev &`, nohup), this
    # shell ignores SIGINT, and dagster dev maps SIGTERM to SIGINT's handler, so it would
    # ignore both: a bash script cannot undo that, so Python restores SIGINT first.
    .venv/bin/oai-pipeline sample-endpoint serve --exit-with-parent >/dev/null &
    exec .venv/bin/python -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' .venv/bin/dagster dev -w workspace.yaml "$@" ;;
  bench) setup; exec .venv/bin/python -m oai_pipeline_tests.benchmark "$@" ;;
  cli) setup; exec .venv/bin/oai-pipeline "$@" ;;
  *) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 2 ;;  # the comment block above, no code
esac
