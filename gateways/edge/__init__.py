"""Edge proxy (L1): routes, auth plugins, per-tenant rate limits, request logs, admin API."""
