import warnings

# Before any module of this package is imported: they use Dagster APIs marked beta or preview
# (dynamic partitions in a multi-partition, pools, automation conditions), and every code
# location load, run worker and sensor tick would print the warnings again.
warnings.filterwarnings("ignore", message=".*currently in (beta|preview).*")
