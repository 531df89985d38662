"""The population checker: each question solved again from its prompt text alone, by a code
path that shares nothing with the gold (PopMedQA §2.1: questions and answers "jointly
generated"; this module is the independent check that the prompt determines the gold).

The gold comes from the generator's recipe (:mod:`.questions`, :mod:`.plant`). The checker
re-parses the rendered text with its own parser (no import of :mod:`.render`), loads the events
into DuckDB and answers with SQL: signature tasks look for ordered pathways, blocks of at least
:data:`MIN_BLOCK` concepts that one identical set of patients each print once, on distinct
days, in one shared order, and nobody else prints; scored tasks look
for the one concept whose per-patient counts equal every stated score; the ATE is a Hajek
estimate written in SQL. A test (tests/tasks/population/test_checker.py) asserts that no import
path leads from this module to the gold's modules.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import re
import threading
from typing import Any

import duckdb
import pandas as pd

MIN_BLOCK = 3  # concepts sharing one carrier set before it counts as a pattern
_HEAD = re.compile(r"^=== Patient ID: (\S+) ===$")
_BOOK = re.compile(r"^(#\d+): \((\S+?//.+?)\) ")
_NUM = re.compile(r"^-?\d+(\.\d+)?$")
# the confounder's diagnoses, restated here from ICD-9/10 (not the kit's vocabulary module)
CONFOUNDER_CODES: dict[str, tuple[str, ...]] = {
    "ckd": ("icd9//585", "icd9//586", "icd9//403", "icd9//404")
    + ("icd10//N18", "icd10//N19", "icd10//I12", "icd10//I13"),
}
CONFOUNDER_WORDS: dict[str, tuple[str, ...]] = {"ckd": ("kidney disease", "renal disease")}

ATE_SQL = """
WITH p AS (SELECT pid, max(t) AS t, max(x) AS x, arg_max(y, seq) FILTER (WHERE y IS NOT NULL) AS y FROM u GROUP BY pid),
s AS (SELECT x, avg(t) AS e FROM p GROUP BY x),
w AS (SELECT p.*, s.e FROM p JOIN s USING (x))
SELECT sum(t * y / e) / sum(t / e) - sum((1 - t) * y / (1 - e)) / sum((1 - t) / (1 - e)),
       min(e), max(e), count(y), count(*)
FROM w
"""
# the ATE of the rows in ``u`` (pid, seq, t, x, y): Hajek weights 1/e and 1/(1 - e), e the
# treated share of the patient's confounder stratum


@functools.lru_cache(maxsize=1 << 17)  # event lines repeat: ~5% of a paper set's are distinct
def _split(line: str) -> tuple[str, float | None]:
    """An event line's concept and its value: read from the right, a number, or a number and
    one unit token, end the line."""
    words = line.split(" ")
    if len(words) >= 2 and _NUM.match(words[-1]):
        return " ".join(words[:-1]), float(words[-1])
    if len(words) >= 3 and _NUM.match(words[-2]):
        return " ".join(words[:-2]), float(words[-2])
    return line, None


def read_events(text: str) -> pd.DataFrame:
    """The prompt's records as rows (pid, seq, day, concept, value), codebook ids resolved."""
    return pd.DataFrame(_event_rows(text), columns=EVENT_COLUMNS)


EVENT_COLUMNS = ["pid", "seq", "day", "concept", "value"]


def _event_rows(text: str) -> list[tuple]:
    book: dict[str, str] = {}
    rows: list[tuple] = []
    pid = day = None
    for line in (x.rstrip() for x in text.splitlines()):
        head = _HEAD.match(line) if line.startswith("=== Patient ID: ") else None
        if head:
            pid, day = head.group(1), None
            continue
        if pid is None:
            m = _BOOK.match(line)
            if m:
                book[m.group(1)] = m.group(2)
            continue
        if line.startswith("Time: "):
            day = line[len("Time: ") :]
        elif line and day is not None:
            concept, value = _split(line)
            rows.append((pid, len(rows), day, book.get(concept, concept), value))
    return rows


