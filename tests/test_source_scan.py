"""The source scanner: kernel declarations, parameter names and `/// pipec:` annotations read
from CUDA text (the types come from the compiler; see test_kernel_analysis.py)."""

from __future__ import annotations

import pytest

from pipec.compiler.source_scan import blank_comments, scan_declarations, split_params

# (source, {kernel: parameter names})
DECLARATIONS = [
    ('extern "C" __global__ void k(float* x, int n) {}', {"k": ("x", "n")}),
    ('extern "C"\n__global__ void k(float* x) {}', {"k": ("x",)}),
    ("__global__ void __launch_bounds__(256, 2) k(float* x) {}", {"k": ("x",)}),
    ("__global__ void __cluster_dims__(8, 1, 1) k(float* x) {}", {"k": ("x",)}),
    ("__global__ static void k(const float* __restrict__ x, float* __restrict__ y);", {"k": ("x", "y")}),
    ("__global__ void k(void) {}", {"k": ()}),
    ("__global__ void k() {}", {"k": ()}),
    ("__global__ void k(float*, int) {}", {"k": ("arg0", "arg1")}),
    ("__global__ void k(float x[4], const double y[]) {}", {"k": ("x", "y")}),
    ("__global__ void k(float x[N]) {}", {"k": ("x",)}),
    ("__global__ void k(Pair p, struct Pair* q) {}", {"k": ("p", "q")}),
    ("__global__ void k(float& r, const int &s) {}", {"k": ("r", "s")}),
    ("__global__ void k(unsigned long long n, int m = 3) {}", {"k": ("n", "m")}),
    ("template <int N> __global__ void k(Array<float, N> a, int n) {}", {"k": ("a", "n")}),
    ("__global__ void a(int x) {}\n__global__ void b(int y) {}", {"a": ("x",), "b": ("y",)}),
    ("// __global__ void commented(int x) {}\n__global__ void k(int y) {}", {"k": ("y",)}),
    ("/* __global__ void commented(int x) {} */ __global__ void k(int y) {}", {"k": ("y",)}),
    ("__device__ void helper(int x) {}\n", {}),
    # a function-like macro taking the kernel's name declares the kernel at its use
    ("#define K(name) __global__ void name(float* x, int n) {}\nK(foo)\nK(bar)",
     {"foo": ("x", "n"), "bar": ("x", "n")}),
    ("#define K(T, name) \\\n  __global__ void name(T* x) {}\nK(float, kf)", {"kf": ("x",)}),
    # a pasted name cannot be found; the macro body is not a kernel named `suffix`
    ("#define K(suffix) __global__ void k_##suffix(float* x) {}\nK(f32)", {}),
    ("#define K __global__ void fixed(float* x) {}\n", {}),
]


@pytest.mark.parametrize("source, expected", DECLARATIONS, ids=[d[0][:50] for d in DECLARATIONS])
def test_declarations(source, expected):
    found = scan_declarations(source)
    assert {name: d.params for name, d in found.items()} == expected


# (source above `extern "C" __global__ void k(float* x, float* y, int n) {}`, extents, outputs,
#  unreadable annotation texts)
ANNOTATIONS = [
    ("", {}, (), ()),
    ("/// pipec: extent x = n * 4\n", {"x": "n * 4"}, (), ()),
    ("/// pipec: out y\n", {}, ("y",), ()),
    ("/// pipec: out x, y\n", {}, ("x", "y"), ()),
    ("/// Doc line.\n/// pipec: extent x = n\n/// pipec: out y\n", {"x": "n"}, ("y",), ()),
    ("///pipec:extent x=ceil_div(n, 2)\n", {"x": "ceil_div(n, 2)"}, (), ()),
    ("/// pipec: extent x\n", {}, (), ("x",)),
    ("/// pipec: size x = n\n", {}, (), ("pipec: size x = n",)),
    ("/// pipec: extent x = n\n\n", {}, (), ()),  # a blank line separates the comment
    ("// pipec: extent x = n\n", {}, (), ()),     # only `///` comments annotate
    ("/// pipec: out y\nint unrelated;\n", {}, (), ()),
]


@pytest.mark.parametrize("above, extents, outputs, unreadable", ANNOTATIONS, ids=[a[0][:40] or "none" for a in ANNOTATIONS])
def test_annotations(above, extents, outputs, unreadable):
    text = above + 'extern "C" __global__ void k(float* x, float* y, int n) {}\n'
    decl = scan_declarations(text)["k"]
    assert {e.param: e.text for e in decl.extents} == extents
    assert all(text[e.where.start : e.where.end] == e.text for e in decl.extents)
    assert decl.outputs == outputs
    assert tuple(text[r.start : r.end] for r in decl.unreadable) == unreadable


def test_the_declaration_spans_its_signature_and_extern_line():
    text = '/// pipec: out x\nextern "C"\n__global__ void k(float* x) { x[0] = 1; }\n'
    where = scan_declarations(text)["k"].where
    assert text[where.start : where.end] == 'extern "C"\n__global__ void k(float* x)'


def test_a_macro_use_spans_the_use_and_keeps_its_annotations():
    text = "#define K(name) __global__ void name(float* x, int n) {}\n/// pipec: extent x = n\nK(foo)\n"
    decl = scan_declarations(text)["foo"]
    assert text[decl.where.start : decl.where.end] == "K(foo)"
    assert (decl.macro, decl.extent("x").text) == ("K", "n")


@pytest.mark.parametrize("params, expected", [
    ("", []), ("void", []), ("int a", ["int a"]), ("int a, float b", ["int a", " float b"]),
    ("Array<int, 4> a, int b", ["Array<int, 4> a", " int b"]),
    ("void (*f)(int, int), int b", ["void (*f)(int, int)", " int b"]),
])
def test_split_params(params, expected):
    assert split_params(params) == expected


def test_blank_comments_keeps_offsets_and_strings():
    text = 'a // c\nb /* d\ne */ "// s"'
    blanked = blank_comments(text)
    assert len(blanked) == len(text) and blanked.count("\n") == 2
    assert blanked.split() == ["a", "b", '"//', 's"']
