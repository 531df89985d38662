"""The seeds' numbered sections, and the check that a section citation names one.

``SECTIONS[(seed, number)]`` -> :class:`SeedSection`: a seed's numbered section, its heading
and the sub-headings it holds. :func:`check_section_citations` lists every section citation
of such a seed in a text that names no quoted sub-heading, or whose section or sub-heading the
table contradicts; tests run it over clinlib, docs, the README and the notebooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clinlib.core.seed_facts import CTB, MMB, SEEDS


@dataclass(frozen=True)
class SeedSection:
    """A seed's numbered section: its heading line and the sub-headings it holds."""

    seed: str
    number: str
    heading: str
    subsections: tuple[str, ...] = ()


ALL_SECTIONS: tuple[SeedSection, ...] = (
    SeedSection(MMB, "1", "1Introduction"),
    SeedSection(MMB, "2", "2Related Work"),
    SeedSection(MMB, "3", "3Preliminary Study", ("memory saturation",)),
    SeedSection(
        MMB,
        "4",
        "4Constructing MedMemoryBench",
        (
            "Data Construction Pipeline",
            "Patient Profile Construction",
            "Disease Progression Event Generation",
            "Multi-turn Sessions Simulation",
            "Memory Extraction and Query Construction",
            "Noise Augmentation",
            "Efficient Mode",
            "Mixed Mode",
            "Statistics",
        ),
    ),
    SeedSection(
        MMB,
        "5",
        "5Evaluation Framework",
        (
            "Query Design",
            "Evaluation Protocol",
            "evaluate-while-constructing",
            "streaming protocol",
        ),
    ),
    SeedSection(
        MMB,
        "6",
        "6Experiment",
        (
            "Experimental Setup",
            "Overall Performance and Main Findings",
            "Memory saturation degrades reasoning robustness",
            "Response Quality and Hallucination Analysis",
            "Ablation Study",
            "Efficiency and Cost Analysis",
        ),
    ),
    SeedSection(MMB, "7", "7Conclusion"),
    # ClinTraceBench: numbered to one decimal; §3 and §4 hold run-in paragraph labels
    SeedSection(CTB, "1", "## 1 Introduction"),
    SeedSection(CTB, "2", "## 2 Related work"),
    SeedSection(
        CTB,
        "3",
        "## 3 Benchmark design",
        ("Cohort", "Task layers", "Task suite", "Evaluation set", "Headline metric"),
    ),
    SeedSection(
        CTB,
        "4",
        "## 4 History representation strategies and backbones",
        (
            "History representation strategies",
            "Floor",
            "Recency",
            "Full",
            "Retrieval",
            "Compression",
            "Agentic memory",
            "Backbones",
            "Memory prep model",
            # the strategies, each opening its bullet
            "no-context-blind",
            "last-visit-only",
            "full-context",
            "dense-retrieval",
            "structured-timeline",
            "llm-summary",
            "Mem0",
            "A-Mem",
        ),
    ),
    SeedSection(CTB, "5", "## 5 Results"),
    SeedSection(CTB, "5.1", "### 5.1 Main accuracy", ("Main accuracy",)),
    SeedSection(
        CTB, "5.2", "### 5.2 SP1: The aggregation bottleneck", ("SP1: The aggregation bottleneck",)
    ),
    SeedSection(
        CTB,
        "5.3",
        "### 5.3 SP2: Backbone-specific extraction profiles",
        ("SP2: Backbone-specific extraction profiles",),
    ),
    SeedSection(
        CTB,
        "5.4",
        "### 5.4 SP3: Non-monotonic abstention under longer context",
        ("SP3: Non-monotonic abstention under longer context",),
    ),
    SeedSection(
        CTB,
        "5.5",
        "### 5.5 SP4: Controlled preservation probe: compressed "
        "representations drop the finding–diagnosis relation even under equal input",
        ("SP4: Controlled preservation probe",),
    ),
    SeedSection(
        CTB,
        "5.6",
        "### 5.6 Retrieval, cost, and Pareto efficiency",
        ("Retrieval, cost, and Pareto efficiency",),
    ),
    SeedSection(CTB, "5.7", "### 5.7 Illustrative failure modes", ("Illustrative failure modes",)),
    SeedSection(CTB, "6", "## 6 Discussion"),
    SeedSection(CTB, "7", "## 7 Conclusion"),
)
SECTIONS: dict[tuple[str, str], SeedSection] = {(s.seed, s.number): s for s in ALL_SECTIONS}

