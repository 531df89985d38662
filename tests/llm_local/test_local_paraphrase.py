"""Question paraphrases by the real local model (llama.cpp serving SmolLM2-135M; paper
Fig. 2 stage 4), through the unchanged paraphrase checks. A module of its own: the rewrite
tests' module-scoped profile patches the build folder for their whole module."""

from __future__ import annotations

import pytest

from clinlib.data.build import load
from clinlib.eval.synthesis.calls import Calls
from clinlib.eval.synthesis.paraphrase import paraphrase_frame
from clinlib.tasks.paraphrase import PARAPHRASE_CHECKS, check_paraphrase, first_problem

pytestmark = pytest.mark.local


def test_paraphrases_by_the_local_model_are_checked(local_server_running, local_profile):
    name = local_server_running.backbone.name
    questions = load("questions", local_profile)
    calls = Calls(local_profile)
    new, log = paraphrase_frame(questions, name, calls=calls)
    assert len(log) == len(questions) and log["check"].isin(["", *PARAPHRASE_CHECKS]).all()
    for q, row in zip(questions.to_dict("records"), log.itertuples(), strict=True):
        # the verdict is the checks' own on the reply the model gave
        assert first_problem(check_paraphrase(q, row.paraphrase or None))[0] == row.check
    kept = log["accepted"].to_numpy()
    assert (
        new["question"].to_numpy()[kept] == log["paraphrase"].str.strip().to_numpy()[kept]
    ).all()
    assert (new["question"].to_numpy()[~kept] == questions["question"].to_numpy()[~kept]).all()
    print(
        f"\nlocal paraphrases kept: {int(kept.sum())}/{len(log)}; "
        f"template kept for: {log.loc[~kept, 'check'].value_counts().to_dict()}"
    )
    again = Calls(local_profile)
    paraphrase_frame(questions, name, calls=again)
    assert again.api_calls.get(name, 0) == 0
