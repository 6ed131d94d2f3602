"""The tuner: an Optuna study over the kernel variants, measured on a GPU (or replayed from
recorded parquet), every trial written to the results store."""

__version__ = "0.1.0"
