"""Clients for the real stores: Redis protocol (kv), ClickHouse (analytics), Milvus (vectors)."""
