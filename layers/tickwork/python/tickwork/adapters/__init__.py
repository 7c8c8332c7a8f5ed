"""Adapters: the ports of ``tickwork.app.ports`` over boto3 clients that are always injected."""
