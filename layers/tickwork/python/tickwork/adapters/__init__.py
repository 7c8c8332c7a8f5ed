"""Adapters: the ports of ``tickwork.domain.ports`` over boto3 clients that are always injected."""
