"""Evaluation settings: the one registry of WHEN a representation is built and WHAT it reads.

Static settings (paper §4, "T3 pre/post"; §5.5 SP4): ``post`` builds from the original
dialogue (every question is asked; the T3 sentence exists only at answer time) and ``pre``
builds from the T3-injected dialogue (only T3 is asked: the only task whose context differs).
``efficient`` is accepted as an alias of ``post`` (MedMemoryBench's name for noise-free runs).

MedMemoryBench §5 "Evaluation Protocol" and §4 "Noise Augmentation" add two, which combine with ``+``:

* ``stream`` — the evaluate-while-constructing protocol: a patient's sessions (visits) arrive
  in order and every question is asked at every checkpoint t (t = sessions seen) from the
  one at which it becomes answerable, using only visits 1..t — for the representation and for
  the answer-time text alike. Checkpoints are every ``delta`` sessions plus the final one
  (:func:`checkpoints`). The seed uses delta = 10 over about 100 sessions per patient (seed facts
  mmb_delta, mmb_corpus: about ten checkpoints each). The kit's default is delta = 1: both
  profiles have patients with only two visits (notebook 14 renders how many), and delta = 1
  is the only value that gives EVERY patient two or more checkpoints; a patient with about
  ten visits gets about the seed's ten. The prediction at checkpoint t
  does not depend on delta, so the per-row setting value omits it (``stream@6``): runs with
  different deltas share the checkpoints they have in common instead of re-asking them.
* ``mixed`` — static evaluation over noisy dialogues (MedMemoryBench §4 "Mixed Mode"):
  construction AND answer-time text are :func:`clinlib.dialogue.noise.add_noise` of the
  dialogue (after any T3/T5 injection, which use the original indices); gold answers do not
  change. Parameters ``ratio`` (extra sessions per real visit) and ``seed``.
* ``stream+mixed`` — checkpoints over the extended (noisy) session sequence.

A spec is components joined by ``+``, each ``name`` or ``name(key=value, ...)``, e.g.
``stream(delta=3)``, ``mixed(ratio=0.5, seed=123)``, ``stream+mixed(seed=123)``; a command line
lists several settings with ``,``. Non-default parameters appear in the label, so variants
never collide in the prediction key ``(qid, strategy, backbone, prep_model, setting)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd

from clinlib.core.labels import format_call, split_call
from clinlib.core.seed_facts import seed_fact
from clinlib.dialogue.noise import add_noise, hide_noise_tags

STATIC_SETTINGS: tuple[str, ...] = ("post", "pre")
SETTING_KINDS: tuple[str, ...] = (*STATIC_SETTINGS, "stream", "mixed")
ALIASES: dict[str, str] = {"efficient": "post"}
# Tasks asked under ``pre``: T3 is the only task whose context differs from ``post``.
PRE_TASKS: tuple[str, ...] = ("T3",)
DEFAULT_DELTA = 1
STREAM_DEFAULTS: dict[str, Any] = {"delta": DEFAULT_DELTA}
NOISE_DEFAULTS: dict[str, Any] = {"ratio": 1.0, "seed": 42}
# MedMemoryBench repeats every run over these seeds (its appendix "Results Across Multiple
# Random Seeds": cross-seed stability, Friedman); from the seed-facts table.
SEEDS: tuple[int, ...] = tuple(int(v) for v in seed_fact("mmb_seeds").values)
CHECKPOINT_SEP = "@"
_NOISY: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
_NOISY_SIZE = 8


class SettingError(ValueError):
    """A setting spec or setting value that cannot be read."""


@dataclass(frozen=True)
class Setting:
    """One parsed setting (see module docstring).

    Attributes:
        base: ``post`` or ``pre``: which T3 view the construction follows.
        stream: evaluated at checkpoints.
        mixed: over noisy dialogues.
        delta: sessions between checkpoints (stream).
        ratio: noise sessions per real visit (mixed).
        seed: noise placement seed (mixed).
    """

    base: str = "post"
    stream: bool = False
    mixed: bool = False
    delta: int = DEFAULT_DELTA
    ratio: float = NOISE_DEFAULTS["ratio"]
    seed: int = NOISE_DEFAULTS["seed"]

    def _mixed_label(self) -> str:
        params = {
            k: v for k, v in (("ratio", self.ratio), ("seed", self.seed)) if v != NOISE_DEFAULTS[k]
        }
        return format_call("mixed", params)

    def _label(self, with_delta: bool) -> str:
        if not (self.stream or self.mixed):
            return self.base
        parts = []
        if self.stream:
            delta = {"delta": self.delta} if with_delta and self.delta != DEFAULT_DELTA else {}
            parts.append(format_call("stream", delta))
        if self.mixed:
            parts.append(self._mixed_label())
        return "+".join(parts)

    @property
    def mode(self) -> str:
        """``efficient`` without noise, else the mixed component's label (``mixed(seed=7)``)."""
        return self._mixed_label() if self.mixed else "efficient"

    @property
    def label(self) -> str:
        """The canonical spec (parses back to this setting)."""
        return self._label(with_delta=True)

    @property
    def key_label(self) -> str:
        """The label in prediction keys: without ``delta`` (a checkpoint's prediction does not
        depend on it)."""
        return self._label(with_delta=False)

    def value(self, checkpoint: int | None = None) -> str:
        """The prediction key's ``setting``: ``stream+mixed@12`` at a checkpoint (sessions
        seen), the label for a static setting."""
        if not self.stream:
            return self.label
        if checkpoint is None or int(checkpoint) < 1:
            raise SettingError(
                f"setting {self.label!r} needs a checkpoint >= 1, got {checkpoint!r}"
            )
        return f"{self.key_label}{CHECKPOINT_SEP}{int(checkpoint)}"


