"""value_needles: a lab value's needle matches every faithful statement of it in a context
and no statement of another value, lab or reference range."""

import re

import pandas as pd
import pytest

from clinlib.strategies import views
from clinlib.strategies.facts import Fact


def _lab(name: str, value: str, unit: str, date: str) -> Fact:
    return Fact(kind="lab", visit_idx=0, turn_idx=0, date=date, name=name, value=value, unit=unit)


FACTS = [
    _lab("Creatinine", "1.1", "mg/dL", "2177-10-25"),
    _lab("Glucose", "123", "mg/dL", "2177-10-25"),
    _lab("Creatinine", "1.2", "mg/dL", "2190-11-25"),
]


@pytest.fixture
def needles(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(views, "facts_of", lambda turns: FACTS)
    question = {"question": "What was the patient's Creatinine on 2177-10-25?"}
    found = views.value_needles(pd.DataFrame(), question)
    assert list(found) == ["Creatinine 1.1 mg/dL (2177-10-25)", "Creatinine 1.2 mg/dL (2190-11-25)"]
    return {label.split(" (")[0]: pattern for label, pattern in found.items()}


# Each context states Creatinine 1.1 mg/dL faithfully; the old pattern (no digit between the
# name and the value) missed the first two.
FAITHFUL = [
    "| 2177-10-25 09:14 | lab | Creatinine [LAB-432] | 1.1 mg/dL | 0.5-1.2 | - |",
    "Labs (latest value): Creatinine 1.2 mg/dL on 2190-11-25 (first 1.1 mg/dL on 2177-10-25).",
    "Your Creatinine was 1.1 mg/dL.",
    "Results for 2177-10-25: Creatinine 1.1 mg/dL, Glucose 123 mg/dL.",
]

# None states Creatinine 1.2 mg/dL (a reference range, another lab's value, a larger number,
# a value after the sentence ends).
UNFAITHFUL_12 = [
    "Your Creatinine at 1.3 mg/dL is above the reference range of 0.5 to 1.2 mg/dL.",
    "Creatinine 1.3 mg/dL, Glucose 1.2 mg/dL.",
    "Creatinine 11.2 mg/dL.",
    "Creatinine 1.3 mg/dL. A later value was 1.2 mg/dL.",
    "| 2177-10-25 | lab | Creatinine [LAB-432] | 1.3 mg/dL | 0.5-1.2 mg/dL | - |",
]


@pytest.mark.parametrize("context", FAITHFUL)
def test_needle_matches_a_faithful_statement(needles: dict[str, str], context: str) -> None:
    assert re.search(needles["Creatinine 1.1 mg/dL"], context)


@pytest.mark.parametrize("context", UNFAITHFUL_12)
def test_needle_rejects_other_numbers(needles: dict[str, str], context: str) -> None:
    assert not re.search(needles["Creatinine 1.2 mg/dL"], context)
