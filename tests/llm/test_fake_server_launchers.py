"""The fake endpoints' launchers: ``python -m clinlib.llm.testserver --reader reference``
answers a kit prompt exactly as the offline reader policy does (checked against the policy
called directly), and ``python -m clinlib.llm.anthropic_fake`` serves the batch fake."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from clinlib.eval.harness.prompts import build_messages
from clinlib.eval.readers.policies import eager_policy, reference_policy

CONTEXT = ""  # no record: `reference` abstains, `eager` guesses


@pytest.fixture(scope="module")
def question(quick_built):
    from clinlib.data.build import load

    qs = load("questions", quick_built)
    return qs[qs["task"] == "T1"].iloc[0].to_dict()


def _post(url: str, body: dict, headers: dict | None = None) -> dict:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def _launch(module: str, *args: str):
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


READERS = [("reference", reference_policy), ("eager", eager_policy)]


@pytest.mark.parametrize(("reader", "policy"), READERS)
def test_testserver_answers_as_the_offline_reader(reader, policy, question):
    messages = build_messages(question, CONTEXT)
    proc, url = _launch("clinlib.llm.testserver", "--reader", reader)
    try:
        assert url.startswith("http://127.0.0.1:")
        reply = _post(f"{url}/chat/completions", {"model": "gpt-4o-mini", "messages": messages})
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    text = reply["choices"][0]["message"]["content"]
    assert text == policy(messages)
    if reader == "reference":
        assert text == "insufficient information"


def test_anthropic_batch_fake_launches_and_a_bad_answer_is_one_line(question):
    proc, url = _launch("clinlib.llm.anthropic_fake", "--reader", "reference")
    try:
        system, *rest = build_messages(question, CONTEXT)
        params = {"model": "claude-x", "max_tokens": 20, "messages": rest}
        body = {"requests": [{"custom_id": "a", "params": {**params, "system": system["content"]}}]}
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        made = _post(f"{url}/messages/batches", body, headers)
        assert made["processing_status"] == "in_progress"
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    cmd = [sys.executable, "-m", "clinlib.llm.testserver", "--answer", "nope"]
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "error: answer 'nope': expected MODULE:FUNCTION or one of ['eager', 'reference']"
    ]
