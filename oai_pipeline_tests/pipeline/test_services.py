from __future__ import annotations

from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings


def _new_run(services: Services) -> int:
    return services.state.create_run(
        "h", window_from=None, window_until=None, scale=None, max_records=0, options={}
    )


def test_an_error_fails_the_run_an_interrupt_stops_it(settings: Settings) -> None:
    with Services(settings) as services:
        failed, stopped = _new_run(services), _new_run(services)

        services.record_failure(failed, ValueError("bad page"))
        services.record_failure(stopped, KeyboardInterrupt())

        assert services.state.get_run(failed)["status"] == "failed"
        assert services.state.get_run(failed)["error"] == "ValueError: bad page"
        assert services.state.get_run(stopped)["status"] == "stopped"
        # before: `KeyboardInterrupt: `, which `status` showed as `stopped (KeyboardInterrupt: )`
        assert services.state.get_run(stopped)["error"] == "KeyboardInterrupt (Ctrl-C)"
        # both are picked up again by the next attempt of the same window
        assert services.state.find_resumable_run("h", None, None)["id"] == stopped
