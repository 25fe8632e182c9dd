"""`pipec.load_bundle(DIR)`: a pipeline from a bundle that `pipec build` wrote, without the
compiler: the bundle's plan, its cubins for the device (or its PTX, which the driver compiles
for a newer device), and its initial buffer bytes.

Everything is checked before the device is touched: the manifest's format and version range,
the sha256 of every file, and that the files the plan needs are there. Each problem is one
`BundleError` line naming the file. compiler/bundle.py writes the layout; docs/native.md
describes it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..api_arguments import flag
from ..plan.bundle_format import (
    FORMAT, FORMAT_VERSION, GEMM_ALGORITHMS, MANIFEST, PLAN, BundleError, arch_number, buffer_path, cubin_path,
    initial_bytes_expected, ptx_path, virtual_arch,
)
from ..plan.gemm_algorithms import GemmAlgorithms, read_bundle_file
from ..plan.schema import Plan, collective_sequence, from_json
from ..wording import plural
from .cublaslt import GemmError, GemmSettings
from .driver import Device, open_device, release_device
from .library import LibraryRecordingError
from .load import Backends, PipelineError, refuse_tuning_on_ranks
from .pipeline import Pipeline
from .process_launchers import SINGLE, Launch
from .resources import LaunchLimitsExceeded

# A manifest's path: folders and names of letters, digits, `_`, `-` and `.`, never `..`.
_SAFE_PATH = re.compile(r"(?!.*(?:^|/)\.\.(?:/|$))[\w.-]+(?:/[\w.-]+)*")


@dataclass(frozen=True)
class Bundle:
    """A bundle's checked contents: its manifest, its plan, and every file it lists."""

    directory: Path
    manifest: dict
    plan: Plan
    files: dict[str, bytes]  # by the manifest's relative path, each matching its hash
    gemm_algorithms: tuple[GemmAlgorithms, ...]  # each GPU's, from gemm_algorithms.json (none without it)

    @property
    def archs(self) -> tuple[str, ...]:
        return tuple(self.manifest["archs"])

    def binaries(self, device: Device) -> tuple[bytes, ...]:
        """Each module's code for `device`: the cubins of its architecture (an `sm_90a` build
        runs on an `sm_90` device), or else the PTX, when the device is at least as new as the
        PTX's target. The PTX gets the NUL that cuModuleLoadData looks for."""
        arch = next((a for a in self.archs if re.sub(r"[af]$", "", a) == device.arch), None)
        if arch is not None:
            return tuple(self.files[cubin_path(m.index, arch)] for m in self.plan.modules)
        target = virtual_arch(self.archs)
        if arch_number(device.arch) < int(target.removeprefix("compute_")):
            raise BundleError(f"{self.directory} holds cubins for {', '.join(self.archs)} and PTX for {target}, "
                              f"none of which runs on {device.describe()}: rebuild it with "
                              f"`pipec build --arch {device.arch}`")
        return tuple(self.files[ptx_path(m.index)] + b"\0" for m in self.plan.modules)

    def initial_contents(self) -> dict[str, bytes]:
        """The initial bytes of every buffer the host does not set with a memset, by name."""
        contents = {}
        for spec in self.plan.buffers:
            if not initial_bytes_expected(spec):
                continue
            data = self.files[buffer_path(spec.name)]
            if len(data) != spec.nbytes:
                raise BundleError(f"{self.directory / buffer_path(spec.name)} holds {len(data):,} {plural('byte', len(data))}; buffer "
                                  f"`{spec.name}` has {spec.nbytes:,}")
            contents[spec.name] = data
        return contents


def read_bundle(directory: str | Path) -> Bundle:
    """The bundle in `directory`, checked: its manifest, version range and hashes, and its plan.
    Raises BundleError, one line naming the file and what is wrong with it."""
    directory = Path(directory)
    manifest = _manifest(directory)
    files = {path: _checked_file(directory, path, digest) for path, digest in sorted(manifest["files"].items())}
    if PLAN not in files:
        raise BundleError(f"{directory / MANIFEST} lists no {PLAN}")
    try:
        plan = from_json(json.loads(files[PLAN]))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BundleError(f"{directory / PLAN} is not a plan this pipec reads ({type(error).__name__}: {error})") \
            from None
    _check_complete(directory, manifest, plan)
    chosen = read_bundle_file(files[GEMM_ALGORITHMS], str(directory / GEMM_ALGORITHMS), plan) \
        if GEMM_ALGORITHMS in files else ()
    return Bundle(directory, manifest, plan, files, chosen)


def _check_complete(directory: Path, manifest: dict, plan: Plan) -> None:
    """Every file the plan needs is listed: a cubin of each module for each architecture, its
    PTX, and the initial bytes of each buffer the host does not memset."""
    needed = [cubin_path(m.index, arch) for arch in manifest["archs"] for m in plan.modules]
    needed += [ptx_path(m.index) for m in plan.modules]
    needed += [buffer_path(b.name) for b in plan.buffers if initial_bytes_expected(b)]
    if missing := [path for path in needed if path not in manifest["files"]]:
        raise BundleError(f"{directory} lists no {', '.join(missing)} in its {MANIFEST}, which its plan needs "
                          "(a bundle written by hand, or by another tool?): rebuild it with `pipec build`")


