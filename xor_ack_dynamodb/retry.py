"""The retry budget shared by every call that can lose a race or meet a transient error."""

from __future__ import annotations

from dataclasses import dataclass

import tenacity

from .errors import InvalidConfig

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by time.

    The wait before attempt *n* + 1 is uniform in ``[0, min(max_wait, initial_wait * 2**n)]``
    (AWS's "full jitter"). The budget ends at ``max_attempts`` attempts or once
    ``max_seconds`` have passed since the first, whichever comes first. Picklable.
    """

    max_attempts: int = 50
    max_seconds: float = 60.0
    initial_wait: float = 0.005
    max_wait: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidConfig(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.max_seconds <= 0 or self.initial_wait < 0 or self.max_wait < 0:
            raise InvalidConfig("max_seconds must be positive and waits non-negative")

    def retrying(self, retry: tenacity.retry_base) -> tenacity.Retrying:
        """A tenacity ``Retrying`` for this budget that retries when ``retry`` says so."""
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts) | tenacity.stop_after_delay(self.max_seconds),
            wait=tenacity.wait_random_exponential(multiplier=self.initial_wait, max=self.max_wait),
            retry=retry,
            reraise=False,
        )
