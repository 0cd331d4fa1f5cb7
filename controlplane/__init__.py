"""Control plane: tenants, keys, limits, analytics, providers, agent registry, STS."""
