"""The HTTP layer: pydantic models, dependencies and routes over service.store_index."""