BLOCKS_SQL = """
WITH once AS (SELECT concept, pid, min(day) AS day, count(*) AS c FROM e GROUP BY concept, pid),
c AS (SELECT concept, list(pid ORDER BY pid) AS who, count(*) AS n, max(c) AS most
      FROM once GROUP BY concept)
SELECT who, list(concept ORDER BY concept) AS cs FROM c
WHERE most = 1 AND n >= 2 AND n < (SELECT count(DISTINCT pid) FROM e)
GROUP BY who HAVING count(*) >= ? ORDER BY len(who) DESC
"""
# carrier sets shared by >= MIN_BLOCK concepts that each carrier prints exactly once
PATH_SQL = """
WITH once AS (SELECT concept, pid, min(day) AS day FROM e WHERE list_contains(?, concept)
              GROUP BY concept, pid)
SELECT count(DISTINCT path), min(nd) FROM (
  SELECT pid, list(concept ORDER BY day, concept) AS path, count(DISTINCT day) AS nd
  FROM once GROUP BY pid)
"""
# one ordered pathway: every carrier prints the block's concepts on distinct days, one order


def _blocks(con: duckdb.DuckDBPyConnection) -> list[frozenset[str]]:
    """Carrier sets of an ordered pathway: >= MIN_BLOCK concepts, each printed once by each
    carrier (2 or more patients, not everyone) and by no one else, on distinct days in one
    order shared by all carriers."""
    out = []
    for who, cs in con.execute(BLOCKS_SQL, [MIN_BLOCK]).fetchall():
        n_paths, min_days = con.execute(PATH_SQL, [cs]).fetchone()
        if n_paths == 1 and min_days == len(cs):
            out.append(frozenset(who))
    return out


def _ids(stem: str, label: str) -> list[str]:
    m = re.search(re.escape(label) + r":?\s*((?:\d+(?:,\s*)?)+)", stem)
    return re.findall(r"\d+", m.group(1)) if m else []


