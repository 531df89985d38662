"""Line-by-line token counts of population prompts equal tiktoken's whole-text counts, and the
cut rule they rely on fails when a cut lands before whitespace or "/"."""

from __future__ import annotations

import random

import pytest

from clinlib.eval.population.answer import messages_for
from clinlib.eval.population.counts import count_by_lines, count_messages_by_lines
from clinlib.llm.tokens import count_tokens
from clinlib.tasks.population.render import RENDERINGS, render_group
from tests.tasks.population.test_population import ORDER, _group

MODELS = ("gpt-4", "gpt-4o")  # cl100k_base, o200k_base
HARD = [
    "",
    "one line",
    "trailing newline\n",
    "\n\nleading blank lines",
    "a)\n/b\nx.\n/usr/bin\nq)\n//x\nz;\n/",
    "foo\n\n bar\n\tbaz\n  indented\nend:\n\n\n",
    "=== Patient ID: 4711 ===\nTime: 2130-01-02\nSodium 140 mEq/L\n#12 7.1\n",
    "crlf line\r\nnext\r\n\r\nafter blank",
    "special <|endoftext|>\n<|endoftext|> text",
    "ünïcödé — 治疗\n🙂 emoji\n's contractions\n're",
    "numbers 1234567\n89\n-0.5 mg\n/ 3",
]


@pytest.mark.parametrize("model", MODELS)
def test_line_counts_equal_whole_counts_on_hard_text(model):
    for text in HARD:
        assert count_by_lines(text, model) == count_tokens(text, model), repr(text)


@pytest.mark.parametrize("model", MODELS)
def test_line_counts_equal_whole_counts_on_random_text(model):
    rng = random.Random(7)
    alphabet = ["\n", "\n\n", " ", "\t", "/", ")", ":", "a", "Zz", "12", "#3", "é", "=== ", "'s"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert count_by_lines(text, model) == count_tokens(text, model), repr(text)


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_line_counts_equal_whole_counts_on_rendered_prompts(rendering):
    context = render_group(_group(), ORDER, rendering).text
    msgs = messages_for("Find the k=3 patients who share a pathway.", context)
    for model in (*MODELS, "offline-reader:population-solver"):
        assert count_by_lines(context, model) == count_tokens(context, model)
        assert count_messages_by_lines(msgs, model) == count_tokens(msgs, model)


@pytest.mark.parametrize(
    ("text", "model"),
    [("foo\n\n bar", "gpt-4"), ("z;\n/", "gpt-4o")],  # a cut before " " / before "/"
)
def test_a_cut_at_every_newline_is_not_exact(text, model):
    i = text.index("\n") + 1
    naive = count_tokens(text[:i], model) + count_tokens(text[i:], model)
    assert naive != count_tokens(text, model)  # so the counter never cuts there
    assert count_by_lines(text, model) == count_tokens(text, model)
