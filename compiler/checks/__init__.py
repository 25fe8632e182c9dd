"""The graph-safety and binding rules, one module each, run in this order over the checked
model and its dependency DAGs. A check reports through the sink and never raises."""

from __future__ import annotations

from .access_conflict import access_conflict
from .address_table_written import address_table_written
from .argument_count import argument_count
from .argument_kind import argument_kind
from .baked_per_step_value import baked_per_step_value
from .block_too_large import block_too_large
from .buffer_smaller_than_extent import buffer_smaller_than_extent
from .collective_operands import collective_operands
from .context import CheckContext
from .control_flow import condition_written_in_body, stale_after_branch, unbounded_while
from .copy_mismatch import copy_mismatch
from .early_access_before_wait import early_access_before_wait
from .forbidden_instructions import forbidden_instructions
from .gemm_operands import gemm_operands
from .host_transfer_in_step import host_transfer_in_step
from .invalid_grid import invalid_grid
from .null_pointer_argument import null_pointer_argument
from .out_read_before_write import out_read_before_write
from .pointer_type_mismatch import pointer_type_mismatch
from .read_before_write import read_before_write
from .read_through_unknown_pointer import read_through_unknown_pointer
from .scalar_out_of_range import scalar_out_of_range
from .shared_cufunction import shared_cufunction
from .shared_memory_over_limit import shared_memory_over_limit
from .unordered_conflict import unordered_conflict
from .unused_buffer import unused_buffer
from .write_through_read_only import write_through_read_only

CHECKS = (
    argument_count,
    argument_kind,
    null_pointer_argument,
    pointer_type_mismatch,
    scalar_out_of_range,
    access_conflict,
    write_through_read_only,
    read_through_unknown_pointer,
    address_table_written,
    baked_per_step_value,
    buffer_smaller_than_extent,
    block_too_large,
    shared_memory_over_limit,
    invalid_grid,
    copy_mismatch,
    gemm_operands,
    collective_operands,
    host_transfer_in_step,
    forbidden_instructions,
    shared_cufunction,
    unordered_conflict,
    early_access_before_wait,
    condition_written_in_body,
    unbounded_while,
    read_before_write,
    stale_after_branch,
    out_read_before_write,
    unused_buffer,
)


def run_checks(context: CheckContext) -> None:
    for check in CHECKS:
        check(context)


__all__ = ["CHECKS", "CheckContext", "run_checks"]
