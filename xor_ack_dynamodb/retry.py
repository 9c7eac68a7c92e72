"""The retry budget shared by every call that can lose a race or meet a transient error."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import tenacity

from .errors import InvalidConfig

__all__ = ["RetryPolicy"]

#: Bounds of the derived per-request timeouts: never so short that a busy local backend
#: (or DynamoDB Local's first request, a JVM warming up) times out, never botocore's 60 s.
_MIN_TIMEOUT = 0.5
_MAX_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by time, and the
    timeouts of the HTTP requests made within that budget.

    The wait before attempt *n* + 1 is uniform in ``[0, min(max_wait, initial_wait * 2**n)]``
    (AWS's "full jitter"). The budget ends after ``max_attempts`` attempts, or before a
    wait or an attempt that would end past ``max_seconds`` since the first attempt began
    (an attempt is assumed to last as long as the attempts before it did on average), so
    a call returns or raises near ``max_seconds``, never minutes after it.

    The HTTP fields apply to the clients the library builds
    (:func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`, ``client_for(config)``, a
    tracker built without ``client=``); a client you pass in keeps its own botocore settings.

    :param max_attempts: attempts of one library call, at least 1.
    :param max_seconds: the time budget of one library call, positive.
    :param initial_wait: the first backoff ceiling in seconds, non-negative.
    :param max_wait: the largest backoff ceiling in seconds, non-negative.
    :param connect_timeout: seconds one HTTP request may take to connect; ``None``
        (default) derives it, see :meth:`timeouts`.
    :param read_timeout: seconds one HTTP request may wait on each read of its response;
        ``None`` (default) derives it, see :meth:`timeouts`.
    :param http_attempts: botocore's total attempts per request (its ``standard`` retry
        mode: resends after connection errors, timeouts, 5xx and throttling), at least 1.

    Frozen and picklable. Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for a
    value out of range.
    """

    max_attempts: int = 50
    max_seconds: float = 60.0
    initial_wait: float = 0.005
    max_wait: float = 0.5
    connect_timeout: float | None = None
    read_timeout: float | None = None
    http_attempts: int = 3

    def __post_init__(self) -> None:
        if not _integer(self.max_attempts) or self.max_attempts < 1:
            raise InvalidConfig(f"max_attempts must be an int of at least 1, got {self.max_attempts!r}")
        if not _finite(self.max_seconds) or self.max_seconds <= 0:
            raise InvalidConfig(f"max_seconds must be a positive number, got {self.max_seconds!r}")
        if not (_finite(self.initial_wait) and _finite(self.max_wait)):
            raise InvalidConfig("initial_wait and max_wait must be numbers")
        if self.initial_wait < 0 or self.max_wait < 0:
            raise InvalidConfig(f"waits must be non-negative, got {self.initial_wait!r}, {self.max_wait!r}")
        for name in ("connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if value is not None and (not _finite(value) or value <= 0):
                raise InvalidConfig(f"{name} must be a positive number of seconds or None, got {value!r}")
        if not _integer(self.http_attempts) or self.http_attempts < 1:
            raise InvalidConfig(f"http_attempts must be an int of at least 1, got {self.http_attempts!r}")

    def timeouts(self) -> tuple[float, float]:
        """``(connect_timeout, read_timeout)`` in seconds, as given or derived.

        A derived timeout is ``max_seconds / (4 * http_attempts)``, kept within 0.5 and
        5 seconds: one request that meets a dead endpoint on every one of its
        ``http_attempts`` gives up within about a quarter of the budget, so the library's
        own retries still fit in it. With the defaults (60 s, 3 attempts) both are 5 s
        (botocore's own default is 60 s each).
        """
        derived = min(_MAX_TIMEOUT, max(_MIN_TIMEOUT, self.max_seconds / (4 * self.http_attempts)))
        connect = self.connect_timeout if self.connect_timeout is not None else derived
        read = self.read_timeout if self.read_timeout is not None else derived
        return connect, read

    def retrying(self, retry: tenacity.retry_base) -> tenacity.Retrying:
        """A tenacity ``Retrying`` for this budget that retries when ``retry`` says so.

        It stops after ``max_attempts``, or instead of a wait, or of an attempt, that
        would end past ``max_seconds``; the last outcome is then raised inside
        ``tenacity.RetryError``."""
        return tenacity.Retrying(**self._budget(retry))

    def async_retrying(self, retry: tenacity.retry_base) -> tenacity.AsyncRetrying:
        """:meth:`retrying` for coroutines: the same budget, waiting with ``asyncio.sleep``."""
        return tenacity.AsyncRetrying(**self._budget(retry))

    def _budget(self, retry: tenacity.retry_base) -> dict[str, Any]:
        return {
            "stop": tenacity.stop_after_attempt(self.max_attempts) | _StopBeforeDeadline(self.max_seconds),
            "wait": tenacity.wait_random_exponential(multiplier=self.initial_wait, max=self.max_wait),
            "retry": retry,
            "reraise": False,
        }


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _StopBeforeDeadline(tenacity.stop.stop_base):
    """Stop when the next wait plus one more attempt would end past ``deadline`` seconds
    after the first attempt began.

    tenacity's ``stop_before_delay`` looks at the wait only: an attempt that starts a
    millisecond before the deadline may still run for its full length (a request waiting
    out its timeouts). The next attempt's length is estimated, with no state, as the mean
    length of the attempts so far (time since start minus time slept, over the attempt
    count): a lost race costs milliseconds and keeps nearly the whole budget, a request
    that times out costs its timeouts and is not started unless they fit.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        elapsed = retry_state.seconds_since_start
        if elapsed is None:  # tenacity sets it before asking; be safe if that changes
            return False
        mean_attempt = max(0.0, elapsed - retry_state.idle_for) / retry_state.attempt_number
        return elapsed + retry_state.upcoming_sleep + mean_attempt >= self.deadline
