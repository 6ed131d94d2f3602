"""A tuning run end to end: the request, its set-up and checks, the pipeline over its studies,
the fleet of processes, and the rows it writes."""
