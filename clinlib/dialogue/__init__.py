"""Stage 2 (paper §3, Fig. 2 stage 3): dialogue synthesis, the length budget, the verifier.

Synthesis (driver :mod:`.synth`): :mod:`.templates` (phrasing), :mod:`.selection` (input
checks, unusable and missed events), :mod:`.turns` (a visit's turns), :mod:`.budget` and
:mod:`.fitting` (the length budget), :mod:`.rewrite` (optional LLM rewriter), :mod:`.render`
(text), :mod:`.stats` (corpus reports). Verifier (driver :mod:`.verify`): :mod:`.matching`
(tags, boundary-aware matching), :mod:`.fields` (what an event must say), :mod:`.checks` (the
HARD and SOFT checks). :mod:`.viewer` renders dialogues for notebook 02 and its app.
"""
