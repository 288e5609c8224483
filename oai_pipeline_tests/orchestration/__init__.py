"""Orchestration: schedules, sensors, automation, range runs, concurrency, live Dagster."""
