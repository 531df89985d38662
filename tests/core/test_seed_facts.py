"""The seed-facts table (clinlib.core.seed_facts) against the seeds' text.

The seeds' flattened text is not shipped with the kit; the passage tests read it from
``$CLINTRACE_SEEDS_DIR``, else the project's ``shared/seeds`` beside the clone (where CI lays
it) or under ``/work``, and skip with that reason when none exists. The value-in-passage and section-citation tests need only
the table and always run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from clinlib.core import seed_facts as sf
from clinlib.core import seed_sections as ss

REPO = Path(__file__).resolve().parents[2]


def _seeds_dir() -> Path:
    if os.environ.get("CLINTRACE_SEEDS_DIR"):
        return Path(os.environ["CLINTRACE_SEEDS_DIR"])
    candidates = [REPO.parent / "shared" / "seeds", Path("/work/shared/seeds")]
    return next((c for c in candidates if c.is_dir()), candidates[0])


SEEDS_DIR = _seeds_dir()


def _ws(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _compact(text: str) -> str:
    """What a value is looked up in: no whitespace, no LaTeX braces, ASCII minus."""
    return re.sub(r"[\s{}]", "", text).replace("−", "-").replace("\\%", "%")


def _seed_text(stem: str) -> str:
    path = SEEDS_DIR / f"{stem}.txt"
    if not path.exists():
        pytest.skip(f"seed text {path} not present (set CLINTRACE_SEEDS_DIR)")
    return _ws(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("key", sorted(sf.SEED_FACTS))
def test_passage_is_in_the_seed(key):
    fact = sf.SEED_FACTS[key]
    assert _ws(fact.passage) in _seed_text(fact.seed), f"{key}: passage not in {fact.seed}"


@pytest.mark.parametrize("key", sorted(sf.SEED_FACTS))
def test_every_value_is_in_its_passage(key):
    fact = sf.SEED_FACTS[key]
    assert fact.seed in sf.SEEDS
    for value in fact.values:
        assert _compact(value) in _compact(fact.passage), f"{key}: {value!r} not in passage"


def test_value_check_fails_on_a_wrong_value():
    # the check the table relies on is not vacuous: 6,272 is not in the 6,271 passage
    fact = sf.seed_fact("ctb_questions")
    assert _compact("6,272") not in _compact(fact.passage)


def test_a_planted_passage_is_not_found():
    text = _seed_text("clintracebench")
    assert _ws("yields a 6,272-question stratified set") not in text


def test_rendering_and_numbers():
    q = sf.seed_fact("ctb_questions")
    assert str(q) == "6,271" and f"{q}" == "6,271" and q.number() == 6271.0
    assert q.cite == '6,271 (ClinTraceBench §3 "Evaluation set")'
    chars = sf.seed_fact("ctb_dialogue_chars")
    assert chars.value == "13.7k / 15.0k / 30.7k" and chars.number(2) == 30700.0
    assert sf.seed_fact("ctb_mem0_size_r").number() == -0.129
    template = "{seed[ctb_questions]} questions"  # how clinlib.md templates name a fact
    assert template.format(seed=sf.SEED_FACTS) == "6,271 questions"
    with pytest.raises(KeyError, match="ctb_questions"):
        sf.seed_fact("ctb_question")


def test_sum_of_task_sizes_is_the_question_count():
    sizes = sf.seed_fact("ctb_task_sizes")
    total = sum(sizes.number(i) for i in range(len(sizes.values)))
    assert total == sf.seed_fact("ctb_questions").number()


def test_mixed_noise_ratio_from_the_seed_is_two():
    # issue 25: "the seed adds about 200 noise sessions to about 100 real ones: ≈ 2"
    ratio = sf.seed_fact("mmb_mixed_sessions").number() / sf.seed_fact("mmb_corpus").number(1)
    assert ratio == 2.0


@pytest.mark.parametrize("section", ss.ALL_SECTIONS, ids=lambda s: f"{s.seed}-{s.number}")
def test_sections_and_their_subheadings_are_in_the_seed(section):
    path = SEEDS_DIR / f"{section.seed}.txt"
    if not path.exists():
        pytest.skip(f"seed text {path} not present (set CLINTRACE_SEEDS_DIR)")
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    starts = {s.number: lines.index(s.heading) for s in ss.ALL_SECTIONS if s.seed == section.seed}
    begin = starts[section.number]
    later = [i for i in starts.values() if i > begin]
    body = _ws(" ".join(lines[begin : min(later) if later else len(lines)]))
    for sub in section.subsections:
        assert sub.lower() in body.lower(), f"§{section.number} lacks {sub!r}"


def test_section_citation_check():
    ok = 'MedMemoryBench §4 "Noise Augmentation" and MedMemoryBench §5 "Evaluation Protocol"'
    assert ss.check_section_citations(ok) == []
    bad = ss.check_section_citations('(MedMemoryBench §3 "Noise Augmentation"; x)')
    assert bad == ["'MedMemoryBench §3 \"Noise Augmentation\"': 'Noise Augmentation' is in §4, "
                   "not §3"]  # fmt: skip
    assert ss.check_section_citations("MedMemoryBench §9") == ["'MedMemoryBench §9': "
                                                              "MedMemoryBench has no §9"]  # fmt: skip
    assert ss.check_section_citations('LongMedBench §"event retrieval"') == []
    assert ss.check_section_citations("MedMemoryBench §5 repeats") == [
        "'MedMemoryBench §5': name the sub-heading, e.g. §5 \"Query Design\""
    ]


def test_paper_section_citations_are_checked_against_clintracebench():
    # "paper" is ClinTraceBench; its sections are numbered to one decimal, so a number alone
    # is checked for existence, and a quoted label must be one of that section's labels
    assert (
        ss.check_section_citations('paper §5.5, paper §3 "Task\nsuite", Paper §4 ("Backbones")')
        == []
    )
    assert ss.check_section_citations('paper §4 "dense-retrieval — BGE-M3 chunk embeddings"') == []
    assert ss.check_section_citations('paper §4 "Evaluation protocol"') == [
        "'paper §4 \"Evaluation protocol\"': 'Evaluation protocol' is in no section in the "
        "table, not §4"
    ]
    assert ss.check_section_citations('ClinTraceBench §3 "Backbones"') == [
        "'ClinTraceBench §3 \"Backbones\"': 'Backbones' is in §4, not §3"
    ]
    assert ss.check_section_citations("the paper's §5.8") == [
        '"paper\'s §5.8": ClinTraceBench has no §5.8'
    ]
    assert ss.check_section_citations("Appendix G.8 and App. C.3") == []
    assert ss.check_section_citations("Appendix G.9") == [
        "'Appendix G.9': ClinTraceBench's Appendix G has no G.9"
    ]
    # another seed's appendix is not ClinTraceBench's (MedMemoryBench's judge prompts, D.1)
    assert ss.check_section_citations("MedMemoryBench Appendix D.1") == []
    assert ss.check_section_citations("MedMemoryBench's Appendix D.1 prompts") == []
    assert ss.check_section_citations("the seed's Appendix D.1") == [
        "'Appendix D.1': ClinTraceBench's Appendix D has no D.1"
    ]


def _cited_texts():
    for path in [*REPO.glob("clinlib/**/*.py"), *REPO.glob("docs/*.md"), REPO / "README.md",
                 *REPO.glob("notebooks/*.ipynb")]:  # fmt: skip
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":  # the cells' text, not the JSON's escaped quotes
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        yield path.relative_to(REPO), text


def test_section_citations_in_the_kit_match_the_seed():
    bad = [f"{path}: {msg}" for path, text in _cited_texts()
           for msg in ss.check_section_citations(text)]  # fmt: skip
    assert not bad, "\n".join(bad)


def _text_numbers_of_paper_claims() -> list[tuple[str, float]]:
    """The numbers clinlib.analysis.paper_figures.claims transcribes from the paper's text."""
    from clinlib.analysis.paper_figures import claims as c
    from clinlib.analysis.paper_figures.cells import SP2_TEXT

    out = [(f"§5.1 full-context × {b}", v) for b, v in c.TEXT_FULL_POOLED_PP.items()]
    for src, strategy, task, _, low, high in c.TEXT_TASK_RANGES:
        out += [(f"{src} {strategy} {task}", low), (f"{src} {strategy} {task}", high)]
    for src, strategies, low, high, _ in c.TEXT_POOLED_RANGES:
        out += [(f"{src} {'/'.join(strategies)}", low), (f"{src} {'/'.join(strategies)}", high)]
    for strategy, values in c.TEXT_T9.items():
        out += [(f"§5.4 T9 {strategy}", v) for v in values]
    out += [(f"§5.3 SP2 {b}", v) for b, values in SP2_TEXT.items() for v in values]
    return [*out, ("Table 5 caption majority macro-F1", c.T5_MAJORITY_F1)]


