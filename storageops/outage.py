"""What counts as an outage of the database or the broker (503), not a fault of the code (500)."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError


def is_outage(exc: BaseException) -> str | None:
    """'database' or 'broker' when exc says that one does not answer, else None."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return "database"
    if isinstance(exc, BrokerError):
        return "broker"
    return None
