"""Claims that copies (offload / reload) overlap compute say what is simulated and what the runtime does (issue 26).

The checker's timing model runs a rank's copies on a copy stream beside its compute; no runtime here overlaps them
(on CPU one stream; on GPU the standalone executor runs a plan's jobs one after another, so a copy job overlaps no
compute job). So every paragraph, list item or table row of the README, docs/ and the schedules' docstrings that
puts copies on a copy stream or has them overlap compute also names the simulation and the runtime.
"""

from __future__ import annotations

import re

from paths import ROOT

COPIES = re.compile(r"\b(offload|offloads|reload|reloads|copy|copies|D2H|H2D)\b", re.IGNORECASE)
OVERLAP = re.compile(r"overlap|copy stream|while it computes|behind compute|hide behind", re.IGNORECASE)
SAYS_BOTH = (re.compile(r"simulat|checker|timing model|in the model", re.IGNORECASE), re.compile(r"runtime", re.I))


def _passages(text: str) -> list[str]:
    """Paragraphs (blank-line separated), with each list item and each table row a passage of its own."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        current: list[str] = []
        for line in block.splitlines():
            if line.lstrip().startswith(("|", "- ", "* ")) or re.match(r"\s*\d+\. ", line):
                if current:
                    out.append("\n".join(current))
                current = [line]
            else:
                current.append(line)
        if current:
            out.append("\n".join(current))
    return out


def _docstring(path) -> str:
    text = path.read_text(encoding="utf-8")
    found = re.match(r'\s*"""(.*?)"""', text, re.DOTALL)
    return found.group(1) if found else ""


def _sources():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield path, path.read_text(encoding="utf-8")
    for folder in (ROOT / "schedules", ROOT / "benchmarks" / "schedules"):
        for path in sorted(folder.glob("*.sched")):
            yield path, _docstring(path)


def test_every_claim_that_copies_overlap_compute_says_what_is_simulated_and_what_the_runtime_does():
    bad = []
    for path, text in _sources():
        for passage in _passages(text):
            if COPIES.search(passage) and OVERLAP.search(passage) and not all(p.search(passage) for p in SAYS_BOTH):
                bad.append(f"{path.relative_to(ROOT)}: {' '.join(passage.split())[:160]}")
    assert not bad, "\n".join(bad)


SENDS = re.compile(r"\b(send|sends|receive|receives|recv|message|messages)\b", re.IGNORECASE)


def test_every_claim_that_sends_overlap_compute_says_what_is_simulated_and_what_the_runtime_does():
    """The same for messages between ranks: the checker simulates their latency beside compute, the one-process-
    per-rank runtime moves them on threads (`runtime/cluster.Transport`); a claim says which it means."""
    bad = []
    for path, text in _sources():
        for passage in _passages(text):
            claims = SENDS.search(passage) and re.search(r"overlap", passage, re.IGNORECASE)
            if claims and "_pir_overlap_send_recv" not in passage and not all(p.search(passage) for p in SAYS_BOTH):
                bad.append(f"{path.relative_to(ROOT)}: {' '.join(passage.split())[:160]}")
    assert not bad, "\n".join(bad)


def test_the_rule_finds_an_unqualified_claim():
    """The check is not vacuous: the claim the library's offload schedule made before it was qualified is caught."""
    claim = "reloaded before its backward (H2D), overlapping compute; when copies take less than a forward"
    assert COPIES.search(claim) and OVERLAP.search(claim) and not all(p.search(claim) for p in SAYS_BOTH)
    claim = "Eager 1F1B: 1F1B with twice the warm-up, so sends overlap compute; more activation memory."  # before
    assert SENDS.search(claim) and not all(p.search(claim) for p in SAYS_BOTH)
