"""The command-line kit that both front doors, `pipec` (compiler/cli.py) and `piperun`
(runtime/cli.py), import: the one-line argument parser and the options they share
(`arguments.py`), the exit status of every `pipec.Error` (`exits.py`), and the terminal
(`terminal.py`: colour, one-line messages, a stdout whose reader may go away).

It imports the compiler's renderers and toolchain, never the runtime: `pipec` starts no GPU
code, and piperun's runtime errors are matched by class name (`exits.EXIT_CODES`)."""
