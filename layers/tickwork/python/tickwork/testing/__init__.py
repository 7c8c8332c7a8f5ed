"""In-memory fakes of the engine's ports, and the engine on them, for tests."""
