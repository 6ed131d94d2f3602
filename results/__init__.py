"""The results store: one pyarrow schema for a trial row, atomic parquet writes, a loader
that skips what it cannot read, and the selection of the best configuration."""
