"""Bundles (`pipec build`, compiler/bundle.py) read by the Python runtime (runtime/bundle.py),
on the fake CUDA driver: a bundle loads into the same graph, the same modules and the same
buffer contents as its `.pipe` file; every malformed bundle is one BundleError line, before
anything is left allocated."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from fake_cublaslt import FakeCublasLt
from fake_cuda import Conditional, KernelLaunch, Memcpy, Memset, fake_driver
from pipec.compiler import compile_file, load_settings
from pipec.compiler.bundle import write_bundle
from pipec.compiler.config import override
from pipec.plan.bundle_format import BundleError
from pipec.runtime import Backends, LoadOptions, load
from pipec.runtime.bundle import load_bundle
from pipec.runtime.process_launchers import Launch

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
PIPES = [ROOT / "pipelines" / "rl_step.pipe", *sorted((ROOT / "pipelines" / "examples").glob("*.pipe")),
         NODES, ROOT / "tests" / "fixtures" / "runtime" / "copies.pipe"]


def build(path: Path, out: Path, archs: tuple[str, ...] = ("sm_90",)) -> Path:
    compilation = compile_file(path, load_settings(path))
    assert compilation.plan is not None, compilation.diagnostics
    write_bundle(compilation.plan, archs, out, str(path))
    return out


def _where(pipeline, address: int):
    """A device address as (buffer, byte offset): the same in two loads, unlike the address."""
    for spec in pipeline.plan.buffers:
        start = pipeline.buffer(spec.name).device_ptr
        if start <= address < start + max(spec.nbytes, 1):
            return spec.name, address - start
    return address


def _argument(pipeline, value: bytes):
    return _where(pipeline, int.from_bytes(value, "little")) if len(value) == 8 else value


def _graph(pipeline, graph) -> list:
    index = {node.handle: i for i, node in enumerate(graph.nodes)}
    return [(node.kind, sorted(index[d] for d in node.deps), _work(pipeline, node)) for node in graph.nodes]


def _work(pipeline, node):
    work = node.work
    if node.child is not None:
        return _graph(pipeline, node.child)
    if isinstance(work, KernelLaunch):
        return (work.function, work.grid, work.block, work.shared_bytes,
                tuple(_argument(pipeline, a) for a in work.args))
    if isinstance(work, Memset):
        return _where(pipeline, work.dst), work.element_size, work.value, work.count
    if isinstance(work, Memcpy):
        return _where(pipeline, work.dst), _where(pipeline, work.src), work.nbytes
    if isinstance(work, Conditional):
        return work.type, [_graph(pipeline, body) for body in work.bodies]
    return None


def _run(pipe: Path, opener) -> dict:
    """What the driver was handed: the step's graph, the modules, and every buffer after the
    init and two steps."""
    driver = fake_driver(pipe)
    fake = driver.cu
    with opener(Backends(driver, FakeCublasLt(fake))) as pipeline:
        graph = _graph(pipeline, fake.executables[pipeline.graph.exec])
        pipeline.step(2)
        contents = {spec.name: pipeline.read(spec.name).tobytes() for spec in pipeline.plan.buffers}
    assert fake.live() == dict.fromkeys(fake.live(), 0), "close leaves something allocated"
    return {"graph": graph, "modules": [c.args[0] for c in fake.named("cuModuleLoadData")], "buffers": contents}


@pytest.mark.parametrize("pipe", PIPES, ids=lambda p: p.stem)
def test_a_bundle_loads_into_what_its_pipe_file_loads_into(pipe, tmp_path):
    bundle = build(pipe, tmp_path / "bundle")
    from_pipe = _run(pipe, lambda backends: load(pipe, LoadOptions(), backends))
    from_bundle = _run(pipe, lambda backends: load_bundle(bundle, backends=backends))
    assert from_bundle["graph"] == from_pipe["graph"]
    assert from_bundle["modules"] == from_pipe["modules"]
    assert from_bundle["buffers"] == from_pipe["buffers"]


def test_the_bundle_buffers_are_what_the_runtime_would_upload(tmp_path):
    bundle = build(NODES, tmp_path / "bundle")
    assert sorted(p.name for p in (bundle / "buffers").iterdir()) == ["x.bin", "y.bin"]  # uniform, normal
    driver = fake_driver(NODES)
    with load(NODES, LoadOptions(), Backends(driver)) as pipeline:
        for name in ("x", "y"):
            assert (bundle / "buffers" / f"{name}.bin").read_bytes() == pipeline.read(name).tobytes()


def test_a_device_without_a_cubin_runs_the_ptx(tmp_path):
    bundle = build(NODES, tmp_path / "bundle", ("sm_80",))
    from_pipe = _run(NODES, lambda backends: load(NODES, LoadOptions(), backends))
    from_bundle = _run(NODES, lambda backends: load_bundle(bundle, backends=backends))
    assert from_bundle["graph"] == from_pipe["graph"]
    ptx = sorted((bundle / "modules").glob("*.ptx"), key=lambda p: int(p.name.split(".")[0]))
    assert set(from_bundle["modules"]) == {p.read_bytes() + b"\0" for p in ptx}
    assert all(b".target sm_80" in module for module in from_bundle["modules"])


@pytest.fixture(scope="module")
def sound_bundle(tmp_path_factory) -> Path:
    return build(NODES, tmp_path_factory.mktemp("sound") / "bundle")


def _rewrite_manifest(bundle: Path, change) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    change(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest, sort_keys=True, indent=1))


def _rehashed(bundle: Path, relative: str, data: bytes) -> None:
    """A file changed and the manifest updated to match: a bundle another tool wrote."""
    (bundle / relative).write_bytes(data)
    _rewrite_manifest(bundle, lambda m: m["files"].update({relative: "sha256:" + hashlib.sha256(data).hexdigest()}))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def _drop_from_manifest(bundle: Path, relative: str) -> None:
    (bundle / relative).unlink()
    _rewrite_manifest(bundle, lambda m: m["files"].pop(relative))


BAD_BUNDLES = {
    "truncated cubin": (lambda b: _truncate(b / "modules" / "0.sm_90.cubin"),
                        r"modules/0\.sm_90\.cubin does not match its hash in the manifest \(\d[\d,]* bytes.*truncated"),
    "truncated manifest": (lambda b: _truncate(b / "manifest.json"), r"manifest\.json is not JSON \(truncated\?\)"),
    "newer version": (lambda b: _rewrite_manifest(b, lambda m: m.update(format_version=3, readers=[3, 3])),
                      r"is bundle format 3, for readers of versions 3 to 3; this pipec \(.*\) reads version 2"),
    "older version": (lambda b: _rewrite_manifest(b, lambda m: m.update(format_version=1, readers=[1, 1])),
                      r"is bundle format 1, for readers of versions 1 to 1; this pipec \(.*\) reads version 2"),
    "changed plan": (lambda b: _flip_a_byte(b / "plan.json"), r"plan\.json does not match its hash"),
    "missing file": (lambda b: (b / "buffers" / "x.bin").unlink(), r"buffers/x\.bin is missing \(the manifest lists it\)"),
    "unlisted module": (lambda b: _drop_from_manifest(b, "modules/0.sm_90.cubin"),
                        r"lists no modules/0\.sm_90\.cubin in its manifest\.json, which its plan needs"),
    "short buffer": (lambda b: _rehashed(b, "buffers/y.bin", b"\0" * 12),
                     r"buffers/y\.bin holds 12 bytes; buffer `y` has 4,000"),
    "path outside": (lambda b: _rewrite_manifest(b, lambda m: m["files"].update({"../x": "sha256:0"})),
                     r"lists `\.\./x`, which is not a path inside the bundle"),
    "other format": (lambda b: _rewrite_manifest(b, lambda m: m.update(format="zip")),
                     r"is not a pipec bundle manifest"),
    "no manifest": (lambda b: (b / "manifest.json").unlink(), r"is not a bundle: it has no manifest\.json"),
    "unreadable plan": (lambda b: _rehashed(b, "plan.json", b'{"pipe": 1}'),
                        r"plan\.json is not a plan this pipec reads \(KeyError"),
}


@pytest.mark.parametrize("case", sorted(BAD_BUNDLES))
def test_a_bad_bundle_is_one_line_naming_the_file(case, sound_bundle, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(sound_bundle, bundle)
    damage, message = BAD_BUNDLES[case]
    damage(bundle)
    driver = fake_driver(NODES)
    with pytest.raises(BundleError, match=message) as error:
        load_bundle(bundle, backends=Backends(driver))
    assert "\n" not in str(error.value)
    assert not driver.cu.calls, "a bundle is checked before the driver is touched"


def test_a_bundle_for_other_architectures_only_is_refused_and_leaks_nothing(tmp_path):
    bundle = build(NODES, tmp_path / "bundle", ("sm_100", "sm_120"))
    driver = fake_driver(NODES)
    with pytest.raises(BundleError, match=r"holds cubins for sm_100, sm_120 and PTX for compute_100, none of which "
                                          r"runs on Fake H200 \(sm_90.*: rebuild it with `pipec build --arch sm_90`"):
        load_bundle(bundle, backends=Backends(driver))
    fake = driver.cu
    assert fake.live() == dict.fromkeys(fake.live(), 0)
    assert [c.name for c in fake.calls].count("cuDevicePrimaryCtxRelease") == 1


def test_the_package_offers_load_bundle_and_its_error():
    import pipec

    assert issubclass(pipec.BundleError, pipec.Error) and "load_bundle" in pipec.__all__
    with pytest.raises(pipec.BundleError, match="is not a bundle"):
        pipec.load_bundle(ROOT / "docs")


@pytest.mark.parametrize("launch, world", [(None, "rank 0 of 1"), (Launch("torchrun", 1, 2, 1), "rank 1 of 2")])
def test_a_bundle_runs_only_as_the_rank_it_was_built_for(launch, world, tmp_path):
    """A plan records the RANK and WORLD_SIZE it was compiled with; as another rank (or with
    collectives and no launcher, a world of one) the bundle is refused before the device."""
    path = ROOT / "tests" / "fixtures" / "runtime" / "collectives.pipe"
    compilation = compile_file(path, override(load_settings(path), defines=(("RANK", "0"), ("WORLD_SIZE", "2"))))
    assert (compilation.plan.rank, compilation.plan.world_size) == (0, 2)
    write_bundle(compilation.plan, ("sm_90",), tmp_path / "bundle", str(path))
    with pytest.raises(BundleError, match=f"was built for rank 0 of 2, and this process is {world}: build one "
                                          "bundle per rank"):
        load_bundle(tmp_path / "bundle", launch=launch, backends=Backends(fake_driver(path)))
