"""The plan: the contract between the compiler, the runtimes (Python and C) and the tools.
`schema.py` holds its types and JSON form, `dtypes.py` the element types both sides share.
Nothing here imports the compiler or a runtime."""
