"""The language server (`ppdsl lsp`): what an editor shows of a `.sched` file, from the same checker.

    sizes.py     the sizes a file is checked at: its `# ppdsl:` directive, the settings, the default
    checking.py  one check of a buffer, as `ppdsl check` makes it
    syntax.py    the syntax tree of a file, item by item when it does not parse whole
    symbols.py   every name defined and used (definition, references, rename, completion)
    convert.py   spans and diagnostics as LSP values
    features.py  hover, code lenses, completion, outline, definition, references, rename
    server.py    the pygls server: documents, checks on a worker thread, the LSP methods

Above the analysis (it builds `Scenario`s and calls `check`), beside the runtime: it never imports paddle.
"""
