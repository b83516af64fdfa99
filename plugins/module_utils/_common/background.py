# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One call on a thread of its own, for reads whose latencies would otherwise add up.

A module run reads CloudStack and Kubernetes one after the other although neither answer
depends on the other; each read is one round trip to a different server, so running one while
the other runs takes the time of the longer, not of both. The result (or the exception) is
handed to whoever asks ``result()``, on that caller's thread, so errors surface where they did
when the reads ran in sequence.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Optional, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``fn()`` started now on a daemon thread; ``result()`` waits for it and returns or raises its outcome."""

    def __init__(self, fn: Callable[[], T], name: str = "background-read") -> None:
        self._fn = fn
        self._value: Optional[T] = None
        self._error: Optional[BaseException] = None
        # daemon: a read that hangs past its own timeout must not keep the module's process alive.
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to the caller's thread by result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


A = TypeVar("A")
B = TypeVar("B")


def side_by_side(here: Callable[[], A], there: Callable[[], B], name: str = "background-read") -> tuple[A, B]:
    """``here()`` on this thread while ``there()`` runs on another; both results, once both ended.

    Both always end before this returns or raises (``here``'s error first): what ``there`` made
    (a client holding credentials in temporary files) is never left behind half-made by an early raise.
    """
    other = Background(there, name=name)
    try:
        mine = here()
    except BaseException:
        try:
            other.result()
        except BaseException:  # here's error is the one to report; there's ended with it
            pass
        raise
    return mine, other.result()
