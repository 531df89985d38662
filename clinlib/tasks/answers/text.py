"""Normalisation, negation and abstention cues shared by every task's parser (paper §4
"Backbones": "the T9 abstention parser", §5.4 Fig. 4; Appendix G.3 "strict vs lenient parser").
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------- normalisation

_LABEL_RE = re.compile(r"^\s*(?:final\s+answer|answer|response)\s*[:\-–—]\s*", re.IGNORECASE)
_WRAP_CHARS = " \t\r\n\"'`*_“”‘’"


def normalize(text: str | None) -> str:
    """Trim wrappers, an ``Answer:`` label and a trailing full stop; unify dashes and spaces.

    Every run of whitespace (any Unicode space: NBSP, thin space, line breaks) becomes one
    space first, so a wrapper or full stop is trimmed whatever space surrounds it.
    """
    if text is None:
        return ""
    s = str(text).replace("\u2212", "-").replace("µ", "u").replace("μ", "u")
    s = re.sub(r"\s+", " ", s).strip(_WRAP_CHARS)
    s = _LABEL_RE.sub("", s).strip(_WRAP_CHARS)
    return s.rstrip(".!").strip(_WRAP_CHARS)


# --------------------------------------------------------------------------- negation

_NEGATORS = {
    "not",
    "no",
    "never",
    "cannot",
    "without",
    "neither",
    "nor",
    "except",
    "excluding",
    "none",
}
_CLAUSE_BREAK = re.compile(r"[.;!?\n]|,\s*(?:but|however|though|although|so|and)\b|\bbut\b")


def negated(text: str, start: int, window: int = 4) -> bool:
    """Whether the word at ``start`` sits in a negated clause (negator within ``window`` words)."""
    head = text[:start]
    breaks = list(_CLAUSE_BREAK.finditer(head))
    clause = head[breaks[-1].end() :] if breaks else head
    words = re.findall(r"[a-z']+", clause.lower())[-window:]
    return any(w in _NEGATORS or w.endswith("n't") for w in words)


# --------------------------------------------------------------------------- abstention

_STATE_VERBS = (
    r"(?:reported|recorded|documented|measured|mentioned|available|given|provided|noted|"
    r"found|listed|stated|specified|included|known|charted|obtained|drawn|checked)"
)
ABSTAIN_CUES = re.compile(
    r"insufficient\s+(?:information|data|evidence|detail)"
    r"|not\s+(?:been\s+|be\s+)?" + _STATE_VERBS + r"|"
    r"\bno\b[^.;]{0,60}?\b(?:was|were|is|are|has\s+been|have\s+been)\s+(?:ever\s+)?"
    + _STATE_VERBS
    + r"|\bno\s+(?:record|mention|documentation|data|information|measurement|result|value|"
    r"values|evidence|entry|entries|reading|report)\b"
    r"|\bno\s+(?:\w+\s+){1,3}?" + _STATE_VERBS + r"\b"
    r"|(?:does|did|do)\s*(?:not|n't)\s+(?:mention|state|include|contain|document|record|"
    r"report|specify|provide|list|show|say|give|indicate)"
    r"|(?:cannot|can't|can\s+not|could\s+not|couldn't|unable\s+to|impossible\s+to|"
    r"not\s+possible\s+to)\s+(?:be\s+)?(?:determine|determined|tell|say|answer|find|know|"
    r"identify|establish|assess|confirm|provide)"
    r"|\bunknown\b|\bunavailable\b|\bnot\s+enough\s+information\b|\bno\s+way\s+to\s+know\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:probably|likely|possibly|perhaps|presumably|approximately|approx|roughly|maybe|"
    r"estimated?|guess(?:ing)?|might\s+be|may\s+be|could\s+be|might\s+have|may\s+have)\b"
    # "about"/"around" hedge only a number ("no information about sodium" is not a guess)
    r"|\b(?:about|around)\s+(?=[<>~]?\d)|~|≈",
    re.IGNORECASE,
)


_STRICT_ABSTAIN = re.compile(r"^insufficient\s+information(?=$|\s*[.,;:!)\-–—])", re.IGNORECASE)


def is_exact_abstention(norm: str) -> bool:
    """The requested abstention, alone or followed by punctuation and an explanation."""
    return _STRICT_ABSTAIN.match(norm) is not None


def abstention_or_guess(norm: str) -> tuple[bool, str | None]:
    """(True, guess_text) when ``norm`` carries an abstention cue.

    ``guess_text`` is the text after a hedge word that follows the cue (the model's guess), or
    None for a clean abstention.
    """
    cue = ABSTAIN_CUES.search(norm)
    if not cue:
        return False, None
    hedge = _HEDGE.search(norm, cue.end())
    if hedge is not None:
        return True, norm[hedge.end() :]
    # a guess may also precede the cue: "probably 140, but it is not documented"
    before = _HEDGE.search(norm[: cue.start()])
    return True, (norm[before.end() : cue.start()] if before is not None else None)
