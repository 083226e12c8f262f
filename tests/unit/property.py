"""The property-test harness every entry point's test shares (hypothesis, derandomized so CI repeats it exactly).

``check_property(name, strategy, judge, must_fail)`` draws inputs - real captures mutated the ways broken tools,
truncated pipes, hostile files and attackers break them, or random JSON - and holds three properties:
- no hang: every call returns within HANG_SECONDS (SIGALRM);
- no uncaught exception: the only exceptions are gpufleet's own (a clear, named error);
- no wrong verdict: an input whose verdict is known to be a failure never passes.
Its figures (inputs tried, clear errors, crashes, hangs, wrong verdicts) go to out/fuzz/NAME.json, and
tests/conftest.py prints them at the end of the run.
"""
from __future__ import annotations

import copy
import json
import os
import pathlib
import re
import signal
from typing import Any, Callable, Dict, List, Tuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from tests.conftest import fixture_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
HANG_SECONDS = 5
EXAMPLES = 150
FIGURES: Dict[str, Dict[str, int]] = {}
TOKENS = ["N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "inf", "-inf", "1e309", "nan", "-nan", "", "x" * 300,
          "99999999999999999999999", "-1", "\x00", "\u2028", "{", "]", "*a", "&a", "true", "null", "~", "'", '"']

settings.register_profile("gpufleet-fuzz", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def _mutate(text: str, op: int, where: float, token: str) -> str:
    lines = text.splitlines()
    i = int(where * max(len(lines) - 1, 0))
    if op == 0:
        return text[: int(where * len(text))]
    if op == 1 and lines:
        return "\n".join(lines[:i] + lines[i + 1:])
    if op == 2 and lines:
        return "\n".join(lines[:i] + [lines[i]] * 3 + lines[i + 1:])
    if op == 3 and lines:
        words = lines[i].split(" ")
        j = int(where * 7919) % len(words)
        words[j] = token
        return "\n".join(lines[:i] + [" ".join(words)] + lines[i + 1:])
    if op == 4:
        return "\n".join(lines[:i] + [token * (1 + int(where * 50))] + lines[i:])
    if op == 5:
        return "[" * (200 + int(where * 5000)) + text
    return text.replace(": ", ": &a " if where < 0.5 else ": *a ", 1)


def mutations(*fixtures: str):
    """Fixture texts mutated once or twice, plus random text."""
    texts = [fixture_text(*f.split("/")) for f in fixtures]
    one = st.builds(_mutate, st.sampled_from(texts), st.integers(0, 6), st.floats(0, 1), st.sampled_from(TOKENS))
    return st.one_of(one, st.builds(_mutate, one, st.integers(0, 6), st.floats(0, 1), st.sampled_from(TOKENS)),
                     st.text(max_size=400))


def json_tree():
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
    return st.recursive(leaves, lambda c: st.one_of(st.lists(c, max_size=4),
                                                    st.dictionaries(st.text(max_size=10), c, max_size=4)),
                        max_leaves=30)


def paths(node: Any, prefix: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    """Every path into a JSON document (keys and list indices), depth first, the root left out."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            out += paths(v, prefix + (k,))
    return out


def replaced(doc: Any, values: Any):
    """``doc`` with one subtree (any path but the root) replaced by a value drawn from ``values``."""
    def replace(path: Tuple[Any, ...], value: Any) -> Any:
        out = copy.deepcopy(doc)
        cursor = out
        for key in path[:-1]:
            cursor = cursor[key]
        cursor[path[-1]] = value
        return out

    return st.builds(replace, st.sampled_from(paths(doc)), values)


def structured(fixture: str):
    """A JSON fixture with one subtree replaced by random JSON (keys kept, values of any type), as text."""
    return replaced(json.loads(fixture_text(*fixture.split("/"))), json_tree()).map(json.dumps)


def keeps_evidence(must_fail: Any, value: Any) -> bool:
    """Whether ``value``'s verdict must be a failure: ``must_fail`` True (always), a text the input must still hold
    (a kernel log's XID line: a mutation that removed it made a different, clean log), or a predicate of the
    input."""
    if must_fail is True:
        return True
    if callable(must_fail):
        return bool(must_fail(value))
    return isinstance(must_fail, str) and isinstance(value, str) and must_fail in value and value.count("\n") >= 3


def check_property(name: str, strategy: Any, judge: Callable[[Any], bool], must_fail: Any = False,
                   examples: int = EXAMPLES) -> None:
    """Run ``judge`` (True: the gate passed) over ``examples`` inputs drawn from ``strategy``; fail the test on a
    hang, an exception that is not gpufleet's own, or a PASS where ``must_fail`` says the input must fail."""
    figures = FIGURES.setdefault(name, {"inputs": 0, "clear errors": 0, "crashes": 0, "hangs": 0,
                                        "wrong verdicts": 0})
    problems = []

    @settings(settings.get_profile("gpufleet-fuzz"), max_examples=examples)
    @given(strategy)
    def run(value):
        figures["inputs"] += 1
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(HANG_SECONDS)
        try:
            passed = judge(value)
        except GpufleetError:
            figures["clear errors"] += 1
            return
        except Hang:
            figures["hangs"] += 1
            problems.append(("hang", repr(value)[:300]))
            return
        except Exception as exc:  # counting exactly these is the point
            figures["crashes"] += 1
            problems.append(("crash %s: %s" % (type(exc).__name__, exc), repr(value)[:300]))
            return
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if must_fail and passed and keeps_evidence(must_fail, value):
            figures["wrong verdicts"] += 1
            problems.append(("wrong verdict: PASS", repr(value)[:300]))

    run()
    out = pathlib.Path(os.environ.get("GPUFLEET_FUZZ_DIR", str(ROOT / "out" / "fuzz")))
    out.mkdir(parents=True, exist_ok=True)
    (out / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".json")).write_text(
        json.dumps({"target": name, **figures}))
    assert not problems, "%s: %d problem(s), first: %r" % (name, len(problems), problems[0])
