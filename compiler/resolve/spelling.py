"""Did you mean: the declared name closest in spelling to one that names nothing, as a hint and
as the edit that puts it in place (an editor's quick fix)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from ...dsl import Span, ast
from ..diagnostics import Edit, Fix


@dataclass(frozen=True)
class Suggestion:
    hint: str
    fixes: tuple[Fix, ...] = ()


def did_you_mean(name: str, names: Iterable[str], what: str, span: Span | None = None) -> Suggestion:
    """The hint for `name`, which names none of `names` (`what`: "kernels", "constants"); with
    the span where `name` is written, the fix that writes the similar name there."""
    close = difflib.get_close_matches(name, list(names), n=1)
    if not close:
        return Suggestion(f"check the spelling; no {what} with that name exist")
    fixes = (Fix(f"Change to `{close[0]}`", (Edit(span, close[0]),)),) if span is not None else ()
    return Suggestion(f"a name with a similar spelling exists: `{close[0]}`", fixes)


def not_imported(name: str, unimported: dict[str, ast.Import]) -> Suggestion | None:
    """For a kernel that a source the module imports by name declares, but the import leaves
    out: the hint to import it, and the fix that adds it to the import's names."""
    decl = unimported.get(name)
    if decl is None or not decl.names:
        return None
    last = decl.names[-1].span
    return Suggestion(f"`{decl.path.value}` declares `{name}`: add it to the names its import lists",
                      (Fix(f"Import `{name}`", (Edit(Span(last.source, last.end, last.end), f", {name}"),)),))
