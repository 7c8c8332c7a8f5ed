"""The HTTP API: the Powertools REST resolver, its schemas, and the one place HTTP statuses are chosen."""
