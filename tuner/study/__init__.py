"""The search: one Optuna study per shape and dtype, its space, samplers and storage, and the
rules that keep a fleet from measuring anything twice."""
