"""The execution-engine fixtures (moto tables and queues, a fake clock, a loopback receiver) shared here."""

from tests.integration.conftest import Engine, engine, receiver

__all__ = ["Engine", "engine", "receiver"]
