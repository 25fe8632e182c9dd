"""Syntax tree to checked model: the declaration pass (imports, constants, buffers, kernel
signatures), waivers, the size pass, and the unrolling of graphs, loops and compile-time `if`s
into concrete nodes."""
