"""Trap facts and MedMemoryBench's six query types (MedMemoryBench §4 "Data Construction
Pipeline" and §5 "Query Design"; docs/design.md "Trap facts and MedMemoryBench's six query
types").

Modules: :mod:`.rules` (cited contraindication rules derived from the hosp tables),
:mod:`.constraints` (injected patient-stated constraints), :mod:`.facts` (``trap_facts``, the
trap dialogue, the verifier, :data:`~.facts.TRAP_KINDS`), :mod:`.queries` (EEM, TLA, SUA, MQ,
IG, MCD) and :mod:`.stage` (``build_traps``: the ``traps`` stage and its gates).
"""