def _component(text: str, spec: str) -> tuple[str, dict[str, Any]]:
    parsed = split_call(text)
    if parsed is None:
        raise SettingError(f"cannot read setting {spec!r}: expected name or name(key=value, ...)")
    name, params = parsed
    name = ALIASES.get(name, name)
    if name not in SETTING_KINDS:
        raise SettingError(
            f"unknown setting {name!r} in {spec!r}; expected some of "
            f"{SETTING_KINDS + tuple(ALIASES)} joined by '+'"
        )
    allowed = {"stream": STREAM_DEFAULTS, "mixed": NOISE_DEFAULTS}.get(name, {})
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise SettingError(
            f"setting {spec!r}: {name} takes no parameter(s) {unknown}; "
            f"accepted: {sorted(allowed) or 'none'}"
        )
    return name, params


def _checked_params(spec: str, params: dict[str, Any]) -> dict[str, Any]:
    delta, ratio, seed = params["delta"], params["ratio"], params["seed"]
    if isinstance(delta, bool) or not isinstance(delta, int) or delta < 1:
        raise SettingError(f"setting {spec!r}: delta must be an integer >= 1, got {delta!r}")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 10:
        raise SettingError(f"setting {spec!r}: ratio must be a number in [0, 10], got {ratio!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SettingError(f"setting {spec!r}: seed must be an integer >= 0, got {seed!r}")
    return {"delta": delta, "ratio": float(ratio), "seed": seed}


def parse_setting(spec: str | Setting) -> Setting:
    """A :class:`Setting` from a spec (``post``, ``stream(delta=3)``, ``stream+mixed`` ...).

    Raises:
        SettingError: one line naming the spec (unknown name or parameter, bad value, a
            component given twice, ``pre`` combined with another).
    """
    if isinstance(spec, Setting):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SettingError(f"cannot read setting {spec!r}: expected a non-empty spec")
    parts = [_component(p, spec) for p in _split_plus(spec)]
    names = [n for n, _ in parts]
    if len(set(names)) != len(names):
        raise SettingError(f"setting {spec!r} names a component twice")
    static = [n for n in names if n in STATIC_SETTINGS]
    if static and len(names) > 1:
        raise SettingError(
            f"setting {spec!r}: {static[0]} does not combine with another "
            "setting (stream and mixed build on post)"
        )
    params = {**STREAM_DEFAULTS, **NOISE_DEFAULTS}
    for _, p in parts:
        params.update(p)
    return Setting(
        base=static[0] if static else "post",
        stream="stream" in names,
        mixed="mixed" in names,
        **_checked_params(spec, params),
    )


def _split_plus(spec: str) -> list[str]:
    """Split at ``+`` outside parentheses (a parameter value may hold one: ``ratio=+1``)."""
    out, depth, cur = [], 0, ""
    for ch in spec:
        depth += (ch == "(") - (ch == ")")
        if ch == "+" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def parse_value(value: str) -> tuple[Setting, int | None]:
    """A prediction's ``setting`` value back to (setting, checkpoint or None)."""
    spec, sep, tail = str(value).partition(CHECKPOINT_SEP)
    setting = parse_setting(spec)
    if not sep:
        if setting.stream:
            raise SettingError(f"setting value {value!r} lacks its checkpoint ('@<sessions>')")
        return setting, None
    if not setting.stream or not tail.isdigit() or int(tail) < 1:
        raise SettingError(f"cannot read setting value {value!r}: expected stream...@<sessions>")
    return setting, int(tail)


def value_of(value: str, setting: str | Setting) -> bool:
    """Whether a prediction's ``setting`` value belongs to a setting (``stream@6`` to any
    ``stream(delta=...)``; a static value to its own label)."""
    s = parse_setting(setting)
    if not s.stream:
        return str(value) == s.label
    return str(value).startswith(s.key_label + CHECKPOINT_SEP)


def parse_settings(specs: str | Setting | Iterable[str | Setting]) -> list[Setting]:
    """Several specs (a single spec string counts as one), de-duplicated by label, in order."""
    if isinstance(specs, str | Setting):
        specs = [specs]
    out: dict[str, Setting] = {}
    for s in specs:
        setting = parse_setting(s)
        out.setdefault(setting.label, setting)
    return list(out.values())


def checkpoints(n_sessions: int, delta: int = DEFAULT_DELTA) -> list[int]:
    """Checkpoints of a patient with ``n_sessions`` sessions: every ``delta`` sessions plus
    the final one (MedMemoryBench §5 "Evaluation Protocol": t in {k*delta <= N}, here with N added)."""
    n = int(n_sessions)
    if n < 1:
        raise SettingError(f"a patient needs at least one session, got {n_sessions!r}")
    if isinstance(delta, bool) or int(delta) < 1:
        raise SettingError(f"delta must be an integer >= 1, got {delta!r}")
    return sorted({*range(int(delta), n + 1, int(delta)), n})


def noise_transform(setting: str | Setting) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The dialogue transformation of a setting: under ``mixed``,
    :func:`clinlib.dialogue.noise.add_noise` with its ratio and seed, then
    :func:`~clinlib.dialogue.noise.hide_noise_tags` (no method sees which sessions are noise);
    the identity otherwise. Noise placement is drawn per (seed, patient), so the injected
    variants of a dialogue get the same noise sessions as the original."""
    s = parse_setting(setting)
    if not s.mixed:
        return _identity
    return partial(_noisy, ratio=s.ratio, seed=s.seed)


def _identity(turns: pd.DataFrame) -> pd.DataFrame:
    return turns


def _noisy(turns: pd.DataFrame, ratio: float, seed: int) -> pd.DataFrame:
    # add_noise takes seconds per hundred patients and a run asks for the same noisy
    # dialogue several times (its plan, then its contexts): keep the last few, keyed by
    # content (the frame is copied out, so a caller's edit cannot reach the memo).
    cols = [c for c in ("subject_id", "visit_idx", "turn_idx", "text") if c in turns.columns]
    content = int(pd.util.hash_pandas_object(turns[cols], index=False).sum())
    key = (len(turns), content, float(ratio), int(seed))
    if key not in _NOISY:
        _NOISY[key] = hide_noise_tags(add_noise(turns, ratio, seed))
        while len(_NOISY) > _NOISY_SIZE:
            _NOISY.popitem(last=False)
    _NOISY.move_to_end(key)
    return _NOISY[key].copy()


def asked_questions(questions: pd.DataFrame, setting: str | Setting) -> pd.DataFrame:
    """The questions asked under a setting, in their original order: all under ``post`` and
    ``mixed``, T3 only under ``pre``; under ``stream`` the single-patient ones — a
    multi-patient comparison (T6) sets two patients' records side by side, and two patients'
    session clocks do not define one checkpoint, so T6 is left to the static settings."""
    s = parse_setting(setting)
    if s.base == "pre":
        return questions[questions["task"].isin(PRE_TASKS)]
    if s.stream:
        return questions[[len(list(ids)) == 1 for ids in questions["subject_ids"]]]
    return questions