def load_bundle(directory: str | Path, *, device: int = 0, bind: Mapping[str, object] | None = None,
                launch: Launch | None = None, tune_gemms: bool = False, backends: Backends = Backends()) -> Pipeline:
    """Load the pipeline a bundle holds, as `pipec.load` loads a `.pipe` file, with the same
    options but those that need the compiler: constants are the build's (`pipec build -D`),
    `update` applies the plan's live-update record (numbers only), and the step runs once a
    launch. Each GEMM node runs the algorithm the bundle stores for this GPU and cuBLASLt when
    cuBLASLt accepts it, else the heuristic's first (the C runtime's rule;
    `Pipeline.gemm_choices` says which), or with `tune_gemms` the fastest of the heuristic's
    best, timed here; the artifact cache is not used. `backends` replaces the driver, cuBLASLt
    or the ranks' connection, as for `pipec.load`. Raises BundleError for a bundle that is not
    sound or has no code for the device."""
    bundle = read_bundle(directory)
    if bundle.plan.step is None:
        raise PipelineError([], f"{directory}: there is no `step` block to run")
    refuse_tuning_on_ranks(Path(directory), flag("tune_gemms", tune_gemms), launch)
    initial = bundle.initial_contents()
    _check_rank(bundle, launch)
    with ExitStack() as until_built:
        opened = open_device(device, backends.driver)
        until_built.callback(release_device, opened)
        binaries = bundle.binaries(opened)
        distributed = None
        if launch is not None or collective_sequence(bundle.plan):
            distributed = backends.connect_ranks(bundle.plan, launch or SINGLE)
        until_built.pop_all()  # the pipeline owns the device and the ranks' connection from here
    try:
        return Pipeline(bundle.plan, binaries, opened, bind=bind, drop_nodes=backends.drop_nodes,
                        gemm=GemmSettings(backends.cublaslt, None, tune_gemms, bundle.gemm_algorithms),
                        distributed=distributed, initial=initial)
    except (GemmError, LibraryRecordingError) as error:
        raise PipelineError([], f"{directory}: {error}") from None
    except LaunchLimitsExceeded as error:  # no sources to point into: the plan's locations
        raise PipelineError([], "; ".join(f"{f.location}: {f.message}" for f in error.findings)) from None


def _check_rank(bundle: Bundle, launch: Launch | None) -> None:
    """A bundle is compiled for one rank of one world size (`pipec build -D RANK=R -D
    WORLD_SIZE=N`): under a launcher, or with collectives (a communicator of one rank without
    one), it runs only as that rank, as the C runtime checks against its communicator."""
    plan = bundle.plan
    if launch is None and not collective_sequence(plan):
        return
    launch = launch or SINGLE
    if (plan.rank, plan.world_size) != (launch.rank, launch.world_size):
        raise BundleError(f"{bundle.directory} was built for rank {plan.rank} of {plan.world_size}, and this "
                          f"process is rank {launch.rank} of {launch.world_size}: build one bundle per rank "
                          f"(`pipec build -D RANK={launch.rank} -D WORLD_SIZE={launch.world_size}`)")


def _manifest(directory: Path) -> dict:
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise BundleError(f"{directory} is not a bundle: it has no {MANIFEST} (write one with `pipec build`)") \
            from None
    except OSError as error:
        raise BundleError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise BundleError(f"{path} is not JSON (truncated?): {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path} is not a pipec bundle manifest (its `format` is not `{FORMAT}`)")
    _check_version(path, manifest)
    files, archs = manifest.get("files"), manifest.get("archs")
    if not isinstance(files, dict) or not isinstance(archs, list) or not archs or \
            not all(isinstance(a, str) and re.fullmatch(r"sm_\d+[af]?", a) for a in archs):
        raise BundleError(f"{path} lacks its `files` or `archs`, or names an architecture that is not sm_XY")
    for relative in files:
        if not _SAFE_PATH.fullmatch(relative) or relative == MANIFEST:
            raise BundleError(f"{path} lists `{relative}`, which is not a path inside the bundle")
    return manifest


def _check_version(path: Path, manifest: dict) -> None:
    """The bundle says which reader versions can read it; this pipec reads FORMAT_VERSION."""
    version, readers = manifest.get("format_version"), manifest.get("readers")
    if not (isinstance(readers, list) and len(readers) == 2 and all(isinstance(r, int) for r in readers)):
        raise BundleError(f"{path} has no `readers` range of two versions")
    if not readers[0] <= FORMAT_VERSION <= readers[1]:
        raise BundleError(f"{path.parent} is bundle format {version}, for readers of versions {readers[0]} to "
                          f"{readers[1]}; this pipec ({__version__}) reads version {FORMAT_VERSION}: rebuild it "
                          "with this pipec's `pipec build`")


def _checked_file(directory: Path, relative: str, digest: object) -> bytes:
    path = directory / relative
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"{path} is missing (the manifest lists it): rebuild the bundle") from None
    except OSError as error:
        raise BundleError(f"cannot read {path}: {error.strerror or error}") from None
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise BundleError(f"{path} does not match its hash in the manifest ({len(data):,} {plural('byte', len(data))}, {actual[:19]}..., "
                          f"the manifest says {str(digest)[:19]}...): it was truncated or changed; rebuild the bundle")
    return data


