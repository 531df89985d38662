"""clinlib.core.progress: a tqdm bar on a terminal, periodic plain lines in a log."""

from __future__ import annotations

import io

from clinlib.core import progress as P


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_mode_writes_a_line_only_every_interval_with_counts_rate_and_time_left():
    clock, out = FakeClock(), io.StringIO()
    bar = P.LineProgress(200, "strategies post", "dialogue", stream=out, every=10, clock=clock)
    clock.t += 4
    bar.update(20)  # 4 s after the start: under the interval, nothing written
    assert out.getvalue() == ""
    clock.t += 6
    bar.update(30)  # 10 s: 50 of 200 at 5/s -> 150 left at 5/s = 30 s
    assert out.getvalue() == (
        "strategies post: 50/200 dialogue (25%), 5.0 dialogue/s, 10s elapsed, ~30s left\n"
    )
    clock.t += 3
    bar.update(10)  # 3 s after the last line: nothing
    assert out.getvalue().count("\n") == 1
    clock.t += 107  # 120 s in: 60/200 at 0.5/s -> 140 left = 280 s
    bar.set_postfix(errors=2)
    bar.update(0)
    assert out.getvalue().splitlines()[-1] == (
        "strategies post: 60/200 dialogue (30%), 0.5 dialogue/s, 2m00s elapsed, ~4m40s left "
        "[errors=2]"
    )


def test_line_mode_close_writes_the_final_line_once():
    clock, out = FakeClock(), io.StringIO()
    bar = P.LineProgress(None, "questions", "q", stream=out, every=60, clock=clock)
    bar.update(7)
    clock.t += 2
    bar.close()
    bar.close()
    assert out.getvalue() == "questions: 7 q, 3.5 q/s, 2s elapsed\n"


def test_line_mode_says_nothing_when_nothing_was_counted():
    out = io.StringIO()
    with P.progress(0, "run quick", "q", stream=out):
        pass
    assert out.getvalue() == ""


def test_line_mode_close_does_not_repeat_a_line_showing_the_same_count():
    clock, out = FakeClock(), io.StringIO()
    bar = P.LineProgress(4, "x", stream=out, every=1, clock=clock)
    clock.t += 1
    bar.update(4)
    bar.close()
    assert out.getvalue().count("\n") == 1


def test_not_a_terminal_gives_plain_lines_and_a_terminal_gives_tqdm():
    from tqdm import tqdm

    log = io.StringIO()
    with P.progress(3, "run quick", "q", stream=log) as bar:
        assert isinstance(bar, P.LineProgress)
        bar.update(3)
    assert log.getvalue().startswith("run quick: 3/3 q (100%)")
    assert "\r" not in log.getvalue()

    tty = TTY()
    with P.progress(3, "run quick", "q", stream=tty) as bar:
        assert isinstance(bar, tqdm)
        bar.update(3)
    assert "\r" in tty.getvalue() and "3/3" in tty.getvalue()


def test_disabled_progress_writes_nothing_but_still_counts():
    out = TTY()
    with P.progress(5, "x", enabled=False, stream=out) as bar:
        bar.update(2)
        bar.set_postfix(a=1)
    assert out.getvalue() == "" and bar.n == 2


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.setenv(P.EVERY_ENV, "2.5")
    assert P.LineProgress(1, "x", stream=io.StringIO()).every == 2.5
    monkeypatch.setenv(P.EVERY_ENV, "soon")
    assert P.LineProgress(1, "x", stream=io.StringIO()).every == P.EVERY_S


def test_a_closed_or_odd_stream_is_not_a_terminal():
    closed = io.StringIO()
    closed.close()
    assert not P.is_terminal(closed)
    assert not P.is_terminal(object())


def test_quiet_libraries_silences_model_loading_bars_and_restores_them():
    # transformers' "Loading weights" bar and huggingface_hub's download bars (a notebook
    # saves them as FloatProgress widgets) are off while a model loads, and back on after
    import huggingface_hub.utils as hub
    import transformers.utils.logging as tlog

    from clinlib.core.progress import quiet_libraries

    # from a known state: another test in this process may have left the bars off
    tlog.enable_progress_bar()
    hub.enable_progress_bars()
    with quiet_libraries():
        assert not tlog.is_progress_bar_enabled() and hub.are_progress_bars_disabled()
    assert tlog.is_progress_bar_enabled() and not hub.are_progress_bars_disabled()
    # bars a caller had turned off stay off
    tlog.disable_progress_bar()
    with quiet_libraries():
        pass
    assert not tlog.is_progress_bar_enabled()
    tlog.enable_progress_bar()


def test_loading_the_transformer_encoder_prints_no_bar(capfd, tmp_path):
    from clinlib.strategies.embed import TRANSFORMER_MODEL, Embedder, resolve_model_path

    embedder = Embedder(TRANSFORMER_MODEL, store_dir=tmp_path)
    embedder._load_new(resolve_model_path(TRANSFORMER_MODEL))  # a fresh load, not the cache
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "%|" not in err


def test_progress_outputs_finds_bars_in_saved_outputs():
    from clinlib.core.progress import progress_outputs

    nb = {
        "cells": [
            {
                "cell_type": "code",
                "outputs": [
                    {
                        "name": "stderr",
                        "output_type": "stream",
                        "text": ["Loading weights:   0%|          | 0/103 [00:00<?, ?it/s]"],
                    }
                ],
            },
            {
                "cell_type": "code",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "data": {
                            "text/plain": "FloatProgress(value=0.0, max=103.0)",
                            "application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                        },
                    }
                ],
            },
            {
                "cell_type": "code",
                "outputs": [
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": "accuracy 97% | 12/20 patients",
                    }
                ],
            },
            {"cell_type": "markdown", "source": "0%| | 0/103"},
        ]
    }
    explorer = {
        "output_type": "display_data",
        "data": {
            "text/plain": "HBox(children=(Dropdown(description='task', options=('T1',)),))",
            "application/vnd.jupyter.widget-view+json": {"model_id": "y"},
        },
    }
    nb["cells"].append({"cell_type": "code", "outputs": [explorer]})  # a widget, not a bar
    assert [i for i, _ in progress_outputs(nb)] == [0, 1]  # a plain "97% | 12/20" is no bar
    assert progress_outputs({"cells": nb["cells"][2:]}) == []


def test_progress_outputs_finds_the_kits_own_status_line():
    from clinlib.core.progress import LineProgress, progress_outputs

    stream = io.StringIO()
    bar = LineProgress(3, "dialogues", "patient", stream=stream)
    bar.update(3)
    bar.close()
    line = stream.getvalue()
    assert "3/3 patient (100%)" in line  # the format the saved 02 output held on paper
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "text": line}]}
    assert [i for i, _ in progress_outputs({"cells": [cell]})] == [0]
    plain = {"cell_type": "code", "outputs": [{"output_type": "stream", "text": "3/3 done (100%)"}]}
    assert progress_outputs({"cells": [plain]}) == []


def test_no_progress_in_a_notebook_kernel():
    class OutStream(io.StringIO):  # what ipykernel puts in sys.stderr, by its module's name
        pass

    OutStream.__module__ = "ipykernel.iostream"
    stream = OutStream()
    bar = P.make_progress(3, "dialogues", "patient", stream=stream)
    bar.update(3)
    bar.close()
    assert stream.getvalue() == ""
    shown = io.StringIO()
    line = P.make_progress(3, "dialogues", "patient", stream=shown)
    line.update(3)
    line.close()
    assert "3/3 patient" in shown.getvalue()  # the same call off a notebook writes its line
