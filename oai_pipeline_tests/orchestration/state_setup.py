"""Put harvesters and finished harvest runs into the state store, as earlier harvests left them."""

from __future__ import annotations

from oai_pipeline.oai.types import SweepCheckpoint
from oai_pipeline.pipeline.services import Services
from oai_pipeline.settings import Settings
from oai_pipeline_tests.support import register


def add_harvester(
    settings: Settings, harvester_id: str, *, enabled: bool = True, base_url: str = ""
) -> None:
    register(
        settings,
        base_url or f"https://{harvester_id}.example.org/oai",
        harvester_id=harvester_id,
        enabled=enabled,
    )


def add_finished_run(
    settings: Settings,
    harvester_id: str,
    response_date: str,
    status: str = "succeeded",
    dagster_run_id: str | None = None,
    *,
    window_from: str | None = None,
    window_until: str | None = None,
    cap_reached: bool = False,
    identifiers: list[str] | None = None,
) -> int:
    """A harvest run whose first page answered at `response_date`, finished as `status`."""
    with Services(settings) as services:
        state = services.state
        run_id = state.create_run(
            harvester_id,
            window_from=window_from,
            window_until=window_until,
            scale=None,
            max_records=10 if cap_reached else 0,
            options={"identifiers": identifiers or []},
            dagster_run_id=dagster_run_id,
        )
        state.save_checkpoint(
            run_id,
            SweepCheckpoint(
                from_=None,
                until=None,
                set_spec=None,
                metadata_prefix="oai_datacite",
                resumption_token=None,
                response_date=response_date,
            ),
        )
        state.save_response_date(run_id, response_date)
        if cap_reached:
            state.set_cap_reached(run_id)
        if status != "running":
            state.finish_run(run_id, status)  # type: ignore[arg-type]
        return run_id