def _one(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else None


def _sorted(xs) -> list[str]:
    return sorted(xs, key=int)


def check_clique(stem, con, pids):
    k = int(re.search(r"[Ff]ind the (\d+) patients", stem).group(1))
    b = _one([b for b in _blocks(con) if len(b) == k])
    return None if b is None else _sorted(b)


def check_icc(stem, con, pids):
    pos, neg = (
        set(_ids(stem, "Positive training examples")),
        set(_ids(stem, "Negative training examples")),
    )
    b = _one([b for b in _blocks(con) if pos <= b and not b & neg])
    return None if b is None else {t: t in b for t in _ids(stem, "Test examples")}


def check_clusters(stem, con, pids):
    k = int(re.search(r"into (\d+) groups", stem).group(1))
    found = [
        c
        for c in itertools.combinations(_blocks(con), k)
        if sum(map(len, c)) == len(pids) and frozenset().union(*c) == pids
    ]
    c = _one(found)
    return None if c is None else sorted((_sorted(b) for b in c), key=lambda g: int(g[0]))


def check_outliers(stem, con, pids):
    b = _one([b for b in _blocks(con) if 2 * len(b) > len(pids)])
    return None if b is None else _sorted(pids - b)


def check_two_sample(stem, con, pids):
    a, b = set(_ids(stem, "Group A")), set(_ids(stem, "Group B"))
    return any(blk & (a | b) in (a, b) for blk in _blocks(con))


def check_similar(stem, con, pids):
    (query,) = _ids(stem, "Query patient")
    k = int(re.search(r"find the (\d+) who", stem).group(1))
    b = _one([b for b in _blocks(con) if query in b and len(b) == k + 1])
    return None if b is None else _sorted(b - {query})


def check_programs(stem, con, pids):
    ex = {p: set(_ids(stem, f"program {p}")) for p in "ABC"}
    seen = set().union(*ex.values())
    blk, blocks = {}, _blocks(con)  # one search for the three programs' pathways
    for p, mine in ex.items():
        blk[p] = _one([b for b in blocks if mine <= b and not b & (seen - mine)])
        if blk[p] is None:
            return None
    out = {}
    for pid in _sorted(pids - seen):
        out[pid] = _one([p for p, b in blk.items() if pid in b])
        if out[pid] is None:
            return None
    return out


def _scores(stem, con, pids) -> dict[str, int] | None:
    ex = pd.DataFrame(re.findall(r"(\d+) scored (\d+)", stem), columns=["pid", "score"])
    ex["score"] = ex["score"].astype(int)
    con.register("ex", ex)
    hits = con.execute(
        """
        WITH n AS (SELECT concept, pid, count(*) AS c FROM e GROUP BY concept, pid),
        x AS (SELECT DISTINCT concept FROM e)
        SELECT x.concept FROM x CROSS JOIN ex LEFT JOIN n ON n.concept = x.concept
             AND n.pid = ex.pid
        GROUP BY x.concept HAVING bool_and(coalesce(n.c, 0) = ex.score)
        """
    ).fetchall()
    if len(hits) != 1:
        return None
    got = dict(
        con.execute(
            "SELECT pid, count(*) FROM e WHERE concept = ? GROUP BY pid", [hits[0][0]]
        ).fetchall()
    )
    return {p: int(got.get(p, 0)) for p in pids - set(ex["pid"])}


def check_top(stem, con, pids):
    s = _scores(stem, con, pids)
    k = int(re.search(r"to the (\d+) of them", stem).group(1))
    if s is None:
        return None
    ranked = sorted(s, key=lambda p: (-s[p], int(p)))
    if len(ranked) > k and s[ranked[k - 1]] == s[ranked[k]]:
        return None
    return _sorted(ranked[:k])


def check_sort(stem, con, pids):
    s = _scores(stem, con, pids)
    return None if s is None else sorted(s, key=lambda p: (-s[p], int(p)))


def check_ate(stem, con, pids):
    m = re.search(r"received (.+?);.*last (.+?) \((\S+)\) in each.*a .+? \((\w+)\) diagnosis", stem)
    if not m:
        return None
    treat, y_label, y_key, conf = m.groups()
    ev = con.execute("SELECT pid, seq, concept, value FROM e").df()
    codes = CONFOUNDER_CODES.get(conf, ())
    words = CONFOUNDER_WORDS.get(conf, ())
    ev["t"] = ev["concept"].isin([treat, f"drug//{treat}"]).astype(int)
    low = ev["concept"].str.lower()
    ev["x"] = (ev["concept"].str.startswith(codes) | low.str.contains("|".join(words))).astype(int)
    ev["y"] = ev["value"].where(ev["concept"].isin([y_label, y_key]))
    con.register("u", ev)
    ate, lo, hi, n_y, n = con.execute(ATE_SQL).fetchone()
    if ate is None or n_y != n or not 0 < lo <= hi < 1:
        return None
    return round(float(ate), 3)


CHECKERS = {
    "P-CLQ": check_clique,
    "P-ICC": check_icc,
    "P-CLU": check_clusters,
    "P-IPW": check_ate,
    "P-OUT": check_outliers,
    "P-TST": check_two_sample,
    "P-SIM": check_similar,
    "P-TOP": check_top,
    "P-SRT": check_sort,
    "P-CLS": check_programs,
}


_LOCAL = threading.local()


def _database() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB database, opened once: opening and closing one per
    question cost ~35 ms, more than answering a 16K-token question."""
    db = getattr(_LOCAL, "db", None)
    if db is None:
        db = _LOCAL.db = duckdb.connect()
    return db


def check_key(task: str, stem: str, context: str) -> str:
    """A digest of one :func:`check` call's input: the key under which the population stage
    keeps the checker's answer (``population_checks.parquet``), so the group reader asked the
    same prompt later reads that answer instead of solving the prompt a second time."""
    h = hashlib.blake2b(digest_size=20)
    for part in (task, stem, context):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def check(task: str, stem: str, context: str) -> Any:
    """The checker's answer to ``task`` from the question ``stem`` and rendered ``context``
    (None when the text does not determine one). Each call queries through its own cursor (a
    connection of its own, so its registered frames are its own) on the thread's database."""
    return _solve(task, stem, _event_rows(context))


def check_many(task: str, stem: str, contexts: list[str]) -> list[Any]:
    """:func:`check` of each context (the renderings of one question); a context whose events
    read back equal to an earlier one's (the codes and codebook renderings) answers as it did
    (a copy) without querying again."""
    done: list[tuple[list[tuple], Any]] = []
    out = []
    for context in contexts:
        rows = _event_rows(context)
        same = next((a for r, a in done if r == rows), _UNSEEN)
        answer = _solve(task, stem, rows) if same is _UNSEEN else copy.deepcopy(same)
        done.append((rows, answer))
        out.append(answer)
    return out


_UNSEEN = object()


def _solve(task: str, stem: str, rows: list[tuple]) -> Any:
    ev = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    con = _database().cursor()
    try:
        con.register("e", ev)
        return CHECKERS[task](stem, con, frozenset(ev["pid"].unique()))
    finally:
        con.close()
