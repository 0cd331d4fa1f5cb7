"""The providers the AI gateway routes to: records, store and the ProviderService."""

from controlplane.providers.servicer import ProviderServicer

__all__ = ["ProviderServicer"]
