"""The HTTP layer: pydantic models, dependencies and routes over results.index."""
