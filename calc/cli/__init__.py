"""The `kvcalc` command line (`python -m calc`, entry point `calc.cli:main`).

    main.py       parser, dispatch, the built-in commands' registration, EXTENSIONS
    output.py     tables, pairs, JSON, wrapped text, one-line notes and errors, run_guarded
    args.py       add_command, add_model_arg, add_size_args, int_at_least, dtype_arg
    commands.py   kv, attention, compare, errata
    models.py     presets, show
    plan.py       plan (+ plan_text.py, its text output); the memory arguments fit shares
    fit.py        fit, hardware

Imports go one way: main imports the command modules; command modules (and the extensions
calc.validate.cli, calc.serving.cli) import output and args, never main. Only this file and
calc/__main__.py import main. Note that `calc.cli.main` is the function here; the module is
`sys.modules["calc.cli.main"]` (or `from calc.cli.main import EXTENSIONS`).
"""

from calc.cli.main import main

__all__ = ["main"]