_NAME_TO_SEED = {name: stem for stem, name in SEEDS.items()}
# a seed name (or "paper", the kit's name for ClinTraceBench), the section sign and a number,
# then optionally a sub-heading in straight or curly quotes, or in parentheses and quotes
_CITATION = re.compile(
    r"(?P<name>" + "|".join(map(re.escape, _NAME_TO_SEED)) + r"|[Pp]aper)['’]?s?\s+§"
    r"(?P<num>\d+(?:\.\d+)?)(?:\s*(?:#\s*|\(\s*)?[\"“](?P<sub>[^\"”]+)[\"”])?"
)
# seeds whose citations may give a section number alone: their sections are numbered finely
# (5.1-5.7), so the number is checked; a quoted label must still be the section's
_NUMBER_SUFFICES = {CTB}
# ClinTraceBench's lettered appendices and their numbered subsections (App. A-I)
CTB_APPENDICES: dict[str, int] = {
    "A": 0,
    "B": 6,
    "C": 3,
    "D": 0,
    "E": 3,
    "F": 4,
    "G": 8,
    "H": 0,
    "I": 0,
}
# another seed named right before an appendix citation ("MedMemoryBench's Appendix D.1")
_OTHER_SEED_BEFORE = re.compile(
    r"\b(?:" + "|".join(re.escape(n) for s, n in SEEDS.items() if s != CTB) + r")(?:'s)?\s+$"
)
_APPENDIX = re.compile(r"\b(?:Appendix|App\.)\s?(?P<letter>[A-Z])(?:\.(?P<num>\d+))?\b")


def seed_section(seed: str, number: str | int) -> SeedSection:
    """The section ``number`` of ``seed`` (file stem or name); KeyError if the table lacks it."""
    stem = _NAME_TO_SEED.get(seed, seed)
    return SECTIONS[(stem, str(number))]


def _label_matches(sub: str, labels: tuple[str, ...]) -> bool:
    """A quoted sub-heading names a label: equal, or one starts with the other (case-blind)."""
    s = " ".join(sub.lower().split()).rstrip(" .")
    return any(s == x.lower() or s.startswith(x.lower()) or x.lower().startswith(s) for x in labels)


def _section_message(m: re.Match[str]) -> str | None:
    stem = CTB if m["name"].lower() == "paper" else _NAME_TO_SEED[m["name"]]
    section = SECTIONS.get((stem, m["num"]))
    if section is None:
        return f"{m[0]!r}: {SEEDS[stem]} has no §{m['num']}"
    sub = m["sub"]
    if not sub:
        if stem in _NUMBER_SUFFICES:
            return None
        return f'{m[0]!r}: name the sub-heading, e.g. §{m["num"]} "{_first(section)}"'
    if _label_matches(sub, section.subsections):
        return None
    owner = [
        s.number for s in ALL_SECTIONS if s.seed == stem and _label_matches(sub, s.subsections)
    ]
    where = f"§{owner[0]}" if owner else "no section in the table"
    return f"{m[0]!r}: {sub!r} is in {where}, not §{m['num']}"


def check_section_citations(text: str) -> list[str]:
    """Section citations in ``text`` that the table contradicts, one message each.

    Only seeds with numbered sections in :data:`SECTIONS` are checked ("paper §N" is
    ClinTraceBench). A citation of a number the table lacks, or with a quoted sub-heading the
    section does not hold, is reported; so is one without a sub-heading, except for
    ClinTraceBench, whose sections are numbered to one decimal (§5.5). ClinTraceBench's
    lettered appendix subsections ("Appendix G.3", "App. C.1") must exist
    (:data:`CTB_APPENDICES`), unless another seed is named right before ("MedMemoryBench
    Appendix D.1").
    """
    seeded = {seed for seed, _ in SECTIONS}
    bad = []
    for m in _CITATION.finditer(text):
        stem = CTB if m["name"].lower() == "paper" else _NAME_TO_SEED[m["name"]]
        if stem in seeded and (msg := _section_message(m)):
            bad.append(msg)
    for m in _APPENDIX.finditer(text):
        letter, num = m["letter"], m["num"]
        if _OTHER_SEED_BEFORE.search(text[max(0, m.start() - 40) : m.start()]):
            continue  # "MedMemoryBench Appendix D.1": another seed's appendix
        if letter in CTB_APPENDICES and num and not 1 <= int(num) <= CTB_APPENDICES[letter]:
            bad.append(f"{m[0]!r}: ClinTraceBench's Appendix {letter} has no {letter}.{num}")
    return bad


def _first(section: SeedSection) -> str:
    return section.subsections[0] if section.subsections else section.heading.lstrip("0123456789")
