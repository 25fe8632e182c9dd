"""Suppression comments at the edges the rule fixtures do not reach: the first and the last
line of a file, quotes before the comment, blank lines before the code it silences, and the
exact span reported. (Written to kill the surviving mutants of scripts/mutate.py.)"""

from __future__ import annotations

from pathlib import Path

from pipec.compiler.diagnostics import Diagnostic, DiagnosticSink
from pipec.compiler.suppressions import apply_suppressions, find_suppressions
from pipec.dsl.source import SourceFile, Span


def _find(text: str):
    sink = DiagnosticSink()
    source = SourceFile(Path("t.pipe"), text)
    return source, find_suppressions(source, sink), sink


def _targets(text: str) -> list[int]:
    return [s.line for s in _find(text)[1]]


def test_a_comment_on_the_first_line_is_found_once():
    assert _targets("x # pipec: ignore[PC302] why\ny\n") == [1]


def test_a_comment_on_the_last_line_without_a_newline_is_found_once():
    assert _targets("x\ny # pipec: ignore[PC302] why") == [2]


def test_a_standalone_comment_applies_to_the_next_code_line_past_blanks_and_comments():
    assert _targets("# pipec: ignore[PC302] why\n\n# other\nx\n") == [4]


def test_a_standalone_comment_before_the_last_line_applies_to_it():
    assert _targets("# pipec: ignore[PC302] why\nx") == [2]


def test_a_standalone_comment_with_no_code_after_it_applies_to_its_own_line():
    assert _targets("x\n# pipec: ignore[PC302] why\n\n# nothing follows\n") == [2]


def test_a_comment_right_after_one_character_of_code_applies_to_that_line():
    assert _targets("x# pipec: ignore[PC302] why\ny\n") == [1]


def test_text_inside_a_string_is_not_a_suppression():
    assert _targets('x = "# pipec: ignore[PC302] why"\n') == []
    assert _targets('x = "a" + "b # pipec: ignore[PC302] why"\n') == []


def test_a_comment_after_closed_strings_is_a_suppression():
    assert _targets('x = "a"# pipec: ignore[PC302] why\n') == [1]
    assert _targets('x = "a" + "b" # pipec: ignore[PC302] why\n') == [1]


def test_codes_names_and_reason_are_read():
    _, (found,), sink = _find("x # pipec: ignore[PC401, unused-buffer] the reason \n")
    assert found.codes == {"PC401", "PC402"}
    assert found.reason == "the reason"
    assert sink.diagnostics == []


def test_the_span_covers_the_comment_to_the_end_of_the_line():
    _, _, sink = _find("x = 1  # pipec: ignore[PC401]\ny\n")
    (missing_reason,) = sink.diagnostics
    assert missing_reason.code == "PC002"
    assert missing_reason.span.text == "# pipec: ignore[PC401]"
    assert (missing_reason.span.line, missing_reason.span.column) == (1, 8)


def test_an_unknown_code_is_reported_at_the_comment():
    _, (found,), sink = _find("x # pipec: ignore[PC999] why\n")
    assert found.codes == set()
    assert [(d.code, d.span.text) for d in sink.diagnostics] == [("PC001", "# pipec: ignore[PC999] why")]


def test_only_a_matching_code_on_the_matching_line_is_silenced():
    source, suppressions, _ = _find("a # pipec: ignore[PC401] why\nb\n")
    other = SourceFile(Path("u.pipe"), source.text)

    def at(src, line, code):
        return Diagnostic(code, "m", Span(src, src.offset(line), src.offset(line) + 1), "h")
    silenced = at(source, 1, "PC401")
    kept = [at(source, 2, "PC401"), at(source, 1, "PC402"), at(other, 1, "PC401")]
    sink = DiagnosticSink()
    assert apply_suppressions([silenced, *kept], suppressions, sink, complete=True) == kept
    assert sink.diagnostics == []


def test_a_suppression_that_silences_nothing_is_reported():
    source, suppressions, _ = _find("a # pipec: ignore[PC401] why\n")
    sink = DiagnosticSink()
    assert apply_suppressions([], suppressions, sink, complete=True) == []
    (unused,) = sink.diagnostics
    assert unused.code == "PC001" and "PC401" in unused.message


def test_an_unused_suppression_is_reported_only_when_the_findings_are_complete():
    source, suppressions, _ = _find("x # pipec: ignore[PC401] read first once\n")
    for complete, reported in ((True, ["PC001"]), (False, [])):
        sink = DiagnosticSink()
        assert apply_suppressions([], suppressions, sink, complete=complete) == []
        assert [d.code for d in sink.diagnostics] == reported


def test_a_dropped_statement_or_a_wrong_binding_keeps_a_suppression_from_being_called_unused():
    from stage_helpers import check_text

    program = """
        buffer y: f32[64] = uninit
        buffer z: f32[64]
        step {{
            launch copier<<<1, 64>>>(in y, out z, 64)  # pipec: ignore[PC401] filled from the host
            {other}
        }}
    """
    assert [d.code for d in check_text(program.format(other="")).diagnostics] == []
    assert [d.code for d in check_text(program.format(other="fill q = 0.0")).diagnostics] == ["PC103"]
    assert [d.code for d in check_text(program.format(other="launch writer<<<1, 64>>>(in z, 64)")).diagnostics] \
        == ["PC318"]
    initialised = program.replace("= uninit", "= fill(1.0)")  # nothing left to suppress
    assert [d.code for d in check_text(initialised.format(other="")).diagnostics] == ["PC001"]