def test_paper_text_numbers_in_claims_are_in_the_seed():
    # claims.py checks the paper's text against its tables; here its transcription of the
    # text is checked against the text itself (as printed: fraction or percent, 1-3 decimals)
    text = _seed_text("clintracebench").replace("{,}", ",")
    missing = []
    for where, v in _text_numbers_of_paper_claims():
        forms = {f"{v:.3f}", f"{v:.2f}", f"{100 * v:.1f}"} if v < 1 else {f"{v:.1f}"}
        if not any(re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", text) for f in forms):
            missing.append(f"{where}: {v}")
    assert not missing, missing
    assert len(_text_numbers_of_paper_claims()) > 50
    # the forms are strict enough that near misses are not found
    for planted in (0.271, 0.703, 0.357):
        forms = {f"{planted:.3f}", f"{planted:.2f}", f"{100 * planted:.1f}"}
        assert not any(re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", text) for f in forms)


def _heading_above(text: str, passage: str) -> str | None:
    """The id of the last numbered heading before ``passage`` in a seed ("5.4", "B.6")."""
    pos = text.find(_ws(passage))
    heads = re.findall(r"#{2,4} (?:Appendix )?([A-Z]?\d*(?:\.\d+)*)\b", text[:pos])
    return heads[-1] if heads else None


def _section_cited(where: str) -> str | None:
    m = re.match(r"(?:§|App\. )([A-Z]?\d*(?:\.\d+)*)", where)
    return m.group(1) if m else None


@pytest.mark.parametrize(
    "key",
    sorted(
        k
        for k, f in sf.SEED_FACTS.items()
        if f.seed == "clintracebench" and _section_cited(f.where)
    ),
)
def test_a_cited_section_is_the_one_the_passage_sits_in(key):
    # ClinTraceBench's text keeps its headings: a passage cited as §5.4 sits under "### 5.4"
    fact = sf.SEED_FACTS[key]
    head = _heading_above(_seed_text(fact.seed), fact.passage)
    assert head is not None and f"{head}.".startswith(f"{_section_cited(fact.where)}."), (
        f"{key}: cited as {fact.where}, printed under {head}"
    )


def test_section_check_fails_on_a_wrong_section():
    text = _ws("### 5.4 SP3\nsome text\n### B.6 T9 kind\nThe T9 pool splits 1{,}147 lab")
    assert _heading_above(text, "The T9 pool splits") == "B.6"
    assert not f"{_heading_above(text, 'The T9 pool splits')}.".startswith("5.4.")
