"""The four stages of a harvest as plain functions over Parquet partitions (no Dagster here)."""
