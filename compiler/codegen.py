"""Code the compiler generates from templates: the glue kernels for copies and wide fills, and
the kernels that decide conditional nodes."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

GLUE_MODULE_NAME = "pipec_glue.cu"
CONDITIONS_MODULE_NAME = "pipec_conditions.cu"
# The element types a device condition may read, with the C type that holds one.
FLAG_TYPES = (("i32", "int"), ("u32", "unsigned int"), ("i64", "long long"),
              ("u64", "unsigned long long"), ("u8", "unsigned char"))
# Copy kernel widths in bytes, widest first, with the C type that moves one unit.
COPY_WIDTHS = ((16, "uint4"), (8, "unsigned long long"), (4, "unsigned int"), (2, "unsigned short"), (1, "unsigned char"))
THREADS = 256
MAX_BLOCKS = 1024


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def glue_source() -> str:
    return _templates().get_template("glue_kernels.cu.j2").render(widths=COPY_WIDTHS)


@cache
def conditions_source() -> str:
    return _templates().get_template("conditions.cu.j2").render(flag_types=FLAG_TYPES)


def copy_width(*byte_quantities: int) -> int:
    """The widest unit that divides every offset and the size."""
    for width, _ in COPY_WIDTHS:
        if all(q % width == 0 for q in byte_quantities):
            return width
    return 1


def grid_for(units: int) -> int:
    return max(1, min(MAX_BLOCKS, -(-units // THREADS)))
