"""Strata's gateways: edge proxy (L1), AI gateway (L2), agent gateway (L3)."""
