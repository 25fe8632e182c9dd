"""`pipec FILE --emit svg`: the picture holds every node, graph and edge of the plan, marks the
critical path of a profile, and, rendered by headless Chromium, shows every label inside its
node, no two nodes on top of each other, and every node inside the box of its graph."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings
from pipec.compiler.cli import main
from pipec.compiler.picture import plan_svg, read_profile
from pipec.plan.schema import ChildGraphNodeSpec

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = [ROOT / "pipelines" / "rl_step.pipe", ROOT / "pipelines" / "examples" / "gemm_mlp.pipe",
             ROOT / "tests" / "fixtures" / "runtime" / "conditionals.pipe"]
SVG = "{http://www.w3.org/2000/svg}"


def _plan(path: Path):
    plan = compile_file(path, load_settings(path)).plan
    assert plan is not None
    return plan


def _classes(root, word: str) -> list:
    return [g for g in root.iter(f"{SVG}g") if word in g.get("class", "").split()]


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.stem)
def test_the_picture_holds_the_plan(path):
    plan = _plan(path)
    root = ET.fromstring(plan_svg(plan))
    reachable = [g for g in (plan.step, plan.init) if g is not None]
    graphs, leaves, edges, programmatic = set(), set(), 0, 0
    while reachable:
        graph = plan.graphs[reachable.pop()]
        graphs.add(graph.name)
        edges += len(graph.edges)
        programmatic += len(graph.programmatic())
        for node in graph.nodes:
            if isinstance(node, ChildGraphNodeSpec):
                reachable.append(node.graph)
            else:
                leaves.add(node.name)
                reachable += list(getattr(node, "bodies", ()))
    assert {g.get("data-name") for g in _classes(root, "graph")} == graphs
    assert {g.get("data-name") for g in _classes(root, "node")} == leaves
    assert len(_classes(root, "edge")) == edges
    assert len(_classes(root, "programmatic")) == programmatic
    assert programmatic or path.stem != "rl_step"  # its edges join kernels, and pdl is "auto"
    assert len(_classes(root, "hazard")) == sum(len(plan.graphs[i].hazards) for i in range(len(plan.graphs))
                                                if plan.graphs[i].name in graphs)


def _trace(tmp_path: Path, times: dict[str, float], critical: set[str]) -> Path:
    events = [{"name": name, "ph": "X", "ts": 0, "dur": us, "args": {"graph_node_id": i, "critical": name in critical}}
              for i, (name, us) in enumerate(times.items())]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_profile_marks_times_and_the_critical_path(tmp_path):
    plan = _plan(PIPELINES[1])
    names = [n.name for g in plan.graphs for n in g.nodes if not isinstance(n, ChildGraphNodeSpec)]
    path = _trace(tmp_path, {name: 10.0 + i for i, name in enumerate(names)}, set(names[:2]))
    root = ET.fromstring(plan_svg(plan, read_profile(path)))
    assert {g.get("data-name") for g in _classes(root, "critical") if "node" in g.get("class")} == set(names[:2])
    assert [g.get("data-src") for g in _classes(root, "edge") if "critical" in g.get("class")] == [names[0]]
    text = "".join(_classes(root, "node")[0].itertext())
    assert "10.0 us" in text


def test_the_command(tmp_path, capsys):
    out = tmp_path / "dag.svg"
    assert main([str(PIPELINES[1]), "--emit", "svg", "-o", str(out)]) == 0
    assert ET.parse(out).getroot().tag == f"{SVG}svg"
    assert main([str(PIPELINES[1]), "--emit", "plan", "--profile", str(out)]) == 2
    assert "--profile goes with --emit svg" in capsys.readouterr().err
    assert main([str(PIPELINES[1]), "--emit", "svg", "--profile", str(out)]) == 2
    assert "is not a trace of `piperun --trace`" in capsys.readouterr().err


# Measured in the browser: text against its node's shape, nodes against each other and against
# the box of the graph they belong to (the longest graph name that prefixes theirs).
_CHECK = """
const problems = [];
const box = el => el.getBBox();
const inside = (a, b) => a.x >= b.x - 0.5 && a.y >= b.y - 0.5 && a.x + a.width <= b.x + b.width + 0.5
                         && a.y + a.height <= b.y + b.height + 0.5;
const graphs = [...document.querySelectorAll('g.graph')].map(g => [g.dataset.name, box(g.querySelector('rect'))]);
const nodes = [...document.querySelectorAll('g.node')];
for (const n of nodes) {
  const shape = box(n.querySelector('rect, polygon')), text = box(n.querySelector('text'));
  if (!inside(text, shape)) problems.push('text outside ' + n.dataset.name);
  const home = graphs.filter(([name]) => n.dataset.name.startsWith(name + '/'))
                     .sort((a, b) => b[0].length - a[0].length)[0];
  if (home && !inside(shape, home[1])) problems.push(n.dataset.name + ' outside ' + home[0]);
}
for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
  const a = box(nodes[i].querySelector('rect, polygon')), b = box(nodes[j].querySelector('rect, polygon'));
  if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height)
    problems.push('overlap ' + nodes[i].dataset.name + ' ' + nodes[j].dataset.name);
}
document.getElementById('result').textContent = JSON.stringify({nodes: nodes.length, problems});
"""


def _chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.stem)
def test_chromium_shows_every_label_inside_its_node(path, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><html><body>{plan_svg(_plan(path))}<pre id='result'>not run</pre>"
                    f"<script>{_CHECK}</script></body></html>")
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.split("<pre id=\"result\">", 1)[1].split("</pre>", 1)[0])
    assert result["nodes"] > 0 and result["problems"] == []
