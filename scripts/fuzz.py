"""The grammar-aware fuzzer of tests/test_fuzz.py, run for a while instead of a bounded number
of examples: `python scripts/fuzz.py --minutes 10 [--out DIR]`. Prints how many inputs were
checked, how many gave each exit status and the findings (a traceback, a hang, a wrong exit
status, a diagnostic without a code or with a span outside its file, a report that does not
parse, exit status 0 while an error of a selected rule stands); each finding's input is kept in
DIR (default: a temporary folder) as DIR/finding-N.pipe, with what surrounded it (the imported
library, pyproject.toml, -D and the environment) in DIR/finding-N.json. Inputs come from the
grammar-aware generator, with device control flow, collectives, imports, -D, configuration and
environment; round k draws from seed k, so a run repeats the inputs of the last. Exits 1 when
there are findings.

Run it from the repository root with the package importable (`PYTHONPATH=<site> python ...`).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import fuzz_oracle  # noqa: E402  (what must hold of each answer)
import test_fuzz  # noqa: E402  (the strategies)

HANG_SECONDS = 30
EXAMPLES_PER_ROUND = 10  # a round may overrun the time bound by this many generated inputs


class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang()


def fuzz(minutes: float, out: Path) -> tuple[int, collections.Counter, collections.Counter, list[str]]:
    """The number of inputs checked, inputs per exit status and per code, and the findings."""
    shutil.copy(test_fuzz.KERNELS, out / "kernels.cu")
    deadline = time.monotonic() + minutes * 60
    statuses: collections.Counter = collections.Counter()
    codes_seen: collections.Counter = collections.Counter()
    checked: list[int] = []  # input sizes
    findings: list[str] = []
    path = out / test_fuzz.PROGRAM
    signal.signal(signal.SIGALRM, _on_alarm)

    def check(case) -> None:
        data, around = case
        if time.monotonic() > deadline:
            return
        checked.append(len(data))
        path.write_bytes(data)
        around.write(out)
        signal.alarm(HANG_SECONDS)
        try:
            status, reported, found = fuzz_oracle.problems(path, around)
            statuses[status] += 1
            codes_seen.update(set(reported))
        except Hang:
            found = [f"no answer within {HANG_SECONDS} s"]
        except Exception:  # the oracle's first question: any traceback is a finding
            found = ["traceback:\n" + traceback.format_exc(limit=-6)]
        finally:
            signal.alarm(0)
        if found:
            kept = out / f"finding-{len(findings) + 1}.pipe"
            kept.write_bytes(data)
            kept.with_suffix(".json").write_text(json.dumps(around.describe(), indent=1) + "\n")
            findings.append(f"{kept}: " + "; ".join(found))

    round_number = 0
    while time.monotonic() < deadline:
        round_number += 1
        # Findings are recorded, not raised, so hypothesis neither stops nor shrinks; each
        # round draws fresh inputs from its own seed.
        run = seed(round_number)(settings(
            max_examples=EXAMPLES_PER_ROUND, deadline=None, database=None,
            phases=[Phase.generate], suppress_health_check=list(HealthCheck),
        )(given(test_fuzz.cases())(check)))
        run()
    return len(checked), statuses, codes_seen, findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--out", type=Path, help="folder for the findings' inputs")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="pipec-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    count, statuses, codes_seen, findings = fuzz(args.minutes, out)
    print(f"inputs checked: {count}")
    print("exit statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    print("inputs per code: " + ", ".join(f"{c}: {n}" for c, n in sorted(codes_seen.items())))
    print(f"findings: {len(findings)}")
    for finding in findings:
        print(f"  {finding}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
