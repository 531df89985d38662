"""Progress of long stages: every stage longer than a few seconds shows it.

One helper for every stage: on a terminal a tqdm bar; otherwise (a log file, a CI job, a
pipe) one plain line every :data:`EVERY_S` seconds with the counts, the rate and the time
left, plus a closing line, so a log shows a stage is alive without carriage-return noise.

Usage::

    with progress(total=len(jobs), desc="strategies post", unit="dialogue") as bar:
        for job in jobs:
            ...
            bar.update(1)
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from tqdm import tqdm

# Seconds between two log lines when the stream is not a terminal ($CLINTRACE_PROGRESS_EVERY).
EVERY_S = 15.0
EVERY_ENV = "CLINTRACE_PROGRESS_EVERY"


def _every() -> float:
    raw = os.environ.get(EVERY_ENV)
    try:
        return float(raw) if raw else EVERY_S
    except ValueError:
        return EVERY_S


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class LineProgress:
    """A tqdm-like counter that writes a line with counts and rate every ``every`` seconds.

    Args:
        total: expected units (None: unknown, no percentage or time left).
        desc: what is counted, e.g. ``"evaluate-offline [1/2]"``.
        unit: the unit's name.
        stream: where lines go (default: stderr).
        every: seconds between lines.
        clock: the time source (tests pass a fake one).
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        stream: IO[str] | None = None,
        every: float | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = stream if stream is not None else sys.stderr
        self.every = _every() if every is None else every
        self.clock = clock
        self.n = 0
        self.postfix = ""
        self.start = self._last = clock()
        self._shown: int | None = None  # the count of the last line written
        self.closed = False

    def line(self) -> str:
        """The current status line: ``desc: n/total units (pct) rate/s, elapsed, left``."""
        elapsed = self.clock() - self.start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if self.total:
            done = f"{self.n:,}/{self.total:,} {self.unit} ({100 * self.n / self.total:.0f}%)"
        else:
            done = f"{self.n:,} {self.unit}"
        text = f"{self.desc}: {done}, {rate:,.1f} {self.unit}/s, {_duration(elapsed)} elapsed"
        if self.total and rate > 0 and self.n < self.total:
            text += f", ~{_duration((self.total - self.n) / rate)} left"
        return text + (f" [{self.postfix}]" if self.postfix else "")

    def _emit(self) -> None:
        print(self.line(), file=self.stream, flush=True)
        self._last = self.clock()
        self._shown = self.n

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units; write a line if ``every`` seconds passed since the last."""
        self.n += n
        if self.clock() - self._last >= self.every:
            self._emit()

    def set_postfix(self, refresh: bool = False, **values: Any) -> None:
        """Extra ``key=value`` fields shown at the end of the next line."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        """Write the final line (once; not when the last line already showed the count, nor
        for a counter that never counted anything, e.g. a resumed run with nothing left)."""
        if not self.closed:
            self.closed = True
            if self._shown != self.n and (self.n or self._shown is not None):
                self._emit()


class _Silent:
    """The disabled counter: same methods, no output."""

    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, refresh: bool = False, **values: Any) -> None:
        pass

    def close(self) -> None:
        pass


def is_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


def in_notebook(stream: IO[str]) -> bool:
    """Whether ``stream`` is a Jupyter kernel's output stream: a notebook shows results, and a
    status line written there would be saved with the notebook's outputs."""
    return type(stream).__module__.startswith("ipykernel")


def make_progress(
    total: int | None,
    desc: str,
    unit: str = "it",
    *,
    enabled: bool = True,
    stream: IO[str] | None = None,
    position: int | None = None,
) -> Any:
    """A progress counter: tqdm on a terminal, :class:`LineProgress` elsewhere, or a silent
    one when not ``enabled``. Every kind has ``update(n)``, ``set_postfix(**kv)``, ``close()``.

    Args:
        total: expected units (None: unknown).
        desc: label of the bar / line.
        unit: unit name.
        enabled: False gives the silent counter.
        stream: where to write (default: stderr).
        position: tqdm row, for bars of several processes sharing one terminal.
    """
    stream = stream if stream is not None else sys.stderr
    if not enabled or in_notebook(stream):
        return _Silent()
    if is_terminal(stream):
        return tqdm(
            total=total, desc=desc, unit=unit, file=stream, position=position, dynamic_ncols=True
        )
    return LineProgress(total, desc, unit, stream=stream)


@contextmanager
def progress(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Iterator[Any]:
    """:func:`make_progress` as a context manager that closes the counter on exit."""
    bar = make_progress(total, desc, unit, **kwargs)
    try:
        yield bar
    finally:
        bar.close()


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence the progress bars of the model libraries (huggingface_hub downloads,
    transformers' "Loading weights" bar, which a notebook shows as a ``FloatProgress`` widget)
    while a model loads, and restore their state after: a stage's progress is the kit's own
    (:func:`progress`), and a saved notebook holds no library bar."""
    restore = []
    try:
        import huggingface_hub.utils as hub

        if not hub.are_progress_bars_disabled():
            hub.disable_progress_bars()
            restore.append(hub.enable_progress_bars)
    except ImportError:
        pass
    # transformers only when already imported: importing it here would cost seconds and make
    # the static encoder (model2vec) depend on it; its loaders import it before they load
    if "transformers" in sys.modules:
        import transformers.utils.logging as tlog

        if tlog.is_progress_bar_enabled():
            tlog.disable_progress_bar()
            restore.append(tlog.enable_progress_bar)
    try:
        yield
    finally:
        for enable in restore:
            enable()


# what a progress bar leaves in a saved notebook: tqdm's text bar ("Loading weights:  0%|  |
# 0/103"), or the widget tqdm.auto shows in Jupyter, whose saved text is its FloatProgress /
# IntProgress (alone or inside the HBox tqdm builds), or the kit's own status line off a
# terminal (:class:`LineProgress`: "desc: 3/3 patient (100%), 7.0 patient/s, 0s elapsed"); other
# widgets (a Dropdown explorer) are not
_BAR_TEXT = re.compile(
    r"\d+%\|[^|\n]*\|\s*\d+/\d+|(?:Float|Int)Progress\("
    r"|\d[\d,]*/\d[\d,]* \S+ \(\d+%\), [\d.,]+ \S+/s, \S+ elapsed"
)


def progress_outputs(notebook: dict) -> list[tuple[int, str]]:
    """(cell index, excerpt) of every progress bar in an executed notebook's saved outputs."""
    found = []
    for i, cell in enumerate(notebook.get("cells", [])):
        for out in cell.get("outputs", []):
            text = out.get("text", "") or out.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else str(text)
            m = _BAR_TEXT.search(text)
            if m:
                found.append((i, text[m.start() : m.start() + 60]))
    return found
