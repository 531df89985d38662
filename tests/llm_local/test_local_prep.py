"""The matched-prep path with the real local model (paper Appendix G.5): the answering
backbone builds its own Mem0 / A-Mem / llm-summary / core-memory constructions, through the unchanged
harness, on one patient of the quick profile.

What is asserted is the path, not the quality: a 135M model writes a summary, and its
Mem0 / A-Mem JSON is either usable or recorded as a warning; never an error or a silent
fallback to the rule-based constructor.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.eval.harness import runner
from clinlib.llm import ResponseCache, default_cache_path
from clinlib.strategies.amem import EVOLUTION_PROMPT, NOTE_CONSTRUCTION_PROMPT
from clinlib.strategies.construction import load_artifacts
from clinlib.strategies.core_memory import CORE_MEMORY_PROMPT
from clinlib.strategies.mem0 import FACT_EXTRACTION_PROMPT
from clinlib.strategies.summary import SUMMARY_PROMPT

pytestmark = pytest.mark.local

PATIENT = 10000413  # two visits; asked T1 (conftest.PATIENTS)
N_VISITS = 2
# The prep calls each construction makes for a two-visit patient, by system prompt: a
# summary in one call (the dialogue fits the window); Mem0 one fact extraction per visit (its
# memory-update calls depend on what the model extracts); A-Mem one note per visit and one
# evolution decision for the second note.
PREP_CALLS = {
    "llm-summary": {SUMMARY_PROMPT.format(budget=500)[:60]: 1},
    "mem0": {FACT_EXTRACTION_PROMPT[:60]: N_VISITS},
    "a-mem": {NOTE_CONSTRUCTION_PROMPT[:60]: N_VISITS, EVOLUTION_PROMPT[:60]: N_VISITS - 1},
    # core-memory: one rewrite of the pinned block per visit (issue 30 §4)
    "core-memory": {CORE_MEMORY_PROMPT[:60]: N_VISITS},
}


def _cache_rows(profile: str) -> pd.DataFrame:
    path = default_cache_path(profile)
    if not path.exists():
        return pd.DataFrame({"request": [], "backbone": []})
    with ResponseCache(path, readonly=True) as cache:
        return cache.to_frame(include_request=True)


def _lead_prompts(frame: pd.DataFrame) -> list[str]:
    """Each request's instruction: its system message, or its first message when it has none
    (A-Mem's evolution prompt is sent as a single user message)."""
    out = []
    for request in frame["request"]:
        messages = json.loads(request)["messages"]
        system = [m["content"] for m in messages if m["role"] == "system"]
        out.append(system[0] if system else messages[0]["content"])
    return out


@pytest.mark.parametrize("strategy", ["llm-summary", "mem0", "a-mem", "core-memory"])
def test_matched_prep_builds_the_construction_with_the_real_model(
    strategy, local_server_running, local_profile
):
    bb = local_server_running.backbone
    before = len(_cache_rows(local_profile))  # one cache for the four cases
    cells = runner.run(runner.RunSpec(local_profile, [strategy], [bb], prep="matched", tasks=["T1"], limit=1),
                       runner.RunOptions(progress=False))  # fmt: skip
    assert cells["prep_model"].tolist() == [bb.name]
    assert int(cells["errors"].sum()) == 0 and int(cells["new_predictions"].sum()) == 1
    arts = load_artifacts(strategy, local_profile, prep=bb.name, subjects=[PATIENT])
    art = arts[PATIENT]
    assert art.prep_model == bb.name  # never mistaken for a rule-based artifact
    made = _cache_rows(local_profile).iloc[before:]
    assert (made["backbone"] == bb.name).all()  # prep calls and the answer: the local model
    systems = _lead_prompts(made)
    for prefix, n in PREP_CALLS[strategy].items():
        assert sum(s.startswith(prefix) for s in systems) == n, prefix
    if strategy == "llm-summary":
        assert art.data["summary"].strip() and art.data["token_model"] == bb.model
    else:
        warnings = art.data.get("warnings", [])
        items = art.data.get("memories") or art.data.get("notes") or art.data.get("core") or []
        assert items or warnings, "neither memories nor a recorded reason for their absence"
        if strategy == "core-memory":  # its build cost, metered per patient
            assert art.prep_usage["requests"] == N_VISITS and art.prep_usage["input_tokens"] > 0
