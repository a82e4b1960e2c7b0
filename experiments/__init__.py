"""Research experiments: questions asked of the lab, each answered once with its numbers.

Not part of the installed ``rag`` package (``rag`` never imports from here). Run one from the
repository root with the project's venv: ``python -m experiments.<question>.run``. Each folder's
README states the question, the protocol, the result and the JSON it wrote.
"""
