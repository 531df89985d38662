"""Population reasoning questions from PopMedQA (Kaul et al. 2026): groups of patient
records, ten tasks with the seed's answer schemas and metrics (App. C), three renderings (§4),
deterministic solvers and gates. Modules: :mod:`.metrics`, :mod:`.spec`, :mod:`.groups`,
:mod:`.render`, :mod:`.questions`, :mod:`.solve`, :mod:`.build`.
"""
