"""PII redaction for the AI gateway (README.md beside this file)."""

from gateways.ai.pii.redactor import Redactor, default_redactor

__all__ = ["Redactor", "default_redactor"]
